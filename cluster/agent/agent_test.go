package agent

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestRunServesMetricsAndStops runs the ds agent over an empty host tree:
// every collector that finds nothing reports failure alone, /metrics
// serves ballast_build_info with the role and node, and cancelling the
// context stops the agent without error.
func TestRunServesMetricsAndStops(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"proc", "sys", "dev"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, io.Discard, pw, "ballast-agent", "test", "ds", []string{"--listen", "127.0.0.1:0", "--node-name", "ds9",
			"--proc-root", filepath.Join(root, "proc"), "--sys-root", filepath.Join(root, "sys"), "--dev-root", filepath.Join(root, "dev"), "--rootfs", root})
		pw.Close()
	}()
	addr := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`msg="agent started" role=ds listen=(\S+)`)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	var a string
	select {
	case a = <-addr:
	case err := <-done:
		t.Fatalf("agent stopped before it started: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("agent did not start within 30s")
	}
	resp, err := http.Get("http://" + a + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`ballast_build_info{node="ds9",role="ds",version="test"} 1`, `ballast_collector_success{collector="diskstats"} 0`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics: got no line %q in\n%s", want, body)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run after cancel: got %v; want nil", err)
		}
	case <-time.After(35 * time.Second):
		t.Fatal("agent did not stop within 35s of cancel")
	}
}
