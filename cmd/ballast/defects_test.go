package main

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/golang/snappy"
	"google.golang.org/protobuf/encoding/protowire"
)

// The defects issue 10 measured against a real mds, one row each. Every
// row was run against the code before the fix and failed there (see the
// row's comment for how); it passes now.

type defectCase struct {
	name string
	// shared rows run against one mds; others start their own processes.
	run func(t *testing.T, p *mdsProc)
}

func TestIssue10Defects(t *testing.T) {
	var shared *mdsProc
	for _, c := range []defectCase{
		// Before: 204, the series was deleted.
		{"delete endpoints refused without admin", deleteNeedsAdmin},
		// Before: the form-encoded import answered 204 and stored the sample;
		// the query API answered Access-Control-Allow-Origin: *.
		{"CSRF-style form posts refused", formPostsRefused},
		// Before: the push endpoints' connection was reset (panic in
		// net/http's goroutine); the scrape crashed the process.
		{"70 KB metric name answered without a crash", longNameAnswered},
		// Before: 204 and dropped (VictoriaMetrics logs "skipping adding too
		// long item to indexdb").
		{"label sets over 64 KB refused", bigLabelSetRefused},
		// Before: 204 and nothing stored.
		{"remote write 2.0 refused with 415", remoteWrite2Refused},
		// Before: 204 and stored at the time of arrival.
		{"timestamp 0 refused, never rewritten", timestampZeroRefused},
		// Before: "-9223372036854775808 … older than the retention".
		{"int64-max timestamp named as out of range", hugeTimestampNamed},
		// Before: 503 "send it again", which a client retries forever.
		{"stale LAYOUTSTATS is a 4xx naming the oldest time", staleLayoutStats},
		// Before: 200, the last duplicate won; upper case keys matched.
		{"duplicate and case-variant LAYOUTSTATS keys refused", layoutStatsKeys},
		// Before: 400 bad_data.
		{"query timeout is 503 timeout", queryTimeout},
		// Before: a 492 KB request got a 10.5 MB error body.
		{"remote write errors stay short", remoteWriteErrorBounded},
		// Before: 848 MB RSS for a 52 KB body.
		{"extra_label amplification bounded", extraLabelBounded},
		// Before (as the issue measured it; this row was written after
		// admission control landed and was not run against the old code):
		// 16 concurrent 30 MB bodies grew RSS to 4.1 GB and were OOM-killed
		// without completing one request.
		{"16 concurrent 30 MB bodies bounded", concurrentHugeBodies},
		// Before: 6.1 s and +213 MB, and no limit could be configured (the
		// config fields this row sets were refused as unknown).
		{"a pathological regex query is bounded", regexQueryBounded},
	} {
		t.Run(c.name, func(t *testing.T) {
			if shared == nil || shared.cmd.ProcessState != nil {
				shared = startMDS(t, t.TempDir())
			}
			c.run(t, shared)
			if !shared.alive() {
				t.Fatalf("the mds died:\n%s", shared.logs)
			}
		})
	}
	t.Run("70 KB metric name from a scrape target", longNameFromScrape)
	t.Run("dcgm-exporter panic input", dcgmPanicInput)
	t.Run("20000 idle connections do not exhaust descriptors", connectionFlood)
}

// alive reports whether the process is running and answers /healthz.
func (p *mdsProc) alive() bool {
	if p.cmd.ProcessState != nil || p.cmd.Process.Signal(syscall.Signal(0)) != nil {
		return false
	}
	resp, err := http.Get(p.url("/healthz"))
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// send posts body to path with headers and returns the status and answer.
func send(t *testing.T, method, u, ctype string, body []byte, hdr ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	return resp.StatusCode, string(b)
}

func deleteNeedsAdmin(t *testing.T, p *mdsProc) {
	ts := time.Now().Add(-time.Minute)
	p.importText(t, batch("keep_me", 3, ts))
	p.waitCount(t, "keep_me", ts, 3)
	q := url.Values{"match[]": {"keep_me"}}.Encode()
	if code, body := send(t, http.MethodPost, p.url("/api/v1/admin/tsdb/delete_series?"+q), "", nil); code != http.StatusUnauthorized {
		t.Errorf("delete_series without credentials: got %d %s; want 401", code, body)
	}
	for _, path := range []string{"/tags/delSeries?path=keep_me", "/internal/resetRollupResultCache", "/snapshot/create", "/api/v1/admin/tsdb/snapshot"} {
		if code, body := send(t, http.MethodPost, p.url(path), "", nil); code != http.StatusNotFound {
			t.Errorf("POST %s: got %d %s; want 404 (not mounted)", path, code, body)
		}
	}
	time.Sleep(3 * time.Second)
	if got := p.countAt(t, "keep_me", ts); got != 3 {
		t.Errorf("after the refused deletes: got %d series; want 3", got)
	}
}

func formPostsRefused(t *testing.T, p *mdsProc) {
	ts := time.Now().Add(-time.Minute)
	body := []byte(fmt.Sprintf("csrf_injected 1 %d\n", ts.UnixMilli()))
	if code, ans := send(t, http.MethodPost, p.url("/api/v1/import/prometheus"), "application/x-www-form-urlencoded", body); code != http.StatusUnsupportedMediaType {
		t.Errorf("form-encoded import: got %d %s; want 415", code, ans)
	}
	if code, ans := send(t, http.MethodPost, p.url("/api/v1/import/prometheus"), "multipart/form-data; boundary=x", body); code != http.StatusUnsupportedMediaType {
		t.Errorf("multipart import: got %d %s; want 415", code, ans)
	}
	// What a browser sends for a cross-site fetch() a page makes.
	browser := []string{"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"}
	if code, ans := send(t, http.MethodPost, p.url("/api/v1/import/prometheus"), "text/plain", body, browser...); code != http.StatusForbidden {
		t.Errorf("cross-site text import: got %d %s; want 403", code, ans)
	}
	if code, ans := send(t, http.MethodPost, p.url("/api/v1/layoutstats"), "text/plain", []byte(`{"client_id":"x","reports":[]}`), browser...); code != http.StatusForbidden && code != http.StatusUnsupportedMediaType {
		t.Errorf("cross-site LAYOUTSTATS: got %d %s; want 403 or 415", code, ans)
	}
	req, _ := http.NewRequest(http.MethodGet, p.url("/api/v1/query?query=1"), nil)
	req.Header.Set("Origin", "https://evil.example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "" {
		t.Errorf("query answer to another origin: Access-Control-Allow-Origin %q; want none", got)
	}
	p.importText(t, batch("csrf_marker", 1, ts))
	p.waitCount(t, "csrf_marker", ts, 1)
	if got := p.countAt(t, "csrf_injected", ts); got != 0 {
		t.Errorf("csrf_injected: got %d series stored; want 0", got)
	}
}

// rwBody renders a snappy-compressed remote write 1.0 WriteRequest.
func rwBody(series [][]string, ts int64, v float64) []byte {
	var wr []byte
	for _, ls := range series {
		var tsb []byte
		for i := 0; i+1 < len(ls); i += 2 {
			var lb []byte
			lb = protowire.AppendTag(lb, 1, protowire.BytesType)
			lb = protowire.AppendString(lb, ls[i])
			lb = protowire.AppendTag(lb, 2, protowire.BytesType)
			lb = protowire.AppendString(lb, ls[i+1])
			tsb = protowire.AppendTag(tsb, 1, protowire.BytesType)
			tsb = protowire.AppendBytes(tsb, lb)
		}
		var sb []byte
		sb = protowire.AppendTag(sb, 1, protowire.Fixed64Type)
		sb = protowire.AppendFixed64(sb, math.Float64bits(v))
		sb = protowire.AppendTag(sb, 2, protowire.VarintType)
		sb = protowire.AppendVarint(sb, uint64(ts))
		tsb = protowire.AppendTag(tsb, 2, protowire.BytesType)
		tsb = protowire.AppendBytes(tsb, sb)
		wr = protowire.AppendTag(wr, 1, protowire.BytesType)
		wr = protowire.AppendBytes(wr, tsb)
	}
	return snappy.Encode(nil, wr)
}

func postRW(t *testing.T, p *mdsProc, body []byte, hdr ...string) (int, string) {
	return send(t, http.MethodPost, p.url("/api/v1/write"), "application/x-protobuf", body,
		append([]string{"Content-Encoding", "snappy", "X-Prometheus-Remote-Write-Version", "0.1.0"}, hdr...)...)
}

func longNameAnswered(t *testing.T, p *mdsProc) {
	name := "a" + strings.Repeat("b", 70<<10)
	ts := time.Now().Add(-time.Minute).UnixMilli()
	code, ans := send(t, http.MethodPost, p.url("/api/v1/import/prometheus"), "text/plain", []byte(fmt.Sprintf("%s 1 %d\n", name, ts)))
	if code != http.StatusBadRequest || !strings.Contains(ans, "limit") || len(ans) > 4096 {
		t.Errorf("text import of a 70 KB name: got %d %.300s (%d bytes); want a short 400 naming the limit", code, ans, len(ans))
	}
	code, ans = postRW(t, p, rwBody([][]string{{"__name__", name}}, ts, 1))
	if code != http.StatusBadRequest || !strings.Contains(ans, "limit") || len(ans) > 4096 {
		t.Errorf("remote write of a 70 KB name: got %d %.300s (%d bytes); want a short 400 naming the limit", code, ans, len(ans))
	}
	code, ans = postRW(t, p, rwBody([][]string{{"__name__", "ok", strings.Repeat("l", 70<<10), "v"}}, ts, 1))
	if code != http.StatusBadRequest || len(ans) > 4096 {
		t.Errorf("remote write of a 70 KB label name: got %d %.300s; want a short 400", code, ans)
	}
	lstats := fmt.Sprintf(`{"client_id":%q,"reports":[]}`, strings.Repeat("c", 70<<10))
	if code, ans := send(t, http.MethodPost, p.url("/api/v1/layoutstats"), "application/json", []byte(lstats)); code/100 != 4 || len(ans) > 4096 {
		t.Errorf("LAYOUTSTATS with a 70 KB client_id: got %d %.300s; want a short 4xx", code, ans)
	}
}

func bigLabelSetRefused(t *testing.T, p *mdsProc) {
	ts := time.Now().Add(-time.Minute)
	var b strings.Builder
	b.WriteString("big_labels{")
	for i := range 20 {
		fmt.Fprintf(&b, "l%d=%q,", i, strings.Repeat("v", 4000))
	}
	fmt.Fprintf(&b, "} 1 %d\n", ts.UnixMilli())
	code, ans := send(t, http.MethodPost, p.url("/api/v1/import/prometheus"), "text/plain", []byte(b.String()))
	if code != http.StatusBadRequest || !strings.Contains(ans, "label set") {
		t.Errorf("an 80 KB label set: got %d %.300s; want 400 naming the label set limit", code, ans)
	}
}

func remoteWrite2Refused(t *testing.T, p *mdsProc) {
	ts := time.Now().Add(-time.Minute)
	body := rwBody([][]string{{"__name__", "rw2_metric"}}, ts.UnixMilli(), 1)
	code, ans := send(t, http.MethodPost, p.url("/api/v1/write"), "application/x-protobuf;proto=io.prometheus.write.v2.Request", body,
		"Content-Encoding", "snappy", "X-Prometheus-Remote-Write-Version", "2.0.0")
	if code != http.StatusUnsupportedMediaType || !strings.Contains(ans, "2.0") {
		t.Errorf("remote write 2.0: got %d %s; want 415 saying 2.0 is not supported", code, ans)
	}
}

func timestampZeroRefused(t *testing.T, p *mdsProc) {
	for _, body := range []string{"ts_zero_text 1 0\n", "ts_zero_text{a=\"b\"} 1 0\n"} {
		if code, ans := send(t, http.MethodPost, p.url("/api/v1/import/prometheus"), "text/plain", []byte(body)); code != http.StatusBadRequest || !strings.Contains(ans, "1970") {
			t.Errorf("text %q: got %d %s; want 400 naming 1970", body, code, ans)
		}
	}
	if code, ans := postRW(t, p, rwBody([][]string{{"__name__", "ts_zero_rw"}}, 0, 1)); code != http.StatusBadRequest || !strings.Contains(ans, "1970") {
		t.Errorf("remote write timestamp 0: got %d %s; want 400 naming 1970", code, ans)
	}
	// A line without a timestamp still gets the time of arrival.
	if code, ans := send(t, http.MethodPost, p.url("/api/v1/import/prometheus"), "text/plain", []byte("ts_none 1\n")); code != http.StatusNoContent {
		t.Errorf("a line without a timestamp: got %d %s; want 204", code, ans)
	}
	p.waitCount(t, "ts_none", time.Now(), 1)
	if got := p.countAt(t, "ts_zero_text", time.Now()) + p.countAt(t, "ts_zero_rw", time.Now()); got != 0 {
		t.Errorf("timestamp-0 samples stored: got %d series; want 0", got)
	}
}

func hugeTimestampNamed(t *testing.T, p *mdsProc) {
	code, ans := send(t, http.MethodPost, p.url("/api/v1/import/prometheus"), "text/plain", []byte("ts_huge 1 9223372036854775807\n"))
	if code != http.StatusBadRequest || strings.Contains(ans, "-9223372036854775808") || strings.Contains(ans, "older") {
		t.Errorf("int64-max timestamp: got %d %s; want 400 saying it is out of range or in the future", code, ans)
	}
}

// layoutStatsBody is one report of one stripe at report time at.
func layoutStatsBody(client string, at time.Time) string {
	return fmt.Sprintf(`{"client_id":%q,"report_time":%q,"reports":[{
 "ffis_offset":0,"ffis_length":1048576,"ffis_stateid":{"seqid":1,"other":"000000000000000000000001"},
 "ffis_read":{"ii_count":10,"ii_bytes":1000},"ffis_write":{"ii_count":0,"ii_bytes":0},
 "ffis_deviceid":"a1b2c3d4000000000000000000000007",
 "ffis_layoutupdate":{"ffl_addr":{"na_r_netid":"tcp","na_r_addr":"127.0.0.1.8.1"},"ffl_fhandle":"0100",
  "ffl_read":{"ffil_ops_requested":10,"ffil_bytes_requested":1000,"ffil_ops_completed":10,"ffil_bytes_completed":1000,"ffil_bytes_not_delivered":0,
   "ffil_total_busy_time":{"seconds":1,"nseconds":0},"ffil_aggregate_completion_time":{"seconds":1,"nseconds":0}},
  "ffl_write":{"ffil_ops_requested":0,"ffil_bytes_requested":0,"ffil_ops_completed":0,"ffil_bytes_completed":0,"ffil_bytes_not_delivered":0,
   "ffil_total_busy_time":{"seconds":0,"nseconds":0},"ffil_aggregate_completion_time":{"seconds":0,"nseconds":0}},
  "ffl_duration":{"seconds":10,"nseconds":0},"ffl_local":false}}]}`, client, at.UTC().Format(time.RFC3339))
}

func staleLayoutStats(t *testing.T, p *mdsProc) {
	old := time.Now().Add(-60 * 24 * time.Hour)
	code, ans := send(t, http.MethodPost, p.url("/api/v1/layoutstats"), "application/json", []byte(layoutStatsBody("stale-client", old)))
	if code/100 != 4 || !strings.Contains(ans, "oldest accepted") {
		t.Errorf("LAYOUTSTATS 60 days old: got %d %s; want a 4xx naming the oldest accepted time", code, ans)
	}
}

func layoutStatsKeys(t *testing.T, p *mdsProc) {
	good := layoutStatsBody("keys-client", time.Now())
	for name, body := range map[string]string{
		"duplicate key":       strings.Replace(good, `"client_id":"keys-client"`, `"client_id":"keys-client","client_id":"other"`, 1),
		"case-variant key":    strings.Replace(good, `"client_id"`, `"CLIENT_ID"`, 1),
		"nested duplicate":    strings.Replace(good, `"ffis_offset":0`, `"ffis_offset":0,"ffis_offset":4096`, 1),
		"nested case-variant": strings.Replace(good, `"ffis_length"`, `"Ffis_Length"`, 1),
	} {
		code, ans := send(t, http.MethodPost, p.url("/api/v1/layoutstats"), "application/json", []byte(body))
		if code != http.StatusBadRequest {
			t.Errorf("%s: got %d %s; want 400", name, code, ans)
		}
	}
}

// queryTimeout sends a query that cannot finish within its timeout on any
// machine. VictoriaMetrics' deadline has one-second resolution (the start
// plus the timeout truncated to a whole second, read from a clock that
// ticks once a second), so a 1 ms timeout is exceeded between one and two
// seconds after the start, and only where vmselect looks: before each
// fetch and before each series is unpacked and rolled up. The query is
// therefore a chain of 100 rollups that VictoriaMetrics evaluates one after
// another (a + b pushes a's label filters into b, so b waits for a), each
// sorting the 400 random samples of every series at each of 28,800 steps:
// about 0.3 s of one core per series here, so no core count shortens the
// chain below tens of seconds, while the query stops at the first check
// past the deadline.
func queryTimeout(t *testing.T, p *mdsProc) {
	const series, samples, rollups = 8, 400, 100
	last := time.Now().Add(-9 * time.Hour).Truncate(time.Second)
	rnd := rand.New(rand.NewPCG(10, 503))
	var b strings.Builder
	for i := range series {
		for j := range samples {
			fmt.Fprintf(&b, "timeout_series{device=\"nvme%dn1\"} %d %d\n", i, rnd.IntN(1e6), last.Add(-time.Duration(j)*time.Second).UnixMilli())
		}
	}
	p.importText(t, b.String())
	p.waitCount(t, "timeout_series", last, series)
	terms := make([]string, rollups)
	for k := range terms {
		terms[k] = fmt.Sprintf("quantile_over_time(%.3f, timeout_series[1d])", 0.5+float64(k)/(2*rollups))
	}
	start := last.Add(time.Hour)
	q := url.Values{"query": {"sum(" + strings.Join(terms, " + ") + ")"}, "start": {strconv.FormatInt(start.Unix(), 10)},
		"end": {strconv.FormatInt(start.Add(28799*time.Second).Unix(), 10)}, "step": {"1"}, "timeout": {"1ms"}, "nocache": {"1"}}
	code, ans := send(t, http.MethodGet, p.url("/api/v1/query_range?"+q.Encode()), "", nil)
	if code != http.StatusServiceUnavailable || !strings.Contains(ans, `"errorType":"timeout"`) {
		t.Errorf("query over its timeout: got %d %.300s; want 503 errorType timeout", code, ans)
	}
}

func remoteWriteErrorBounded(t *testing.T, p *mdsProc) {
	// One series whose labels decompress to 10 MB; snappy sends it in
	// about half a megabyte.
	ls := []string{"__name__", "echoed"}
	for i := range 40 {
		ls = append(ls, fmt.Sprintf("l%02d", i), strings.Repeat("v", 256<<10))
	}
	body := rwBody([][]string{ls}, time.Now().UnixMilli(), 1)
	code, ans := postRW(t, p, body)
	if code != http.StatusBadRequest || len(ans) > 4096 {
		t.Errorf("remote write of a %d KB request with 10 MB of labels: got %d and a %d-byte answer; want 400 and at most 4 KB", len(body)>>10, code, len(ans))
	}
}

// concurrentHugeBodies posts 16 distinct 30 MB text bodies at once (~660,000
// samples each). Admission control (ingest.max_inflight_bytes, 64 MiB) lets
// two be parsed at a time and answers the rest 429 with Retry-After after
// ingest.queue_timeout; every request gets an answer, the mds stays under
// the RSS bound docs/storage.md gives for bodies this large (1.5 GiB), and
// every acknowledged body is stored whole.
func concurrentHugeBodies(t *testing.T, p *mdsProc) {
	const bodies, series = 16, 1000
	base := time.Now().Add(-50 * time.Minute).Truncate(time.Second)
	lines := make([]int, bodies)
	codes := make([]int, bodies)
	answers := make([]string, bodies)
	retryAfter := make([]string, bodies)
	var wg sync.WaitGroup
	for k := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var b bytes.Buffer
			b.Grow(31 << 20)
			for j := 0; b.Len() < 30<<20; j++ {
				fmt.Fprintf(&b, "huge_body{req=\"%d\",s=\"%d\"} %d %d\n", k, j%series, j, base.Add(time.Duration(j/series)*time.Second).UnixMilli())
				lines[k]++
			}
			resp, err := http.Post(p.url("/api/v1/import/prometheus"), "text/plain", &b)
			if err != nil {
				answers[k] = err.Error()
				return
			}
			defer resp.Body.Close()
			a, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			codes[k], answers[k], retryAfter[k] = resp.StatusCode, string(a), resp.Header.Get("Retry-After")
		}()
	}
	wg.Wait()
	accepted := 0
	for k := range bodies {
		switch {
		case codes[k] == http.StatusNoContent:
			accepted++
		case codes[k] == http.StatusTooManyRequests && retryAfter[k] != "":
		default:
			t.Errorf("body %d: got %d (Retry-After %q) %.300s; want 204, or 429 with Retry-After", k, codes[k], retryAfter[k], answers[k])
		}
	}
	if accepted == 0 {
		t.Errorf("none of %d bodies was accepted; want at least one", bodies)
	}
	peak := peakRSS(t, p.cmd.Process.Pid)
	t.Logf("%d of %d bodies accepted; mds peak RSS %d MiB", accepted, bodies, peak>>20)
	if peak > 3<<29 {
		t.Errorf("peak RSS %d MiB with %d concurrent 30 MB bodies; want under the documented 1.5 GiB", peak>>20, bodies)
	}
	at := base.Add(time.Hour)
	for k := range bodies {
		if codes[k] != http.StatusNoContent {
			continue
		}
		want := float64(lines[k])
		q := fmt.Sprintf(`sum(count_over_time(huge_body{req="%d"}[2h]))`, k)
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Second) {
			vec := instant(t, p.addr, q, at)
			got := 0.0
			if len(vec) == 1 {
				got = float64(vec[0].Value)
			}
			if got == want {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("body %d was acknowledged with %v samples; %v are stored", k, want, got)
				break
			}
		}
	}
}

// regexQueryBounded runs the issue's `{__name__=~"(a|b)*.*.*.*.*"}` (it
// matches every series) over 5,000 series: the shared mds (default limits)
// answers it; an mds with a small storage.max_memory_per_query refuses it
// with 422 naming the limit, counted in /metrics.
func regexQueryBounded(t *testing.T, p *mdsProc) {
	const series = 5000
	ts := time.Now().Add(-10 * time.Minute).Truncate(time.Second)
	var b strings.Builder
	for i := range series {
		fmt.Fprintf(&b, "regex_row_%d{i=\"%d\"} 1 %d\n", i, i%10, ts.UnixMilli())
	}
	const expr = `{__name__=~"(a|b)*.*.*.*.*"}`
	p.importText(t, b.String())
	p.waitCount(t, `{__name__=~"regex_row_.*"}`, ts, series)
	before := peakRSS(t, p.cmd.Process.Pid)
	if n := len(instant(t, p.addr, expr, ts)); n < series {
		t.Errorf("%s with the default limits: %d series; want at least %d", expr, n, series)
	}
	if grew := peakRSS(t, p.cmd.Process.Pid) - before; grew > 128<<20 {
		t.Errorf("%s over %d series grew peak RSS by %d MiB; want at most 128", expr, series, grew>>20)
	}

	dir := t.TempDir()
	cfg := filepath.Join(dir, "mds.yml")
	os.WriteFile(cfg, []byte("role: mds\nstorage:\n  max_memory_per_query: 65536\n"), 0o644)
	lim := startMDS(t, filepath.Join(dir, "data"), "--config", cfg)
	lim.importText(t, b.String())
	lim.waitCount(t, `{__name__=~"regex_row_.*"}`, ts, series)
	path := "/api/v1/query?" + url.Values{"query": {expr}, "time": {strconv.FormatInt(ts.Unix(), 10)}}.Encode()
	code, ans := send(t, http.MethodGet, lim.url(path), "", nil)
	if code != 422 || !strings.Contains(ans, `"errorType":"execution"`) || !strings.Contains(ans, "maxMemoryPerQuery") {
		t.Errorf("%s with max_memory_per_query 65536: got %d %.400s; want 422 execution naming maxMemoryPerQuery", expr, code, ans)
	}
	_, m := send(t, http.MethodGet, lim.url("/metrics"), "", nil)
	if !strings.Contains(m, `ballast_query_rejected_total{reason="memory"}`) {
		t.Errorf("/metrics does not count the refusal as reason memory")
	}
	if !lim.alive() {
		t.Fatalf("the mds with query limits died:\n%s", lim.logs)
	}
}

// peakRSS returns VmHWM of pid in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	return rss(t, pid, "VmHWM:")
}

func extraLabelBounded(t *testing.T, p *mdsProc) {
	ts := time.Now().Add(-time.Minute).UnixMilli()
	var body strings.Builder
	for i := 0; body.Len() < 52<<10; i++ {
		fmt.Fprintf(&body, "amp_%d 1 %d\n", i, ts)
	}
	// Refused requests must cost next to nothing; the accepted one stores
	// 4,000 new series of 4 KB each (16 MB of names, as a 16 MB body
	// spelling them out would), which VictoriaMetrics indexes and caches.
	for _, c := range []struct {
		labels, size int
		want         []int
		maxGrowth    int64
	}{
		{39, 4096, []int{http.StatusBadRequest, http.StatusRequestHeaderFieldsTooLarge}, 16 << 20}, // the issue's request
		{12, 4096, []int{http.StatusBadRequest}, 16 << 20},                                         // within the URL limit, over the extra-label limit
		{1, 4000, []int{http.StatusNoContent}, 160 << 20},                                          // the most extra labels allow, on every line
	} {
		q := url.Values{}
		for i := range c.labels {
			q.Add("extra_label", fmt.Sprintf("e%d=%s", i, strings.Repeat("x", c.size)))
		}
		before := peakRSS(t, p.cmd.Process.Pid)
		code, ans := send(t, http.MethodPost, p.url("/api/v1/import/prometheus?"+q.Encode()), "text/plain", []byte(body.String()))
		grew := peakRSS(t, p.cmd.Process.Pid) - before
		if !slices.Contains(c.want, code) {
			t.Errorf("%d extra labels of %d bytes: got %d %.300s; want %v", c.labels, c.size, code, ans, c.want)
		}
		if grew > c.maxGrowth {
			t.Errorf("%d extra labels of %d bytes on a 52 KB body: peak RSS grew %d MB; want at most %d MB", c.labels, c.size, grew>>20, c.maxGrowth>>20)
		}
	}
}

// longNameFromScrape serves a page with a 70 KB metric name next to a
// normal one; the mds must keep the normal one and stay up.
func longNameFromScrape(t *testing.T) {
	page := "scrape_ok 1\n" + "x" + strings.Repeat("y", 70<<10) + " 1\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, page) }))
	defer srv.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "mds.yml")
	os.WriteFile(cfg, []byte("role: mds\nscrape:\n  interval: 1s\n  timeout: 1s\n"), 0o644)
	p := startMDS(t, filepath.Join(dir, "data"), "--config", cfg, "--scrape-target", strings.TrimPrefix(srv.URL, "http://"))
	p.waitCount(t, "scrape_ok", time.Now().Add(5*time.Second), 1)
	time.Sleep(5 * time.Second) // several more scrapes
	if !p.alive() {
		t.Fatalf("the mds died scraping a 70 KB name:\n%s", p.logs)
	}
	_, m := send(t, http.MethodGet, p.url("/metrics"), "", nil)
	if !strings.Contains(m, `ballast_scrape_rejected_rows_total{reason="metric_name"}`) {
		t.Errorf("/metrics does not count the rejected long name")
	}
}

// dcgmPanicInput runs a client agent reading a dcgm-exporter that serves
// the 49-byte page a fuzzer found; the agent must keep serving /metrics.
func dcgmPanicInput(t *testing.T) {
	page := "#HELP A" + strings.Repeat("0", 30) + " 000000000\n{}"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, page) }))
	defer srv.Close()
	cfg := filepath.Join(t.TempDir(), "ds.yml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("role: ds\ndcgm_exporter_url: %s/metrics\n", srv.URL)), 0o644)
	addr := startAgent(t, "127.0.0.1:0", "--config", cfg, "--collector.dcgm=true").addr
	for i := range 2 {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatalf("scrape %d: the agent is gone: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `ballast_collector_success{collector="dcgm"} 0`) {
			t.Fatalf("scrape %d: got %d; want 200 with the dcgm collector failed alone", i, resp.StatusCode)
		}
		time.Sleep(1100 * time.Millisecond) // past cache_for
	}
}

// connectionFlood opens 20,000 connections that never send a request to
// an mds whose descriptor limit is 4096, while ingest goes on over a
// keep-alive connection. Before the connection cap, the mds accepted
// until it ran out of descriptors and VictoriaMetrics exited when it could
// not open a file.
func connectionFlood(t *testing.T) {
	dir := t.TempDir()
	p := startMDSWith(t, []string{"sh", "-c", `ulimit -n 4096 && exec "$0" "$@"`, ballastBin}, filepath.Join(dir, "data"), "--flush-interval", "1s")
	ts := time.Now().Add(-time.Minute)
	var acked atomic.Int64
	stop := make(chan struct{})
	ingestDone := make(chan struct{})
	go func() {
		defer close(ingestDone)
		c := &http.Client{Timeout: 30 * time.Second}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			resp, err := c.Post(p.url("/api/v1/import/prometheus"), "text/plain", strings.NewReader(batch(fmt.Sprintf("flood_%d", i), 200, ts)))
			if err != nil {
				continue
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusNoContent {
				acked.Add(1)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	var conns []net.Conn
	d := net.Dialer{Timeout: 300 * time.Millisecond}
	attempted, opened := 0, 0
	for wave := 0; attempted < 20000; wave++ {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range 1000 {
			attempted++
			wg.Go(func() {
				c, err := d.Dial("tcp", p.addr)
				if err != nil {
					return
				}
				mu.Lock()
				conns = append(conns, c)
				opened++
				mu.Unlock()
			})
		}
		wg.Wait()
		if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.cmd.Process.Pid)); err == nil && len(fds) > 2048 {
			t.Errorf("after %d connection attempts the mds holds %d descriptors; want the connection cap to hold it far below its limit of 4096", attempted, len(fds))
		}
	}
	time.Sleep(2 * time.Second) // flushes under the flood
	for _, c := range conns {
		c.Close()
	}
	close(stop)
	<-ingestDone
	t.Logf("20000 connection attempts, %d connected (the rest waited or timed out in the kernel), %d ingest requests acknowledged", opened, acked.Load())
	if !p.alive() {
		t.Fatalf("the mds died under 20000 idle connections:\n%s", p.logs)
	}
	if acked.Load() == 0 {
		t.Errorf("no ingest request was acknowledged during the flood")
	}
}
