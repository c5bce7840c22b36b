package ha

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ballast-io/ballast/internal/testpeer"
)

const testTTL = 2 * time.Second

func newElector(t *testing.T, name string, endpoints ...string) *Elector {
	t.Helper()
	e, err := New(Options{Endpoints: endpoints, Name: name, TTL: testTTL, Prefix: "/test/" + t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Stop(context.Background()) })
	return e
}

func waitLeading(t *testing.T, e *Elector, within time.Duration) uint64 {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if ep, ok := e.Leading(); ok {
			return ep
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s did not lead within %s", e.opts.Name, within)
	return 0
}

// TestElectionFailover: one of two leads; when it stops, the other leads
// with a higher epoch, and never both at once.
func TestElectionFailover(t *testing.T) {
	etcd := testpeer.StartEtcd(t)
	a := newElector(t, "a", etcd.ClientURL)
	epA := waitLeading(t, a, 10*time.Second)
	b := newElector(t, "b", etcd.ClientURL)
	time.Sleep(testTTL)
	if _, ok := b.Leading(); ok {
		t.Fatal("b leads while a does; want only a")
	}
	if err := a.Confirm(context.Background(), epA); err != nil {
		t.Fatalf("a cannot confirm its epoch: %v", err)
	}
	start := time.Now()
	a.Stop(context.Background())
	epB := waitLeading(t, b, 2*testTTL)
	if epB <= epA {
		t.Fatalf("b's epoch %d is not above a's %d", epB, epA)
	}
	t.Logf("b led %s after a stopped (epochs %d → %d)", time.Since(start).Round(time.Millisecond), epA, epB)
	if err := b.Confirm(context.Background(), epA); err == nil {
		t.Fatal("b confirmed a's old epoch")
	}
}

// cutProxy forwards TCP to target until Cut, after which it refuses and
// drops every connection: etcd unreachable from one process only.
type cutProxy struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	cut    bool
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{l: l, target: target}
	t.Cleanup(func() { p.Cut(); l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.cut {
				p.mu.Unlock()
				c.Close()
				continue
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go func() { io.Copy(u, c); u.Close() }()
			go func() { io.Copy(c, u); c.Close() }()
		}
	}()
	return p
}

func (p *cutProxy) URL() string { return "http://" + p.l.Addr().String() }

func (p *cutProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for _, c := range p.conns {
		c.Close()
	}
}

// TestSplitBrain cuts the leader off from etcd (the other still reaches
// it): the leader stops acting within the lease TTL, the other takes over
// after it, and at no sample do both lead.
func TestSplitBrain(t *testing.T) {
	etcd := testpeer.StartEtcd(t)
	proxy := newCutProxy(t, strings.TrimPrefix(etcd.ClientURL, "http://"))
	a := newElector(t, "a", proxy.URL())
	epA := waitLeading(t, a, 10*time.Second)
	b := newElector(t, "b", etcd.ClientURL)
	time.Sleep(testTTL)

	proxy.Cut()
	cut := time.Now()
	var aStopped, bLed time.Duration
	var epB uint64
	for time.Since(cut) < 4*testTTL && (aStopped == 0 || bLed == 0) {
		_, aOK := a.Leading()
		e, bOK := b.Leading()
		if aOK && bOK {
			t.Fatalf("both lead %s after the cut", time.Since(cut))
		}
		if !aOK && aStopped == 0 {
			aStopped = time.Since(cut)
		}
		if bOK && bLed == 0 {
			bLed, epB = time.Since(cut), e
		}
		time.Sleep(2 * time.Millisecond)
	}
	if aStopped == 0 || aStopped > testTTL {
		t.Fatalf("a stopped leading %s after losing etcd; want within the lease TTL %s", aStopped, testTTL)
	}
	if bLed == 0 || epB <= epA {
		t.Fatalf("b led %s after the cut with epoch %d; want it to take over with an epoch above %d", bLed, epB, epA)
	}
	t.Logf("cut off at 0: a stopped acting after %s, b led after %s (TTL %s)", aStopped.Round(time.Millisecond), bLed.Round(time.Millisecond), testTTL)
}

func TestFenceFile(t *testing.T) {
	f := FenceFile{Path: filepath.Join(t.TempDir(), "fence")}
	ran := 0
	commit := func() error { ran++; return nil }
	if err := f.Commit(5, commit); err != nil || ran != 1 {
		t.Fatalf("first commit: %v, ran %d", err, ran)
	}
	if err := f.Raise(9); err != nil {
		t.Fatal(err)
	}
	if err := f.Commit(5, commit); !errors.Is(err, ErrFenced) || ran != 1 {
		t.Fatalf("commit with a lower epoch: got %v (ran %d); want ErrFenced and nothing run", err, ran)
	}
	if err := f.Commit(9, commit); err != nil || ran != 2 {
		t.Fatalf("commit at the recorded epoch: %v", err)
	}
	if s, _ := f.Seen(); s != 9 {
		t.Fatalf("seen %d; want 9", s)
	}
}

// TestMain runs the fencing helper when the test binary is started as one.
func TestMain(m *testing.M) {
	if os.Getenv("BALLAST_HA_HELPER") != "" {
		os.Exit(helper())
	}
	os.Exit(m.Run())
}

// helper is one "mds" of the fencing test: it campaigns, raises the fence
// when it takes over, and while leading commits a line to the journal every
// 20 ms under the fence. While a "hold" file exists it stops between the
// leadership check and the commit: it writes its epoch to a "holding" file
// and waits until the hold is gone. That is where the test stops it with
// SIGSTOP. (It used to sleep 200 ms there instead; a test descheduled that
// long before sending SIGSTOP saw the commit go through, and the continued
// process then saw it had lost the lease and never tried the late commit
// the test waits for: a flake on a loaded machine, 2026-11-26.)
func helper() int {
	dir := os.Getenv("BALLAST_HA_DIR")
	name := os.Getenv("BALLAST_HA_NAME")
	e, err := New(Options{Endpoints: []string{os.Getenv("BALLAST_HA_ETCD")}, Name: name, TTL: testTTL, Prefix: "/test/fencing"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := e.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fence := FenceFile{Path: filepath.Join(dir, "fence")}
	journal, err := os.OpenFile(filepath.Join(dir, "journal"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return 2
	}
	var raised uint64
	for {
		epoch, ok := e.Leading()
		if !ok {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if raised != epoch {
			if err := fence.Raise(epoch); err != nil {
				fmt.Fprintf(journal, "%s refused-raise %d\n", name, epoch)
				time.Sleep(10 * time.Millisecond)
				continue
			}
			raised = epoch
		}
		if exists(filepath.Join(dir, "hold-"+name)) {
			os.WriteFile(filepath.Join(dir, "holding-"+name), []byte(strconv.FormatUint(epoch, 10)), 0o644)
			for exists(filepath.Join(dir, "hold-"+name)) {
				time.Sleep(time.Millisecond)
			}
		}
		err := fence.Commit(epoch, func() error {
			_, err := fmt.Fprintf(journal, "%s commit %d\n", name, epoch)
			return err
		})
		if err != nil {
			fmt.Fprintf(journal, "%s refused %d\n", name, epoch)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFencingPausedLeader: two processes; the leader is stopped with
// SIGSTOP after its leadership check and before its commit, for longer than
// the lease; the other takes over and raises the fence; after SIGCONT the
// old leader's commit is refused, and no commit of the old epoch follows
// one of the new.
func TestFencingPausedLeader(t *testing.T) {
	etcd := testpeer.StartEtcd(t)
	dir := t.TempDir()
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	start := func(name string) *exec.Cmd {
		cmd := exec.Command(bin, "-test.run=^$")
		cmd.Env = append(os.Environ(), "BALLAST_HA_HELPER=1", "BALLAST_HA_DIR="+dir, "BALLAST_HA_NAME="+name, "BALLAST_HA_ETCD="+etcd.ClientURL)
		cmd.Stderr = os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Signal(syscall.SIGCONT); cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	procs := map[string]*exec.Cmd{"a": start("a")}
	// a leads and is about to commit.
	holding := func(name string) (uint64, bool) {
		b, err := os.ReadFile(filepath.Join(dir, "holding-"+name))
		if err != nil {
			return 0, false
		}
		v, err := strconv.ParseUint(string(b), 10, 64)
		return v, err == nil
	}
	waitFor := func(what string, f func() bool) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for !f() {
			if time.Now().After(deadline) {
				b, _ := os.ReadFile(filepath.Join(dir, "journal"))
				t.Fatalf("timed out waiting for %s; journal:\n%s", what, b)
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitFor("a to lead and commit", func() bool { return strings.Contains(readJournal(dir), "a commit") })
	procs["b"] = start("b")
	time.Sleep(testTTL)
	hold := filepath.Join(dir, "hold-a")
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var old uint64
	waitFor("a between check and commit", func() bool { var ok bool; old, ok = holding("a"); return ok })
	procs["a"].Process.Signal(syscall.SIGSTOP)
	waitFor("b to take over and commit", func() bool { return strings.Contains(readJournal(dir), "b commit") })
	os.Remove(hold)
	procs["a"].Process.Signal(syscall.SIGCONT)
	waitFor("a's late commit attempt", func() bool { return strings.Contains(readJournal(dir), fmt.Sprintf("a refused %d", old)) })
	time.Sleep(500 * time.Millisecond)

	lines := strings.Split(strings.TrimSpace(readJournal(dir)), "\n")
	newSeen := false
	for _, l := range lines {
		f := strings.Fields(l)
		if f[1] != "commit" {
			continue
		}
		ep, _ := strconv.ParseUint(f[2], 10, 64)
		if ep > old {
			newSeen = true
		}
		if newSeen && ep <= old {
			t.Fatalf("commit of the old epoch %d after the new leader's: %q\njournal:\n%s", old, l, strings.Join(lines, "\n"))
		}
	}
	t.Logf("journal: %d lines; a's commit at epoch %d after SIGCONT was refused", len(lines), old)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func readJournal(dir string) string {
	b, _ := os.ReadFile(filepath.Join(dir, "journal"))
	return string(b)
}
