package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ballast-io/ballast/cluster/report"
)

// servingRe finds the address in the line `ballast demo --serve` prints
// once it serves.
var servingRe = regexp.MustCompile(`Console: http://(\S+)/ui/`)

func readReport(t *testing.T, dir string) report.Report {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r report.Report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestDemoWritesCapacityReport runs a 20-minute demo with --serve: the run
// writes OUT/report/{report.html,report.md,report.json} with inline SVG
// plots from the filesystem series in its store and says the history is
// short; then `ballast report capacity` against the demo's query API reads
// the same series and finds the same used bytes per pool.
func TestDemoWritesCapacityReport(t *testing.T) {
	out := filepath.Join(t.TempDir(), "demo")
	cmd := exec.Command(ballastBin, "demo", "--duration", "20m", "--start", "2026-11-01T00:00:00Z",
		"--out", out, "--listen", "127.0.0.1:0", "--quiet", "--serve")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGINT)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
		}
	}()
	var printed strings.Builder
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			printed.WriteString(sc.Text() + "\n")
			if m := servingRe.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		close(addr)
	}()
	var api string
	select {
	case a, ok := <-addr:
		if !ok {
			t.Fatalf("demo exited before serving:\n%s", stderr.String())
		}
		api = a
	case <-time.After(3 * time.Minute):
		t.Fatalf("demo did not serve within 3 minutes:\n%s", stderr.String())
	}
	dir := filepath.Join(out, "report")
	if !strings.Contains(printed.String(), "Capacity report: "+dir+"/report.html") {
		t.Errorf("demo output does not say where the report is:\n%s", printed.String())
	}
	for _, f := range []string{"report.html", "report.md", "report.json"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(html), "<svg"); n < 1 || !strings.Contains(string(html), "<path") {
		t.Errorf("report.html has %d <svg> plots; want at least one with paths", n)
	}
	r := readReport(t, dir)
	// mixed: 16 data servers of 8 drives in pool fast (spares have no
	// filesystem), plus the spare of ds07 the demo's actuators promoted in
	// place of the failing ds07/nvme3n1.
	if len(r.Devices) != 129 || len(r.Pools) != 1 || r.Pools[0].Subject.ID != "fast" || r.Pools[0].Used <= 0 {
		t.Fatalf("demo report: %d drives, pools %+v; want 129 drives in pool fast with data", len(r.Devices), r.Pools)
	}
	if len(r.Summary) == 0 || !strings.HasPrefix(r.Summary[0], "Short history: only 20m0s") {
		t.Errorf("summary does not open with the short-history warning: %q", r.Summary)
	}

	// The same report through the HTTP query API, as against an mds.
	dir2 := t.TempDir()
	if msg, err := runCmd(t, "report capacity", "--url", "http://"+api, "--at", r.GeneratedAt.Format(time.RFC3339),
		"--lookback", "20m", "--step", "10s", "--pools", "ds=fast", "--no-drive-health", "--out", dir2); err != nil {
		t.Fatalf("report capacity against the demo: %v\n%s", err, msg)
	}
	r2 := readReport(t, dir2)
	if len(r2.Devices) != len(r.Devices) || len(r2.Pools) != 1 || r2.Pools[0].Used != r.Pools[0].Used {
		t.Errorf("report through the API: %d drives, pools %+v; want %d drives and pool fast at %v bytes as in the demo's own report",
			len(r2.Devices), r2.Pools, len(r.Devices), r.Pools[0].Used)
	}
}
