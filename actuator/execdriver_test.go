package actuator

import (
	"context"
	"crypto/rand"
	"encoding/json"
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
	x.checkFiles(x.d, data)
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

// checkFiles checks that every file of data is on the devices once, where
// its layout (through d) says, with its bytes, and nothing else is.
func (x *execMDS) checkFiles(d *ExecDriver, data map[string][]byte) {
	x.t.Helper()
	files := 0
	for dev := range 4 {
		dn := fmt.Sprintf("d%d", dev)
		es, _ := os.ReadDir(filepath.Join(x.root, "dev", dn))
		for _, en := range es {
			files++
			l, err := d.Locate(context.Background(), en.Name())
			if err != nil || l.Mirrors[0][0].Device != dn {
				x.t.Errorf("%s/%s is left behind (layout %+v, %v)", dn, en.Name(), l, err)
			} else if b, _ := os.ReadFile(filepath.Join(x.root, "dev", dn, en.Name())); string(b) != string(data[en.Name()]) {
				x.t.Errorf("%s on %s does not hold its bytes", en.Name(), dn)
			}
		}
	}
	if files != len(data) {
		x.t.Errorf("%d files on the devices; want %d", files, len(data))
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

// TestExecDriverPausesACopyUnderWay: Pause interrupts the copy command
// under way (SIGTERM to its process group; the toy MDS's copy keeps its
// part file and exits 75, as docs/actions.md asks of a command), and Copy
// reports not done, no error; while paused, Copy and Verify run no
// command and report not done; after the resume the copy goes on from its
// part file and ends byte-identical (verify matches).
func TestExecDriverPausesACopyUnderWay(t *testing.T) {
	x := newExecMDS(t, false)
	data := x.random(16 << 16) // 16 blocks of the toy's 64 KiB
	x.addFile("f", [][2]string{{"d0", "h0"}}, [][]byte{data})
	x.write(filepath.Join(x.root, "pace"), nil)
	m := models.Move{File: "f", From: "d0", To: "d2", Generation: 1, Bytes: int64(len(data))}
	req := CopyRequest{ID: "mv1", Move: m, RateLimit: 4 << 16} // 4 blocks/s: 4 s unpaused
	part, dst := filepath.Join(x.root, "dev", "d2", "f.part"), filepath.Join(x.root, "dev", "d2", "f")
	ctx := context.Background()
	type result struct {
		p   Progress
		err error
	}
	done := make(chan result, 1)
	go func() {
		p, err := x.d.Copy(ctx, req)
		done <- result{p, err}
	}()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if fi, err := os.Stat(part); err == nil && fi.Size() >= 1<<16 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the copy command wrote no block in 30 s")
		}
	}
	if err := x.d.Pause(ctx, req.ID, m, true); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(8 * time.Second): // kill_grace is 10 s: SIGTERM did it
		t.Fatal("Copy did not return within 8 s of the pause")
	}
	if r.err != nil || r.p.Done {
		t.Fatalf("the paused copy: %+v, %v; want not done, no error", r.p, r.err)
	}
	fi, err := os.Stat(part)
	if err != nil || fi.Size() == 0 || fi.Size() >= int64(len(data)) {
		t.Fatalf("part file after the pause: %v, %v; want part of the %d bytes kept", fi, err, len(data))
	}
	if _, err := os.Stat(dst); err == nil {
		t.Fatal("the copy is in place though it was paused")
	}
	kept := fi.Size()
	time.Sleep(500 * time.Millisecond)
	if fi, _ := os.Stat(part); fi.Size() != kept {
		t.Fatalf("the part file grew from %d to %d bytes after the pause: a child of the command runs on", kept, fi.Size())
	}
	calls := len(x.lines("calls.log"))
	if p, err := x.d.Copy(ctx, req); err != nil || p.Done {
		t.Errorf("copy while paused: %+v, %v; want not done", p, err)
	}
	if v, err := x.d.Verify(ctx, m); err != nil || v.Done {
		t.Errorf("verify while paused: %+v, %v; want not done", v, err)
	}
	if n := len(x.lines("calls.log")); n != calls {
		t.Errorf("the script was run %d times while the move was paused; want 0", n-calls)
	}
	if err := x.d.Pause(ctx, req.ID, m, false); err != nil {
		t.Fatal(err)
	}
	if p, err := x.d.Copy(ctx, req); err != nil || !p.Done {
		t.Fatalf("copy after the resume: %+v, %v; want done", p, err)
	}
	if rs := x.lines("resumes.log"); len(rs) != 1 || !strings.HasPrefix(rs[0], "f#0.0:d0>d2@1 ") || strings.HasSuffix(rs[0], " 0") {
		t.Errorf("resumes %q; want the copy to go on from its part file once", rs)
	}
	if v, err := x.d.Verify(ctx, m); err != nil || !v.Done || !v.Match {
		t.Errorf("verify after the resume: %+v, %v; want done and matching", v, err)
	}
	if b, _ := os.ReadFile(dst); string(b) != string(data) {
		t.Error("the copy differs from the source")
	}
}

// TestExecDriverPauseKillsAfterGrace: a copy command that ignores SIGTERM,
// and its child with it, are killed (SIGKILL to the process group)
// kill_grace after the pause; Copy reports not done, no error.
func TestExecDriverPauseKillsAfterGrace(t *testing.T) {
	dir := t.TempDir()
	c := DefaultExecConfig()
	c.Timeout = Duration(time.Minute)
	c.KillGrace = Duration(time.Second)
	c.Devices = []DeviceSpec{{Device: "aa", DS: "ds1"}, {Device: "bb", DS: "ds2"}}
	c.Commands = map[string][]string{}
	for _, s := range ExecSteps {
		c.Commands[s] = []string{"true"}
	}
	// an ignored signal stays ignored in the child
	c.Commands["copy"] = []string{"sh", "-c", `trap "" TERM; sleep 60 & echo $! >"$1"; wait; wait`, "-", filepath.Join(dir, "child")}
	d, err := NewExecDriver(ExecOptions{Config: c})
	if err != nil {
		t.Fatal(err)
	}
	m := models.Move{File: "f", From: "aa", To: "bb", Generation: 1, Bytes: 100}
	ctx := context.Background()
	done := make(chan error, 1)
	go func() {
		p, err := d.Copy(ctx, CopyRequest{ID: "mv1", Move: m})
		if err == nil && p.Done {
			err = errors.New("done")
		}
		done <- err
	}()
	var pid int
	for deadline := time.Now().Add(20 * time.Second); pid == 0; time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(filepath.Join(dir, "child"))
		fmt.Sscan(string(b), &pid)
		if time.Now().After(deadline) {
			t.Fatal("the copy command did not start its child in 20 s")
		}
	}
	start := time.Now()
	if err := d.Pause(ctx, "mv1", m, true); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the paused copy: %v; want not done, no error", err)
		}
	case <-time.After(9 * time.Second):
		t.Fatal("Copy did not return within 9 s of the pause (kill_grace 1 s)")
	}
	if took := time.Since(start); took < 900*time.Millisecond {
		t.Errorf("Copy returned %s after the pause; want after kill_grace (the command ignores SIGTERM)", took)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil || strings.Contains(string(b), ") Z ") {
			break // gone, or a zombie waiting for its new parent
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command's child %d still runs after the kill: %s", pid, b)
		}
	}
}

// TestExecDriverCancelStopsACopyUnderWay: an operator cancels a running
// rebalance while a move's copy command runs (paced, 4 s); the engine, on
// workers as in the mds, stops the command then (SIGTERM through Pause)
// rather than let it finish, and aborts the move: the copy and its part
// file are removed, nothing is committed, every file keeps its bytes.
func TestExecDriverCancelStopsACopyUnderWay(t *testing.T) {
	x := newExecMDS(t, false)
	heat, data := map[[2]string]float64{}, map[string][]byte{}
	for d := range 4 {
		n, rate, size := 4, 30.0, 100
		if d == 0 {
			n, rate, size = 6, 80, 16<<16 // 1 MiB: 4 s at 4 blocks/s
		}
		for i := range n {
			f, dev, h := fmt.Sprintf("s%d-%d", d, i), fmt.Sprintf("d%d", d), fmt.Sprintf("c%d%02d", d, i)
			data[f] = x.random(size)
			x.addFile(f, [][2]string{{dev, h}}, [][]byte{data[f]})
			heat[[2]string{dev, h}] = rate
		}
	}
	x.write(filepath.Join(x.root, "pace"), nil)
	dc := x.d.cfg
	for i := range dc.Devices {
		dc.Devices[i].BandwidthBytes = 2 << 20 // × device_share 0.25 ÷ 2 moves per device: 4 blocks/s
	}
	d, err := NewExecDriver(ExecOptions{Config: dc})
	if err != nil {
		t.Fatal(err)
	}
	j, err := storage.OpenJournal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	c := rebalanceConfig(models.ModeAuto)
	c.Move.Grace = 0
	e, err := New(Options{Config: c, Mover: d, Journal: j, Load: func() ([]models.Action, error) { return j.Actions(storage.ActionFilter{}) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer e.Stop(context.Background())
	hot := hotspot("d0", time.Now())
	tick := func() {
		var ds []models.StripeDelta
		for k, v := range heat {
			ds = append(ds, models.StripeDelta{StripeKey: models.StripeKey{DeviceID: k[0], FileHandle: k[1]}, Duration: 10 * time.Second, Read: models.StripeIO{BytesCompleted: uint64(v * 10)}})
		}
		e.ObserveStripes(ds)
		e.Reconcile(context.Background(), time.Now(), []models.Finding{hot})
		time.Sleep(100 * time.Millisecond)
	}
	copying := func() (plan string, part string) {
		ms, _ := j.Actions(storage.ActionFilter{Kind: models.ActionMoveStripe})
		for _, m := range ms {
			if m.State == models.ActionRunning && m.Move.Phase == models.PhaseCopying {
				p := filepath.Join(x.root, "dev", m.Move.To, m.Move.File+".part")
				if fi, err := os.Stat(p); err == nil && fi.Size() >= 1<<16 {
					return m.Parent, p
				}
			}
		}
		return "", ""
	}
	var plan string
	for deadline := time.Now().Add(60 * time.Second); plan == ""; {
		if time.Now().After(deadline) {
			t.Fatal("no copy under way within 60 s")
		}
		tick()
		plan, _ = copying()
	}
	if _, err := e.Decide(plan, "cancel", "ops", "maintenance", time.Now()); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; tick() {
		if p, ok := e.get(plan); ok && p.State.Terminal() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cancelled plan did not end within 60 s")
		}
	}
	if got := x.lines("interrupted.log"); len(got) == 0 {
		t.Error("no copy command was interrupted; want the cancel to stop the copy under way")
	}
	if cs := x.lines("commits.log"); len(cs) != 0 {
		t.Errorf("commits %q after the cancel; want none", cs)
	}
	ms, _ := j.Actions(storage.ActionFilter{Kind: models.ActionMoveStripe})
	for _, m := range ms {
		if m.State != models.ActionCancelled || m.Move.Phase != models.PhaseAborted {
			t.Errorf("move %s: %s in phase %s (%s); want cancelled, aborted", m.ID, m.State, m.Move.Phase, m.Reason)
		}
	}
	x.checkFiles(d, data)
}

// leadsAt is an HA gate that leads at a fixed epoch.
type leadsAt uint64

func (g leadsAt) Leading() (uint64, bool) { return uint64(g), true }

// TestExecDriverSuccessorAdoptsMovesInFlight: a leader (epoch 1, its own
// journal) rebalances through the toy MDS and dies, without its graceful
// stop, after 7, 9, 11 or 13 journal writes; a successor with an empty journal
// of its own (epoch 2) runs the takeover command, adopts the moves the
// MDS holds in flight and finishes or aborts each: every file keeps its
// bytes, nothing is left on the devices or in flight, each commit was
// applied once and no commit was asked again once applied (repeats.log),
// no move the dead leader had journaled committed is committed again, and
// a late commit of the deposed leader's epoch is refused.
func TestExecDriverSuccessorAdoptsMovesInFlight(t *testing.T) {
	adopted := 0
	for _, n := range []int{7, 9, 11, 13} { // copying; committed, not cleaned up
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			x := newExecMDS(t, false)
			heat, data := x.hotDevice()
			c := x.d.cfg
			c.Commands["takeover"] = []string{"bash", c.Commands["locate"][1], x.root, "takeover"}
			d, err := NewExecDriver(ExecOptions{Config: c})
			if err != nil {
				t.Fatal(err)
			}
			cfg := rebalanceConfig(models.ModeAuto)
			cfg.Move.Grace = 0
			cfg.Verify.Window = Duration(time.Second)
			hot := hotspot("d0", t0)
			now := t0
			run := func(j Journal, load func() ([]models.Action, error), epoch uint64, ticks int, die bool) {
				runEngine(t, Options{Config: cfg, Mover: d, Journal: j, Load: load, Gate: leadsAt(epoch)}, heat, hot, &now, ticks, die)
			}
			ja, err := storage.OpenJournal(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer ja.Close()
			run(&crashJournal{j: ja, left: n}, func() ([]models.Action, error) { return ja.Actions(storage.ActionFilter{}) }, 1, 6, true)
			// the moves the MDS holds in flight (copy begun, not cleaned
			// up or aborted), and those the dead leader journaled committed
			inFlight, committed := map[string]bool{}, map[string]string{}
			recs, _ := filepath.Glob(filepath.Join(x.root, "inflight", "*.json"))
			for _, p := range recs {
				var s ExecStep
				if b, err := os.ReadFile(p); err != nil || json.Unmarshal(b, &s) != nil || s.InFlight == nil {
					t.Fatalf("in-flight record %s: %v; want a copy step's JSON with in_flight", p, err)
				}
				inFlight[s.InFlight.ID] = true
			}
			left, _ := ja.Actions(storage.ActionFilter{Kind: models.ActionMoveStripe})
			for _, m := range left {
				switch m.Move.Phase {
				case models.PhaseCommitted, models.PhaseCleaned:
					committed[m.ID] = fmt.Sprintf("commit %s#%d.%d:%s>%s@%d", m.Move.File, m.Move.Mirror, m.Move.Component, m.Move.From, m.Move.To, m.Move.Generation)
				}
			}
			mark := len(x.lines("calls.log"))

			jb, err := storage.OpenJournal(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer jb.Close()
			run(jb, func() ([]models.Action, error) { return jb.Actions(storage.ActionFilter{}) }, 2, 14, false)
			took, _ := jb.Actions(storage.ActionFilter{})
			byID := map[string]models.Action{}
			for _, a := range took {
				byID[a.ID] = a
				if a.Move != nil && strings.HasPrefix(a.Reason, "taken over at epoch 2") {
					adopted++
				}
			}
			t.Logf("the leader died with %d moves in flight at the MDS (%d journaled committed)", len(inFlight), len(committed))
			for id := range inFlight {
				a, ok := byID[id]
				switch {
				case !ok:
					t.Errorf("move %s, in flight when the leader died, was not adopted", id)
				case !(a.State == models.ActionSucceeded && a.Move.Phase == models.PhaseCleaned) && a.Move.Phase != models.PhaseAborted:
					t.Errorf("adopted move %s ended %s in phase %s (%s); want cleaned or aborted", id, a.State, a.Move.Phase, a.Reason)
				}
			}
			for _, call := range x.lines("calls.log")[mark:] {
				for id, commit := range committed {
					if call == commit {
						t.Errorf("the successor asked %q again; the dead leader had journaled move %s committed", call, id)
					}
				}
			}
			for _, r := range x.lines("repeats.log") {
				t.Errorf("a commit was asked again once applied: %s", r)
			}
			seen := map[string]bool{}
			for _, cm := range x.lines("commits.log") {
				if seen[cm] {
					t.Errorf("%q applied twice", cm)
				}
				seen[cm] = true
			}
			if fl, _ := filepath.Glob(filepath.Join(x.root, "inflight", "*.json")); len(fl) != 0 {
				t.Errorf("%d moves still in flight at the MDS once quiet; want none", len(fl))
			}
			x.checkFiles(d, data)
			// the deposed leader wakes and commits: refused by the fence
			l, err := d.Locate(context.Background(), "s1-0")
			if err != nil {
				t.Fatal(err)
			}
			late := models.Move{File: "s1-0", From: l.Mirrors[0][0].Device, To: "d3", Generation: l.Generation}
			if err := d.Commit(context.Background(), late, 1); !errors.Is(err, ErrGenerationChanged) {
				t.Errorf("a commit at the deposed epoch 1: %v; want refused (exit 3)", err)
			}
			if l2, _ := d.Locate(context.Background(), "s1-0"); l2.Generation != l.Generation {
				t.Errorf("the deposed leader's commit changed the layout (generation %d → %d)", l.Generation, l2.Generation)
			}
		})
	}
	if adopted == 0 {
		t.Error("no move was adopted by the successor in any run; the test proves nothing")
	}
}
