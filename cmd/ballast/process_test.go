package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// These tests run the real binary as a subprocess: crashes, restarts and
// the data-dir lock can only be tested across processes.

var ballastBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ballast-bin-")
	if err != nil {
		panic(err)
	}
	ballastBin = filepath.Join(dir, "ballast")
	out, err := exec.Command("go", "build", "-o", ballastBin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "cannot build ballast: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type mdsProc struct {
	cmd  *exec.Cmd
	addr string
	mu   sync.Mutex
	logs *strings.Builder
	done chan error
	// lines carries the log lines (dropped when nobody reads them)
	lines chan string
}

var listenRe = regexp.MustCompile(`msg="mds started" listen=(\S+)`)

// startMDS runs `ballast mds` on a free loopback port and waits until it
// reports its address.
func startMDS(t *testing.T, dataDir string, extra ...string) *mdsProc {
	t.Helper()
	return startMDSWith(t, []string{ballastBin}, dataDir, extra...)
}

// startMDSWith runs `ballast mds` through argv (the binary, or a wrapper
// that ends by running it with the arguments that follow).
func startMDSWith(t *testing.T, argv []string, dataDir string, extra ...string) *mdsProc {
	t.Helper()
	return startMDSCmd(t, nil, argv, dataDir, extra...)
}

// startMDSCmd is startMDSWith with setup applied to the command before it
// starts (environment); a line sent on p.lines, when the caller set it
// through setup's process, is every log line.
func startMDSCmd(t *testing.T, setup func(*exec.Cmd), argv []string, dataDir string, extra ...string) *mdsProc {
	t.Helper()
	args := append(append(argv[1:len(argv):len(argv)], "mds", "--listen", "127.0.0.1:0", "--data-dir", dataDir), extra...)
	cmd := exec.Command(argv[0], args...)
	if setup != nil {
		setup(cmd)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &mdsProc{cmd: cmd, logs: new(strings.Builder), done: make(chan error, 1), lines: make(chan string, 1024)}
	addrCh := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.logs.WriteString(line + "\n")
			p.mu.Unlock()
			if m := listenRe.FindStringSubmatch(line); m != nil {
				addrCh <- m[1]
			}
			select {
			case p.lines <- line:
			default: // nobody reads them
			}
		}
		p.done <- cmd.Wait()
	}()
	select {
	case p.addr = <-addrCh:
	case err := <-p.done:
		// its last line is the error Start returned ("ballast mds: …"):
		// on the first line, so that a filtered test log keeps it
		t.Fatalf("mds exited before starting: %v: %s\n%s", err, lastLines(p.logs.String(), 1), p.logs)
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("mds did not start within 60s\n%s", p.logs)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (p *mdsProc) url(path string) string { return "http://" + p.addr + path }

// stop sends sig and waits for the process to exit.
func (p *mdsProc) stop(t *testing.T, sig syscall.Signal) error {
	t.Helper()
	p.cmd.Process.Signal(sig)
	select {
	case err := <-p.done:
		return err
	case <-time.After(60 * time.Second):
		p.cmd.Process.Kill()
		t.Fatalf("mds did not exit within 60s of %v\n%s", sig, p.logs)
		return nil
	}
}

func (p *mdsProc) importText(t *testing.T, body string) {
	t.Helper()
	resp, err := http.Post(p.url("/api/v1/import/prometheus"), "text/plain", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("import: got %d %s; want 204", resp.StatusCode, b)
	}
}

// countAt returns count(expr) evaluated at ts through the client_golang API.
func (p *mdsProc) countAt(t *testing.T, expr string, ts time.Time) int {
	t.Helper()
	vec := instant(t, p.addr, "count(count_over_time("+expr+"[1h]))", ts)
	if len(vec) == 0 {
		return 0
	}
	return int(vec[0].Value)
}

func (p *mdsProc) waitCount(t *testing.T, expr string, ts time.Time, want int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := p.countAt(t, expr, ts)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: got %d series; want %d", expr, got, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// batch renders n series of metric name at ts.
func batch(name string, n int, ts time.Time) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "%s{device=\"nvme%dn1\"} %d %d\n", name, i, i, ts.UnixMilli())
	}
	return b.String()
}

func TestMDSRestartKeepsAcknowledgedData(t *testing.T) {
	dir := t.TempDir()
	ts := time.Now().Add(-time.Minute)
	p := startMDS(t, dir)
	p.importText(t, batch("restart_a", 50, ts))
	p.importText(t, batch("restart_b", 50, ts)) // acknowledged just before the stop
	if err := p.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("clean stop: %v\n%s", err, p.logs)
	}
	q := startMDS(t, dir)
	q.waitCount(t, "restart_a", ts, 50)
	q.waitCount(t, "restart_b", ts, 50)
}

// TestMDSSurvivesSIGKILL checks the documented durability window: with
// --flush-interval 1s, everything acknowledged more than 1 s + 2 s
// (lib/storage's in-memory buffering) + 1 s margin before a SIGKILL is on
// disk after it.
func TestMDSSurvivesSIGKILL(t *testing.T) {
	dir := t.TempDir()
	ts := time.Now().Add(-time.Minute)
	p := startMDS(t, dir, "--flush-interval", "1s")
	p.importText(t, batch("kill_early", 200, ts))
	p.waitCount(t, "kill_early", ts, 200)
	time.Sleep(4 * time.Second) // the flush window for --flush-interval 1s
	p.importText(t, batch("kill_late", 10, ts))
	if err := p.stop(t, syscall.SIGKILL); err == nil {
		t.Fatalf("SIGKILL: process exited cleanly; want killed")
	}
	q := startMDS(t, dir)
	q.waitCount(t, "kill_early", ts, 200)
	t.Logf("series acknowledged <4s before the kill that survived: %d of 10", q.countAt(t, "kill_late", ts))
}

func TestMDSRefusesSecondProcessOnSameDataDir(t *testing.T) {
	dir := t.TempDir()
	ts := time.Now().Add(-time.Minute)
	p := startMDS(t, dir)
	p.importText(t, batch("lock_a", 5, ts))
	out, err := exec.Command(ballastBin, "mds", "--listen", "127.0.0.1:0", "--data-dir", dir).CombinedOutput()
	if err == nil {
		t.Fatalf("second mds on the same data dir started; want refusal\n%s", out)
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Errorf("second mds: got %v; want exit status 1", err)
	}
	if !strings.Contains(string(out), "data dir is in use by another process") {
		t.Errorf("second mds: got %q; want it to say the data dir is in use", out)
	}
	// The first one is unharmed.
	p.waitCount(t, "lock_a", ts, 5)
}

// TestMDSLayoutStatsIngest posts two cumulative RFC 8435 reports for one
// stripe and checks the derived per-device read rate lands in the store.
func TestMDSLayoutStatsIngest(t *testing.T) {
	p := startMDS(t, t.TempDir())
	post := func(at time.Time, count, bytes, secs int) {
		body := fmt.Sprintf(`{"client_id":"gpu01","report_time":%q,"reports":[{
 "ffis_offset":0,"ffis_length":1048576,"ffis_stateid":{"seqid":1,"other":"000000000000000000000001"},
 "ffis_read":{"ii_count":%d,"ii_bytes":%d},"ffis_write":{"ii_count":0,"ii_bytes":0},
 "ffis_deviceid":"a1b2c3d4000000000000000000000007",
 "ffis_layoutupdate":{"ffl_addr":{"na_r_netid":"tcp","na_r_addr":"127.0.0.1.8.1"},"ffl_fhandle":"0100",
  "ffl_read":{"ffil_ops_requested":%d,"ffil_bytes_requested":%d,"ffil_ops_completed":%d,"ffil_bytes_completed":%d,"ffil_bytes_not_delivered":0,
   "ffil_total_busy_time":{"seconds":%d,"nseconds":0},"ffil_aggregate_completion_time":{"seconds":1,"nseconds":0}},
  "ffl_write":{"ffil_ops_requested":0,"ffil_bytes_requested":0,"ffil_ops_completed":0,"ffil_bytes_completed":0,"ffil_bytes_not_delivered":0,
   "ffil_total_busy_time":{"seconds":0,"nseconds":0},"ffil_aggregate_completion_time":{"seconds":0,"nseconds":0}},
  "ffl_duration":{"seconds":%d,"nseconds":0},"ffl_local":false}}]}`,
			at.UTC().Format(time.RFC3339), count, bytes, count, bytes, count, bytes, secs/2, secs)
		resp, err := http.Post(p.url("/api/v1/layoutstats"), "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("layoutstats: got %d %s; want 2xx", resp.StatusCode, b)
		}
	}
	now := time.Now().Add(-30 * time.Second).Truncate(time.Second)
	post(now, 100, 100<<20, 10)
	post(now.Add(10*time.Second), 300, 300<<20, 20)
	// A report that goes backwards without a reset is refused with a reason.
	resp, err := http.Post(p.url("/api/v1/layoutstats"), "application/json", strings.NewReader(`{"client_id":"gpu01","reports":[{"ffis_offset":0}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "reports[0]") {
		t.Errorf("malformed report: got %d %s; want 400 naming reports[0]", resp.StatusCode, b)
	}
	p.waitCount(t, `ballast_layoutstats_device_bytes_per_second{deviceid="a1b2c3d4000000000000000000000007",op="read"}`, time.Now(), 1)
}
