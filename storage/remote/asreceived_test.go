package remote_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/prompb"
	"github.com/golang/snappy"

	"github.com/ballast-io/ballast/internal/testpeer"
	"github.com/ballast-io/ballast/storage"
	"github.com/ballast-io/ballast/storage/remote"
)

// TestRemoteWriteForwardedAsReceived posts remote-write bodies to the ingest
// handler of a remote store in front of a real vminsert (through a proxy
// that records what the store sends): a fully valid body of at least half a
// block goes out byte for byte as received; a small valid one goes out as
// its own protobuf, compressed again; a partly invalid one is answered 400
// and only its valid samples go out, encoded again. Every valid sample is
// then read back from the cluster.
func TestRemoteWriteForwardedAsReceived(t *testing.T) {
	c := testpeer.StartVMCluster(t)
	target, err := url.Parse(c.WriteURL())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var sent [][]byte
	proxy := httputil.NewSingleHostReverseProxy(target)
	// sent records the write bodies vminsert acknowledged.
	tap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/api/v1/write") {
			proxy.ServeHTTP(w, r)
			return
		}
		// Read the body before proxying (docs/notes.md, trap 3).
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		// Recorded before the answer goes back to the store.
		proxy.ServeHTTP(&onStatus{ResponseWriter: w, f: func(code int) {
			if code/100 == 2 {
				mu.Lock()
				sent = append(sent, b)
				mu.Unlock()
			}
		}}, r)
	}))
	defer tap.Close()
	const block = 1000
	s := open(t, remote.Options{WriteURL: tap.URL, QueryURL: c.QueryURL(), Tenant: "5", FlushURLs: c.FlushURLs(), BlockSamples: block})
	h := storage.NewIngestHandler(s, storage.IngestOptions{})
	now := time.Now().Add(-time.Minute).Truncate(time.Second)
	post := func(body []byte) (int, string) {
		req := httptest.NewRequest(http.MethodPost, storage.PathRemoteWrite, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/x-protobuf")
		req.Header.Set("Content-Encoding", "snappy")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	series := func(metric string, n int, bad map[int]string) prompb.WriteRequest {
		wr := prompb.WriteRequest{Timeseries: make([]prompb.TimeSeries, n)}
		for i := range n {
			ts := now.UnixMilli()
			// __name__ last: ballast's own encoding puts it first, so a
			// body encoded again cannot pass for the one received.
			ls := []prompb.Label{{Name: "device", Value: fmt.Sprintf("nvme%dn1", i)}, {Name: "__name__", Value: metric}}
			switch bad[i] {
			case "label":
				ls = append(ls, prompb.Label{Name: "bad-name", Value: "x"})
			case "old":
				ts = now.Add(-400 * 24 * time.Hour).UnixMilli()
			}
			wr.Timeseries[i] = prompb.TimeSeries{Labels: ls, Samples: []prompb.Sample{{Value: float64(i), Timestamp: ts}}}
		}
		return wr
	}
	// next flushes the store and returns the one data body it sent since
	// the last call (Flush's own marker blocks left out).
	seen := 0
	next := func() []byte {
		t.Helper()
		s.Flush()
		mu.Lock()
		defer mu.Unlock()
		var data [][]byte
		for _, b := range sent[seen:] {
			if pb, err := snappy.Decode(nil, b); err != nil || !bytes.Contains(pb, []byte("ballast_remote_flush_marker")) {
				data = append(data, b)
			}
		}
		seen = len(sent)
		if len(data) != 1 {
			t.Fatalf("the store sent %d data bodies; want 1", len(data))
		}
		return data[0]
	}

	// A whole valid block, nothing queued: forwarded as received from the
	// request itself, so it is at the remote when the answer comes.
	big := series("asreceived_big", block, nil)
	bigBody := snappy.Encode(nil, big.MarshalProtobuf(nil))
	if code, msg := post(bigBody); code != http.StatusNoContent {
		t.Fatalf("valid body: HTTP %d %s; want 204", code, msg)
	}
	mu.Lock()
	if len(sent) != 1 {
		t.Errorf("valid body: %d bodies at the remote when the answer came; want it sent before", len(sent))
	}
	mu.Unlock()
	if got := next(); !bytes.Equal(got, bigBody) {
		t.Errorf("valid body of %d samples: the store sent %d bytes that differ from the %d received; want them as received", block, len(got), len(bigBody))
	}

	// A small valid body: its own protobuf, compressed again.
	small := series("asreceived_small", 10, nil)
	smallPB := small.MarshalProtobuf(nil)
	if code, msg := post(snappy.Encode(nil, smallPB)); code != http.StatusNoContent {
		t.Fatalf("small valid body: HTTP %d %s; want 204", code, msg)
	}
	if got, err := snappy.Decode(nil, next()); err != nil || !bytes.Equal(got, smallPB) {
		t.Errorf("small valid body: the store sent a block decoding to %d bytes (err %v); want the %d bytes of protobuf received", len(got), err, len(smallPB))
	}

	// Partly invalid: 400 naming the bad ones, the valid ones re-encoded.
	mixed := series("asreceived_mixed", block, map[int]string{3: "label", 7: "old"})
	mixedBody := snappy.Encode(nil, mixed.MarshalProtobuf(nil))
	code, msg := post(mixedBody)
	if code != http.StatusBadRequest || !strings.Contains(msg, fmt.Sprintf("rejected 2 of %d samples (the other %d are stored)", block, block-2)) ||
		!strings.Contains(msg, "timeseries 3") || !strings.Contains(msg, "timeseries 7") {
		t.Fatalf("partly invalid body: HTTP %d %s; want 400 naming timeseries 3 and 7", code, msg)
	}
	got := next()
	if bytes.Equal(got, mixedBody) {
		t.Fatal("partly invalid body: the store forwarded it as received; want only its valid samples")
	}
	pb, err := snappy.Decode(nil, got)
	if err != nil {
		t.Fatal(err)
	}
	wru := prompb.GetWriteRequestUnmarshaler()
	defer prompb.PutWriteRequestUnmarshaler(wru)
	wr, err := wru.UnmarshalProtobuf(pb)
	if err != nil {
		t.Fatal(err)
	}
	var devices []string
	for _, ts := range wr.Timeseries {
		for _, l := range ts.Labels {
			if l.Name == "device" {
				devices = append(devices, l.Value)
			}
		}
	}
	sort.Strings(devices)
	if len(devices) != block-2 {
		t.Errorf("partly invalid body: the store sent %d series; want the %d valid ones", len(devices), block-2)
	}
	for _, d := range []string{"nvme3n1", "nvme7n1"} {
		if i := sort.SearchStrings(devices, d); i < len(devices) && devices[i] == d {
			t.Errorf("partly invalid body: the store sent the invalid series %s", d)
		}
	}

	// vminsert down: the valid body is queued on disk as received, then
	// delivered as received once vminsert is back.
	c.Insert.Stop(10 * time.Second)
	down := series("asreceived_down", block, nil)
	downBody := snappy.Encode(nil, down.MarshalProtobuf(nil))
	if code, msg := post(downBody); code != http.StatusNoContent {
		t.Fatalf("valid body, vminsert down: HTTP %d %s; want 204", code, msg)
	}
	if _, n, blocks := s.QueueStats(); n != block || blocks != 1 {
		t.Fatalf("valid body, vminsert down: %d samples in %d blocks queued; want %d in 1", n, blocks, block)
	}
	c.RestartInsert(t)
	if got := next(); !bytes.Equal(got, downBody) {
		t.Errorf("valid body queued while vminsert was down: the store sent %d bytes that differ from the %d received; want them as received", len(got), len(downBody))
	}

	// Everything valid is in the cluster.
	for metric, want := range map[string]float64{"asreceived_big": block, "asreceived_small": 10, "asreceived_mixed": block - 2, "asreceived_down": block} {
		rs, err := s.Query(context.Background(), fmt.Sprintf("count(%s)", metric), now)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 1 || rs[0].Values[0] != want {
			t.Errorf("count(%s) in the cluster: %+v; want %v", metric, rs, want)
		}
	}
}

// onStatus calls f with the status code before writing it.
type onStatus struct {
	http.ResponseWriter
	f func(code int)
}

func (o *onStatus) WriteHeader(code int) {
	o.f(code)
	o.ResponseWriter.WriteHeader(code)
}
