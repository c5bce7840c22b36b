package actuator

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/storage"
)

// execMDS is the toy MDS of testdata/exec-mds.sh in a temp dir, four
// devices d0..d3 on ds0 and ds1, driven by the exec driver: real files,
// a real shell script as the operator's command for every step.
type execMDS struct {
	t    *testing.T
	root string
	d    *ExecDriver
	big  []byte // big's logical bytes, striped in 512-byte units
}

const execUnit = 512

// newExecMDS starts an empty toy MDS with the exec driver over it.
func newExecMDS(t *testing.T, restripe bool) *execMDS {
	t.Helper()
	script, err := filepath.Abs("testdata/exec-mds.sh")
	if err != nil {
		t.Fatal(err)
	}
	x := &execMDS{t: t, root: t.TempDir()}
	cmd := func(step string, args ...string) []string {
		return append([]string{"bash", script, x.root, step}, args...)
	}
	move := []string{"{{.File}}", "{{.Mirror}}", "{{.Component}}", "{{.From}}", "{{.To}}", "{{.Generation}}"}
	c := DefaultExecConfig()
	c.Timeout = Duration(30 * time.Second)
	c.Restripe = restripe
	c.Commands = map[string][]string{"locate": cmd("locate", "{{.File}}"), "stripes": cmd("stripes", "{{.Device}}"),
		"devices": cmd("devices"), "state": cmd("state", "{{.Device}}", "{{.DS}}", "{{.State}}")}
	for _, s := range []string{"copy", "verify", "commit", "cleanup", "abort"} {
		c.Commands[s] = cmd(s, move...)
	}
	if restripe {
		for _, s := range ExecRestripeSteps {
			c.Commands[s] = cmd(s)
		}
	}
	for i := range 4 {
		c.Devices = append(c.Devices, DeviceSpec{Device: fmt.Sprintf("d%d", i), Name: fmt.Sprintf("ds%d/nvme%dn1", i/2, i%2),
			DS: fmt.Sprintf("ds%d", i/2), Pool: "fast", CapacityBytes: 1e12})
	}
	if x.d, err = NewExecDriver(ExecOptions{Config: c}); err != nil {
		t.Fatal(err)
	}
	return x
}

// hotFile lays out hotFileCluster's files: big striped over d0 and d1
// (8192 random bytes, 400 B/s on each component), four small files of
// 100 random bytes on every device at 25 B/s.
func (x *execMDS) hotFile() map[[2]string]float64 {
	x.big = make([]byte, 8192)
	rand.Read(x.big)
	heat := map[[2]string]float64{{"d0", "b0"}: 400, {"d1", "b1"}: 400}
	x.addFile("big", [][2]string{{"d0", "b0"}, {"d1", "b1"}}, dealt(x.big, 2))
	for d := range 4 {
		for i := range 4 {
			dev, h := fmt.Sprintf("d%d", d), fmt.Sprintf("a%d%d", d, i)
			x.addFile(fmt.Sprintf("s%d-%d", d, i), [][2]string{{dev, h}}, [][]byte{x.random(100)})
			heat[[2]string{dev, h}] = 25
		}
	}
	return heat
}

// hotDevice lays out hotCluster's files (100 random bytes each): twelve
// on d0 at 50 B/s, six on every other device at 30.
func (x *execMDS) hotDevice() (map[[2]string]float64, map[string][]byte) {
	heat, data := map[[2]string]float64{}, map[string][]byte{}
	for d := range 4 {
		n, rate := 6, 30.0
		if d == 0 {
			n, rate = 12, 50
		}
		for i := range n {
			f, dev, h := fmt.Sprintf("s%d-%d", d, i), fmt.Sprintf("d%d", d), fmt.Sprintf("c%d%02d", d, i)
			data[f] = x.random(100)
			x.addFile(f, [][2]string{{dev, h}}, [][]byte{data[f]})
			heat[[2]string{dev, h}] = rate
		}
	}
	return heat, data
}

func (x *execMDS) random(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// dealt splits data into w components, unit by unit round-robin.
func dealt(data []byte, w int) [][]byte {
	out := make([][]byte, w)
	for u := 0; u*execUnit < len(data); u++ {
		out[u%w] = append(out[u%w], data[u*execUnit:min((u+1)*execUnit, len(data))]...)
	}
	return out
}

func (x *execMDS) write(p string, b []byte) {
	x.t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		x.t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		x.t.Fatal(err)
	}
}

// addFile writes file's one mirror: components (device, handle) holding
// parts, at generation 1.
func (x *execMDS) addFile(file string, comps [][2]string, parts [][]byte) {
	var lines strings.Builder
	for j, c := range comps {
		x.write(filepath.Join(x.root, "dev", c[0], file), parts[j])
		fmt.Fprintf(&lines, "%s %s %d %s\n", c[0], c[1], len(parts[j]), file)
	}
	x.write(filepath.Join(x.root, "meta", file+".m0"), []byte(lines.String()))
	x.write(filepath.Join(x.root, "meta", file+".gen"), []byte("1\n"))
	x.write(filepath.Join(x.root, "meta", file+".unit"), []byte(fmt.Sprintln(execUnit)))
}

// lines returns the lines of ROOT/name ("" for none).
func (x *execMDS) lines(name string) []string {
	b, err := os.ReadFile(filepath.Join(x.root, name))
	if os.IsNotExist(err) {
		return nil
	} else if err != nil {
		x.t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// readBig reads big's layout through locate and its bytes back through
// its components, unit by unit.
func (x *execMDS) readBig() (Layout, []byte) {
	x.t.Helper()
	l, err := x.d.Locate(context.Background(), "big")
	if err != nil {
		x.t.Fatal(err)
	}
	comps := l.Mirrors[0]
	var parts [][]byte
	for _, c := range comps {
		b, err := os.ReadFile(filepath.Join(x.root, "dev", c.Device, c.Path))
		if err != nil {
			x.t.Fatalf("component %+v: %v", c, err)
		}
		parts = append(parts, b)
	}
	var out []byte
	for u := 0; ; u++ {
		p := parts[u%len(parts)]
		off := (u / len(parts)) * execUnit
		if off >= len(p) {
			break
		}
		out = append(out, p[off:min(off+execUnit, len(p))]...)
	}
	return l, out
}

// left lists the files of the devices that no layout references.
func (x *execMDS) left() []string {
	x.t.Helper()
	var out []string
	for d := range 4 {
		dev := fmt.Sprintf("d%d", d)
		es, _ := os.ReadDir(filepath.Join(x.root, "dev", dev))
		for _, e := range es {
			if strings.HasPrefix(e.Name(), "s") && !strings.Contains(e.Name(), ".part") {
				continue // the small files stay where they are
			}
			l, _ := x.d.Locate(context.Background(), "big")
			if !holds(l, dev, e.Name()) {
				out = append(out, dev+"/"+e.Name())
			}
		}
	}
	return out
}

func holds(l Layout, dev, path string) bool {
	for _, c := range l.Mirrors[0] {
		if c.Device == dev && c.Path == path {
			return true
		}
	}
	return false
}

// checkRestriped checks big ends over four devices at generation
// 2 with its bytes, nothing else left on the devices, the commit applied
// once.
func (x *execMDS) checkRestriped() {
	x.t.Helper()
	l, b := x.readBig()
	if devs := devicesOf(l.Mirrors[0]); len(devs) != 4 || l.Generation != 2 {
		x.t.Fatalf("big is on %v at generation %d; want 4 devices at generation 2", devs, l.Generation)
	}
	if string(b) != string(x.big) {
		x.t.Fatalf("big reads back %d bytes that differ from its %d", len(b), len(x.big))
	}
	if left := x.left(); len(left) != 0 {
		x.t.Errorf("left on the devices: %v; want only big's new components", left)
	}
	if cs := x.lines("commits.log"); len(cs) != 1 || !strings.HasPrefix(cs[0], "restripe_commit big#0:d0,d1>") {
		x.t.Errorf("commits applied %q; want big's restripe once", cs)
	}
	calls := 0
	for _, c := range x.lines("calls.log") {
		if strings.HasPrefix(c, "restripe_commit ") {
			calls++
		}
	}
	if calls != 1 {
		x.t.Errorf("restripe_commit called %d times; want once", calls)
	}
}

func restripesIn(all []models.Action) (rs []models.Action) {
	for _, a := range all {
		if a.Kind == models.ActionRestripeFile {
			rs = append(rs, a)
		}
	}
	return rs
}

// TestExecDriverRestripesThroughAScript: with actuators.exec.restripe on,
// a rebalance restripes big over the four devices through the operator's
// script (restripe_copy, restripe_verify, restripe_commit,
// restripe_cleanup); off, the script is never handed a restripe step and
// the plan says the driver cannot.
func TestExecDriverRestripesThroughAScript(t *testing.T) {
	x := newExecMDS(t, true)
	heat := x.hotFile()
	plans, all := crashAndRestart(t, x.d, heat, 1<<20)
	rs := restripesIn(all)
	if len(plans) != 1 || plans[0].State != models.ActionSucceeded || len(rs) != 1 || rs[0].State != models.ActionSucceeded || rs[0].Move.Phase != models.PhaseCleaned {
		t.Fatalf("plans %+v, restripes %+v; want one succeeded plan with its restripe cleaned up", plans, rs)
	}
	x.checkRestriped()
	var steps []string
	for _, c := range x.lines("calls.log") {
		if s, _, _ := strings.Cut(c, " "); strings.HasPrefix(s, "restripe_") && (len(steps) == 0 || steps[len(steps)-1] != s) {
			steps = append(steps, s)
		}
	}
	if got := strings.Join(steps, ","); got != "restripe_copy,restripe_verify,restripe_commit,restripe_cleanup" {
		t.Errorf("restripe steps %s; want copy, verify, commit, cleanup in that order", got)
	}

	x = newExecMDS(t, false)
	heat = x.hotFile()
	plans, all = crashAndRestart(t, x.d, heat, 1<<20)
	if rs := restripesIn(all); len(rs) != 0 {
		t.Fatalf("restripes %+v with exec restripe off; want none", rs)
	}
	if len(plans) == 0 || !strings.Contains(strings.Join(plans[0].Plan.Notes, ";"), "driver cannot restripe") {
		t.Errorf("plans %+v; want a note that the driver cannot restripe", plans)
	}
	for _, c := range x.lines("calls.log") {
		if strings.HasPrefix(c, "restripe_") {
			t.Fatalf("the script was called %q with restripe off", c)
		}
	}
}

// phaseSteps are the restripe steps a journaled phase has finished.
var phaseSteps = map[models.MovePhase][]string{
	models.PhaseCopied:    {"restripe_copy"},
	models.PhaseVerified:  {"restripe_copy", "restripe_verify"},
	models.PhaseCommitted: {"restripe_copy", "restripe_verify", "restripe_commit"},
	models.PhaseCleaned:   {"restripe_copy", "restripe_verify", "restripe_commit", "restripe_cleanup"},
}

// TestExecDriverRestripeResumesAfterCrash kills the engine (no graceful
// stop) after 1, 2, … journal writes and starts a new one on the same
// journal and the same toy MDS: big ends restriped with its bytes, nothing
// left behind, the commit applied once, and no step the journal had
// recorded as finished runs again after the restart.
func TestExecDriverRestripeResumesAfterCrash(t *testing.T) {
	for n := 1; n < 8; n++ { // pending, copying, copied, verified, committed, cleaned
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			x := newExecMDS(t, true)
			heat := x.hotFile()
			var phase models.MovePhase
			mark := 0
			plans, all := restartAfter(t, x.d, heat, n, true, func(j *storage.Journal) {
				as, err := j.Actions(storage.ActionFilter{Kind: models.ActionRestripeFile})
				if err != nil {
					t.Fatal(err)
				}
				if len(as) == 1 {
					phase = as[0].Move.Phase
				}
				mark = len(x.lines("calls.log"))
			})
			rs := restripesIn(all)
			if len(plans) != 1 || plans[0].State != models.ActionSucceeded || len(rs) != 1 || rs[0].State != models.ActionSucceeded {
				t.Fatalf("after the restart: plans %+v, restripes %+v; want one succeeded each", plans, rs)
			}
			x.checkRestriped()
			t.Logf("crashed with the restripe journaled %q", phase)
			for _, c := range x.lines("calls.log")[mark:] {
				for _, done := range phaseSteps[phase] {
					if strings.HasPrefix(c, done+" ") {
						t.Errorf("journaled %s before the crash, yet %q ran after the restart", phase, c)
					}
				}
			}
		})
	}
}

// TestExecDriverRestripeCommitAnswerLost: the script applies the
// restripe's commit but its answer is lost (exit 1): the engine retries,
// locate shows the mirror on its new devices, and the commit is not asked
// again.
func TestExecDriverRestripeCommitAnswerLost(t *testing.T) {
	x := newExecMDS(t, true)
	heat := x.hotFile()
	x.write(filepath.Join(x.root, "lose.restripe_commit"), nil)
	plans, all := crashAndRestart(t, x.d, heat, 1<<20)
	if rs := restripesIn(all); len(plans) != 1 || plans[0].State != models.ActionSucceeded || len(rs) != 1 || rs[0].State != models.ActionSucceeded {
		t.Fatalf("plans %+v, restripes %+v; want one succeeded each", plans, rs)
	}
	if _, err := os.Stat(filepath.Join(x.root, "lose.restripe_commit")); err == nil {
		t.Fatal("the commit's answer was never lost")
	}
	x.checkRestriped()
}

// TestExecDriverRestripeRollsBack: a restripe whose commit the script
// refuses (exit 3: the MDS's layout moved on) or whose copy fails for good
// (exit 5) is aborted through restripe_abort: big stays on its two
// components at generation 1 with its bytes, no new component is left on
// any device, nothing was committed.
func TestExecDriverRestripeRollsBack(t *testing.T) {
	for _, tc := range []struct {
		step, code string
		state      models.ActionState
	}{{"restripe_commit", "3", models.ActionCancelled}, {"restripe_copy", "5", models.ActionFailed}} {
		t.Run(tc.step, func(t *testing.T) {
			x := newExecMDS(t, true)
			heat := x.hotFile()
			x.write(filepath.Join(x.root, "fail."+tc.step), []byte(tc.code))
			_, all := crashAndRestart(t, x.d, heat, 1<<20)
			rs := restripesIn(all)
			if len(rs) == 0 {
				t.Fatal("no restripe planned")
			}
			for _, r := range rs {
				if r.State != tc.state || r.Move.Phase != models.PhaseAborted {
					t.Errorf("restripe %s %s in phase %s (%s); want %s, aborted", r.ID, r.State, r.Move.Phase, r.Reason, tc.state)
				}
			}
			l, b := x.readBig()
			if devs := devicesOf(l.Mirrors[0]); len(devs) != 2 || l.Generation != 1 || string(b) != string(x.big) {
				t.Errorf("big is on %v at generation %d (bytes equal: %v); want its two old components at 1 with its bytes", devs, l.Generation, string(b) == string(x.big))
			}
			if left := x.left(); len(left) != 0 {
				t.Errorf("left on the devices: %v; want none", left)
			}
			if cs := x.lines("commits.log"); len(cs) != 0 {
				t.Errorf("commits applied %q; want none", cs)
			}
			aborts := 0
			for _, c := range x.lines("calls.log") {
				if strings.HasPrefix(c, "restripe_abort ") {
					aborts++
				}
			}
			if aborts == 0 {
				t.Error("no restripe_abort reached the script")
			}
		})
	}
}

// TestExecDriverMovesThroughAScript: a rebalance of a hot device moves
// stripes through the operator's script (copy, verify, commit, cleanup):
// every file ends on one device with its bytes, the old copies are gone
// and each commit was applied once.
func TestExecDriverMovesThroughAScript(t *testing.T) {
	x := newExecMDS(t, false)
	heat, data := x.hotDevice()
	plans, all := crashAndRestart(t, x.d, heat, 1<<20)
	moved := 0
	for _, a := range all {
		if a.Kind == models.ActionMoveStripe && a.State == models.ActionSucceeded && a.Move.Phase == models.PhaseCleaned {
			moved++
		}
	}
	if len(plans) != 1 || plans[0].State != models.ActionSucceeded || moved == 0 || moved != plans[0].Plan.Moves {
		t.Fatalf("plans %+v, %d moves cleaned up; want one succeeded plan with all its moves", plans, moved)
	}
	files := 0
	for d := range 4 {
		dev := fmt.Sprintf("d%d", d)
		es, _ := os.ReadDir(filepath.Join(x.root, "dev", dev))
		for _, e := range es {
			files++
			l, err := x.d.Locate(context.Background(), e.Name())
			if err != nil || l.Mirrors[0][0].Device != dev {
				t.Errorf("%s/%s is left behind (layout %+v, %v)", dev, e.Name(), l, err)
				continue
			}
			if b, _ := os.ReadFile(filepath.Join(x.root, "dev", dev, e.Name())); string(b) != string(data[e.Name()]) {
				t.Errorf("%s on %s does not hold its bytes", e.Name(), dev)
			}
		}
	}
	if files != len(data) {
		t.Errorf("%d files on the devices; want %d", files, len(data))
	}
	cs := x.lines("commits.log")
	seen := map[string]bool{}
	for _, c := range cs {
		if seen[c] {
			t.Errorf("%q applied twice", c)
		}
		seen[c] = true
	}
	if len(cs) != moved {
		t.Errorf("%d commits applied for %d moves", len(cs), moved)
	}
}

// mutatingCalls lists the script's calls other than locate, stripes and
// devices.
func (x *execMDS) mutatingCalls() (out []string) {
	for _, c := range x.lines("calls.log") {
		if s, _, _ := strings.Cut(c, " "); s != "locate" && s != "stripes" && s != "devices" {
			out = append(out, c)
		}
	}
	return out
}

// TestExecDriverRestripeModes: in dry-run the restripe is proposed and
// the script is only asked to locate and list; in approve it waits,
// asking nothing more, until an operator approves, then restripes.
func TestExecDriverRestripeModes(t *testing.T) {
	for _, mode := range []models.ActionMode{models.ModeDryRun, models.ModeApprove} {
		t.Run(string(mode), func(t *testing.T) {
			x := newExecMDS(t, true)
			heat := x.hotFile()
			j, err := storage.OpenJournal(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			c := rebalanceConfig(mode)
			c.Move.Grace = 0
			e, err := New(Options{Config: c, Mover: x.d, Journal: j, Inline: true,
				Load: func() ([]models.Action, error) { return j.Actions(storage.ActionFilter{}) }})
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer e.Stop(context.Background())
			now := t0
			tick := func(n int) {
				for range n {
					var ds []models.StripeDelta
					for k, v := range heat {
						ds = append(ds, models.StripeDelta{StripeKey: models.StripeKey{DeviceID: k[0], FileHandle: k[1]}, Duration: 10 * time.Second, Read: models.StripeIO{BytesCompleted: uint64(v * 10)}})
					}
					e.ObserveStripes(ds)
					e.Reconcile(context.Background(), now, []models.Finding{hotspot("d0", t0)})
					now = now.Add(10 * time.Second)
				}
			}
			tick(6)
			rs, _ := j.Actions(storage.ActionFilter{Kind: models.ActionRestripeFile})
			want := models.ActionProposed
			if mode == models.ModeApprove {
				want = models.ActionAwaitingApproval
			}
			if len(rs) != 1 || rs[0].State != want {
				t.Fatalf("restripes %+v; want one %s", rs, want)
			}
			if m := x.mutatingCalls(); len(m) != 0 {
				t.Fatalf("%s: the script was asked %q; want only locate, stripes and devices", mode, m)
			}
			if mode == models.ModeDryRun {
				return
			}
			if _, err := e.Decide(rs[0].Parent, "approve", "ops", "", now); err != nil {
				t.Fatal(err)
			}
			tick(12)
			x.checkRestriped()
		})
	}
}

// TestExecDriverDevicesAndState: the devices command reports each
// device's use and the state the state command set at the MDS, so a new
// driver (a restarted mds) sees a drained device as drained.
func TestExecDriverDevicesAndState(t *testing.T) {
	x := newExecMDS(t, false)
	x.hotFile()
	if !x.d.Capabilities().SetState {
		t.Fatal("the driver says it cannot set states with a state command")
	}
	if err := x.d.SetState(context.Background(), models.Subject{Kind: models.SubjectDevice, ID: "d2"}, StateDraining); err != nil {
		t.Fatal(err)
	}
	d2, err := NewExecDriver(ExecOptions{Config: x.d.cfg})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := d2.Devices(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		want, used := StateOnline, int64(4*100)
		if d.ID == "d0" || d.ID == "d1" {
			used += 4096
		}
		if d.ID == "d2" {
			want = StateDraining
		}
		if d.State != want || d.UsedBytes != used || d.CapacityBytes != 1e12 {
			t.Errorf("%s: state %s, used %d, capacity %d; want %s, %d, 1e12", d.ID, d.State, d.UsedBytes, d.CapacityBytes, want, used)
		}
	}
}

// TestExecDriverCommandContract: a command gets the step's values as
// argv templates, BALLAST_* variables and JSON on stdin, and its exit
// code says what happened (docs/actions.md, the exec driver).
func TestExecDriverCommandContract(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	c := DefaultExecConfig()
	c.Timeout = Duration(2 * time.Second)
	c.Devices = []DeviceSpec{{Device: "aa", DS: "ds1"}, {Device: "bb", DS: "ds2"}}
	c.Commands = map[string][]string{}
	for _, s := range ExecSteps {
		c.Commands[s] = []string{"sh", "-c", `exit "$(cat "$1")"`, "-", filepath.Join(dir, "code")}
	}
	c.Commands["copy"] = []string{"sh", "-c", `echo "$1 $2 $BALLAST_MOVE $BALLAST_RATE $BALLAST_FROM_DS>$BALLAST_TO_DS" >"$3"; cat >>"$3"; exit "$(cat "$4")"`,
		"-", "{{.File}}#{{.Mirror}}.{{.Component}}", "{{.Rate}}", out, filepath.Join(dir, "code")}
	c.Commands["verify"] = []string{"sh", "-c", `printf 'sha256:ab\nsha256:%s\n' "$1"; exit "$(cat "$2")"`, "-", "{{.To}}", filepath.Join(dir, "code")}
	d, err := NewExecDriver(ExecOptions{Config: c})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	m := models.Move{File: "data/f", Mirror: 1, Component: 2, From: "aa", To: "bb", Generation: 7, Bytes: 100}
	code := func(s string) { os.WriteFile(filepath.Join(dir, "code"), []byte(s), 0o644) }

	code("0")
	p, err := d.Copy(ctx, CopyRequest{Move: m, RateLimit: 1.5e6})
	if err != nil || !p.Done || p.Bytes != 100 {
		t.Fatalf("copy: %+v, %v; want done, 100 bytes", p, err)
	}
	b, _ := os.ReadFile(out)
	got := string(b)
	for _, want := range []string{"data/f#1.2 1500000 data/f#1.2:aa>bb@7 1500000 ds1>ds2\n", `"step":"copy"`, `"move":"data/f#1.2:aa>bb@7"`, `"rate":1500000`, `"new_generation":8`} {
		if !strings.Contains(got, want) {
			t.Errorf("the copy command got %q; want it to contain %q", got, want)
		}
	}
	v, err := d.Verify(ctx, m)
	if err != nil || !v.Done || v.Match || v.Checksum != "sha256:ab" || v.CopyChecksum != "sha256:bb" {
		t.Errorf("verify: %+v, %v; want done, not matching (sha256:ab against sha256:bb)", v, err)
	}
	m.To = "ab"
	if v, err = d.Verify(ctx, m); err != nil || !v.Match {
		t.Errorf("verify: %+v, %v; want a match", v, err)
	}
	code("75")
	if p, err = d.Copy(ctx, CopyRequest{Move: m}); err != nil || p.Done {
		t.Errorf("copy exit 75: %+v, %v; want not done, no error", p, err)
	}
	for _, tc := range []struct {
		code string
		is   func(error) bool
		want string
	}{
		{"3", func(err error) bool { return errors.Is(err, ErrGenerationChanged) }, "ErrGenerationChanged"},
		{"4", func(err error) bool { return errors.Is(err, ErrNotFound) }, "ErrNotFound"},
		{"5", IsPermanent, "permanent"},
		{"1", func(err error) bool { return err != nil && !IsPermanent(err) }, "retryable"},
		{"75", func(err error) bool { return err != nil && !IsPermanent(err) }, "retryable (75 means not done only for copy and verify)"},
	} {
		code(tc.code)
		if err := d.Commit(ctx, m, 3); !tc.is(err) {
			t.Errorf("commit exit %s: %v; want %s", tc.code, err, tc.want)
		}
	}
	c.Commands["cleanup"] = []string{"sleep", "10"}
	d, _ = NewExecDriver(ExecOptions{Config: c})
	start := time.Now()
	if err := d.Cleanup(ctx, m); err == nil || IsPermanent(err) || time.Since(start) > 8*time.Second {
		t.Errorf("a command past the timeout: %v after %s; want a retryable error after about 2s", err, time.Since(start))
	}
}
