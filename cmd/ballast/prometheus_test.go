package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// TestPrometheusRemoteWriteLosesNothing is issue 9's acceptance 3: a stock
// Prometheus (Debian's prometheus package, 2.42 on bookworm) scrapes itself
// and a `ballast ds` agent and remote-writes everything to a real `ballast
// mds` for 60 s. Every sample Prometheus holds for that window, NaN
// summaries aside, is in ballast with the same timestamp and value (NaN is
// accepted and, as VictoriaMetrics cannot store it, counted instead), and
// Prometheus records no failed, dropped or retried sample.
func TestPrometheusRemoteWriteLosesNothing(t *testing.T) {
	t.Parallel()
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus is not installed: apt-get install prometheus (make test-deps does it when run as root)")
	}
	const window = 60 * time.Second
	a := startAgent(t, "127.0.0.1:0")
	m := startMDS(t, filepath.Join(t.TempDir(), "data"))
	prom := startPrometheus(t, promBin, a.addr, m.addr)

	// A fixed window, begun once Prometheus has scraped and sent for a while.
	t0 := time.Now().Add(5 * time.Second).Truncate(time.Second).Add(500 * time.Millisecond)
	t1 := t0.Add(window)
	time.Sleep(time.Until(t1))
	// Wait until Prometheus has sent everything up to the end of the window.
	deadline := time.Now().Add(30 * time.Second)
	for {
		v := instant(t, prom.addr, `min(prometheus_remote_storage_queue_highest_sent_timestamp_seconds)`, time.Now())
		if len(v) == 1 && float64(v[0].Value) >= float64(t1.Unix())+1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus did not send samples past %s within 30s: %v\n%s", t1, v, prom.logs)
		}
		time.Sleep(500 * time.Millisecond)
	}

	sel := `{job=~"prometheus|ballast-ds"}`
	want := rawWindow(t, prom.addr, sel, t0, t1)
	var got map[string][]model.SamplePair
	var diffs []string
	for try := 0; ; try++ { // rows are searchable in ballast about 2 s after they are written
		got = rawWindow(t, m.addr, sel, t0, t1)
		if diffs = compareWindows(want, got); len(diffs) == 0 || try == 20 {
			break
		}
		time.Sleep(time.Second)
	}
	samples, nans, agentSeries := 0, 0, 0
	for k, sps := range want {
		if strings.Contains(k, `job="ballast-ds"`) {
			agentSeries++
		}
		for _, sp := range sps {
			if math.IsNaN(float64(sp.Value)) {
				nans++
			} else {
				samples++
			}
		}
	}
	t.Logf("window %s..%s: Prometheus holds %d series (%d from the ds agent), %d samples and %d NaN samples", t0.Format(time.TimeOnly), t1.Format(time.TimeOnly), len(want), agentSeries, samples, nans)
	if len(diffs) > 0 {
		t.Errorf("%d series differ between Prometheus and ballast; first ones:\n%s", len(diffs), strings.Join(diffs[:min(len(diffs), 10)], "\n"))
	}
	if agentSeries == 0 || nans == 0 {
		t.Errorf("got %d agent series and %d NaN samples in the window; want both > 0 (the test must cover the agent and NaN summaries)", agentSeries, nans)
	}

	// Prometheus' own account of its remote write.
	now := time.Now()
	for _, q := range []string{
		`sum(prometheus_remote_storage_samples_failed_total)`,
		`sum(prometheus_remote_storage_samples_dropped_total)`,
		`sum(prometheus_remote_storage_samples_retried_total)`,
	} {
		v := instant(t, prom.addr, q, now)
		if len(v) != 1 || v[0].Value != 0 {
			t.Errorf("Prometheus %s: got %v; want 0", q, v)
		}
	}
	if v := instant(t, prom.addr, `sum(prometheus_remote_storage_samples_total)`, now); len(v) != 1 || v[0].Value == 0 {
		t.Errorf("Prometheus sent no samples: %v", v)
	}
	// ballast's account: NaNs counted, nothing rejected.
	body := httpGet(t, m.url("/metrics"))
	if !strings.Contains(body, `ballast_ingest_nan_samples_total{format="remote_write"}`) {
		t.Errorf("mds /metrics lacks ballast_ingest_nan_samples_total for remote write")
	}
	if strings.Contains(body, "ballast_ingest_rejected_") {
		t.Errorf("mds rejected something from Prometheus:\n%s", grepLines(body, "ballast_ingest_rejected_"))
	}
	if err := prom.stop(); err != nil {
		t.Errorf("prometheus: %v\n%s", err, prom.logs)
	}
}

type promProc struct {
	cmd  *exec.Cmd
	addr string
	logs *strings.Builder
	done chan error
}

// startPrometheus runs Prometheus on a free loopback port with a temporary
// data dir, scraping itself and agent every second and remote-writing to
// the mds at mdsAddr, and waits until it is ready.
func startPrometheus(t *testing.T, bin, agent, mdsAddr string) *promProc {
	t.Helper()
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: prometheus
    static_configs: [{targets: [%q]}]
  - job_name: ballast-ds
    static_configs: [{targets: [%q]}]
remote_write:
  - url: http://%s/api/v1/write
    queue_config: {batch_send_deadline: 1s}
`, addr, agent, mdsAddr)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &promProc{cmd: cmd, addr: addr, logs: new(strings.Builder), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.logs.WriteString(sc.Text() + "\n")
		}
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-p.done
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready within 30s: %v\n%s", err, p.logs)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (p *promProc) stop() error {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		return err
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		return fmt.Errorf("did not stop within 30s of SIGTERM")
	}
}

func promAPI(t *testing.T, addr string) promv1.API {
	t.Helper()
	c, err := api.NewClient(api.Config{Address: "http://" + addr})
	if err != nil {
		t.Fatal(err)
	}
	return promv1.NewAPI(c)
}

func instant(t *testing.T, addr, q string, at time.Time) model.Vector {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, _, err := promAPI(t, addr).Query(ctx, q, at)
	if err != nil {
		t.Fatalf("query %s on %s: %v", q, addr, err)
	}
	vec, _ := v.(model.Vector)
	return vec
}

// rawWindow returns the raw samples of sel in (from, to] by series,
// through the Prometheus query API of addr (a range-vector instant query,
// which both Prometheus and ballast answer with raw samples).
func rawWindow(t *testing.T, addr, sel string, from, to time.Time) map[string][]model.SamplePair {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A wider range, cut exactly here: the two engines differ on whether
	// the range's left end is included.
	rng := int(to.Sub(from).Seconds()) + 5
	v, _, err := promAPI(t, addr).Query(ctx, fmt.Sprintf("%s[%ds]", sel, rng), to)
	if err != nil {
		t.Fatalf("query %s on %s: %v", sel, addr, err)
	}
	out := map[string][]model.SamplePair{}
	m, _ := v.(model.Matrix)
	for _, s := range m {
		var sps []model.SamplePair
		for _, sp := range s.Values {
			if tm := sp.Timestamp.Time(); tm.After(from) && !tm.After(to) {
				sps = append(sps, sp)
			}
		}
		out[s.Metric.String()] = sps
	}
	return out
}

// compareWindows lists the series whose non-NaN samples differ between
// want (Prometheus) and got (ballast): a missing or extra timestamp, or a
// value off by more than VictoriaMetrics' 12 significant digits. NaN is
// left out on both sides: Prometheus' NaN summaries are not stored by
// ballast (counted instead), and the staleness markers Prometheus writes
// when a scrape fails are stored by ballast and returned by its raw
// range-vector answer as NaN points, where Prometheus' own answer leaves
// them out (docs/storage.md).
func compareWindows(want, got map[string][]model.SamplePair) []string {
	var diffs []string
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		w := map[model.Time]float64{}
		for _, sp := range want[k] {
			if !math.IsNaN(float64(sp.Value)) {
				w[sp.Timestamp] = float64(sp.Value)
			}
		}
		g := map[model.Time]float64{}
		for _, sp := range got[k] {
			if !math.IsNaN(float64(sp.Value)) {
				g[sp.Timestamp] = float64(sp.Value)
			}
		}
		missing, extra, off := 0, 0, 0
		for ts, v := range w {
			gv, ok := g[ts]
			switch {
			case !ok:
				missing++
			case !closeEnough(v, gv):
				off++
			}
		}
		for ts := range g {
			if _, ok := w[ts]; !ok {
				extra++
			}
		}
		if missing+extra+off > 0 {
			diffs = append(diffs, fmt.Sprintf("%s: Prometheus %d samples, ballast %d; missing %d, extra %d, different value %d", k, len(w), len(g), missing, extra, off))
		}
	}
	return diffs
}

func closeEnough(a, b float64) bool {
	if a == b {
		return true
	}
	return math.Abs(a-b) <= 1e-11*math.Max(math.Abs(a), math.Abs(b))
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
