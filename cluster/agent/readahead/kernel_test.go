//go:build linux

package readahead_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ballast-io/ballast/actuator"
	"github.com/ballast-io/ballast/cluster"
	"github.com/ballast-io/ballast/cluster/node"
	"github.com/ballast-io/ballast/internal/testkit"
	"github.com/ballast-io/ballast/models"
)

// loopFS is an ext4 filesystem on a loop device over a temporary file,
// mounted in a temporary directory; everything is undone at cleanup.
type loopFS struct {
	dev, mnt, bdi string
	origKB        int64
}

func bdiPath(bdi string) string { return filepath.Join("/sys/class/bdi", bdi, "read_ahead_kb") }

func readSysKB(t testing.TB, bdi string) int64 {
	t.Helper()
	b, err := os.ReadFile(bdiPath(bdi))
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// needLoopFS skips unless the test runs as root with losetup, mkfs.ext4
// and mount on PATH (CI runs as root; nothing is installed here).
func needLoopFS(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a loop device, mkfs.ext4 and mounts it (CI runs as root)")
	}
	for _, tool := range []string{"losetup", "mkfs.ext4", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s on PATH: %v", tool, err)
		}
	}
}

// newLoopFS makes a size-byte ext4 on a loop device and mounts it. The
// cleanup writes back the bdi's original read_ahead_kb (whatever the test
// did), unmounts and detaches the loop device.
func newLoopFS(t testing.TB, size int64) *loopFS {
	t.Helper()
	needLoopFS(t)
	dir := t.TempDir()
	img := filepath.Join(dir, "fs.img")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	run := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	l := &loopFS{mnt: filepath.Join(dir, "mnt")}
	if err := os.Mkdir(l.mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "--find", "--show", img).CombinedOutput()
	if err != nil {
		t.Skipf("cannot attach a loop device (no loop support here?): %v: %s", err, out)
	}
	l.dev = strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", l.dev).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v: %s", l.dev, err, out)
		}
	})
	run("mkfs.ext4", "-q", "-F", l.dev)
	run("mount", "-t", "ext4", l.dev, l.mnt)
	t.Cleanup(func() {
		if out, err := exec.Command("umount", l.mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", l.mnt, err, out)
		}
	})
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == l.mnt {
			l.bdi = f[2]
		}
	}
	if l.bdi == "" {
		t.Fatalf("mount %s not in /proc/self/mountinfo", l.mnt)
	}
	l.origKB = readSysKB(t, l.bdi)
	// registered last, runs first: the original is back before unmount
	t.Cleanup(func() {
		if err := os.WriteFile(bdiPath(l.bdi), []byte(strconv.FormatInt(l.origKB, 10)), 0); err != nil {
			t.Errorf("restoring %s: %v", bdiPath(l.bdi), err)
		}
	})
	return l
}

// TestRealKernelReadAhead (acceptance 1 of issue 14): on a real
// block-backed filesystem (ext4 on a loop device), the client agent,
// pointed at the real /proc and /sys with only that mount allowed and
// driven by a real mds over an act-scoped token, sets read_ahead_kb,
// reads it back from sysfs, restores the original on shutdown and again
// when the mds is lost for longer than its lease. Only the test's own bdi
// is written; the original is written back at cleanup even on failure.
func TestRealKernelReadAhead(t *testing.T) {
	needLoopFS(t)
	if !testkit.OwnProcess(t) {
		return
	}
	l := newLoopFS(t, 64<<20)
	target := int64(4096)
	if l.origKB == target {
		target = 2048
	}
	// every other bdi stays as it was (other loop devices excepted: other
	// processes on this host may attach and detach them meanwhile)
	others := map[string]string{}
	bdis, _ := filepath.Glob("/sys/class/bdi/*/read_ahead_kb")
	for _, p := range bdis {
		if strings.HasPrefix(filepath.Base(filepath.Dir(p)), "7:") {
			continue
		}
		if b, err := os.ReadFile(p); err == nil && p != bdiPath(l.bdi) {
			others[p] = string(b)
		}
	}

	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	os.WriteFile(tok, []byte("gpu-agents-0123456789abcdef01234\n"), 0o600)
	m := startMDS(t, models.ModeAuto, []actuator.ReadAheadPin{{Node: "gpu01", MountPoint: l.mnt, KB: target}}, func(c *cluster.MDSConfig) {
		c.Auth.Clients = []cluster.AuthClient{{Name: "gpu-agents", TokenFile: tok, Scopes: []node.Scope{node.ScopeAct}}}
	})
	clk := &clock{t: time.Now()}
	cfg := agentConfig(m.url, filepath.Join(dir, "ra.json"))
	cfg.TokenFile = tok
	cfg.FSTypes = []string{"ext4"}
	cfg.MountPoints = []string{l.mnt}
	cfg.MaxStepKB = 16384
	ft := fakeTree{proc: "/proc", sys: "/sys"}
	a := newAgent(t, cfg, ft, clk)

	sync1(t, a)
	m.tick(t, clk.now())
	sync1(t, a)
	if got := readSysKB(t, l.bdi); got != target {
		t.Fatalf("after the mds asked for %d KiB, %s holds %d", target, bdiPath(l.bdi), got)
	}
	// the block queue of the loop device is the same bdi
	if q, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(l.dev), "queue/read_ahead_kb")); err == nil && strings.TrimSpace(string(q)) != strconv.FormatInt(target, 10) {
		t.Fatalf("/sys/block/%s/queue/read_ahead_kb is %s, want %d", filepath.Base(l.dev), q, target)
	}
	sync1(t, a)
	m.tick(t, clk.now())
	if act := m.action(t, l.mnt); act.State != models.ActionVerifying {
		t.Fatalf("action %s is %s (%s), want verifying", act.ID, act.State, act.Reason)
	}

	// shutdown restores the original
	a.Start()
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	if got := readSysKB(t, l.bdi); got != l.origKB {
		t.Fatalf("after shutdown %s holds %d, want the original %d", bdiPath(l.bdi), got, l.origKB)
	}

	// a new agent applies it again; then the mds goes away
	b := newAgent(t, cfg, ft, clk)
	sync1(t, b)
	if got := readSysKB(t, l.bdi); got != target {
		t.Fatalf("second agent: %s holds %d, want %d", bdiPath(l.bdi), got, target)
	}
	m.stop()
	clk.add(time.Duration(cfg.Lease) + time.Second)
	b.SyncOnce(context.Background())
	if got := readSysKB(t, l.bdi); got != l.origKB {
		t.Fatalf("after losing the mds past the lease %s holds %d, want the original %d", bdiPath(l.bdi), got, l.origKB)
	}
	for p, v := range others {
		if b, err := os.ReadFile(p); err == nil && string(b) != v {
			t.Errorf("%s changed from %q to %q: only %s may be touched", p, v, b, bdiPath(l.bdi))
		}
	}
	fmt.Fprintf(os.Stderr, "real kernel: %s (%s) bdi %s: %d → %d → %d KiB\n", l.dev, l.mnt, l.bdi, l.origKB, target, l.origKB)
}
