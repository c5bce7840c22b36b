package remote_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/prompb"
	"github.com/golang/snappy"

	"github.com/ballast-io/ballast/storage"
	"github.com/ballast-io/ballast/storage/remote"
)

// BenchmarkRemoteIngest measures ballast's own cost per sample on the
// remote path: a remote-write request to the ingest handler, validated,
// queued on disk and sent to a receiver that only reads the body.
func BenchmarkRemoteIngest(b *testing.B) {
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer recv.Close()
	s, err := remote.Open(remote.Options{DataDir: b.TempDir(), WriteURL: recv.URL + "/api/v1/write", QueryURL: recv.URL})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(b.Context())
	h := storage.NewIngestHandler(s, storage.IngestOptions{})
	const n = 10000
	ts := time.Now().Add(-time.Minute).UnixMilli()
	wr := prompb.WriteRequest{Timeseries: make([]prompb.TimeSeries, n)}
	for i := range n {
		wr.Timeseries[i] = prompb.TimeSeries{
			Labels: []prompb.Label{{Name: "__name__", Value: "bench_remote_bytes_total"}, {Name: "job", Value: "ballast-agents"},
				{Name: "instance", Value: fmt.Sprintf("ds%03d:9751", i/24)}, {Name: "device", Value: fmt.Sprintf("nvme%dn1", i%24)}},
			Samples: []prompb.Sample{{Value: float64(i), Timestamp: ts}},
		}
	}
	body := snappy.Encode(nil, wr.MarshalProtobuf(nil))
	b.ResetTimer()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, storage.PathRemoteWrite, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/x-protobuf")
		req.Header.Set("Content-Encoding", "snappy")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusNoContent {
			b.Fatalf("HTTP %d %s", rec.Code, rec.Body)
		}
	}
	s.Flush()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/sample")
}
