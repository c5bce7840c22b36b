package scrape

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/decimal"

	"github.com/ballast-io/ballast/internal/testkit"
	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/storage/ingest"
)

// recorder is the BatchWriter under test: it keeps every sample the
// scraper writes, staleness markers included, so the test can see exactly
// what would reach the store.
type recorder struct {
	mu      sync.Mutex
	samples []models.Sample
}

func (r *recorder) Limits(now time.Time) ingest.Limits {
	return ingest.Limits{DefaultTimestamp: now.UnixMilli()}
}

func (r *recorder) WriteBatch(b *ingest.Batch) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.samples = append(r.samples, b.Samples()...)
	return nil
}

// first returns the first sample of name from instance at or after from
// for which ok holds.
func (r *recorder) first(name, instance string, from time.Time, ok func(models.Sample) bool) (models.Sample, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.samples {
		if s.Name == name && s.Label("instance") == instance && s.Timestamp >= from.UnixMilli() && ok(s) {
			return s, true
		}
	}
	return models.Sample{}, false
}

func (r *recorder) waitFirst(t *testing.T, what, name, instance string, from time.Time, ok func(models.Sample) bool) models.Sample {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if s, found := r.first(name, instance, from, ok); found {
			return s
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: no %s sample from %s after %s within 15s", what, name, instance, from.Format(time.RFC3339Nano))
	return models.Sample{}
}

func value(v float64) func(models.Sample) bool {
	return func(s models.Sample) bool { return s.Value == v }
}

func stale(s models.Sample) bool { return decimal.IsStaleNaN(s.Value) }

// agent is a /metrics endpoint that can be stopped and started again on the
// same address, as an agent process is killed and restarted.
type agent struct {
	mu   sync.Mutex
	body string
	addr string
	srv  *http.Server
}

func (a *agent) setBody(b string) {
	a.mu.Lock()
	a.body = b
	a.mu.Unlock()
}

func (a *agent) start(t *testing.T) {
	t.Helper()
	addr := a.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	a.addr = ln.Addr().String()
	a.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		a.mu.Lock()
		defer a.mu.Unlock()
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprint(w, a.body)
	})}
	go a.srv.Serve(ln)
}

func (a *agent) stop() { a.srv.Close() }

// TestScraperSurvivesTheRealWorld runs the one scraper this process may
// have against an agent that loses a series, goes down and comes back, and
// a target that hangs: staleness markers, up 0 and 1, rate-limited logs and
// a bounded stop. lib/promscrape runs once per process, so this is one test.
func TestScraperSurvivesTheRealWorld(t *testing.T) {
	const interval = time.Second
	a := &agent{}
	a.setBody("a_metric{x=\"1\"} 1\nb_metric 2\nballast_build_info{version=\"t\",role=\"ds\",node=\"ds07\"} 1\n")
	a.start(t)
	defer a.stop()
	// Not a ballast agent (no ballast_build_info); its file_sd labels set
	// role.
	other := &agent{}
	other.setBody("c_metric 3\n")
	other.start(t)
	defer other.stop()
	hang := testkit.HangingListener(t)
	dir := t.TempDir()
	sd := filepath.Join(dir, "targets.json")
	if err := os.WriteFile(sd, []byte(fmt.Sprintf(`[{"targets":[%q]},{"targets":[%q],"labels":{"role":"client"}}]`, hang, other.addr)), 0o644); err != nil {
		t.Fatal(err)
	}
	logs := &testkit.LogBuffer{}
	rec := &recorder{}
	s := New(Options{
		ConfigPath:  filepath.Join(dir, "scrape.yml"),
		Interval:    interval,
		Timeout:     interval,
		Targets:     []string{a.addr},
		TargetFiles: []string{sd},
		Writer:      rec,
		Logger:      slog.New(slog.NewTextHandler(logs, nil)),
	})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			s.Stop(ctx)
		}
	}()

	t0 := time.Now()
	rec.waitFirst(t, "agent up", "up", a.addr, t0, value(1))
	rec.waitFirst(t, "agent series", "b_metric", a.addr, t0, value(2))

	// node and role: from the agent's ballast_build_info on its own series,
	// the target's labels and instance host otherwise; up keeps the target
	// labels only.
	c := rec.waitFirst(t, "other target", "c_metric", other.addr, t0, value(3))
	for _, want := range []struct {
		s          models.Sample
		node, role string
	}{
		{rec.waitFirst(t, "agent series", "a_metric", a.addr, t0, value(1)), "ds07", "ds"},
		{rec.waitFirst(t, "agent up", "up", a.addr, t0, value(1)), "", ""},
		{c, "127.0.0.1", "client"},
	} {
		if n, r := want.s.Label("node"), want.s.Label("role"); n != want.node || r != want.role {
			t.Errorf("%s from %s: got node %q, role %q; want %q, %q", want.s.Name, want.s.Label("instance"), n, r, want.node, want.role)
		}
	}

	// A series that disappears gets a staleness marker.
	tDrop := time.Now()
	a.setBody("a_metric{x=\"1\"} 1\n")
	rec.waitFirst(t, "disappeared series", "b_metric", a.addr, tDrop, stale)

	// The agent goes down: up 0 and staleness markers for its series,
	// within two intervals.
	tDown := time.Now()
	a.stop()
	down := rec.waitFirst(t, "agent down", "up", a.addr, tDown, value(0))
	st := rec.waitFirst(t, "series of a down agent", "a_metric", a.addr, tDown, stale)
	if n := st.Label("node"); n != "ds07" {
		t.Errorf("staleness marker of a down agent: got node %q; want the node of its series, ds07", n)
	}
	for _, s := range []models.Sample{down, st} {
		if d := time.UnixMilli(s.Timestamp).Sub(tDown); d > 2*interval {
			t.Errorf("%s %v came %v after the agent went down; want within %v", s.Name, s.Value, d, 2*interval)
		}
	}
	time.Sleep(3 * interval) // several failed scrapes, logged once

	// Back on the same address: up 1 at the first scrape, within one
	// interval (plus scheduling slack on a loaded machine).
	tBack := time.Now()
	a.start(t)
	back := rec.waitFirst(t, "agent back", "up", a.addr, tBack, value(1))
	if d := time.UnixMilli(back.Timestamp).Sub(tBack); d > interval+750*time.Millisecond {
		t.Errorf("up 1 came %v after the agent was back; want within one interval (%v)", d, interval)
	} else {
		t.Logf("up 1 came %v after the agent was back", d)
	}
	rec.waitFirst(t, "series after restart", "a_metric", a.addr, tBack, value(1))

	// Logs: each failing target once per window, the recovery once.
	deadline := time.Now().Add(5 * interval)
	for testkit.CountLines(logs.String(), `msg="scrape target is up again"`, "target="+a.addr) == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	for _, c := range []struct {
		substrs []string
		want    int
	}{
		{[]string{"level=WARN", `msg="cannot scrape target"`, "target=" + a.addr, "connection refused"}, 1},
		{[]string{"level=INFO", `msg="scrape target is up again"`, "target=" + a.addr}, 1},
		{[]string{"level=WARN", `msg="cannot scrape target"`, "target=" + hang}, 1},
	} {
		if got := testkit.CountLines(logs.String(), c.substrs...); got != c.want {
			t.Errorf("log lines with %q: got %d; want %d\n%s", c.substrs, got, c.want, logs.String())
		}
	}

	// Stop while a target hangs: in-flight scrapes are cancelled.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("stop with a hanging target: %v", err)
	}
	stopped = true
	t.Logf("stopped in %v with a hanging target", time.Since(start).Round(time.Millisecond))
}
