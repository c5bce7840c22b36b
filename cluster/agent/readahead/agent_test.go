package readahead_test

import (
	"context"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballast-io/ballast/actuator"
	"github.com/ballast-io/ballast/cluster"
	"github.com/ballast-io/ballast/cluster/agent/readahead"
	"github.com/ballast-io/ballast/cluster/node"
	"github.com/ballast-io/ballast/internal/testkit"
	"github.com/ballast-io/ballast/internal/units"
	"github.com/ballast-io/ballast/models"
)

// testMDS is a real mds (cluster.NewMDS) on 127.0.0.1 whose pipeline the
// test ticks.
type testMDS struct {
	*cluster.MDS
	url  string
	stop func()
}

func startMDS(t *testing.T, mode models.ActionMode, pins []actuator.ReadAheadPin, mutate func(*cluster.MDSConfig)) *testMDS {
	t.Helper()
	cfg := cluster.DefaultMDSConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.LogLevel = "error"
	cfg.Scrape.Interval = cluster.Duration(time.Hour)
	cfg.Report.CapacityEvery = 0
	cfg.Actuators.Modes = map[models.ActionKind]models.ActionMode{models.ActionSetReadAhead: mode}
	cfg.Actuators.ReadAhead.Pins = pins
	cfg.Actuators.Verify.Window = units.Duration(time.Second)
	if mutate != nil {
		mutate(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	m := cluster.NewMDS(cfg, cluster.Runtime{ManualTicks: true}, "test", slog.New(slog.DiscardHandler))
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	tm := &testMDS{MDS: m, url: "http://" + m.Addr()}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := m.Stop(ctx); err != nil {
				t.Errorf("mds stop: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	tm.stop = stop
	return tm
}

func (m *testMDS) tick(t *testing.T, now time.Time) {
	t.Helper()
	for _, err := range m.Tick(context.Background(), now).Errors {
		t.Logf("tick: %v", err)
	}
}

// action returns the one set_read_ahead action for mp.
func (m *testMDS) action(t *testing.T, mp string) models.Action {
	t.Helper()
	var out []models.Action
	for _, a := range m.Actions().List(nil) {
		if a.Kind == models.ActionSetReadAhead && a.Params[actuator.ParamMountPoint] == mp {
			out = append(out, a)
		}
	}
	if len(out) != 1 {
		t.Fatalf("want one set_read_ahead action for %s, got %+v", mp, out)
	}
	return out[0]
}

// fakeTree is a /proc and /sys with two NFS mounts and a root ext4 one.
type fakeTree struct{ proc, sys string }

const mountinfo = `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
40 22 0:52 / /mnt/train rw,relatime shared:30 - nfs4 ds:/train rw,vers=4.1,rsize=1048576,wsize=1048576
41 22 0:53 / /mnt/infer rw,relatime shared:31 - nfs4 ds:/models rw,vers=4.1,rsize=1048576,wsize=1048576
`

func newFakeTree(t *testing.T) fakeTree {
	t.Helper()
	d := t.TempDir()
	ft := fakeTree{proc: filepath.Join(d, "proc"), sys: filepath.Join(d, "sys")}
	write := func(p, s string) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(ft.proc, "self/mountinfo"), mountinfo)
	for _, bdi := range []string{"0:52", "0:53", "8:1"} {
		write(filepath.Join(ft.sys, "class/bdi", bdi, "read_ahead_kb"), "128\n")
	}
	return ft
}

func (ft fakeTree) kb(t *testing.T, bdi string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ft.sys, "class/bdi", bdi, "read_ahead_kb"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// snapshot reads every file under dir.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func agentConfig(url, state string) readahead.Config {
	c := readahead.DefaultConfig()
	c.MDSURL = url
	c.Poll = units.Duration(time.Second)
	c.Lease = units.Duration(10 * time.Second)
	c.MinKB, c.MaxKB, c.MaxStepKB = 64, 16384, 2048
	c.StateFile = state
	return c
}

func newAgent(t *testing.T, cfg readahead.Config, ft fakeTree, clk *clock) *readahead.Agent {
	t.Helper()
	a, err := readahead.New(cfg, readahead.Options{ProcRoot: ft.proc, SysRoot: ft.sys, Node: "gpu01", Now: clk.now, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func sync1(t *testing.T, a *readahead.Agent) {
	t.Helper()
	if err := a.SyncOnce(context.Background()); err != nil {
		t.Fatalf("sync: %v", err)
	}
}

// TestAgentAppliesWithinBoundsAndRestores drives an agent over a fake
// sysfs with a real mds: a pinned value is applied in steps of at most
// max_step_kb and read back, the mds follows it to verifying; a value
// outside the agent's bounds is refused whatever the mds asks (nothing is
// written, the action fails naming the bounds); the original is restored
// when the mds is lost for longer than the lease, and on shutdown.
func TestAgentAppliesWithinBoundsAndRestores(t *testing.T) {
	if !testkit.OwnProcess(t) {
		return
	}
	ft := newFakeTree(t)
	m := startMDS(t, models.ModeAuto, []actuator.ReadAheadPin{
		{Node: "gpu01", MountPoint: "/mnt/train", KB: 4096},
		{Node: "gpu01", MountPoint: "/mnt/infer", KB: 65536}, // above the agent's max_kb
	}, nil)
	clk := &clock{t: time.Now()}
	state := filepath.Join(t.TempDir(), "ra.json")
	a := newAgent(t, agentConfig(m.url, state), ft, clk)

	sync1(t, a) // report: nothing asked yet
	m.tick(t, clk.now())
	if st := m.action(t, "/mnt/train").State; st != models.ActionRunning {
		t.Fatalf("train action is %s, want running", st)
	}
	sync1(t, a)
	if got := ft.kb(t, "0:52"); got != "2176" {
		t.Fatalf("first step: read_ahead_kb %s, want 2176 (128 + max_step_kb 2048)", got)
	}
	if _, err := os.Stat(state); err != nil {
		t.Fatalf("the original was not remembered before the write: %v", err)
	}
	sync1(t, a)
	if got := ft.kb(t, "0:52"); got != "4096" {
		t.Fatalf("second step: read_ahead_kb %s, want 4096", got)
	}
	sync1(t, a) // the mds learns what was read back on the next sync
	if got := ft.kb(t, "0:53"); got != "128" {
		t.Fatalf("out-of-bounds value was written: read_ahead_kb %s, want 128", got)
	}
	if got := ft.kb(t, "8:1"); got != "128" {
		t.Fatalf("an unmanaged mount was touched: %s", got)
	}
	var refused string
	for _, mt := range a.Mounts() {
		if mt.MountPoint == "/mnt/infer" {
			refused = mt.Refused
		}
		if mt.MountPoint == "/mnt/train" && (mt.CurrentKB != 4096 || mt.OriginalKB != 128) {
			t.Fatalf("train reported %+v", mt)
		}
	}
	if !strings.Contains(refused, "outside this agent's bounds [64, 16384]") {
		t.Fatalf("infer refusal %q", refused)
	}
	m.tick(t, clk.now())
	if a := m.action(t, "/mnt/train"); a.State != models.ActionVerifying {
		t.Fatalf("train action is %s, want verifying (%s)", a.State, a.Reason)
	}
	if a := m.action(t, "/mnt/infer"); a.State != models.ActionFailed || !strings.Contains(a.Reason, "refused") {
		t.Fatalf("infer action is %s (%s), want failed: refused", a.State, a.Reason)
	}
	m.tick(t, clk.now().Add(2*time.Second))
	if a := m.action(t, "/mnt/train"); a.State != models.ActionSucceeded {
		t.Fatalf("train action is %s, want succeeded (a pin is kept; %s)", a.State, a.Reason)
	}
	sync1(t, a)
	if got := ft.kb(t, "0:52"); got != "4096" {
		t.Fatalf("a succeeded pin is still published: read_ahead_kb %s, want 4096", got)
	}

	// the mds disappears: within the lease nothing changes, past it the
	// original is back and nothing is remembered
	m.stop()
	clk.add(5 * time.Second)
	if err := a.SyncOnce(context.Background()); err == nil {
		t.Fatal("sync with a stopped mds succeeded")
	}
	if got := ft.kb(t, "0:52"); got != "4096" {
		t.Fatalf("restored within the lease: %s", got)
	}
	clk.add(6 * time.Second)
	a.SyncOnce(context.Background())
	if got := ft.kb(t, "0:52"); got != "128" {
		t.Fatalf("after the lease: read_ahead_kb %s, want the original 128", got)
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Fatalf("state file still there after restoring everything: %v", err)
	}
}

// TestAgentShutdownRestoresAndCrashKeepsOriginal: a crashed agent's
// successor restores the value the first one found (from the state file),
// not the value it finds, on shutdown.
func TestAgentShutdownRestoresAndCrashKeepsOriginal(t *testing.T) {
	if !testkit.OwnProcess(t) {
		return
	}
	ft := newFakeTree(t)
	m := startMDS(t, models.ModeAuto, []actuator.ReadAheadPin{{Node: "gpu01", MountPoint: "/mnt/train", KB: 1024}}, nil)
	clk := &clock{t: time.Now()}
	state := filepath.Join(t.TempDir(), "ra.json")
	a := newAgent(t, agentConfig(m.url, state), ft, clk)
	sync1(t, a)
	m.tick(t, clk.now())
	sync1(t, a)
	if got := ft.kb(t, "0:52"); got != "1024" {
		t.Fatalf("read_ahead_kb %s, want 1024", got)
	}
	// crash: no Stop; a new agent starts from the state file
	b := newAgent(t, agentConfig(m.url, state), ft, clk)
	sync1(t, b)
	mt := b.Mounts()
	if len(mt) != 2 || mt[1].MountPoint != "/mnt/train" || mt[1].OriginalKB != 128 || mt[1].CurrentKB != 1024 {
		t.Fatalf("after a crash the agent reports %+v; want train original 128, current 1024", mt)
	}
	b.Start()
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	if got := ft.kb(t, "0:52"); got != "128" {
		t.Fatalf("after shutdown read_ahead_kb %s, want the original 128", got)
	}
}

// TestAgentDryRunWritesNothing: with set_read_ahead in dry-run the mds
// publishes the proposal as a dry-run target and the agent changes no
// file under its sysfs root (compared byte for byte) and writes no state.
func TestAgentDryRunWritesNothing(t *testing.T) {
	if !testkit.OwnProcess(t) {
		return
	}
	ft := newFakeTree(t)
	m := startMDS(t, models.ModeDryRun, []actuator.ReadAheadPin{{Node: "gpu01", MountPoint: "/mnt/train", KB: 4096}}, nil)
	clk := &clock{t: time.Now()}
	state := filepath.Join(t.TempDir(), "ra.json")
	a := newAgent(t, agentConfig(m.url, state), ft, clk)
	before := snapshot(t, filepath.Dir(ft.sys))
	for i := 0; i < 4; i++ {
		sync1(t, a)
		m.tick(t, clk.now())
		clk.add(time.Second)
	}
	if act := m.action(t, "/mnt/train"); act.State != models.ActionProposed || !act.DryRun {
		t.Fatalf("dry-run action is %s dry_run=%v", act.State, act.DryRun)
	}
	want := m.Actions().ReadAheadDesired("gpu01")
	if len(want.Targets) != 1 || !want.Targets[0].DryRun || want.Targets[0].KB != 4096 {
		t.Fatalf("desired state %+v, want one dry-run target of 4096", want)
	}
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	after := snapshot(t, filepath.Dir(ft.sys))
	if len(after) != len(before) {
		t.Fatalf("files changed: %d before, %d after", len(before), len(after))
	}
	for p, b := range before {
		if after[p] != b {
			t.Errorf("%s changed in dry-run: %q → %q", p, b, after[p])
		}
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Fatalf("dry-run wrote a state file: %v", err)
	}
}

// TestAgentNeedsActScope: the sync endpoint refuses a token without the
// act scope, which the agent counts as no contact with the mds.
func TestAgentNeedsActScope(t *testing.T) {
	if !testkit.OwnProcess(t) {
		return
	}
	ft := newFakeTree(t)
	dir := t.TempDir()
	tokQ, tokA := filepath.Join(dir, "q"), filepath.Join(dir, "a")
	os.WriteFile(tokQ, []byte("query-token-0123456789abcdef\n"), 0o600)
	os.WriteFile(tokA, []byte("act-token-0123456789abcdef0123\n"), 0o600)
	m := startMDS(t, models.ModeAuto, []actuator.ReadAheadPin{{Node: "gpu01", MountPoint: "/mnt/train", KB: 1024}}, func(c *cluster.MDSConfig) {
		c.Auth.Clients = []cluster.AuthClient{
			{Name: "grafana", TokenFile: tokQ, Scopes: []node.Scope{node.ScopeQuery}},
			{Name: "gpu-agents", TokenFile: tokA, Scopes: []node.Scope{node.ScopeAct}},
		}
	})
	clk := &clock{t: time.Now()}
	cfg := agentConfig(m.url, filepath.Join(dir, "ra.json"))
	cfg.TokenFile = tokQ
	a := newAgent(t, cfg, ft, clk)
	if err := a.SyncOnce(context.Background()); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("sync with a query token: %v, want 403", err)
	}
	cfg.TokenFile = tokA
	b := newAgent(t, cfg, ft, clk)
	sync1(t, b)
	m.tick(t, clk.now())
	sync1(t, b)
	if got := ft.kb(t, "0:52"); got != "1024" {
		t.Fatalf("read_ahead_kb %s, want 1024", got)
	}
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
}
