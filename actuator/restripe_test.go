package actuator

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/storage"
)

// hotFileCluster: file big has two components, on d0 and d1, at 400 B/s
// each; every device also holds four small files at 25 B/s. Loads 500,
// 500, 100, 100: mean 300, target 1.2 × 300 = 360. Each of big's
// components is above the target by itself, so no stripe move helps;
// three devices are not enough (100 + 800 / 3 = 367), restriped over all
// four (100 + 200 = 300) every device is under it.
func hotFileCluster(restripe bool) (*memMover, map[[2]string]float64) {
	m := cluster4()
	m.restripe = restripe
	heat := map[[2]string]float64{}
	m.addFile("big", 3000, "d0", "d1")
	heat[[2]string{"d0", "fh-big-0"}] = 400
	heat[[2]string{"d1", "fh-big-1"}] = 400
	for d := range 4 {
		for i := range 4 {
			n := fmt.Sprintf("s%d-%d", d, i)
			dev := fmt.Sprintf("d%d", d)
			m.addFile(n, 100, dev)
			heat[[2]string{dev, "fh-" + n + "-0"}] = 25
		}
	}
	return m, heat
}

const bigBytes = "big/0/3000big/1/3000"

func (r *rig) restripes() []models.Action {
	as, err := r.j.Actions(storage.ActionFilter{Kind: models.ActionRestripeFile})
	if err != nil {
		r.t.Fatal(err)
	}
	return as
}

// checkRestriped checks that big ends over width devices, one component
// each, with its bytes, its old components gone and one commit.
func checkRestriped(t *testing.T, m *memMover, width int) {
	t.Helper()
	l := m.layouts["big"]
	devs := devicesOf(l.Mirrors[0])
	if len(devs) != width || l.Generation != 2 {
		t.Fatalf("big is on %v at generation %d; want %d devices at generation 2", devs, l.Generation, width)
	}
	seen := map[string]bool{}
	for _, d := range devs {
		if seen[d] {
			t.Fatalf("big has two components on %s: %v", d, devs)
		}
		seen[d] = true
	}
	b, ok := m.mirrorBytes(devs, "big", m.tags["big#0"], 0)
	if !ok || string(b) != bigBytes {
		t.Fatalf("big reads back %q; want %q", b, bigBytes)
	}
	for k := range m.data {
		if strings.Contains(k, "|big") && !strings.Contains(k, "|big"+m.tags["big#0"]+"|") {
			t.Errorf("copy %s left behind", k)
		}
	}
	if len(m.commits) != 1 || m.commits["big#0@1"] != 1 {
		t.Errorf("commits %v; want big#0 committed once", m.commits)
	}
}

func TestEngineRestripesAHotFile(t *testing.T) {
	m, heat := hotFileCluster(true)
	r := newRig(t, m, rebalanceConfig(models.ModeAuto), "")
	r.runFor(30, heat, hotspot("d0", t0))
	ps := r.plans()
	if len(ps) != 1 || ps[0].Plan == nil || ps[0].Plan.Restripes != 1 || ps[0].Plan.Moves != 0 {
		t.Fatalf("plans %+v; want one rebalance with one restripe and no move", ps)
	}
	p := ps[0]
	if p.Plan.LowerBoundBytes <= 0 || p.Plan.LowerBoundBytes > p.Plan.Bytes || p.Plan.Bytes != 6000 {
		t.Errorf("plan bytes %d, lower bound %d; want 6000 over a positive bound at most that", p.Plan.Bytes, p.Plan.LowerBoundBytes)
	}
	if p.State != models.ActionSucceeded || p.Progress == nil || p.Progress.MovesDone != 1 || p.Progress.BytesMoved != 6000 {
		t.Fatalf("plan %s, progress %+v; want succeeded with its restripe done", p.State, p.Progress)
	}
	rs := r.restripes()
	if len(rs) != 1 || rs[0].State != models.ActionSucceeded || rs[0].Move.Phase != models.PhaseCleaned || rs[0].Move.Restripe == nil {
		t.Fatalf("restripes %+v; want one cleaned up", rs)
	}
	checkRestriped(t, m, 4)
	if got := rs[0].Move.Restripe.From; len(got) != 2 || got[0] != "d0" || got[1] != "d1" {
		t.Errorf("restripe from %v; want [d0 d1]", got)
	}
}

func TestEngineRestripeDryRunAndNoDriverSupport(t *testing.T) {
	m, heat := hotFileCluster(true)
	r := newRig(t, m, rebalanceConfig(models.ModeDryRun), "")
	r.runFor(10, heat, hotspot("d0", t0))
	if rs := r.restripes(); len(rs) != 1 || rs[0].State != models.ActionProposed {
		t.Fatalf("dry run: restripes %+v; want one proposed", rs)
	}
	if n := m.mutations(); n != 0 {
		t.Fatalf("dry run made %d mover calls %v; want none", n, m.calls)
	}
	// a driver that cannot restripe gets no restripe, and the plan says why
	m, heat = hotFileCluster(false)
	r = newRig(t, m, rebalanceConfig(models.ModeAuto), "")
	r.runFor(10, heat, hotspot("d0", t0))
	if rs := r.restripes(); len(rs) != 0 {
		t.Fatalf("restripes %+v with a driver that cannot; want none", rs)
	}
	ps := r.plans()
	if len(ps) == 0 || !strings.Contains(ps[0].Reason+strings.Join(ps[0].Plan.Notes, ";"), "driver cannot restripe") {
		t.Fatalf("plans %+v; want a note that the driver cannot restripe", ps)
	}
}

// A restripe whose commit is refused (the file's layout moved on at the
// MDS) is aborted: its new components go, the layout stays as it was.
func TestEngineRestripeAbortsWhenCommitRefused(t *testing.T) {
	m, heat := hotFileCluster(true)
	m.failNext["commit"] = fmt.Errorf("another client changed it: %w", ErrGenerationChanged)
	r := newRig(t, m, rebalanceConfig(models.ModeAuto), "")
	r.runFor(10, heat, hotspot("d0", t0))
	rs := r.restripes()
	if len(rs) != 1 || rs[0].State != models.ActionCancelled || rs[0].Move.Phase != models.PhaseAborted {
		t.Fatalf("restripes %+v; want one cancelled, aborted", rs)
	}
	if devs := devicesOf(m.layouts["big"].Mirrors[0]); len(devs) != 2 || m.layouts["big"].Generation != 1 {
		t.Errorf("big is on %v at generation %d; want its two old components at 1", devs, m.layouts["big"].Generation)
	}
	for k := range m.data {
		if strings.Contains(k, "|big~") {
			t.Errorf("new component %s left behind", k)
		}
	}
	if m.calls["abort"] == 0 {
		t.Error("no abort reached the driver")
	}
}

// TestEngineRestripeResumesAfterCrashAtEveryStep crashes the engine (on
// workers, each step journaled on its own) after 1, 2, … journal writes
// and starts a new one on the same journal: big ends restriped with its
// bytes, no copy is left behind and the commit happened once.
func TestEngineRestripeResumesAfterCrashAtEveryStep(t *testing.T) {
	for n := 1; n < 14; n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			m, heat := hotFileCluster(true)
			as, all := crashAndRestart(t, m, heat, n)
			var rs []models.Action
			for _, a := range all {
				if a.Kind == models.ActionRestripeFile {
					rs = append(rs, a)
				}
			}
			if len(as) != 1 || as[0].State != models.ActionSucceeded {
				t.Fatalf("after the restart: %+v; want one succeeded plan", as)
			}
			if len(rs) != 1 || rs[0].State != models.ActionSucceeded || rs[0].Move.Phase != models.PhaseCleaned {
				t.Fatalf("after the restart: restripes %+v; want one succeeded", rs)
			}
			checkRestriped(t, m, 4)
		})
	}
}

func TestEngineRestripesASaturatedFileOverEveryDevice(t *testing.T) {
	// big at 300 B/s per component, the small files at 10 B/s on d0..d2
	// and 25 on d3: loads 340, 340, 40, 100, mean 205, target 246; from
	// the heat three devices do (40 + 600 ÷ 3 = 240: d0, d1, d2). When the
	// finding sees d0 at its limit the 600 B/s are what d0 and d1 served,
	// not what big's readers ask: every device under the target without
	// big takes a component, d3 too (the same bytes).
	for _, tc := range []struct {
		util  float64
		width int
	}{{0.5, 3}, {1, 4}} {
		m, heat := hotFileCluster(true)
		heat[[2]string{"d0", "fh-big-0"}] = 300
		heat[[2]string{"d1", "fh-big-1"}] = 300
		for d := range 3 {
			for i := range 4 {
				heat[[2]string{fmt.Sprintf("d%d", d), fmt.Sprintf("fh-s%d-%d-0", d, i)}] = 10
			}
		}
		f := hotspot("d0", t0)
		f.Evidence = []models.Evidence{{Name: "utilization", Value: tc.util, Unit: "ratio"}}
		r := newRig(t, m, rebalanceConfig(models.ModeAuto), "")
		r.runFor(30, heat, f)
		ps := r.plans()
		if len(ps) != 1 || ps[0].Plan == nil || ps[0].Plan.Restripes != 1 || ps[0].Plan.Bytes != 6000 {
			t.Fatalf("utilization %.1f: plans %+v; want one rebalance restriping big's 6000 bytes", tc.util, ps)
		}
		checkRestriped(t, m, tc.width)
		censored := strings.Contains(strings.Join(ps[0].Plan.Notes, ";"), "lower bound")
		if censored != (tc.util >= saturatedUtil) {
			t.Errorf("utilization %.1f: notes %q; want the lower-bound note only when saturated", tc.util, ps[0].Plan.Notes)
		}
	}
}
