package main

import (
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang/snappy"

	"github.com/ballast-io/ballast/storage/ingest"
)

func TestReplaceSection(t *testing.T) {
	sec := beginMarker + "\nnew\n" + endMarker + "\n"
	other := "<!-- BEGIN twin -->\ntwin\n<!-- END twin -->\n"
	tests := []struct {
		name, doc, want string
	}{
		{"empty file gets a title", "", "# Benchmarks\n\nGenerated sections; each is rewritten only by the program named in it.\n\n" + sec},
		{"appended after other sections", "# B\n\n" + other, "# B\n\n" + other + "\n" + sec},
		{"replaced in place, neighbours kept", "# B\n\n" + beginMarker + "\nold\nold\n" + endMarker + "\n\n" + other,
			"# B\n\n" + sec + "\n" + other},
		{"other section before", other + "\n" + beginMarker + "\nold\n" + endMarker + "\n", other + "\n" + sec},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := replaceSection(tc.doc, sec)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
			again, err := replaceSection(got, sec)
			if err != nil || again != got {
				t.Errorf("second replacement changed the document:\n%q\n%v", again, err)
			}
		})
	}
	if _, err := replaceSection("x\n"+beginMarker+"\nno end\n", sec); err == nil {
		t.Error("a begin marker without an end marker was accepted; the rest of the file would be lost")
	}
}

func TestParseListen(t *testing.T) {
	tests := []struct {
		line, want string
		ok         bool
	}{
		{`time=2026-11-22T00:49:12.001Z level=INFO msg="mds started" listen=127.0.0.1:41234 data_dir=/tmp/x`, "127.0.0.1:41234", true},
		{`time=2026-11-22T00:49:12.001Z level=INFO msg="mds started" listen=127.0.0.1:41234`, "127.0.0.1:41234", true},
		{`level=INFO msg="mds started" listen=[::1]:9750 data_dir=/d`, "[::1]:9750", true},
		{`level=INFO msg="listening" listen=127.0.0.1:41234`, "", false},
		{`level=INFO msg="mds started" listen=127.0.0.1:0`, "", false},
		{`level=INFO msg="mds started" data_dir=/d`, "", false},
	}
	for _, tc := range tests {
		got, ok := parseListen(tc.line)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseListen(%q) = %q, %v; want %q, %v", tc.line, got, ok, tc.want, tc.ok)
		}
	}
}

func TestProcParsers(t *testing.T) {
	status := "Name:\tballast\nVmPeak:\t 2000 kB\nVmHWM:\t  123456 kB\nVmRSS:\t 1000 kB\n"
	if n, err := parseVmHWM(status); err != nil || n != 123456*1024 {
		t.Errorf("parseVmHWM = %d, %v; want %d", n, err, 123456*1024)
	}
	if _, err := parseVmHWM("Name:\tx\n"); err == nil {
		t.Error("parseVmHWM accepted a status without VmHWM")
	}
	if _, err := parseVmHWM("VmHWM:\t12 MB\n"); err == nil {
		t.Error("parseVmHWM accepted a unit other than kB")
	}
	cpu := "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nprocessor\t: 1\nmodel name\t: AMD EPYC 7B13\n"
	if got := parseCPUModel(cpu); got != "AMD EPYC 7B13" {
		t.Errorf("parseCPUModel = %q", got)
	}
	stat := "4739 (bench all) S 4737 4737 1 0 -1 4194304 1000 0 0 0 1234 56 0 0 20 0 9 0 100 1 1 18446744073709551615\n"
	if got, err := parseStatCPU(stat); err != nil || got != 12900*time.Millisecond {
		t.Errorf("parseStatCPU = %s, %v; want 12.9s", got, err)
	}
	if _, err := parseStatCPU("4739 (x) S 1 2"); err == nil {
		t.Error("parseStatCPU accepted a truncated stat line")
	}
	if got := parseMemTotal("MemTotal:       24558904 kB\nMemFree: 1 kB\n"); got != 24558904*1024 {
		t.Errorf("parseMemTotal = %d", got)
	}
}

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 200; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	if got := percentile(ds, 50); got != 100*time.Millisecond {
		t.Errorf("median = %s, want 100ms", got)
	}
	if got := percentile(ds, 99); got != 198*time.Millisecond {
		t.Errorf("p99 = %s, want 198ms (nearest rank 198 of 200)", got)
	}
	if got := percentile(ds[:1], 99); got != 200*time.Millisecond {
		t.Errorf("p99 of one = %s", got)
	}
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("percentile of none = %s", got)
	}
}

func TestVerdicts(t *testing.T) {
	if got := verdictAtLeast(0.35, 0.5); got != "missed by 30 % (0.35× < 0.50×)" {
		t.Errorf("got %q", got)
	}
	if got := verdictAtLeast(1.2, 1); !strings.HasPrefix(got, "met") {
		t.Errorf("got %q", got)
	}
	if got := verdictAtLeast(math.NaN(), 1); got != "not measured" {
		t.Errorf("got %q", got)
	}
	a := &ingestResult{Acked: 3_000_000, Elapsed: time.Second}
	b := &ingestResult{Acked: 1_500_000, Elapsed: time.Second}
	if got := ratio(a, b); got != 2 {
		t.Errorf("ratio = %v, want 2", got)
	}
	if got := ratio(a, &ingestResult{Err: os.ErrClosed}); !math.IsNaN(got) {
		t.Errorf("ratio with a failed path = %v, want NaN", got)
	}
	if got := fmtInt(3_000_000); got != "3,000,000" {
		t.Errorf("fmtInt = %q", got)
	}
}

// TestTargets checks that the verdicts follow the measurements.
func TestTargets(t *testing.T) {
	res := func(samplesPerSec float64, cpuPerSample time.Duration) *ingestResult {
		return &ingestResult{Acked: 1_000_000, Stored: 1_000_000, Elapsed: time.Duration(1e6 / samplesPerSec * float64(time.Second)), CPU: cpuPerSample * 1_000_000}
	}
	d := &dataset{Name: "10k", TargetRawRatio: 0.5}
	r := &report{Datasets: []*datasetResult{{D: d, Results: map[string]*ingestResult{
		pathRaw:           res(4e6, 400*time.Nanosecond),
		pathBallastImport: res(1.5e6, 1000*time.Nanosecond),
		pathVMImport:      res(2e6, 800*time.Nanosecond),
		pathBallastRW:     res(2.2e6, 700*time.Nanosecond),
		pathVMRW:          res(2e6, 800*time.Nanosecond),
	}}}, Query: &queryRun{Queries: []*queryResult{{Spec: querySpec{Name: "1 series"}, Result: map[string]*latency{
		"ballast": {Samples: []time.Duration{5 * time.Millisecond, 25 * time.Millisecond}},
	}}}}}
	got := map[string]string{}
	for _, tg := range r.targets() {
		got[tg.Goal] = tg.Verdict
	}
	want := map[string]string{
		"10k: ballast import ≥ VM single-node import":                                                 "missed by 25 % (0.75× < 1.00×)",
		"10k: ballast import ≥ 0.5× raw AddRows":                                                      "missed by 25 % (0.38× < 0.50×)",
		"10k, by CPU per sample: ballast import ≥ VM single-node import":                              "missed by 20 % (0.80× < 1.00×)",
		"10k, by CPU per sample: ballast import ≥ 0.5× raw AddRows":                                   "missed by 20 % (0.40× < 0.50×)",
		"ballast query_range p99, 1 series, 1 h at 1 s < 20ms":                                        "missed by 5 ms (25 % over)",
		"10k: ballast import ≥ 1.05× VM single-node import (issue 17)":                                "missed by 29 % (0.75× < 1.05×)",
		"10k, by CPU per sample: ballast import ≥ 1.05× VM single-node import (issue 17)":             "missed by 24 % (0.80× < 1.05×)",
		"10k: ballast remote write ≥ 1.05× VM single-node remote write (issue 17)":                    "met (1.10× ≥ 1.05×)",
		"10k, by CPU per sample: ballast remote write ≥ 1.05× VM single-node remote write (issue 17)": "met (1.14× ≥ 1.05×)",
	}
	for g, v := range want {
		if got[g] != v {
			t.Errorf("%s: verdict %q, want %q", g, got[g], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d targets, want %d: %v", len(got), len(want), got)
	}
	if errs := r.errors(); len(errs) != 0 {
		t.Errorf("errors() = %v for complete results", errs)
	}
	r.Datasets[0].Results[pathVMImport].Stored--
	if errs := r.errors(); len(errs) != 1 || !strings.Contains(errs[0].Error(), "but 999,999") && !strings.Contains(errs[0].Error(), "but 999999") {
		t.Errorf("errors() = %v; want one about a dropped sample", errs)
	}
}

// TestPayloadsAgree decodes the text and remote-write bodies with ballast's
// own parsers and checks that they carry the same samples, in the same
// encoding the raw path hands to lib/storage: every path gets the same data.
func TestPayloadsAgree(t *testing.T) {
	d := &dataset{Name: "t", Metric: "bench_ingest", Series: 25_000, Points: 3, Step: 10 * time.Second,
		Start: time.Now().Add(-time.Hour).Truncate(time.Second).UnixMilli(), BatchSeries: 7_000, BatchPoints: 2}
	p, err := d.render()
	if err != nil {
		t.Fatal(err)
	}
	bs := d.Batches()
	if len(p.text) != len(bs) || len(p.rw) != len(bs) || len(p.namesRaw) != d.Series {
		t.Fatalf("got %d text, %d remote-write bodies and %d names; want %d, %d, %d", len(p.text), len(p.rw), len(p.namesRaw), len(bs), len(bs), d.Series)
	}
	total := 0
	for k, bt := range bs {
		var tb, rb ingest.Batch
		var lim ingest.Limits
		if err := ingest.ParseText(string(p.text[k]), &lim, &tb); err != nil {
			t.Fatalf("text body %d: %v", k, err)
		}
		pb, err := snappy.Decode(nil, p.rw[k])
		if err != nil {
			t.Fatalf("remote-write body %d: %v", k, err)
		}
		if err := ingest.ParseRemoteWrite(pb, &lim, &rb); err != nil {
			t.Fatalf("remote-write body %d: %v", k, err)
		}
		if tb.Len() != bt.Samples() || rb.Len() != bt.Samples() {
			t.Fatalf("body %d: text has %d samples, remote write %d; want %d", k, tb.Len(), rb.Len(), bt.Samples())
		}
		total += tb.Len()
		// Same set of samples: remote write groups by series, text by
		// timestamp, so compare as sets keyed by name and time.
		key := func(name string, ts int64) string { return name + "@" + time.UnixMilli(ts).String() }
		want := map[string]float64{}
		for pt := bt.p0; pt < bt.p1; pt++ {
			for i := bt.lo; i < bt.hi; i++ {
				want[key(string(p.namesRaw[i]), d.ts(pt))] = value(i, pt)
			}
		}
		for name, b := range map[string]*ingest.Batch{"text": &tb, "remote write": &rb} {
			rows, _, _ := b.MetricRows(nil, nil, 0, math.MaxInt)
			for _, r := range rows {
				k2 := key(string(r.MetricNameRaw), r.Timestamp)
				v, ok := want[k2]
				if !ok || v != r.Value {
					t.Fatalf("%s body %d: sample %q = %v is not in the raw payload (raw value %v, present %v)", name, k, k2, r.Value, v, ok)
				}
			}
		}
	}
	if total != d.Samples() {
		t.Errorf("bodies hold %d samples; want %d", total, d.Samples())
	}
}

// TestSmoke runs the whole harness with -quick against a freshly built
// ballast and VictoriaMetrics. It takes about a minute, so it runs only
// when asked: BALLAST_BENCH_SMOKE=1 go test ./bench/cmd/benchall.
func TestSmoke(t *testing.T) {
	if testing.Short() || os.Getenv("BALLAST_BENCH_SMOKE") != "1" {
		t.Skip("set BALLAST_BENCH_SMOKE=1 (and leave out -short) to run the harness end to end")
	}
	dir := t.TempDir()
	ballast := filepath.Join(dir, "ballast")
	benchall := filepath.Join(dir, "benchall")
	for _, b := range [][]string{{ballast, "github.com/ballast-io/ballast/cmd/ballast"}, {benchall, "github.com/ballast-io/ballast/bench/cmd/benchall"}} {
		if out, err := exec.Command("go", "build", "-o", b[0], b[1]).CombinedOutput(); err != nil {
			t.Fatalf("cannot build %s: %v\n%s", b[1], err, out)
		}
	}
	out := filepath.Join(dir, "BENCHMARKS.md")
	before := "# Benchmarks\n\n<!-- BEGIN twin -->\nkept\n<!-- END twin -->\n\n" + beginMarker + "\nstale\n" + endMarker + "\n\n<!-- BEGIN analyzers -->\nalso kept\n<!-- END analyzers -->\n"
	if err := os.WriteFile(out, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(benchall, "-ballast", ballast, "-quick", "-out", out, "-timeout", "5m")
	logs, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("benchall -quick failed: %v\n%s", err, logs)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, s := range []string{"<!-- BEGIN twin -->\nkept\n<!-- END twin -->", "<!-- BEGIN analyzers -->\nalso kept\n<!-- END analyzers -->",
		"Quick smoke run", "### Ingest throughput", "### query_range latency", "### Targets of issues 2 and 17"} {
		if !strings.Contains(doc, s) {
			t.Errorf("%s lacks %q", out, s)
		}
	}
	if strings.Contains(doc, "stale") {
		t.Errorf("the old foundation section was not replaced:\n%s", doc)
	}
	if strings.Count(doc, beginMarker) != 1 || strings.Count(doc, endMarker) != 1 {
		t.Errorf("want exactly one foundation section:\n%s", doc)
	}
	// Every ingest path of both datasets stored everything it acknowledged.
	full := regexp.MustCompile(`(?m)^\| quick: [^|]+ \| [^|]+ \| ([0-9,]+) \| ([0-9,]+) \| 0 \|`)
	rows := full.FindAllStringSubmatch(doc, -1)
	if len(rows) != 2*len(ingestPaths) {
		t.Errorf("found %d ingest rows with nothing dropped; want %d:\n%s", len(rows), 2*len(ingestPaths), doc)
	}
	for _, r := range rows {
		if r[1] != r[2] || r[1] == "0" {
			t.Errorf("acknowledged %s but stored %s", r[1], r[2])
		}
	}
}

func TestParseDatasets(t *testing.T) {
	if sel, err := parseDatasets(""); err != nil || sel != nil {
		t.Fatalf("parseDatasets(\"\") = %v, %v; want nil, nil", sel, err)
	}
	sel, err := parseDatasets("1M, 10k")
	if err != nil || len(sel) != 2 || !sel[0] || !sel[1] {
		t.Fatalf("parseDatasets(\"1M, 10k\") = %v, %v; want both", sel, err)
	}
	if sel, err := parseDatasets("1M"); err != nil || len(sel) != 1 || !sel[1] || datasets(false, time.Now())[1].Series != 1_000_000 {
		t.Fatalf("parseDatasets(\"1M\") = %v, %v; want the 1M-series dataset only", sel, err)
	}
	if _, err := parseDatasets("100k"); err == nil || !strings.Contains(err.Error(), `"100k"`) {
		t.Fatalf("parseDatasets(\"100k\") error = %v; want one naming 100k", err)
	}
}

// TestPushAllResendsThrottled: a body answered 429 is sent again after
// Retry-After and counted; a 400 still stops the push.
func TestPushAllResendsThrottled(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen[string(b)]++
		n := seen[string(b)]
		mu.Unlock()
		switch {
		case string(b) == "bad":
			w.WriteHeader(http.StatusBadRequest)
		case n == 1:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	defer srv.Close()
	c := newClient(2)
	acked, _, throttled, err := pushAll(context.Background(), c, srv.URL, nil, [][]byte{[]byte("a"), []byte("b"), []byte("c")}, []int{1, 2, 3}, 2)
	if err != nil || acked != 6 || throttled != 3 {
		t.Fatalf("pushAll = %d acked, %d throttled, %v; want 6, 3, nil", acked, throttled, err)
	}
	if _, _, _, err := pushAll(context.Background(), c, srv.URL, nil, [][]byte{[]byte("bad")}, []int{1}, 1); err == nil || !strings.Contains(err.Error(), "status 400") {
		t.Fatalf("pushAll of a bad body: %v; want status 400", err)
	}
}
