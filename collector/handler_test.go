package collector

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballast-io/ballast/internal/ratelog"
	"github.com/ballast-io/ballast/internal/testkit"
	"github.com/ballast-io/ballast/models"
)

// scriptedCollector returns fixed samples and counts its runs; block, when
// set, makes Collect wait for it to close.
type scriptedCollector struct {
	samples []Sample
	err     error
	runs    atomic.Int32
	block   chan struct{}
}

func (s *scriptedCollector) Collect(ctx context.Context) ([]Sample, error) {
	s.runs.Add(1)
	if s.block != nil {
		<-s.block
	}
	return s.samples, s.err
}

// testHandler builds a Handler over the given collectors, bypassing the
// registry.
func testHandler(t *testing.T, opts Options, cs map[string]Collector, order ...string) *Handler {
	t.Helper()
	h, err := NewHandler(opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	fails := ratelog.New(failureLogEvery)
	for _, n := range order {
		h.runs = append(h.runs, &run{name: n, c: cs[n], log: newOnceLogger(h.opts.Logger.With("collector", n)), fails: fails})
	}
	return h
}

func scrape(t *testing.T, h http.Handler, gzipped bool) (string, http.Header) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	if gzipped {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("status: got %d; want 200: %s", rec.Code, rec.Body)
	}
	var r io.Reader = rec.Body
	if rec.Header().Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(rec.Body)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), rec.Header()
}

func TestHandlerExpositionGzipAndSelfMetrics(t *testing.T) {
	ok := &scriptedCollector{samples: []Sample{{models.MetricNetReceiveBytes, []string{"eth0"}, 42}}}
	na := &scriptedCollector{err: fmt.Errorf("cannot load libdcgm: %w", ErrNotApplicable)}
	h := testHandler(t, Options{}, map[string]Collector{"netdev": ok, "dcgm": na}, "netdev", "dcgm")
	body, hdr := scrape(t, h, true)
	if hdr.Get("Content-Encoding") != "gzip" {
		t.Errorf("Content-Encoding: got %q; want gzip when asked", hdr.Get("Content-Encoding"))
	}
	for _, want := range []string{
		"# HELP ballast_network_receive_bytes_total ",
		"# TYPE ballast_network_receive_bytes_total counter",
		`ballast_network_receive_bytes_total{device="eth0"} 42`,
		`ballast_collector_success{collector="netdev"} 1`,
		`ballast_collector_success{collector="dcgm"} 0`,
		`ballast_collector_duration_seconds{collector="netdev"}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("exposition lacks %q:\n%s", want, body)
		}
	}
	plain, hdr := scrape(t, h, false)
	if hdr.Get("Content-Encoding") != "" || !strings.Contains(plain, "ballast_collector_success") {
		t.Errorf("plain scrape: encoding %q, body %q", hdr.Get("Content-Encoding"), plain)
	}
}

func TestHandlerCacheSharesRuns(t *testing.T) {
	now := time.Unix(1000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	c := &scriptedCollector{samples: []Sample{{models.MetricNFSDThreads, nil, 8}}}
	h := testHandler(t, Options{CacheTTL: 5 * time.Second, Now: clock}, map[string]Collector{"nfsd": c}, "nfsd")
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ { // concurrent scrapers share one run
		wg.Add(1)
		go func() { defer wg.Done(); scrape(t, h, false) }()
	}
	wg.Wait()
	scrape(t, h, false)
	if got := c.runs.Load(); got != 1 {
		t.Errorf("runs within the TTL: got %d; want 1", got)
	}
	mu.Lock()
	now = now.Add(6 * time.Second)
	mu.Unlock()
	scrape(t, h, false)
	if got := c.runs.Load(); got != 2 {
		t.Errorf("runs after the TTL: got %d; want 2", got)
	}
}

func TestHandlerTimeoutAndStuckRun(t *testing.T) {
	c := &scriptedCollector{block: make(chan struct{}), samples: []Sample{{models.MetricNFSDThreads, nil, 8}}}
	h := testHandler(t, Options{Timeout: 20 * time.Millisecond, CacheTTL: -1}, map[string]Collector{"nfsd": c}, "nfsd")
	body, _ := scrape(t, h, false)
	if !strings.Contains(body, `ballast_collector_success{collector="nfsd"} 0`) {
		t.Errorf("timed-out collector must report success 0:\n%s", body)
	}
	scrape(t, h, false) // still blocked: no second run piles up
	if got := c.runs.Load(); got != 1 {
		t.Errorf("runs while the first is stuck: got %d; want 1", got)
	}
	close(c.block)
	deadline := time.Now().Add(5 * time.Second)
	for {
		body, _ = scrape(t, h, false)
		if strings.Contains(body, `ballast_collector_success{collector="nfsd"} 1`) || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !strings.Contains(body, `ballast_collector_success{collector="nfsd"} 1`) {
		t.Errorf("collector did not recover after unblocking:\n%s", body)
	}
}

func TestHandlerDeduplicatesAcrossCollectors(t *testing.T) {
	l := []string{"nvme0", "S", "M"}
	a := &scriptedCollector{samples: []Sample{{models.MetricDriveTemperature, l, 40}}}
	b := &scriptedCollector{samples: []Sample{{models.MetricDriveTemperature, l, 41}}}
	h := testHandler(t, Options{}, map[string]Collector{"nvme": a, "smartctl": b}, "nvme", "smartctl")
	body, _ := scrape(t, h, false)
	if n := strings.Count(body, "ballast_drive_temperature_celsius{"); n != 1 || !strings.Contains(body, "} 40") {
		t.Errorf("got %d temperature series; want 1, from nvme (40):\n%s", n, body)
	}
}

func TestNewHandlerRejectsUnknownCollector(t *testing.T) {
	if _, err := NewHandler(Options{}, []string{"nvme", "floppy"}); err == nil || !strings.Contains(err.Error(), `"floppy"`) {
		t.Errorf("got %v; want an error naming \"floppy\"", err)
	}
}

func TestRolesAndNames(t *testing.T) {
	if got, want := strings.Join(DefaultEnabled("ds"), ","), "nvme,smartctl,diskstats,nfsd,filesystem,netdev"; got != want {
		t.Errorf("ds: got %s; want %s", got, want)
	}
	if got, want := strings.Join(DefaultEnabled("client"), ","), "netdev,dcgm,mountstats,readahead"; got != want {
		t.Errorf("client: got %s; want %s", got, want)
	}
	if DefaultEnabled("mds") != nil {
		t.Errorf("mds enables no agent collector")
	}
	if got := len(Names()); got != 9 {
		t.Errorf("Names: got %d; want 9", got)
	}
}

// TestHandlerRealCollectorsOverFakeTree serves every collector of both
// roles over a fake /proc, /sys and /dev: collectors whose source is
// absent report success 0 and the others serve their series.
func TestHandlerRealCollectorsOverFakeTree(t *testing.T) {
	proc := fakeRoot(t, map[string]string{
		"diskstats":    string(readFixture(t, "procfs/diskstats/prometheus-procfs_diskstats")),
		"net/dev":      string(readFixture(t, "procfs/netdev/prometheus-procfs_net_dev")),
		"net/rpc/nfsd": string(readFixture(t, "procfs/nfsd/node-exporter_nfsd")),
		"self":         "->1",
		"1/mountstats": string(readFixture(t, "procfs/mountstats/node-exporter_mountstats")),
		"1/mountinfo":  "",
	})
	sys := fakeRoot(t, map[string]string{"block/sda/queue/read_ahead_kb": "128\n"})
	names := append(DefaultEnabled("ds"), DefaultEnabled("client")...)
	h, err := NewHandler(Options{ProcRoot: proc, SysRoot: sys, DevRoot: t.TempDir(), SmartctlPath: "/nonexistent/smartctl"}, names)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	body, _ := scrape(t, h, false)
	for _, want := range []string{
		`ballast_collector_success{collector="nvme"} 1`,                // finds sda in /sys/block ...
		`ballast_collector_device_up{collector="nvme",device="sda"} 0`, // ... but no /dev/sda
		`ballast_collector_success{collector="smartctl"} 0`,
		`ballast_collector_success{collector="dcgm"} 0`,
		`ballast_collector_success{collector="diskstats"} 1`,
		`ballast_collector_success{collector="netdev"} 1`,
		`ballast_collector_success{collector="nfsd"} 1`,
		`ballast_collector_success{collector="mountstats"} 1`,
		`ballast_collector_success{collector="readahead"} 1`,
		`ballast_disk_reads_completed_total{device="sda"}`,
		`ballast_block_readahead_bytes{device="sda"} 131072`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("exposition lacks %q", want)
		}
	}
}

// TestCollectorFailuresAreLoggedOncePerWindow: a collector failing on every
// scrape is logged at warn once (not once per scrape), its recovery once,
// and a collector that does not apply to the host only at debug.
func TestCollectorFailuresAreLoggedOncePerWindow(t *testing.T) {
	logs := &testkit.LogBuffer{}
	failing := &scriptedCollector{err: fmt.Errorf("cannot read /proc/diskstats: permission denied")}
	na := &scriptedCollector{err: fmt.Errorf("no nfsd here: %w", ErrNotApplicable)}
	h := testHandler(t, Options{CacheTTL: -1, Logger: slog.New(slog.NewTextHandler(logs, nil))},
		map[string]Collector{"flaky": failing, "nfsd": na}, "flaky", "nfsd")
	for i := 0; i < 5; i++ {
		scrape(t, h, false)
	}
	failing.err = nil
	scrape(t, h, false)
	scrape(t, h, false)
	for _, c := range []struct {
		substrs []string
		want    int
	}{
		{[]string{"level=WARN", `msg="collector failed"`, "collector=flaky", "permission denied"}, 1},
		{[]string{"level=INFO", `msg="collector recovered"`, "collector=flaky", "failures_not_logged=4"}, 1},
		{[]string{"collector=nfsd"}, 0}, // debug only
	} {
		if got := testkit.CountLines(logs.String(), c.substrs...); got != c.want {
			t.Errorf("log lines with %q: got %d; want %d\n%s", c.substrs, got, c.want, logs.String())
		}
	}
}
