package actuator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/storage"
)

// hotCluster lays out 12 one-component files on d0 at 50 B/s each and 6 on
// each other device at 30 B/s: d0 carries 600 of 1140 B/s, mean 285.
// With target 1.2 (342) d0 must shed 258 B/s: 6 stripes of 50, and the
// three cool devices can take 3 each without passing 342.
func hotCluster() (*memMover, map[[2]string]float64) {
	m := cluster4()
	heat := map[[2]string]float64{}
	for i := range 12 {
		n := fmt.Sprintf("a%02d", i)
		m.addFile(n, 100, "d0")
		heat[[2]string{"d0", "fh-" + n + "-0"}] = 50
	}
	for d := 1; d < 4; d++ {
		for i := range 6 {
			n := fmt.Sprintf("f%d-%d", d, i)
			dev := fmt.Sprintf("d%d", d)
			m.addFile(n, 100, dev)
			heat[[2]string{dev, "fh-" + n + "-0"}] = 30
		}
	}
	return m, heat
}

func rebalanceConfig(mode models.ActionMode) Config {
	c := testConfig(mode)
	c.Rebalance.TargetMaxMean = 1.2
	return c
}

// runFor ticks n times with the heat and the finding.
func (r *rig) runFor(n int, heat map[[2]string]float64, fs ...models.Finding) {
	for range n {
		r.heat(heat)
		r.tick(fs...)
	}
}

func TestEngineAutoRebalances(t *testing.T) {
	m, heat := hotCluster()
	r := newRig(t, m, rebalanceConfig(models.ModeAuto), "")
	hot := hotspot("d0", t0)
	r.runFor(20, heat, hot)
	ps := r.plans()
	if len(ps) != 1 {
		t.Fatalf("got %d plans; want 1: %+v", len(ps), ps)
	}
	p := ps[0]
	if p.Kind != models.ActionRebalance || p.State != models.ActionSucceeded {
		t.Fatalf("plan %s is %s %s (%s); want a succeeded rebalance", p.ID, p.Kind, p.State, p.Reason)
	}
	if p.Plan.Moves != 6 || p.Plan.Bytes != 600 || p.Plan.LowerBoundBytes != 600 {
		t.Errorf("plan: %d moves, %d bytes, lower bound %d; want 6 moves of 600 bytes, bound 600", p.Plan.Moves, p.Plan.Bytes, p.Plan.LowerBoundBytes)
	}
	if p.Progress.MovesDone != 6 || p.Progress.BytesMoved != 600 {
		t.Errorf("progress %+v; want 6 moves done, 600 bytes", p.Progress)
	}
	if p.Plan.MaxMeanPredicted > 1.2 {
		t.Errorf("predicted max/mean %.3f; want ≤ 1.2", p.Plan.MaxMeanPredicted)
	}
	onD0 := 0
	for name, l := range m.layouts {
		dev := l.Mirrors[0][0].Device
		if dev == "d0" {
			onD0++
		}
		if string(m.data[m.key(dev, name, 0, 0)]) != fmt.Sprintf("%s/0/100", name) {
			t.Errorf("%s on %s holds %q; want its original bytes", name, dev, m.data[m.key(dev, name, 0, 0)])
		}
	}
	if onD0 != 6 {
		t.Errorf("%d files left on d0; want 6", onD0)
	}
	if len(m.data) != len(m.layouts) {
		t.Errorf("%d copies for %d files; want no copy left behind", len(m.data), len(m.layouts))
	}
	for k, n := range m.commits {
		if n != 1 {
			t.Errorf("commit %s happened %d times; want once", k, n)
		}
	}
	for _, mv := range r.moves() {
		if mv.State != models.ActionSucceeded || mv.Move.Phase != models.PhaseCleaned || !strings.HasPrefix(mv.Move.Checksum, "sha256:") {
			t.Errorf("move %s: %s, phase %s, checksum %q; want succeeded, cleaned, a sha256", mv.ID, mv.State, mv.Move.Phase, mv.Move.Checksum)
		}
	}
}

// TestEngineIgnoresNetworkPathHotspots: a hotspot finding about a
// network path (a DS's port full of another tenant's traffic) plans no
// rebalance, even where the stripes' heat alone would justify one.
func TestEngineIgnoresNetworkPathHotspots(t *testing.T) {
	m, heat := hotCluster()
	r := newRig(t, m, rebalanceConfig(models.ModeAuto), "")
	hot := hotspot("d0", t0)
	hot.Evidence = []models.Evidence{{Name: evidenceNetworkPath, Value: 1}}
	r.runFor(5, heat, hot)
	if ps := r.plans(); len(ps) != 0 {
		t.Fatalf("got %d plans; want none for a network path: %+v", len(ps), ps)
	}
}

func TestEngineDryRunChangesNothing(t *testing.T) {
	m, heat := hotCluster()
	r := newRig(t, m, rebalanceConfig(models.ModeDryRun), "")
	hot := hotspot("d0", t0)
	r.runFor(30, heat, hot)
	if n := m.mutations(); n != 0 {
		t.Errorf("dry-run called the mover's mutating methods %d times (%v); want 0", n, m.calls)
	}
	ps := r.plans()
	if len(ps) != 1 || ps[0].State != models.ActionProposed || !ps[0].DryRun || ps[0].Plan.Moves != 6 {
		t.Fatalf("got %+v; want one dry-run proposal of 6 moves", ps)
	}
	if _, err := r.e.Decide(ps[0].ID, "approve", "op", "", r.now); !errors.Is(err, ErrConflict) {
		t.Errorf("approving a dry-run: got %v; want a conflict", err)
	}
	// the hot spot ends: the proposal is withdrawn
	hot.End = r.now
	r.runFor(3, heat, hot)
	ps = r.plans()
	if ps[0].State != models.ActionCancelled || !strings.Contains(ps[0].Reason, "no longer needed") {
		t.Errorf("after the finding ended: %s (%s); want cancelled as no longer needed", ps[0].State, ps[0].Reason)
	}
	if n := m.mutations(); n != 0 {
		t.Errorf("dry-run mutated %d times; want 0", n)
	}
}

func TestEngineApproveWaitsForAnOperator(t *testing.T) {
	m, heat := hotCluster()
	r := newRig(t, m, rebalanceConfig(models.ModeApprove), "")
	hot := hotspot("d0", t0)
	r.runFor(20, heat, hot)
	ps := r.plans()
	if len(ps) != 1 || ps[0].State != models.ActionAwaitingApproval {
		t.Fatalf("got %+v; want one plan awaiting approval", ps)
	}
	if n := m.mutations(); n != 0 {
		t.Fatalf("before approval the mover was called %d times; want 0", n)
	}
	if _, err := r.e.Decide("nope", "approve", "op", "", r.now); !errors.Is(err, ErrUnknown) {
		t.Errorf("approve unknown: got %v; want ErrUnknown", err)
	}
	a, err := r.e.Decide(ps[0].ID, "approve", "alice", "looks right", r.now)
	if err != nil || a.State != models.ActionApproved || a.Decision.By != "alice" {
		t.Fatalf("approve: got %+v, %v", a, err)
	}
	if _, err := r.e.Decide(ps[0].ID, "approve", "alice", "", r.now); !errors.Is(err, ErrConflict) {
		t.Errorf("approving twice: got %v; want a conflict", err)
	}
	r.runFor(20, heat, hot)
	if p := r.plans()[0]; p.State != models.ActionSucceeded || p.Progress.MovesDone != 6 {
		t.Errorf("after approval: %s, %+v; want succeeded with 6 moves", p.State, p.Progress)
	}
}

func TestEngineRejectAndCancel(t *testing.T) {
	m, heat := hotCluster()
	r := newRig(t, m, rebalanceConfig(models.ModeApprove), "")
	hot := hotspot("d0", t0)
	r.runFor(3, heat, hot)
	p := r.plans()[0]
	if _, err := r.e.Decide(p.ID, "reject", "bob", "not now", r.now); err != nil {
		t.Fatal(err)
	}
	r.runFor(3, heat, hot)
	for _, mv := range r.moves() {
		if mv.State != models.ActionCancelled {
			t.Errorf("move %s of a rejected plan is %s; want cancelled", mv.ID, mv.State)
		}
	}
	if p := r.plans()[0]; p.State != models.ActionRejected {
		t.Errorf("plan is %s; want rejected", p.State)
	}
	if m.mutations() != 0 {
		t.Errorf("a rejected plan called the mover")
	}

	// cancel a running plan with slow copies: started copies are aborted
	m2, heat2 := hotCluster()
	m2.copyPolls = 100
	r2 := newRig(t, m2, rebalanceConfig(models.ModeAuto), "")
	r2.runFor(5, heat2, hotspot("d0", t0))
	p2 := r2.plans()[0]
	if p2.State != models.ActionRunning {
		t.Fatalf("plan is %s; want running", p2.State)
	}
	if _, err := r2.e.Decide(p2.ID, "cancel", "bob", "maintenance", r2.now); err != nil {
		t.Fatal(err)
	}
	r2.runFor(5, heat2, hotspot("d0", t0))
	if p := r2.plans()[0]; p.State != models.ActionCancelled {
		t.Errorf("plan is %s; want cancelled", p.State)
	}
	for name, l := range m2.layouts {
		if strings.HasPrefix(name, "a") && l.Mirrors[0][0].Device != "d0" {
			t.Errorf("%s moved to %s although the plan was cancelled before any commit", name, l.Mirrors[0][0].Device)
		}
	}
	if len(m2.data) != len(m2.layouts) {
		t.Errorf("%d copies for %d files after the cancel; want the new copies removed", len(m2.data), len(m2.layouts))
	}
}

func TestEngineGuardConcurrency(t *testing.T) {
	m, heat := hotCluster()
	m.copyPolls = 3
	c := rebalanceConfig(models.ModeAuto)
	c.Budgets.MaxConcurrentMoves = 2
	r := newRig(t, m, c, "")
	hot := hotspot("d0", t0)
	sawBlock := false
	for range 40 {
		r.runFor(1, heat, hot)
		running := 0
		for _, mv := range r.moves() {
			if ph := mv.Move.Phase; mv.State == models.ActionRunning && (ph == models.PhaseCopying || ph == models.PhaseCopied || ph == models.PhaseVerified) {
				running++
			}
			sawBlock = sawBlock || strings.HasPrefix(mv.Blocked, GuardConcurrency+":")
		}
		if running > 2 {
			t.Fatalf("at %s %d copies run; want at most max_concurrent_moves 2", r.now, running)
		}
	}
	if !sawBlock {
		t.Errorf("no move was held by the concurrency guard")
	}
	if p := r.plans()[0]; p.State != models.ActionSucceeded {
		t.Errorf("plan is %s; want succeeded in the end", p.State)
	}
}

func TestEngineGuardBytesPerHour(t *testing.T) {
	m, heat := hotCluster()
	c := rebalanceConfig(models.ModeAuto)
	c.Budgets.MaxBytesPerHour = 250 // two moves of 100
	r := newRig(t, m, c, "")
	hot := hotspot("d0", t0)
	r.runFor(30, heat, hot)
	started := 0
	blocked := ""
	for _, mv := range r.moves() {
		if !mv.Started.IsZero() {
			started++
		}
		if mv.Blocked != "" {
			blocked = mv.Blocked
		}
	}
	if started != 2 || !strings.HasPrefix(blocked, GuardBytesHour+":") {
		t.Fatalf("started %d moves, held by %q; want 2 and the bytes_per_hour guard", started, blocked)
	}
	r.now = r.now.Add(time.Hour)
	r.runFor(5, heat, hot)
	started = 0
	for _, mv := range r.moves() {
		if !mv.Started.IsZero() {
			started++
		}
	}
	if started != 4 {
		t.Errorf("an hour later %d moves started; want 4", started)
	}
}

func TestEngineGuardDeviceAndFile(t *testing.T) {
	g := &guards{e: &Engine{cfg: DefaultConfig()}, perDev: map[string]int{}, perDS: map[string]int{}, dsOf: map[string]string{}, files: map[string]bool{}}
	g.e.cfg.Budgets.MaxMovesPerDevice = 1
	mv := func(file, from, to string) *models.Action {
		return &models.Action{ID: file, Move: &models.Move{File: file, From: from, To: to, Bytes: 1}}
	}
	p := &models.Action{}
	if why, guard := g.admit(mv("f1", "d0", "d1"), p); guard != "" {
		t.Fatalf("first move refused: %s", why)
	}
	if _, guard := g.admit(mv("f2", "d0", "d2"), p); guard != GuardDeviceBusy {
		t.Errorf("second copy from d0: guard %q; want device_busy", guard)
	}
	if _, guard := g.admit(mv("f1", "d3", "d2"), p); guard != GuardFileBusy {
		t.Errorf("second move of f1: guard %q; want file_busy", guard)
	}
}

func TestEngineGuardCheckpointWindow(t *testing.T) {
	m, heat := hotCluster()
	r := newRig(t, m, rebalanceConfig(models.ModeAuto), "")
	hot := hotspot("d0", t0)
	fc := models.Finding{ID: "checkpoint_forecast:client:gpu00:1", Kind: "checkpoint_forecast", Subject: models.Subject{Kind: models.SubjectClient, ID: "gpu00"},
		Severity: models.SeverityInfo, Start: t0, LastSeen: t0, Evidence: []models.Evidence{
			{Name: "next_start", Value: float64(t0.Add(30 * time.Second).Unix())}, {Name: "next_end", Value: float64(t0.Add(10 * time.Minute).Unix())}}}
	r.runFor(20, heat, hot, fc)
	for _, mv := range r.moves() {
		if !mv.Started.IsZero() {
			t.Errorf("move %s started at %s inside the predicted checkpoint window", mv.ID, mv.Started)
		}
		if !strings.HasPrefix(mv.Blocked, GuardCheckpoint+":") {
			t.Errorf("move %s held by %q; want checkpoint_window", mv.ID, mv.Blocked)
		}
	}
	// an urgent evacuation is not held
	risk := models.Finding{ID: "drive_failure_risk/device:ds1/nvme0", Kind: "drive_failure_risk", Subject: models.Subject{Kind: models.SubjectDevice, ID: "ds1/nvme0"},
		Severity: models.SeverityCritical, Start: r.now, LastSeen: r.now}
	r.runFor(10, heat, hot, fc, risk)
	urgentStarted := 0
	for _, mv := range r.moves() {
		if mv.Urgent && !mv.Started.IsZero() {
			urgentStarted++
		}
	}
	if urgentStarted == 0 {
		t.Errorf("no urgent move started inside the checkpoint window; want the evacuation to go on")
	}
}

// A burst seen under way holds non-urgent moves before any forecast
// exists (a job's first checkpoints), and they start once it ended.
func TestEngineGuardCheckpointBurstUnderWay(t *testing.T) {
	m, heat := hotCluster()
	r := newRig(t, m, rebalanceConfig(models.ModeAuto), "")
	hot := hotspot("d0", t0)
	burst := models.Finding{ID: "checkpoint_burst:client:gpu00:1", Kind: "checkpoint_burst", Subject: models.Subject{Kind: models.SubjectClient, ID: "gpu00"},
		Severity: models.SeverityInfo, Start: t0, LastSeen: t0}
	r.runFor(20, heat, hot, burst)
	if len(r.moves()) == 0 {
		t.Fatal("no move planned; want a rebalance held by the burst")
	}
	for _, mv := range r.moves() {
		if !mv.Started.IsZero() {
			t.Errorf("move %s started at %s while a checkpoint burst was under way", mv.ID, mv.Started)
		}
		if !strings.HasPrefix(mv.Blocked, GuardCheckpoint+":") {
			t.Errorf("move %s held by %q; want checkpoint_window", mv.ID, mv.Blocked)
		}
	}
	burst.End, burst.LastSeen = r.now, r.now
	r.runFor(20, heat, hot, burst)
	started := 0
	for _, mv := range r.moves() {
		if !mv.Started.IsZero() {
			started++
		}
	}
	if started == 0 {
		t.Error("no move started after the burst ended")
	}
}

// Copies under way when a checkpoint window opens (a burst seen under
// way, or a forecast window reached) are paused, not left to finish inside
// it, and resume when it ends; urgent moves go on.
func TestEngineCheckpointPausesRunningCopies(t *testing.T) {
	for _, how := range []string{"burst", "forecast"} {
		t.Run(how, func(t *testing.T) {
			m, heat := hotCluster()
			m.copyPolls = 8 // a copy takes 9 ticks
			r := newRig(t, m, rebalanceConfig(models.ModeAuto), "")
			hot := hotspot("d0", t0)
			running := func() (n int) {
				for _, mv := range r.moves() {
					if mv.State == models.ActionRunning && mv.Move.Phase == models.PhaseCopying {
						n++
					}
				}
				return n
			}
			for i := 0; i < 30 && running() == 0; i++ {
				r.runFor(1, heat, hot)
			}
			if running() == 0 {
				t.Fatal("no copy under way; want moves copying when the window opens")
			}
			var win models.Finding
			if how == "burst" {
				win = models.Finding{ID: "checkpoint_burst:client:gpu00:1", Kind: "checkpoint_burst", Subject: models.Subject{Kind: models.SubjectClient, ID: "gpu00"},
					Severity: models.SeverityInfo, Start: r.now, LastSeen: r.now}
			} else {
				// forecast earlier (no move would have started), the window
				// is reached now
				win = models.Finding{ID: "checkpoint_forecast:client:gpu00:1", Kind: "checkpoint_forecast", Subject: models.Subject{Kind: models.SubjectClient, ID: "gpu00"},
					Severity: models.SeverityInfo, Start: r.now, LastSeen: r.now, Evidence: []models.Evidence{
						{Name: "next_start", Value: float64(r.now.Unix())}, {Name: "next_end", Value: float64(r.now.Add(3 * time.Minute).Unix())}}}
			}
			before := map[string]models.MovePhase{}
			for _, mv := range r.moves() {
				before[mv.ID] = mv.Move.Phase
			}
			r.runFor(15, heat, hot, win) // 150 s: the copies would have finished
			for _, mv := range r.moves() {
				if mv.Move.Phase != before[mv.ID] {
					t.Errorf("move %s went from %s to %s inside the checkpoint window; want it paused", mv.ID, before[mv.ID], mv.Move.Phase)
				}
				if mv.State == models.ActionRunning && !strings.HasPrefix(mv.Blocked, GuardCheckpoint+": paused") {
					t.Errorf("running move %s held by %q; want paused by checkpoint_window", mv.ID, mv.Blocked)
				}
			}
			m.mu.Lock()
			paused, steps := len(m.paused), m.stepsWhilePaused
			m.mu.Unlock()
			if paused == 0 || paused != running() {
				t.Errorf("%d copies paused in the driver; want the %d running", paused, running())
			}
			if steps != 0 {
				t.Errorf("the engine called Copy or Verify %d times on a paused copy; want 0", steps)
			}
			// the window ends: the copies resume and every move finishes
			if how == "burst" {
				win.End, win.LastSeen = r.now, r.now
			} else {
				r.now = r.now.Add(time.Minute) // past next_end and the margin
			}
			r.runFor(60, heat, hot, win)
			m.mu.Lock()
			paused = len(m.paused)
			m.mu.Unlock()
			if paused != 0 {
				t.Errorf("%d copies still paused after the window; want 0", paused)
			}
			for _, mv := range r.moves() {
				if mv.State != models.ActionSucceeded {
					t.Errorf("move %s: %s (%s, blocked %q); want succeeded after the window", mv.ID, mv.State, mv.Reason, mv.Blocked)
				}
			}
			for name, l := range m.layouts {
				dev := l.Mirrors[0][0].Device
				if got := string(m.data[m.key(dev, name, 0, 0)]); got != fmt.Sprintf("%s/0/100", name) {
					t.Errorf("%s on %s holds %q; want its original bytes", name, dev, got)
				}
			}
		})
	}
}

// An urgent move (a drive about to fail) is never paused by a window.
// copyingRig starts a rebalance whose copies take 9 ticks and ticks until
// some are under way.
func copyingRig(t *testing.T, with ...func(*Options)) (*rig, map[[2]string]float64, models.Finding) {
	t.Helper()
	m, heat := hotCluster()
	m.copyPolls = 8
	r := newRig(t, m, rebalanceConfig(models.ModeAuto), "", with...)
	hot := hotspot("d0", t0)
	for i := 0; i < 30 && r.copying() == 0; i++ {
		r.runFor(1, heat, hot)
	}
	if r.copying() == 0 {
		t.Fatal("no copy under way; want moves copying")
	}
	return r, heat, hot
}

// copying counts the moves whose copy is under way.
func (r *rig) copying() (n int) {
	for _, mv := range r.moves() {
		if mv.State == models.ActionRunning && mv.Move.Phase == models.PhaseCopying {
			n++
		}
	}
	return n
}

// TestEngineCheckpointPausesOnWriteRate: the tick the checkpoint stage sees
// a group writing (Options.Writing: a burst's first seconds, before its
// checkpoint_burst finding), running non-urgent copies pause, new moves
// wait, and the hold names the guard and the live write rate; when the
// writing stops they stay paused for checkpoint_margin, then resume and
// finish.
func TestEngineCheckpointPausesOnWriteRate(t *testing.T) {
	var writing []models.Subject
	r, heat, hot := copyingRig(t, func(o *Options) { o.Writing = func() []models.Subject { return writing } })
	writing = []models.Subject{{Kind: models.SubjectClient, ID: "gpu00"}}
	r.runFor(1, heat, hot)
	r.m.mu.Lock()
	paused, calls := len(r.m.paused), r.m.calls["pause"]
	r.m.mu.Unlock()
	if n := r.copying(); paused == 0 || paused != n {
		t.Fatalf("%d copies paused in the driver (%d pause calls) at the tick the write rate rose; want the %d running", paused, calls, n)
	}
	for _, mv := range r.moves() {
		if mv.State != models.ActionRunning {
			continue
		}
		if !strings.HasPrefix(mv.Blocked, GuardCheckpoint+": paused") || !strings.Contains(mv.Blocked, "write rate above idle") {
			t.Errorf("running move %s held by %q; want paused by checkpoint_window, naming the write rate", mv.ID, mv.Blocked)
		}
	}
	r.runFor(10, heat, hot)
	r.m.mu.Lock()
	steps := r.m.stepsWhilePaused
	r.m.mu.Unlock()
	if steps != 0 {
		t.Errorf("the engine called Copy or Verify %d times on a paused copy; want 0", steps)
	}
	for _, mv := range r.moves() {
		if mv.Move.Phase == models.PhaseCleaned {
			t.Errorf("move %s finished while the group was writing; want it held", mv.ID)
		}
	}
	writing = nil
	r.runFor(2, heat, hot) // 20 s, inside the 30 s margin
	r.m.mu.Lock()
	paused = len(r.m.paused)
	r.m.mu.Unlock()
	if n := r.copying(); paused == 0 || paused != n {
		t.Errorf("%d copies paused 20 s after the writing stopped; want the %d running held for checkpoint_margin", paused, n)
	}
	r.runFor(60, heat, hot)
	for _, mv := range r.moves() {
		if mv.State != models.ActionSucceeded {
			t.Errorf("move %s: %s (blocked %q); want succeeded once the writing stopped", mv.ID, mv.State, mv.Blocked)
		}
	}
}

// TestEngineCheckpointPausesBeforeForecastOpens: a forecast window (with
// its margin) that opens between this tick and the next pauses running
// copies at this tick, so that none runs into the window before the
// engine looks again, and starts no new move.
func TestEngineCheckpointPausesBeforeForecastOpens(t *testing.T) {
	r, heat, hot := copyingRig(t)
	margin := time.Duration(r.e.cfg.Budgets.CheckpointMargin)
	// the next tick is 10 s away; the window opens 5 s from now
	start := r.now.Add(margin + 5*time.Second)
	fc := models.Finding{ID: "checkpoint_forecast:client:gpu00:1", Kind: "checkpoint_forecast", Subject: models.Subject{Kind: models.SubjectClient, ID: "gpu00"},
		Severity: models.SeverityInfo, Start: r.now, LastSeen: r.now, Evidence: []models.Evidence{
			{Name: "next_start", Value: float64(start.Unix())}, {Name: "next_end", Value: float64(start.Add(time.Minute).Unix())}}}
	before := map[string]models.Action{}
	for _, mv := range r.moves() {
		before[mv.ID] = mv
	}
	r.runFor(1, heat, hot, fc)
	r.m.mu.Lock()
	paused := len(r.m.paused)
	r.m.mu.Unlock()
	if n := r.copying(); paused == 0 || paused != n {
		t.Errorf("%d copies paused in the driver a tick before the window opens; want the %d running", paused, n)
	}
	for _, mv := range r.moves() {
		if b := before[mv.ID]; b.Move.Phase == models.PhasePending && mv.Move.Phase != models.PhasePending {
			t.Errorf("move %s started (%s) with the window opening before the next tick; want it held", mv.ID, mv.Move.Phase)
		}
		if mv.State == models.ActionRunning && !strings.Contains(mv.Blocked, "opens before the next tick") {
			t.Errorf("running move %s held by %q; want paused, saying the window opens before the next tick", mv.ID, mv.Blocked)
		}
	}
}

func TestEngineCheckpointKeepsUrgentCopiesGoing(t *testing.T) {
	m, heat := hotCluster()
	m.copyPolls = 3
	r := newRig(t, m, rebalanceConfig(models.ModeAuto), "")
	risk := models.Finding{ID: "drive_failure_risk/device:ds1/nvme0", Kind: "drive_failure_risk", Subject: models.Subject{Kind: models.SubjectDevice, ID: "ds1/nvme0"},
		Severity: models.SeverityCritical, Start: r.now, LastSeen: r.now}
	burst := models.Finding{ID: "checkpoint_burst:client:gpu00:1", Kind: "checkpoint_burst", Subject: models.Subject{Kind: models.SubjectClient, ID: "gpu00"},
		Severity: models.SeverityInfo, Start: r.now, LastSeen: r.now}
	r.runFor(40, heat, risk, burst)
	done := 0
	for _, mv := range r.moves() {
		if !mv.Urgent {
			continue
		}
		if strings.HasPrefix(mv.Blocked, GuardCheckpoint) {
			t.Errorf("urgent move %s held by %q inside the burst; want it going on", mv.ID, mv.Blocked)
		}
		if mv.State == models.ActionSucceeded {
			done++
		}
	}
	if done == 0 {
		t.Error("no urgent move finished inside the burst; want the evacuation to go on")
	}
	if n := m.calls["pause"]; n != 0 {
		t.Errorf("%d pauses; want none for urgent moves", n)
	}
}

func TestEngineEvacuatesToSpare(t *testing.T) {
	m, heat := hotCluster()
	r := newRig(t, m, testConfig(models.ModeAuto), "")
	risk := models.Finding{ID: "drive_failure_risk/device:ds0/nvme0", Kind: "drive_failure_risk", Subject: models.Subject{Kind: models.SubjectDevice, ID: "ds0/nvme0"},
		Severity: models.SeverityWarning, Start: t0, LastSeen: t0, Evidence: []models.Evidence{{Name: "failure_window_from", Value: 3}}}
	r.runFor(30, heat, risk)
	ps := r.plans()
	if len(ps) != 1 || ps[0].Kind != models.ActionPromoteSpare || ps[0].Params["spare"] != "sp0" {
		t.Fatalf("got %+v; want one promote_spare onto sp0", ps)
	}
	p := ps[0]
	if !p.Urgent {
		t.Errorf("a failure predicted in 3 days is not urgent; want urgent (urgent_within 7d)")
	}
	if p.State != models.ActionSucceeded || p.Effect == nil || p.Effect.Verdict != models.VerdictEffective || p.Effect.After[EffectStripesLeft] != 0 {
		t.Errorf("plan %s, effect %+v; want succeeded, effective, no stripe left", p.State, p.Effect)
	}
	for name, l := range m.layouts {
		if strings.HasPrefix(name, "a") && l.Mirrors[0][0].Device != "sp0" {
			t.Errorf("%s is on %s; want the spare", name, l.Mirrors[0][0].Device)
		}
	}
	if m.devs[0].State != StateDraining || m.devs[4].State != StateOnline {
		t.Errorf("states: d0 %s, sp0 %s; want draining and online", m.devs[0].State, m.devs[4].State)
	}
}

// TestEvacuationVerdictRestsOnStripesLeft: a promotion that left no
// stripe on the failing drive is effective even when the affected
// clients' GPU utilisation fell over its window (the failing drive's own
// decline falls there); the drop is named in the reason. A rebalance with
// the same drop is worse (TestEngineRollsBackWhatMadeThingsWorse).
func TestEvacuationVerdictRestsOnStripesLeft(t *testing.T) {
	m, heat := hotCluster()
	r := newRig(t, m, testConfig(models.ModeAuto), "")
	r.measure = func(expr string, at time.Time) (float64, bool) {
		if !strings.Contains(expr, models.MetricGPUUtilization) {
			return 0, false
		}
		for _, p := range r.plans() {
			if !p.Started.IsZero() && at.After(p.Started) {
				return 0.6, true
			}
		}
		return 0.9, true
	}
	risk := models.Finding{ID: "drive_failure_risk/device:ds0/nvme0", Kind: "drive_failure_risk", Subject: models.Subject{Kind: models.SubjectDevice, ID: "ds0/nvme0"},
		Severity: models.SeverityWarning, Start: t0, LastSeen: t0, Evidence: []models.Evidence{{Name: "failure_window_from", Value: 3}}}
	r.runFor(30, heat, risk)
	ps := r.plans()
	if len(ps) != 1 || ps[0].Effect == nil {
		t.Fatalf("got %+v; want one plan with a measured effect", ps)
	}
	e := ps[0].Effect
	if e.Before[EffectGPUUtil] != 0.9 || e.After[EffectGPUUtil] != 0.6 {
		t.Fatalf("gpu_util %v → %v; want the rig's 0.9 → 0.6", e.Before[EffectGPUUtil], e.After[EffectGPUUtil])
	}
	if e.Verdict != models.VerdictEffective || !strings.Contains(e.Reason, "no stripe") || !strings.Contains(e.Reason, "fell from 0.900 to 0.600") {
		t.Errorf("verdict %s %q; want effective, no stripe left, the GPU drop named", e.Verdict, e.Reason)
	}
	if ps[0].State != models.ActionSucceeded {
		t.Errorf("plan %s; want succeeded (an evacuation is never rolled back)", ps[0].State)
	}
}

func TestVerdictOfDriveActions(t *testing.T) {
	e := &Engine{cfg: testConfig(models.ModeAuto)}
	drop := map[string]float64{EffectGPUUtil: 0.6, EffectStripesLeft: 0}
	for _, c := range []struct {
		name  string
		p     models.Action
		after map[string]float64
		want  models.Verdict
	}{
		{"risk, none left, GPU fell", models.Action{Kind: models.ActionEvacuateDevice, FindingID: "drive_failure_risk/device:ds0/nvme0"}, drop, models.VerdictEffective},
		{"risk, 3 left, GPU fell", models.Action{Kind: models.ActionEvacuateDevice, FindingID: "drive_failure_risk/device:ds0/nvme0"}, map[string]float64{EffectGPUUtil: 0.6, EffectStripesLeft: 3}, models.VerdictIneffective},
		{"spare, none left, GPU fell", models.Action{Kind: models.ActionPromoteSpare, FindingID: "drive_failure_risk/device:ds0/nvme0"}, drop, models.VerdictEffective},
		{"wear-out, none left, GPU fell", models.Action{Kind: models.ActionEvacuateDevice, FindingID: "drive_wearout/device:ds0/nvme0"}, drop, models.VerdictWorse},
		{"wear-out escalated urgent, GPU fell", models.Action{Kind: models.ActionEvacuateDevice, FindingID: "drive_wearout/device:ds0/nvme0", Urgent: true}, drop, models.VerdictEffective},
		{"wear-out, none left, GPU held", models.Action{Kind: models.ActionEvacuateDevice, FindingID: "drive_wearout/device:ds0/nvme0"}, map[string]float64{EffectGPUUtil: 0.9, EffectStripesLeft: 0}, models.VerdictEffective},
		{"rebalance, GPU fell", models.Action{Kind: models.ActionRebalance, FindingID: "hotspot/device:ds0/nvme0"}, map[string]float64{EffectGPUUtil: 0.6}, models.VerdictWorse},
	} {
		c.p.Effect = &models.ActionEffect{Before: map[string]float64{EffectGPUUtil: 0.9}, After: c.after}
		if v, why := e.verdict(context.Background(), &c.p); v != c.want {
			t.Errorf("%s: %s %q; want %s", c.name, v, why, c.want)
		}
	}
}

func TestEngineGuardEvacuationsAndMinIn(t *testing.T) {
	m, heat := hotCluster()
	m.copyPolls = 50
	m.devs = m.devs[:4] // no spare
	c := testConfig(models.ModeAuto)
	c.Budgets.MaxEvacuatingDevices = 1
	c.Budgets.MaxDrainingDS = 2
	r := newRig(t, m, c, "")
	risk := func(dev string) models.Finding {
		return models.Finding{ID: "drive_failure_risk/device:" + dev, Kind: "drive_failure_risk", Subject: models.Subject{Kind: models.SubjectDevice, ID: dev},
			Severity: models.SeverityWarning, Start: t0, LastSeen: t0}
	}
	r.runFor(5, heat, risk("ds0/nvme0"), risk("ds1/nvme1"))
	var running, held int
	for _, p := range r.plans() {
		switch {
		case p.State == models.ActionRunning:
			running++
		case p.State == models.ActionApproved && strings.HasPrefix(p.Blocked, GuardEvacuations+":"):
			held++
		}
	}
	if running != 1 || held != 1 {
		t.Errorf("%d evacuations running, %d held by the evacuations guard; want 1 and 1", running, held)
	}

	// a file over all four devices: evacuating one leaves three, fewer than
	// its layout needs
	m2 := cluster4()
	m2.devs = m2.devs[:4]
	m2.addFile("wide", 100, "d0", "d1", "d2", "d3")
	r2 := newRig(t, m2, testConfig(models.ModeAuto), "")
	r2.runFor(5, nil, risk("ds0/nvme0"))
	p := r2.plans()[0]
	if !strings.HasPrefix(p.Blocked, GuardMinIn+":") && p.State != models.ActionCancelled {
		t.Errorf("plan %s held by %q (%s); want the min_in guard or no legal move", p.State, p.Blocked, p.Reason)
	}
	if m2.calls["copy"] != 0 {
		t.Errorf("copied %d times; want none", m2.calls["copy"])
	}
}

func TestEngineCooldownAndOffPeak(t *testing.T) {
	m, heat := hotCluster()
	r := newRig(t, m, rebalanceConfig(models.ModeAuto), "")
	hot := hotspot("d0", t0)
	r.runFor(20, heat, hot)
	if n := len(r.plans()); n != 1 {
		t.Fatalf("got %d plans; want 1", n)
	}
	// a new hot spot on d1 within the cooldown: no new plan for the pool
	heat2 := map[[2]string]float64{}
	for k, v := range heat {
		heat2[k] = v
		if k[0] == "d1" {
			heat2[k] = 200
		}
	}
	hot.End, hot.LastSeen = r.now, r.now
	hot2 := hotspot("d1", r.now)
	r.runFor(10, heat2, hot, hot2)
	if n := len(r.plans()); n != 1 {
		t.Errorf("within the cooldown: %d plans; want still 1", n)
	}
	r.now = r.now.Add(10 * time.Minute)
	r.runFor(3, heat2, hot2)
	if n := len(r.plans()); n != 2 {
		t.Errorf("after the cooldown: %d plans; want 2", n)
	}

	// wear-out waits for the off-peak window
	m3, heat3 := hotCluster()
	c := testConfig(models.ModeAuto)
	c.Evacuate.OffPeak = "01:00-05:00"
	r3 := newRig(t, m3, c, "")
	wear := models.Finding{ID: "drive_wearout/device:ds1/nvme0", Kind: "drive_wearout", Subject: models.Subject{Kind: models.SubjectDevice, ID: "ds1/nvme0"},
		Severity: models.SeverityInfo, Start: t0, LastSeen: t0}
	r3.runFor(5, heat3, wear)
	p := r3.plans()[0]
	if p.Urgent || !strings.HasPrefix(p.Blocked, GuardOffPeak+":") || p.NotBefore.Hour() != 1 {
		t.Errorf("wear-out plan: urgent %v, held by %q, not before %s; want non-urgent, held until 01:00", p.Urgent, p.Blocked, p.NotBefore)
	}
	if m3.calls["copy"] != 0 {
		t.Errorf("wear-out copied before off-peak")
	}
	r3.now = time.Date(2026, 5, 2, 1, 0, 0, 0, time.UTC)
	r3.runFor(20, heat3, wear)
	if p := r3.plans()[0]; p.State != models.ActionSucceeded {
		t.Errorf("in the off-peak window the plan is %s (%s); want succeeded", p.State, p.Blocked)
	}
}

func TestEngineAbortsOnLayoutChange(t *testing.T) {
	m, heat := hotCluster()
	m.copyPolls = 20
	r := newRig(t, m, rebalanceConfig(models.ModeAuto), "")
	hot := hotspot("d0", t0)
	r.runFor(3, heat, hot)
	// someone else rewrites the layouts of every file being copied
	var changed []string
	for _, mv := range r.moves() {
		if mv.Move.Phase == models.PhaseCopying {
			m.mu.Lock()
			m.layouts[mv.Move.File].Generation += 10
			m.mu.Unlock()
			changed = append(changed, mv.ID)
		}
	}
	if len(changed) == 0 {
		t.Fatal("no move was copying")
	}
	r.runFor(5, heat, hot)
	for _, id := range changed {
		a, _ := r.j.Action(id)
		if a.State != models.ActionCancelled || !strings.Contains(a.Reason, "layout of") {
			t.Errorf("move %s: %s (%s); want cancelled because the layout changed", id, a.State, a.Reason)
		}
		if _, ok := m.data[m.key(a.Move.To, a.Move.File, 0, 0)]; ok {
			t.Errorf("move %s left its copy on %s; want it removed", id, a.Move.To)
		}
	}
}

func TestEngineVerifyMismatch(t *testing.T) {
	m, heat := hotCluster()
	m.corrupt = 1
	r := newRig(t, m, rebalanceConfig(models.ModeAuto), "")
	hot := hotspot("d0", t0)
	r.runFor(30, heat, hot)
	if p := r.plans()[0]; p.State != models.ActionSucceeded || p.Progress.MovesDone != 6 {
		t.Errorf("one corrupt copy: plan %s %+v; want succeeded after a recopy", p.State, p.Progress)
	}
	if m.calls["copy"] != 7 {
		t.Errorf("%d copies; want 7 (one redone)", m.calls["copy"])
	}

	m2, heat2 := hotCluster()
	m2.corrupt = 1000
	c := rebalanceConfig(models.ModeAuto)
	c.Move.MaxAttempts = 2
	r2 := newRig(t, m2, c, "")
	r2.runFor(40, heat2, hot)
	p := r2.plans()[0]
	if p.State != models.ActionFailed {
		t.Errorf("copies always corrupt: plan %s; want failed", p.State)
	}
	for _, mv := range r2.moves() {
		if mv.State != models.ActionFailed || !strings.Contains(mv.Reason, "checksums differ") {
			t.Errorf("move %s: %s %q; want failed on checksums", mv.ID, mv.State, mv.Reason)
		}
	}
	if len(m2.data) != len(m2.layouts) {
		t.Errorf("%d copies for %d files; want every bad copy removed", len(m2.data), len(m2.layouts))
	}
}

func TestEngineRollsBackWhatMadeThingsWorse(t *testing.T) {
	m, heat := hotCluster()
	r := newRig(t, m, rebalanceConfig(models.ModeAuto), "")
	var started time.Time
	r.measure = func(expr string, at time.Time) (float64, bool) {
		if !strings.Contains(expr, models.MetricGPUUtilization) {
			return 0, false
		}
		for _, p := range r.plans() {
			started = p.Started
		}
		if started.IsZero() || !at.After(started) {
			return 0.9, true
		}
		return 0.7, true
	}
	hot := hotspot("d0", t0)
	r.runFor(40, heat, hot)
	p := r.plans()[0]
	if p.State != models.ActionRolledBack || p.Effect.Verdict != models.VerdictWorse {
		t.Fatalf("plan %s, verdict %v; want rolled back as worse", p.State, p.Effect)
	}
	for name, l := range m.layouts {
		if strings.HasPrefix(name, "a") && l.Mirrors[0][0].Device != "d0" {
			t.Errorf("%s is on %s after the rollback; want d0", name, l.Mirrors[0][0].Device)
		}
	}
	back := 0
	for _, mv := range r.moves() {
		if mv.RollbackOf != "" && mv.State == models.ActionSucceeded {
			back++
		}
	}
	if back != 6 {
		t.Errorf("%d rollback moves succeeded; want 6", back)
	}
}

// crashJournal fails every write after the first n, as if the process
// died: the engine must stop acting (no step without its journal entry).
type crashJournal struct {
	mu   sync.Mutex
	j    *storage.Journal
	left int
}

func (c *crashJournal) PutActions(as []models.Action) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.left <= 0 {
		return errors.New("crashed")
	}
	c.left--
	return c.j.PutActions(as)
}

// crashAndRestart runs an engine on workers (each step journaled on its
// own) over m with heat and a hotspot on d0 for 6 ticks, its journal
// failing every write after the first n (a crash), then a new engine on
// the same journal for 12 ticks; it returns the journal's plans and its
// actions of every kind.
func crashAndRestart(t *testing.T, m Mover, heat map[[2]string]float64, n int) (plans, all []models.Action) {
	t.Helper()
	return restartAfter(t, m, heat, n, false, nil)
}

// restartAfter is crashAndRestart; with kill the first engine dies
// without its graceful stop (no abort of the copies under way, as after a
// kill -9), and mid, when given, sees the journal between the two.
func restartAfter(t *testing.T, m Mover, heat map[[2]string]float64, n int, kill bool, mid func(*storage.Journal)) (plans, all []models.Action) {
	t.Helper()
	c := rebalanceConfig(models.ModeAuto)
	c.Move.Grace = 0
	c.Verify.Window = Duration(time.Second)
	hot := hotspot("d0", t0)
	now := t0
	run := func(j Journal, load func() ([]models.Action, error), ticks int, die bool) {
		runEngine(t, Options{Config: c, Mover: m, Journal: j, Load: load}, heat, hot, &now, ticks, die)
	}
	sj, err := storage.OpenJournal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer sj.Close()
	load := func() ([]models.Action, error) { return sj.Actions(storage.ActionFilter{}) }
	run(&crashJournal{j: sj, left: n}, load, 6, kill)
	if mid != nil {
		mid(sj)
	}
	run(sj, load, 12, false)
	plans, _ = sj.Actions(storage.ActionFilter{Plans: true})
	all, _ = sj.Actions(storage.ActionFilter{})
	return plans, all
}

// runEngine starts an engine with o on workers, its clock *now, and
// ticks it ticks times with heat and the finding hot, 10 s apart, waiting
// for its workers each tick; with die it then dies without its graceful
// stop (no abort of the copies under way, as after a kill -9), else it
// stops.
func runEngine(t *testing.T, o Options, heat map[[2]string]float64, hot models.Finding, now *time.Time, ticks int, die bool) {
	t.Helper()
	o.Clock = func() time.Time { return *now }
	e, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range ticks {
		var ds []models.StripeDelta
		for k, v := range heat {
			ds = append(ds, models.StripeDelta{StripeKey: models.StripeKey{DeviceID: k[0], FileHandle: k[1]}, Duration: 10 * time.Second, Read: models.StripeIO{BytesCompleted: uint64(v * 10)}})
		}
		e.ObserveStripes(ds)
		e.Reconcile(context.Background(), *now, []models.Finding{hot})
		e.wg.Wait()
		*now = now.Add(10 * time.Second)
	}
	if die {
		e.mu.Lock()
		e.started = false
		e.cancel()
		e.mu.Unlock()
		e.wg.Wait()
		return
	}
	e.Stop(context.Background())
}

// TestEngineResumesAfterCrashAtEveryStep crashes the engine (on workers,
// each step journaled on its own) after 1, 2, … journal writes and starts a
// new one on the same journal: every file ends on the planned device with
// its bytes, nothing is left behind and no commit happens twice.
func TestEngineResumesAfterCrashAtEveryStep(t *testing.T) {
	for n := 1; n < 60; n += 3 {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			m, heat := hotCluster()
			as, _ := crashAndRestart(t, m, heat, n)
			if len(as) != 1 || as[0].State != models.ActionSucceeded {
				t.Fatalf("after the restart: %+v; want one succeeded plan", as)
			}
			for name, l := range m.layouts {
				dev := l.Mirrors[0][0].Device
				if string(m.data[m.key(dev, name, 0, 0)]) != fmt.Sprintf("%s/0/100", name) {
					t.Errorf("%s on %s holds %q; want its bytes", name, dev, m.data[m.key(dev, name, 0, 0)])
				}
			}
			if len(m.data) != len(m.layouts) {
				t.Errorf("%d copies for %d files; want none left behind", len(m.data), len(m.layouts))
			}
			for k, c := range m.commits {
				if c != 1 {
					t.Errorf("%s committed %d times; want once", k, c)
				}
			}
		})
	}
}

// TestEngineStoppingTickPlansNothing: a tick whose context is done (the
// mds is stopping: the pipeline cancels its tick before the engine stops)
// plans nothing and starts no step, on a cluster where a live tick plans
// a rebalance at once.
func TestEngineStoppingTickPlansNothing(t *testing.T) {
	m, heat := hotCluster()
	r := newRig(t, m, rebalanceConfig(models.ModeAuto), "")
	hot := hotspot("d0", t0)
	stopping, cancel := context.WithCancel(context.Background())
	cancel()
	for range 3 {
		r.heat(heat)
		if err := r.e.Reconcile(stopping, r.now, []models.Finding{hot}); err != nil {
			t.Fatalf("a stopping tick: %v", err)
		}
		r.now = r.now.Add(10 * time.Second)
	}
	if ps := r.plans(); len(ps) != 0 {
		t.Fatalf("stopping ticks journaled %d plans: %+v; want none", len(ps), ps)
	}
	if n := m.mutations(); n != 0 {
		t.Fatalf("stopping ticks made %d mover calls %v; want none", n, m.calls)
	}
	r.runFor(1, heat, hot)
	if ps := r.plans(); len(ps) != 1 || ps[0].Kind != models.ActionRebalance {
		t.Fatalf("a live tick journaled %+v; want one rebalance (the test needs a cluster that plans)", ps)
	}
}

// TestEngineGuardUnforecastHoldsEvacuations: once a client group has
// written a checkpoint and no forecast predicts its next, a non-urgent
// spare promotion moves no data (its copies under way pause, new moves
// wait, each hold naming checkpoint_unforecast) after the burst's own
// window has passed; a forecast lets it go on and finish; without a
// forecast checkpoint_unforecast_hold bounds the wait; an urgent one is
// never held.
func TestEngineGuardUnforecastHoldsEvacuations(t *testing.T) {
	risk := func(from float64, sev models.Severity) models.Finding {
		return models.Finding{ID: "drive_failure_risk/device:ds0/nvme0", Kind: "drive_failure_risk", Subject: models.Subject{Kind: models.SubjectDevice, ID: "ds0/nvme0"},
			Severity: sev, Start: t0, LastSeen: t0, Evidence: []models.Evidence{{Name: "failure_window_from", Value: from}}}
	}
	burst := func(r *rig, end bool) models.Finding {
		f := models.Finding{ID: "checkpoint_burst:client:gpu00:1", Kind: "checkpoint_burst", Subject: models.Subject{Kind: models.SubjectClient, ID: "gpu00"},
			Severity: models.SeverityInfo, Start: t0.Add(20 * time.Second), LastSeen: r.now}
		if end {
			f.End = r.now
		}
		return f
	}
	// start runs the evacuation until copies are under way, then a burst
	// for a tick and its end, and the checkpoint_margin past it
	start := func(t *testing.T, hold time.Duration, f models.Finding) *rig {
		m, heat := hotCluster()
		m.copyPolls = 8
		c := testConfig(models.ModeAuto)
		c.Budgets.CheckpointUnforecastHold = Duration(hold)
		r := newRig(t, m, c, "")
		for i := 0; i < 10 && r.copying() == 0; i++ {
			r.runFor(1, heat, f)
		}
		if r.copying() == 0 {
			t.Fatal("no copy of the evacuation under way")
		}
		r.runFor(1, heat, f, burst(r, false))
		r.runFor(1, heat, f, burst(r, true))
		r.runFor(4, heat, f) // 40 s: past the 30 s margin
		return r
	}
	held := func(r *rig) (paused, copying, waiting, done int) {
		for _, mv := range r.moves() {
			switch {
			case mv.State == models.ActionSucceeded:
				done++
			case strings.HasPrefix(mv.Blocked, unforecastPrefix):
				paused++
			case strings.HasPrefix(mv.Blocked, GuardUnforecast+":"):
				waiting++
			case mv.Move.Phase == models.PhaseCopying || mv.Move.Phase == models.PhaseCopied:
				copying++
			}
		}
		return paused, copying, waiting, done
	}
	heat := map[[2]string]float64{}

	t.Run("forecast releases", func(t *testing.T) {
		r := start(t, time.Hour, risk(30, models.SeverityWarning))
		paused, copying, _, done := held(r)
		if paused == 0 || copying != 0 || done != 0 {
			t.Fatalf("%d copies paused, %d copying, %d done with no forecast after the burst; want every copy paused by checkpoint_unforecast", paused, copying, done)
		}
		// a new move of the evacuation waits; one of a rebalance does not
		ps := r.plans()
		if len(ps) != 1 || ps[0].Kind != models.ActionPromoteSpare || ps[0].Urgent {
			t.Fatalf("plans %+v; want one non-urgent promote_spare", ps)
		}
		mv := &models.Action{ID: "x", Move: &models.Move{File: "new", From: "d1", To: "d2", Bytes: 1}}
		if why, guard := r.e.newGuards(r.now).admit(mv, &ps[0]); guard != GuardUnforecast || !strings.Contains(why, "client:gpu00") || !strings.Contains(why, "checkpoint_unforecast_hold 1h0m0s") {
			t.Errorf("a new move of the promotion: %s %q; want refused by checkpoint_unforecast, naming the group and the setting", guard, why)
		}
		if why, guard := r.e.newGuards(r.now).admit(mv, &models.Action{Kind: models.ActionRebalance}); guard != "" {
			t.Errorf("a rebalance's move refused by %s: %s; want it admitted", guard, why)
		}
		r.m.mu.Lock()
		inDriver, steps := len(r.m.paused), r.m.stepsWhilePaused
		r.m.mu.Unlock()
		if inDriver != paused || steps != 0 {
			t.Errorf("driver: %d copies paused, %d steps on them; want %d, 0", inDriver, steps, paused)
		}
		next := r.now.Add(time.Hour)
		fc := models.Finding{ID: "checkpoint_forecast:client:gpu00:1", Kind: "checkpoint_forecast", Subject: models.Subject{Kind: models.SubjectClient, ID: "gpu00"},
			Severity: models.SeverityInfo, Start: r.now, LastSeen: r.now, Evidence: []models.Evidence{
				{Name: "next_start", Value: float64(next.Unix())}, {Name: "next_end", Value: float64(next.Add(time.Minute).Unix())}}}
		r.runFor(60, heat, risk(30, models.SeverityWarning), fc)
		for _, mv := range r.moves() {
			if mv.State != models.ActionSucceeded {
				t.Errorf("move %s: %s (blocked %q); want succeeded once a forecast exists", mv.ID, mv.State, mv.Blocked)
			}
		}
	})
	t.Run("hold bounded", func(t *testing.T) {
		r := start(t, 3*time.Minute, risk(30, models.SeverityWarning))
		if paused, _, waiting, _ := held(r); paused+waiting == 0 {
			t.Fatal("nothing held by checkpoint_unforecast within its hold")
		}
		r.runFor(80, heat, risk(30, models.SeverityWarning))
		for _, mv := range r.moves() {
			if mv.State != models.ActionSucceeded {
				t.Errorf("move %s: %s (blocked %q); want succeeded once checkpoint_unforecast_hold passed", mv.ID, mv.State, mv.Blocked)
			}
		}
	})
	t.Run("urgent goes on", func(t *testing.T) {
		r := start(t, time.Hour, risk(3, models.SeverityWarning))
		if paused, _, waiting, _ := held(r); paused+waiting != 0 {
			t.Errorf("%d urgent moves held by checkpoint_unforecast; want none", paused+waiting)
		}
	})
}

// A drive about to fail is evacuated urgently whatever else is said about
// it: its drive_failure_risk outranks a drive_wearout for the same drive,
// in one tick or later, and escalates the wear-out's open plan to urgent,
// once, across a restart, and without skipping an operator's approval.
func TestEngineRiskOutranksWearout(t *testing.T) {
	wear := models.Finding{ID: "drive_wearout/device:ds1/nvme0", Kind: "drive_wearout", Subject: models.Subject{Kind: models.SubjectDevice, ID: "ds1/nvme0"},
		Severity: models.SeverityInfo, Start: t0, LastSeen: t0, Summary: "worn out"}
	risk := models.Finding{ID: "drive_failure_risk/device:ds1/nvme0", Kind: "drive_failure_risk", Subject: models.Subject{Kind: models.SubjectDevice, ID: "ds1/nvme0"},
		Severity: models.SeverityCritical, Start: t0, LastSeen: t0, Summary: "media errors rising"}
	cfg := func(mode models.ActionMode) Config {
		c := testConfig(mode)
		c.Evacuate.OffPeak = "01:00-05:00" // t0 is 12:00: a replacement waits 13 h
		return c
	}
	plan := func(t *testing.T, r *rig) (models.Action, []models.Action) {
		t.Helper()
		ps := r.plans()
		if len(ps) != 1 {
			t.Fatalf("%d plans; want one for the drive", len(ps))
		}
		var kids []models.Action
		for _, mv := range r.moves() {
			if mv.Parent == ps[0].ID {
				kids = append(kids, mv)
			}
		}
		if len(kids) == 0 {
			t.Fatalf("plan %s has no moves", ps[0].ID)
		}
		return ps[0], kids
	}
	wantUrgent := func(t *testing.T, r *rig) models.Action {
		t.Helper()
		p, kids := plan(t, r)
		if !p.Urgent || !p.NotBefore.IsZero() || strings.HasPrefix(p.Blocked, GuardOffPeak+":") || p.FindingID != risk.ID {
			t.Errorf("plan: urgent %v, not before %s, held by %q, finding %s; want urgent, not waiting for off-peak, serving %s", p.Urgent, p.NotBefore, p.Blocked, p.FindingID, risk.ID)
		}
		for _, mv := range kids {
			if !mv.Urgent {
				t.Errorf("move %s (%s) is not urgent", mv.ID, mv.State)
			}
		}
		return p
	}

	t.Run("wear-out first", func(t *testing.T) {
		m, heat := hotCluster()
		dir := t.TempDir()
		r := newRig(t, m, cfg(models.ModeAuto), dir)
		r.runFor(3, heat, wear)
		if p, _ := plan(t, r); p.Urgent || !strings.HasPrefix(p.Blocked, GuardOffPeak+":") {
			t.Fatalf("wear-out plan: urgent %v, held by %q; want non-urgent, waiting for off-peak", p.Urgent, p.Blocked)
		}
		r.runFor(1, heat, wear, risk)
		p := wantUrgent(t, r)
		if !strings.Contains(p.Reason, "escalated to urgent at ") || !strings.Contains(p.Reason, risk.Summary) {
			t.Errorf("reason %q; want it to say when and why the plan became urgent", p.Reason)
		}
		// a restart reads the escalation back from the journal: nothing
		// changes again
		r.e.Stop(context.Background())
		r.j.Close()
		r2 := newRig(t, m, cfg(models.ModeAuto), dir)
		r2.now = r.now
		r2.runFor(30, heat, wear, risk)
		p = wantUrgent(t, r2)
		if n := strings.Count(p.Reason, "escalated to urgent"); n != 1 {
			t.Errorf("reason says %d times that it was escalated; want once: %q", n, p.Reason)
		}
		if p.State != models.ActionSucceeded {
			t.Errorf("plan %s (%s) 5 minutes after the risk; want succeeded, not waiting for 01:00", p.State, p.Blocked)
		}
	})
	w := wear
	w.ID = "0/" + wear.ID // findings are read in id order: this one first
	for _, tc := range []struct {
		name          string
		first, second []models.Finding
	}{
		{"one tick, wear-out listed first", []models.Finding{w, risk}, []models.Finding{w, risk}},
		{"risk first", []models.Finding{risk}, []models.Finding{risk, wear}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, heat := hotCluster()
			r := newRig(t, m, cfg(models.ModeAuto), "")
			r.runFor(2, heat, tc.first...)
			r.runFor(3, heat, tc.second...)
			if p := wantUrgent(t, r); strings.Contains(p.Reason, "escalated") || !strings.HasPrefix(p.Reason, risk.Kind) {
				t.Errorf("reason %q; want the risk's plan from the start, never escalated", p.Reason)
			}
		})
	}
	t.Run("approve", func(t *testing.T) {
		m, heat := hotCluster()
		r := newRig(t, m, cfg(models.ModeApprove), "")
		r.runFor(3, heat, wear)
		r.runFor(3, heat, wear, risk)
		if p := wantUrgent(t, r); p.State != models.ActionAwaitingApproval {
			t.Errorf("plan %s; want still awaiting approval, now urgent", p.State)
		}
		if n := m.calls["copy"]; n != 0 {
			t.Errorf("copied %d times before approval", n)
		}
	})
}
