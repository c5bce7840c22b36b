// Package testpeer starts the real engines ballast's tests talk to — a
// VictoriaMetrics cluster (vminsert, vmselect, two vmstorage), single-node
// VictoriaMetrics, Prometheus with its remote-write receiver, etcd — as
// subprocesses on 127.0.0.1, and stops exactly the processes it started.
// It is a test helper shared by several packages, not product code.
//
// Debian packages (victoria-metrics, prometheus, etcd-server) are installed
// with apt-get when missing and the test runs as root, as `make test-deps`
// does; otherwise the test skips saying what to install. The cluster binaries
// are not packaged: they come from shared/tools/victoriametrics-cluster
// beside the project (or $BALLAST_VM_CLUSTER_DIR), and a test skips when
// they are absent.
package testpeer

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Debian returns the path of binary, installing the Debian package pkg
// when it is missing and the test runs as root; otherwise it skips.
func Debian(t testing.TB, binary, pkg string) string {
	t.Helper()
	if p, err := exec.LookPath(binary); err == nil {
		return p
	}
	if os.Getenv("BALLAST_NO_APT_INSTALL") != "" || os.Geteuid() != 0 {
		t.Skipf("%s is not installed and this test may not install it (not root or BALLAST_NO_APT_INSTALL set); install the Debian package %s (make test-deps does as root)", binary, pkg)
	}
	installMu.Lock()
	defer installMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "apt-get", "install", "-y", "-qq", pkg)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("cannot install %s (apt-get install -y %s): %v\n%s", binary, pkg, err, tail(out))
	}
	p, err := exec.LookPath(binary)
	if err != nil {
		t.Skipf("%s still not found after installing %s: %v", binary, pkg, err)
	}
	return p
}

var installMu sync.Mutex

// VMClusterDir finds the VictoriaMetrics cluster binaries: $BALLAST_VM_CLUSTER_DIR,
// else shared/tools/victoriametrics-cluster beside the module root or any of
// its parents (a worktree may sit deeper than the main checkout). It skips
// the test when they are absent.
func VMClusterDir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv("BALLAST_VM_CLUSTER_DIR"); d != "" {
		if hasCluster(d) {
			return d
		}
		t.Skipf("BALLAST_VM_CLUSTER_DIR=%s does not hold vminsert, vmselect and vmstorage", d)
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("cannot get the working directory: %v", err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		c := filepath.Join(d, "shared", "tools", "victoriametrics-cluster")
		if hasCluster(c) {
			return c
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	t.Skipf("this test needs the VictoriaMetrics v1.150.0 cluster binaries (vminsert, vmselect, vmstorage) in ../shared/tools/victoriametrics-cluster from the project root or $BALLAST_VM_CLUSTER_DIR; none found above %s", dir)
	return ""
}

func hasCluster(d string) bool {
	for _, b := range []string{"vminsert", "vmselect", "vmstorage"} {
		if fi, err := os.Stat(filepath.Join(d, b)); err != nil || fi.IsDir() {
			return false
		}
	}
	return true
}

// FreePort returns a free TCP port on 127.0.0.1.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("cannot find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Proc is one started subprocess. Its output goes to a log file in the
// test's temp dir, printed when the test fails.
type Proc struct {
	Name string
	bin  string
	args []string
	log  string

	mu  sync.Mutex
	cmd *exec.Cmd
	out *os.File
}

// Start starts bin with args; the process is killed when the test ends.
func Start(t testing.TB, name, bin string, args ...string) *Proc {
	t.Helper()
	p := &Proc{Name: name, bin: bin, args: args, log: filepath.Join(t.TempDir(), name+".log")}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			b, _ := os.ReadFile(p.log)
			t.Logf("%s log (tail):\n%s", name, tail(b))
		}
	})
	return p
}

// Start (re)starts the process with the same arguments.
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	out, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("cannot open log of %s: %w", p.Name, err)
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		out.Close()
		return fmt.Errorf("cannot start %s (%s): %w", p.Name, p.bin, err)
	}
	p.cmd, p.out = cmd, out
	return nil
}

// Pid is the running process's id, or 0.
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Kill sends SIGKILL and reaps the process. Idempotent.
func (p *Proc) Kill() { p.stop(syscall.SIGKILL, 0) }

// Stop sends SIGTERM and waits up to timeout for a clean exit, then kills.
func (p *Proc) Stop(timeout time.Duration) { p.stop(syscall.SIGTERM, timeout) }

// Signal sends sig (SIGSTOP, SIGCONT) to the running process.
func (p *Proc) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return fmt.Errorf("%s is not running", p.Name)
	}
	return p.cmd.Process.Signal(sig)
}

func (p *Proc) stop(sig syscall.Signal, timeout time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	p.cmd.Process.Signal(sig)
	if sig != syscall.SIGKILL {
		p.cmd.Process.Signal(syscall.SIGCONT) // a stopped process must run to exit
	}
	select {
	case <-done:
	case <-time.After(timeout):
		p.cmd.Process.Kill()
		<-done
	}
	p.out.Close()
	p.cmd = nil
}

// WaitHTTP polls url until it answers 2xx or timeout passes.
func WaitHTTP(url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				return nil
			}
			last = fmt.Errorf("HTTP %d", resp.StatusCode)
		} else {
			last = err
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready after %s: %v", url, timeout, last)
}

func tail(b []byte) []byte {
	b = bytes.TrimSpace(b)
	if len(b) > 3000 {
		return b[len(b)-3000:]
	}
	return b
}
