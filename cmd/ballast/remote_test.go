package main

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ballast-io/ballast/internal/testpeer"
)

// TestDemoRemoteStoreSameFindings runs the demo twice with the same seed
// and start: on the embedded store, and with --store remote=… against a
// VictoriaMetrics cluster (two vmstorage, vminsert -replicationFactor=2,
// vmselect with dedup). The findings, the capacity report and every stored
// sample must be the same: the analyzers read through the same Querier
// whichever backend holds the data.
func TestDemoRemoteStoreSameFindings(t *testing.T) {
	c := testpeer.StartVMCluster(t)
	run := func(out string, extra ...string) {
		t.Helper()
		args := append([]string{"demo", "--scenario", "mixed", "--seed", "3", "--duration", "10m",
			"--start", "2026-11-02T00:00:00Z", "--out", out, "--listen", "127.0.0.1:0", "--quiet", "--export"}, extra...)
		if b, err := exec.Command(ballastBin, args...).CombinedOutput(); err != nil {
			t.Fatalf("demo %v: %v\n%s", extra, err, b)
		}
	}
	emb, rem := filepath.Join(t.TempDir(), "embedded"), filepath.Join(t.TempDir(), "remote")
	run(emb)
	flush := []string{}
	for _, u := range c.FlushURLs() {
		flush = append(flush, "--store-flush-url", u)
	}
	run(rem, append([]string{"--store", "remote=" + c.WriteURL() + "," + c.QueryURL(), "--store-tenant", "11"}, flush...)...)

	read := func(dir, f string) []byte { return readOut(t, dir, f) }
	fe, fr := read(emb, "findings.jsonl"), read(rem, "findings.jsonl")
	if len(fe) == 0 || !bytes.Equal(fe, fr) {
		t.Errorf("findings differ between the embedded and the remote store (%d vs %d bytes):\nembedded:\n%s\nremote:\n%s", len(fe), len(fr), head(fe), head(fr))
	}
	if a, b := read(emb, "report/report.json"), read(rem, "report/report.json"); !bytes.Equal(a, b) {
		t.Errorf("the capacity report differs between the embedded and the remote store (%d vs %d bytes)", len(a), len(b))
	}
	if _, err := os.Stat(filepath.Join(rem, "data", "remote-write-queue.db")); err != nil {
		t.Errorf("the remote demo has no queue in its data dir: %v", err)
	}
	compareTelemetry(t, read(emb, "telemetry.jsonl"), read(rem, "telemetry.jsonl"))
}

// readOut reads file f of a demo's output dir.
func readOut(t *testing.T, dir, f string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, f))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func head(b []byte) []byte {
	if len(b) > 1500 {
		return b[:1500]
	}
	return b
}

// TestMDSRemoteBackend runs `ballast mds --store remote=…` against a
// single-node VictoriaMetrics: pushes are validated as on the embedded
// store, reach the remote, and come back through the mds's own query API
// (client_golang), which proxies to the remote; a stop with the remote down
// keeps the queue, and the next start delivers it.
func TestMDSRemoteBackend(t *testing.T) {
	vm := testpeer.StartVictoriaMetrics(t)
	dir := t.TempDir()
	p := startMDS(t, dir, "--store", "remote="+vm.QueryURL())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("mds log:\n%s", p.logs)
		}
	})
	now := time.Now().Truncate(time.Second)
	p.importText(t, batch("remote_mds_test", 5, now))
	resp, err := http.Post(p.url("/api/v1/import/prometheus"), "text/plain", strings.NewReader("remote_mds_test{device=\"x\"} 1\nbad-name 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("push with a bad metric name: got %d; want 400 as on the embedded store", resp.StatusCode)
	}
	p.waitCount(t, "remote_mds_test", now, 5)

	// Remote down: the next pushes wait in the queue across a restart.
	vm.Proc.Stop(10 * time.Second)
	p.importText(t, batch("remote_mds_later", 3, now))
	time.Sleep(1500 * time.Millisecond) // past block_interval: on disk
	if err := p.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("mds stop: %v\n%s", err, p.logs)
	}
	if err := vm.Proc.Start(); err != nil {
		t.Fatal(err)
	}
	if err := testpeer.WaitHTTP(vm.QueryURL()+"/health", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	p = startMDS(t, dir, "--store", "remote="+vm.QueryURL())
	if !strings.Contains(p.logs.String(), "remote-write queue resumes") {
		t.Errorf("the restarted mds did not report resuming its queue:\n%s", p.logs)
	}
	p.waitCount(t, "remote_mds_later", now, 3)
}
