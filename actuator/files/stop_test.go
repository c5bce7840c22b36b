package files

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ballast-io/ballast/actuator"
	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/storage"
)

// TestFilesStopAbortsCopyUnderWay stops the actions engine (a graceful
// stop of the mds: SIGTERM) while its worker copies a file through this
// driver: the stop must leave the exports and the layout store clean and
// the journal self-describing — no part file and no copy on the
// destination, no in-flight record, the move journaled cancelled in phase
// aborted (not a failed attempt), its plan cancelled, the source and its
// layout untouched and the layout hook never called.
func TestFilesStopAbortsCopyUnderWay(t *testing.T) {
	r := newRig(t, 1<<20)
	// paced: 0.25 (device_share) × 400 kB/s ÷ 2 (max_moves_per_device)
	// = 50 kB/s, so the 1 MiB copy takes about 20 s
	s := r.d.devs[devB]
	s.BandwidthBytes = 400_000
	r.d.devs[devB] = s

	j, err := storage.OpenJournal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	now := time.Now()
	plan := models.Action{ID: "rebalance:pool:p:1", Kind: models.ActionRebalance, Subject: models.Subject{Kind: models.SubjectPool, ID: "p"},
		Mode: models.ModeAuto, State: models.ActionRunning, Created: now, Updated: now, Started: now}
	mv := r.move()
	mv.Phase = models.PhasePending
	move := models.Action{ID: plan.ID + ":m:1", Kind: models.ActionMoveStripe, Parent: plan.ID, Subject: models.Subject{Kind: models.SubjectStripe, ID: devA + "/0a0b"},
		Mode: models.ModeAuto, State: models.ActionApproved, Created: now, Updated: now, Move: &mv}
	if err := j.PutActions([]models.Action{plan, move}); err != nil {
		t.Fatal(err)
	}
	cfg := actuator.DefaultConfig()
	cfg.Driver, cfg.Mode = actuator.DriverFiles, models.ModeAuto
	cfg.Files = r.d.cfg
	cfg.Files.LayoutCommand = []string{"true"} // validation only: the driver has the rig's hook
	e, err := actuator.New(actuator.Options{Config: cfg, Mover: r.d, Journal: j,
		Load: func() ([]models.Action, error) { return j.Actions(storage.ActionFilter{}) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := e.Reconcile(context.Background(), time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	dstDir := filepath.Join(r.b, "set")
	parts := func() []string {
		ps, _ := filepath.Glob(filepath.Join(dstDir, ".ballast-*.part"))
		return ps
	}
	records := func() []string {
		rs, _ := filepath.Glob(filepath.Join(r.d.cfg.LayoutDir, "moves", "*.json"))
		return rs
	}
	// the copy is under way: a part file with bytes in it, a record in flight
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if ps := parts(); len(ps) == 1 {
			if fi, err := os.Stat(ps[0]); err == nil && fi.Size() > 0 && len(records()) == 1 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no copy under way within 20 s: parts %v, records %v", parts(), records())
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}

	if ps := parts(); len(ps) != 0 {
		t.Errorf("part files left by the stop: %v", ps)
	}
	if _, err := os.Stat(filepath.Join(dstDir, "f1")); err == nil {
		t.Error("a copy was left on the destination, which no layout references")
	}
	if rs := records(); len(rs) != 0 {
		t.Errorf("in-flight records left by the stop: %v", rs)
	}
	got, err := j.Actions(storage.ActionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range got {
		switch a.ID {
		case move.ID:
			if a.State != models.ActionCancelled || a.Move == nil || a.Move.Phase != models.PhaseAborted || !strings.Contains(a.Reason, "stop") {
				t.Errorf("move journaled %s, phase %v, reason %q; want cancelled, aborted, by the stop", a.State, a.Move, a.Reason)
			}
			if a.Attempts != 0 || a.Error != "" {
				t.Errorf("move journaled %d failed attempts (%q); a copy cut by a stop is no failure", a.Attempts, a.Error)
			}
		case plan.ID:
			if a.State != models.ActionCancelled || !strings.Contains(a.Reason, "stopped") {
				t.Errorf("plan journaled %s (%q); want cancelled by the stop", a.State, a.Reason)
			}
		}
	}
	if b := mustRead(t, filepath.Join(r.a, "set", "f1")); !bytes.Equal(b, r.data) {
		t.Error("the source changed")
	}
	if l, err := r.d.Locate(context.Background(), "set/f1"); err != nil || l.Generation != 1 || l.Mirrors[0][0].Device != devA {
		t.Errorf("layout after the stop: %+v, %v; want generation 1 on %s", l, err, devA)
	}
	if len(r.calls) != 0 {
		t.Errorf("the layout hook was called %d times; want none", len(r.calls))
	}
}
