package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// server is a ballast mds or VictoriaMetrics single-node process started by
// the harness, listening on loopback.
type server struct {
	kind string // "ballast" or "VictoriaMetrics"
	cmd  *exec.Cmd
	base string // http://127.0.0.1:PORT
	logs *tail
	done chan struct{} // closed when the process has exited
	err  error         // Wait's result, valid after done
}

// running lists every started process so that cleanup can kill what is
// left, whatever path the harness leaves by.
var running struct {
	sync.Mutex
	list []*server
}

const (
	startTimeout = 90 * time.Second
	stopTimeout  = 60 * time.Second
)

// start runs bin with args, its stderr and stdout going to a bounded tail.
// The child is in its own process group (a terminal's Ctrl-C reaches only
// the harness, which stops it) and gets SIGKILL if the harness dies.
func start(kind, bin string, args []string) (*server, io.Reader, error) {
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	cmd.Stderr = pw
	s := &server{kind: kind, cmd: cmd, logs: newTail(40), done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("cannot start %s %q: %w", kind, bin, err)
	}
	running.Lock()
	running.list = append(running.list, s)
	running.Unlock()
	go func() {
		s.err = cmd.Wait()
		pw.Close()
		close(s.done)
	}()
	return s, pr, nil
}

// startBallast starts `ballast mds` on 127.0.0.1:0 and learns its port from
// the "mds started" log line.
func startBallast(ctx context.Context, bin, dataDir string) (*server, error) {
	s, out, err := start("ballast", bin, []string{"mds", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--log-level", "info"})
	if err != nil {
		return nil, err
	}
	addrCh := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			s.logs.add(line)
			if addr, ok := parseListen(line); ok {
				select {
				case addrCh <- addr:
				default:
				}
			}
		}
		io.Copy(io.Discard, out)
	}()
	t := time.NewTimer(startTimeout)
	defer t.Stop()
	select {
	case addr := <-addrCh:
		s.base = "http://" + addr
		return s, nil
	case <-s.done:
		return nil, fmt.Errorf("cannot start ballast mds: it exited (%v) before logging \"mds started\"; last output:\n%s", s.err, s.logs)
	case <-t.C:
		s.kill()
		return nil, fmt.Errorf("cannot start ballast mds: no \"mds started\" line within %s; last output:\n%s", startTimeout, s.logs)
	case <-ctx.Done():
		s.kill()
		return nil, ctx.Err()
	}
}

// parseListen returns the address of a ballast `msg="mds started"` log line
// (slog text format: `... msg="mds started" listen=127.0.0.1:PORT ...`).
func parseListen(line string) (string, bool) {
	if !strings.Contains(line, `msg="mds started"`) {
		return "", false
	}
	_, rest, ok := strings.Cut(line, " listen=")
	if !ok {
		return "", false
	}
	addr, _, _ := strings.Cut(rest, " ")
	addr = strings.Trim(addr, `"`)
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || port == "" || port == "0" {
		return "", false
	}
	return addr, true
}

// startVM starts VictoriaMetrics single-node on a free loopback port and
// waits until /health answers. VictoriaMetrics logs nothing at ERROR level
// when all is well, so the port is chosen here rather than read back.
func startVM(ctx context.Context, bin, dataDir string) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	s, out, err := start("VictoriaMetrics", bin, []string{
		"-httpListenAddr=" + addr,
		"-storageDataPath=" + dataDir,
		"-retentionPeriod=100y",
		"-loggerLevel=ERROR",
	})
	if err != nil {
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			s.logs.add(sc.Text())
		}
		io.Copy(io.Discard, out)
	}()
	s.base = "http://" + addr
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			return nil, fmt.Errorf("cannot start VictoriaMetrics: it exited (%v); last output:\n%s", s.err, s.logs)
		case <-ctx.Done():
			s.kill()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		resp, err := http.Get(s.base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
	}
	s.kill()
	return nil, fmt.Errorf("cannot start VictoriaMetrics: %s/health did not answer 200 within %s; last output:\n%s", s.base, startTimeout, s.logs)
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("cannot find a free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// peakRSS returns the process's peak resident set size (VmHWM) in bytes.
func (s *server) peakRSS() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0, fmt.Errorf("cannot read peak RSS of %s: %w", s.kind, err)
	}
	return parseVmHWM(string(b))
}

// parseVmHWM returns the VmHWM field of a /proc/PID/status text in bytes.
func parseVmHWM(status string) (int64, error) {
	for line := range strings.Lines(status) {
		v, ok := strings.CutPrefix(line, "VmHWM:")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("cannot parse VmHWM line %q", strings.TrimSpace(line))
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("cannot parse VmHWM line %q: %w", strings.TrimSpace(line), err)
		}
		return n << 10, nil
	}
	return 0, errors.New("cannot find VmHWM in /proc status")
}

// cpuTime returns the CPU time (user + system, all threads) the process has
// used so far.
func (s *server) cpuTime() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		return 0, fmt.Errorf("cannot read CPU time of %s: %w", s.kind, err)
	}
	return parseStatCPU(string(b))
}

// parseStatCPU returns utime + stime of a /proc/PID/stat line. They are in
// USER_HZ ticks, which the kernel fixes at 100 per second for /proc.
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("cannot parse /proc stat %q: no command field", stat)
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("cannot parse /proc stat: %d fields after the command, want at least 13", len(f))
	}
	var ticks int64
	for _, v := range f[11:13] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("cannot parse /proc stat CPU field %q: %w", v, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * (time.Second / 100), nil
}

// selfCPU returns the CPU time this process has used so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// stop sends SIGTERM, waits up to stopTimeout for a clean exit (both servers
// flush to disk), then kills.
func (s *server) stop() error {
	s.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(stopTimeout)
	defer t.Stop()
	select {
	case <-s.done:
		if s.err != nil {
			return fmt.Errorf("%s exited with %v on SIGTERM; last output:\n%s", s.kind, s.err, s.logs)
		}
		return nil
	case <-t.C:
		s.kill()
		return fmt.Errorf("%s did not exit within %s of SIGTERM; killed it", s.kind, stopTimeout)
	}
}

// kill sends SIGKILL and waits for the exit.
func (s *server) kill() {
	select {
	case <-s.done:
		return
	default:
	}
	s.cmd.Process.Kill()
	<-s.done
}

// killAll kills every process the harness started that is still running.
func killAll() {
	running.Lock()
	defer running.Unlock()
	for _, s := range running.list {
		s.kill()
	}
	running.list = nil
}

// tail keeps the last n lines of a process's output for error messages.
type tail struct {
	mu    sync.Mutex
	n     int
	lines []string
}

func newTail(n int) *tail { return &tail{n: n} }

func (t *tail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == t.n {
		copy(t.lines, t.lines[1:])
		t.lines = t.lines[:t.n-1]
	}
	t.lines = append(t.lines, line)
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}
