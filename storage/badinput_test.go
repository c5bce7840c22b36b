package storage

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"
)

func remoteWriteBody(t *testing.T, wr *prompb.WriteRequest) []byte {
	t.Helper()
	pb, err := wr.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return snappy.Encode(nil, pb)
}

func post(t *testing.T, path, ctype, encoding string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, testURL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, readAll(resp)
}

// storedState is the set of series and their sample sums for the metrics
// this test writes, used to prove that rejected requests change nothing.
func storedState(t *testing.T, at time.Time) string {
	t.Helper()
	ss, err := testStore.QueryRange(context.Background(), `sum_over_time({__name__=~"bad_.*|good_.*"}[1h])`, at, at, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, s := range ss {
		parts = append(parts, fmt.Sprintf("%s%v=%v", s.Name, s.Labels, s.Values))
	}
	return strings.Join(parts, ";")
}

// TestBadInputIsRejectedAndLosesNothing sends requests with nothing valid
// in them: each gets a clear error naming the line or series and the
// reason, and nothing stored earlier changes.
func TestBadInputIsRejectedAndLosesNothing(t *testing.T) {
	now := time.Now().Truncate(time.Second).Add(-2 * time.Minute)
	ms := now.UnixMilli()
	good := fmt.Sprintf("good_metric{a=\"1\"} 42 %d\n", ms)
	if code, body := post(t, PathImportPrometheus, "text/plain", "", []byte(good)); code != http.StatusNoContent {
		t.Fatalf("good import: got %d %s", code, body)
	}
	waitFor(t, "good sample", func() (bool, error) {
		s := storedState(t, now.Add(time.Minute))
		return s != "", fmt.Errorf("state %q", s)
	})
	before := storedState(t, now.Add(time.Minute))

	long := strings.Repeat("x", 5000)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(good))
	zw.Close()
	rw := func(ls []prompb.Label, v float64) []byte {
		return remoteWriteBody(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Labels: ls, Samples: []prompb.Sample{{Value: v, Timestamp: ms}}}}})
	}
	validRW := rw([]prompb.Label{{Name: "__name__", Value: "bad_rw"}}, 1)
	manyLabels := "bad_many{"
	for i := 0; i < 41; i++ {
		manyLabels += fmt.Sprintf("l%d=\"v\",", i)
	}
	manyLabels += "} 1\n"

	cases := []struct {
		name     string
		path     string
		ctype    string
		encoding string
		body     []byte
		code     int
		want     string // substring of the error message
	}{
		{"metric name starts with digit", PathImportPrometheus, "text/plain", "", []byte("1bad_name 1\n"), 400, "line 1"},
		{"metric name with dash", PathImportPrometheus, "text/plain", "", []byte("bad-name 1\n"), 400, "invalid metric name \"bad-name\""},
		{"value not a float", PathImportPrometheus, "text/plain", "", []byte("bad_value abc\n"), 400, "cannot parse value"},
		{"value with two dots", PathImportPrometheus, "text/plain", "", []byte("bad_value 1.2.3\n"), 400, "line 1"},
		{"Inf timestamp", PathImportPrometheus, "text/plain", "", []byte("bad_ts 1 Inf\n"), 400, "timestamp"},
		{"timestamp before retention", PathImportPrometheus, "text/plain", "", []byte("bad_ts 1 631152000000\n"), 400, "older than the retention"},
		{"timestamp far in the future", PathImportPrometheus, "text/plain", "", []byte(fmt.Sprintf("bad_ts 1 %d\n", time.Now().Add(30*24*time.Hour).UnixMilli())), 400, "future"},
		{"duplicate labels", PathImportPrometheus, "text/plain", "", []byte(`bad_dup{a="1",a="2"} 1` + "\n"), 400, "duplicate label \"a\""},
		{"huge label value", PathImportPrometheus, "text/plain", "", []byte(`bad_long{a="` + long + `"} 1` + "\n"), 400, "5000 bytes long"},
		{"bad label name", PathImportPrometheus, "text/plain", "", []byte(`bad_lname{1a="x"} 1` + "\n"), 400, "invalid label name"},
		{"unterminated label value", PathImportPrometheus, "text/plain", "", []byte(`bad_unterm{a="x} 1` + "\n"), 400, "line 1"},
		{"missing value", PathImportPrometheus, "text/plain", "", []byte(`bad_noval{a="x"}` + "\n"), 400, "line 1"},
		{"too many labels", PathImportPrometheus, "text/plain", "", []byte(manyLabels), 400, "too many labels"},
		{"__name__ as a label", PathImportPrometheus, "text/plain", "", []byte(`bad_n{__name__="x"} 1` + "\n"), 400, "__name__"},
		{"invalid UTF-8 label value", PathImportPrometheus, "text/plain", "", []byte("bad_utf{a=\"\xff\xfe\"} 1\n"), 400, "UTF-8"},
		{"empty body", PathImportPrometheus, "text/plain", "", nil, 400, "empty"},
		{"protobuf to text endpoint", PathImportPrometheus, "application/x-protobuf", "", validRW, 415, "content type"},
		{"bad gzip", PathImportPrometheus, "text/plain", "gzip", []byte("not gzip"), 400, "gzip"},
		{"body over the limit", PathImportPrometheus, "text/plain", "", bytes.Repeat([]byte("bad_big 1\n"), 200000), 413, "limit"},
		{"gzip bomb over the limit", PathImportPrometheus, "text/plain", "gzip", gzipOf(bytes.Repeat([]byte("bad_big 1\n"), 200000)), 413, "limit"},
		{"text to remote write", PathRemoteWrite, "text/plain", "", []byte(good), 415, "application/x-protobuf"},
		{"truncated snappy", PathRemoteWrite, "application/x-protobuf", "", validRW[:len(validRW)/2], 400, "snappy"},
		{"snappy of garbage protobuf", PathRemoteWrite, "application/x-protobuf", "", snappy.Encode(nil, []byte{0xff, 0xff, 0xff, 0x01}), 400, "protobuf"},
		{"remote write without __name__", PathRemoteWrite, "application/x-protobuf", "", rw([]prompb.Label{{Name: "a", Value: "b"}}, 1), 400, "no __name__"},
		{"remote write duplicate label", PathRemoteWrite, "application/x-protobuf", "", rw([]prompb.Label{{Name: "__name__", Value: "bad_rw"}, {Name: "a", Value: "1"}, {Name: "a", Value: "2"}}, 1), 400, "duplicate label"},
		{"remote write bad metric name", PathRemoteWrite, "application/x-protobuf", "", rw([]prompb.Label{{Name: "__name__", Value: "bad rw"}}, 1), 400, "invalid metric name"},
		{"gzip remote write", PathRemoteWrite, "application/x-protobuf", "gzip", validRW, 400, "snappy-compressed"},
		{"snappy encoding on text", PathImportPrometheus, "text/plain", "snappy", []byte(good), 400, "only for remote write"},
		{"only bad lines", PathImportPrometheus, "text/plain", "", []byte("bad_two 1 2 3 4\n# fine\nbad-two 1\n"), 400, "rejected 2 of 2 samples (nothing stored): line 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, body := post(t, c.path, c.ctype, c.encoding, c.body)
			if code != c.code {
				t.Fatalf("got HTTP %d %s; want %d", code, body, c.code)
			}
			var e struct{ Status, ErrorType, Error string }
			if err := json.Unmarshal([]byte(body), &e); err != nil {
				t.Fatalf("error body %q is not JSON: %v", body, err)
			}
			if e.Status != "error" || e.ErrorType == "" || !strings.Contains(e.Error, c.want) {
				t.Errorf("got %+v; want status error and a message containing %q", e, c.want)
			}
		})
	}
	// Nothing from the rejected requests may have landed, and the good sample
	// must still be there. Flush so any stray row would be visible.
	testStore.Flush()
	time.Sleep(2500 * time.Millisecond)
	testStore.Flush()
	if after := storedState(t, now.Add(time.Minute)); after != before {
		t.Errorf("stored data changed: got %q; want %q", after, before)
	}
}

// TestPartlyBadRequestStoresEveryValidSample: a request with valid and
// invalid samples stores every valid one and answers 400 naming the
// invalid ones and saying the rest is stored (docs/storage.md).
func TestPartlyBadRequestStoresEveryValidSample(t *testing.T) {
	now := time.Now().Truncate(time.Second).Add(-2 * time.Minute)
	ms := now.UnixMilli()
	text := fmt.Sprintf("partial_text{i=\"0\"} 1 %d\npartial_text{i=\"1\"} 1 %d\npartial_text 1 2 3 4\npartial_text{i=\"2\"} 1 %d\nbad-partial 1\n", ms, ms, ms)
	code, body := post(t, PathImportPrometheus, "text/plain", "", []byte(text))
	if code != http.StatusBadRequest || !strings.Contains(body, "rejected 2 of 5 samples (the other 3 are stored): line 3") || !strings.Contains(body, "line 5") {
		t.Errorf("text: got %d %s; want 400 saying 3 are stored and naming lines 3 and 5", code, body)
	}
	old := now.Add(-400 * 24 * time.Hour).UnixMilli()
	wr := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		{Labels: []prompb.Label{{Name: "__name__", Value: "partial_rw"}, {Name: "i", Value: "0"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: ms}, {Value: 2, Timestamp: old}}},
		{Labels: []prompb.Label{{Name: "i", Value: "nameless"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: ms}, {Value: 1, Timestamp: ms + 1}}},
		{Labels: []prompb.Label{{Name: "__name__", Value: "partial_rw"}, {Name: "i", Value: "1"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: ms}}},
	}}
	code, body = post(t, PathRemoteWrite, "application/x-protobuf", "snappy", remoteWriteBody(t, wr))
	if code != http.StatusBadRequest || !strings.Contains(body, "rejected 3 of 5 samples (the other 2 are stored)") ||
		!strings.Contains(body, "timeseries 0") || !strings.Contains(body, "older than the retention") || !strings.Contains(body, "timeseries 1") {
		t.Errorf("remote write: got %d %s; want 400 saying 2 are stored and naming series 0 and 1", code, body)
	}
	for _, c := range []struct {
		expr string
		want float64
	}{{"count(partial_text)", 3}, {"count(partial_rw)", 2}} {
		waitFor(t, c.expr, func() (bool, error) {
			ss, err := testStore.Query(context.Background(), c.expr, now.Add(time.Second))
			if err != nil || len(ss) != 1 {
				return false, fmt.Errorf("got %v, %v", ss, err)
			}
			return ss[0].Values[0] == c.want, fmt.Errorf("got %v; want %v", ss[0].Values, c.want)
		})
	}
	var exp bytes.Buffer
	testMetrics.WritePrometheus(&exp)
	for _, want := range []string{
		`ballast_ingest_rejected_samples_total{format="prometheus_text",reason="parse"}`,
		`ballast_ingest_rejected_samples_total{format="prometheus_text",reason="metric_name"}`,
		`ballast_ingest_rejected_samples_total{format="remote_write",reason="timestamp"}`,
		`ballast_ingest_rejected_samples_total{format="remote_write",reason="metric_name"}`,
	} {
		if !strings.Contains(exp.String(), want) {
			t.Errorf("/metrics lacks %s:\n%s", want, exp.String())
		}
	}
}

// TestSpecialValuesAreStoredAsVictoriaMetricsDoes: ±Inf is stored, the
// staleness marker ends a series, and NaN is accepted (204) but not stored,
// as in VictoriaMetrics (counted in ballast_ingest_nan_samples_total).
func TestSpecialValuesAreStoredAsVictoriaMetricsDoes(t *testing.T) {
	now := time.Now().Truncate(time.Second).Add(-2 * time.Minute)
	ms := now.UnixMilli()
	text := fmt.Sprintf("special_text{v=\"nan\"} NaN %d\nspecial_text{v=\"inf\"} +Inf %d\nspecial_text{v=\"-inf\"} -Inf %d\n", ms, ms, ms)
	if code, body := post(t, PathImportPrometheus, "text/plain", "", []byte(text)); code != http.StatusNoContent {
		t.Fatalf("text with NaN and ±Inf: got %d %s; want 204", code, body)
	}
	series := func(v string, samples ...prompb.Sample) prompb.TimeSeries {
		return prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: "special_rw"}, {Name: "v", Value: v}}, Samples: samples}
	}
	wr := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		series("nan", prompb.Sample{Value: math.NaN(), Timestamp: ms}),
		series("inf", prompb.Sample{Value: math.Inf(1), Timestamp: ms}),
		series("stale", prompb.Sample{Value: 5, Timestamp: ms - 10000}, prompb.Sample{Value: math.Float64frombits(0x7ff0000000000002), Timestamp: ms}),
	}}
	if code, body := post(t, PathRemoteWrite, "application/x-protobuf", "snappy", remoteWriteBody(t, wr)); code != http.StatusNoContent {
		t.Fatalf("remote write with NaN, +Inf and a staleness marker: got %d %s; want 204", code, body)
	}
	at := now.Add(time.Second)
	waitFor(t, "special values", func() (bool, error) {
		ss, err := testStore.Query(context.Background(), `{__name__=~"special_.*"}`, at)
		if err != nil {
			return false, err
		}
		got := map[string]float64{}
		for _, s := range ss {
			got[s.Name+"/"+s.Label("v")] = s.Values[0]
		}
		want := map[string]float64{"special_text/inf": math.Inf(1), "special_text/-inf": math.Inf(-1), "special_rw/inf": math.Inf(1)}
		return fmt.Sprint(got) == fmt.Sprint(want), fmt.Errorf("got %v; want %v (no NaN series, the stale one ended)", got, want)
	})
	// The marker is stored: a raw range-vector answer returns it as a NaN
	// point (as VictoriaMetrics does; Prometheus leaves it out), and
	// functions over the range skip it (docs/storage.md).
	for _, c := range []struct{ query, want string }{
		{`special_rw{v="stale"}[1m]`, fmt.Sprintf(`"values":[[%d,"5"],[%d,"NaN"]]`, ms/1000-10, ms/1000)},
		{`count_over_time(special_rw{v="stale"}[1m])`, `"value":[` + fmt.Sprint(at.Unix()) + `,"1"]`},
	} {
		resp, err := http.Get(testURL + "/api/v1/query?nocache=1&time=" + fmt.Sprint(at.Unix()) + "&query=" + url.QueryEscape(c.query))
		if err != nil {
			t.Fatal(err)
		}
		if body := readAll(resp); !strings.Contains(body, c.want) {
			t.Errorf("%s: got %s; want it to contain %s", c.query, body, c.want)
		}
	}
	var exp bytes.Buffer
	testMetrics.WritePrometheus(&exp)
	for _, want := range []string{`ballast_ingest_nan_samples_total{format="prometheus_text"} `, `ballast_ingest_nan_samples_total{format="remote_write"} `} {
		if !strings.Contains(exp.String(), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func gzipOf(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

func TestRemoteWriteLandsAndIsQueryable(t *testing.T) {
	at := time.Now().Truncate(time.Second).Add(-3 * time.Minute)
	var tss []prompb.TimeSeries
	for i := 0; i < 5; i++ {
		ts := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: "rw_gpu_util_ratio"}, {Name: "gpu", Value: fmt.Sprint(i)}}}
		for k := 0; k < 6; k++ {
			ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: at.Add(time.Duration(k) * 10 * time.Second).UnixMilli(), Value: float64(i) / 10})
		}
		tss = append(tss, ts)
	}
	// The headers Prometheus and vmagent send.
	code, body := post(t, PathRemoteWrite, "application/x-protobuf", "snappy", remoteWriteBody(t, &prompb.WriteRequest{Timeseries: tss}))
	if code != http.StatusNoContent {
		t.Fatalf("remote write: got %d %s; want 204", code, body)
	}
	waitFor(t, "remote-written series", func() (bool, error) {
		ss, err := testStore.Query(context.Background(), `sum(rw_gpu_util_ratio)`, at.Add(50*time.Second))
		if err != nil || len(ss) != 1 {
			return false, fmt.Errorf("got %v, %v", ss, err)
		}
		return math.Abs(ss[0].Values[0]-1.0) < 1e-9, fmt.Errorf("sum %v", ss[0].Values)
	})
}
