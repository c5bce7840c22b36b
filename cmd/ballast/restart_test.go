package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/ballast-io/ballast/internal/testkit"
)

// rawSamples returns the raw samples of the series selector sel from from
// to now, through the mds query API.
func (p *mdsProc) rawSamples(t *testing.T, sel string, from time.Time) []model.SamplePair {
	t.Helper()
	var out []model.SamplePair
	for _, sps := range rawWindow(t, p.addr, sel, from.Add(-time.Millisecond), time.Now()) {
		out = append(out, sps...)
	}
	return out
}

// waitSample waits up to 20 s for a sample of sel at or after from for
// which ok holds, and returns the first one.
func (p *mdsProc) waitSample(t *testing.T, sel string, from time.Time, ok func(float64) bool) model.SamplePair {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, sp := range p.rawSamples(t, sel, from) {
			if ok(float64(sp.Value)) {
				return sp
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no matching sample of %s since %s within 20s", sel, from.Format(time.RFC3339Nano))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func eq(want float64) func(float64) bool { return func(v float64) bool { return v == want } }

// TestScrapeSurvivesAgentRestart is issue 9's acceptance 2 with real
// binaries: a killed agent reads up 0 within two scrape intervals; once it
// is back, up 1 and new samples land within two intervals; SIGTERM while a
// target hangs returns within the documented shutdown timeout.
func TestScrapeSurvivesAgentRestart(t *testing.T) {
	t.Parallel() // mostly waiting; overlaps with the other process tests
	const interval = time.Second
	a := startAgent(t, "127.0.0.1:0")
	hang := testkit.HangingListener(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "mds.yml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("role: mds\nscrape:\n  interval: 1s\n  timeout: 1s\n  targets: [%s, %s]\n", a.addr, hang)), 0o644)
	p := startMDS(t, filepath.Join(dir, "data"), "--config", cfg)
	up := fmt.Sprintf(`up{instance=%q}`, a.addr)
	fresh := fmt.Sprintf(`ballast_collector_success{instance=%q,collector="diskstats"}`, a.addr)
	p.waitSample(t, up, time.Now().Add(-time.Minute), eq(1))

	tKill := time.Now()
	a.kill()
	down := p.waitSample(t, up, tKill, eq(0))
	if d := down.Timestamp.Time().Sub(tKill); d > 2*interval {
		t.Errorf("up 0 came %v after the agent was killed; want within %v", d, 2*interval)
	} else {
		t.Logf("up 0 came %v after the agent was killed", d)
	}
	time.Sleep(2 * interval) // a few failed scrapes

	startAgent(t, a.addr)
	tBack := time.Now()
	for _, c := range []struct {
		sel string
		ok  func(float64) bool
	}{{up, eq(1)}, {fresh, eq(1)}} {
		s := p.waitSample(t, c.sel, tBack, c.ok)
		if d := s.Timestamp.Time().Sub(tBack); d > 2*interval {
			t.Errorf("%s came %v after the agent was back; want within %v", c.sel, d, 2*interval)
		} else {
			t.Logf("%s came %v after the agent was back", c.sel, d)
		}
	}

	tTerm := time.Now()
	if err := p.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM with a hanging target: %v\n%s", err, p.logs)
	}
	took := time.Since(tTerm)
	if took > shutdownTimeout {
		t.Errorf("SIGTERM with a hanging target took %v; want at most %v", took, shutdownTimeout)
	}
	t.Logf("SIGTERM with a hanging target: stopped in %v", took.Round(time.Millisecond))
	// The process has exited, so its log is complete: each outage logged once.
	logs := p.logs.String()
	for _, want := range []struct {
		substrs []string
		n       int
	}{
		{[]string{"level=WARN", `msg="cannot scrape target"`, "target=" + a.addr}, 1},
		{[]string{`msg="scrape target is up again"`, "target=" + a.addr}, 1},
		{[]string{"level=WARN", `msg="cannot scrape target"`, "target=" + hang}, 1},
	} {
		if got := testkit.CountLines(logs, want.substrs...); got != want.n {
			t.Errorf("log lines with %q: got %d; want %d\n%s", want.substrs, got, want.n, logs)
		}
	}
}

// TestSecondSignalExitsAtOnce holds the mds's shutdown with a client that
// never finishes its request, then sends a second SIGTERM: the process
// exits at once with status 130.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	t.Parallel()
	p := startMDS(t, t.TempDir())
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() {
		resp, err := http.Post(p.url("/api/v1/import/prometheus"), "text/plain", pr)
		if err == nil {
			resp.Body.Close()
		}
	}()
	pw.Write([]byte("stuck_metric 1\n"))
	time.Sleep(500 * time.Millisecond) // the request is in the handler

	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		t.Fatalf("mds exited (%v) while a request was in flight; want it to wait for it\n%s", err, p.logs)
	case <-time.After(1500 * time.Millisecond):
	}
	tSecond := time.Now()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 130 {
			t.Errorf("after a second SIGTERM: got %v; want exit status 130", err)
		}
		t.Logf("second SIGTERM: exited in %v", time.Since(tSecond).Round(time.Millisecond))
		if !strings.Contains(p.logs.String(), "second signal, exiting now") {
			t.Errorf("stderr lacks %q:\n%s", "second signal, exiting now", p.logs)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("mds did not exit within 5s of a second SIGTERM\n%s", p.logs)
	}
}
