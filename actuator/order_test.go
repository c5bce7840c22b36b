package actuator

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/ballast-io/ballast/models"
)

// TestDeviceLoadsSumInKeyOrder: a device's load is the sum of its
// stripes' rates, and a floating-point sum depends on its order. Rates
// 1e17, 5 and 5 B/s sum to 1e17 when the large one comes first and to
// 1e17+16 when the two small ones meet first: summed in map order, the
// load changed from call to call, and devices the twin loads alike swapped
// places in the planner's orders (eval's divergent runs, docs/notes.md).
// Every call must give the sum in the order of the stripes' file handles.
func TestDeviceLoadsSumInKeyOrder(t *testing.T) {
	h := newHeatModel(time.Minute)
	rates := map[string]float64{"fh-a": 1e17, "fh-b": 5, "fh-c": 5}
	put := func(k heatKey, r float64) {
		h.index[k] = len(h.entries)
		h.entries = append(h.entries, heatEntry{key: k, rate: r})
	}
	for fh, r := range rates { // in map order: at random
		put(heatKey{"d1", fh}, r)
	}
	put(heatKey{"d2", "fh-a"}, 7)
	want := rates["fh-a"]
	want += rates["fh-b"]
	want += rates["fh-c"]
	for i := range 200 {
		got := h.deviceLoads()
		if math.Float64bits(got["d1"]) != math.Float64bits(want) || got["d2"] != 7 {
			t.Fatalf("call %d: loads %v; want d1 %v (summed in handle order), d2 7", i, got, want)
		}
	}
}

// TestGuardWindowsInTimeOrder: the checkpoint windows of one tick come
// from the engine's findings map. In its order, which of two overlapping
// windows a refusal or a pause named (and so whether a held move's reason
// changed and was journaled again) differed from run to run; they are in
// start order now, every time.
func TestGuardWindowsInTimeOrder(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e := &Engine{cfg: DefaultConfig(), acts: map[string]*models.Action{}, inflight: map[string]bool{},
		devs: map[string]Device{}, findings: map[string]models.Finding{}}
	for i := range 6 {
		id := fmt.Sprintf("gpu%02d", 5-i) // later starts first in the ids
		at := now.Add(time.Duration(i) * time.Minute)
		e.findings["checkpoint_forecast:client:"+id] = models.Finding{ID: "checkpoint_forecast:client:" + id, Kind: "checkpoint_forecast",
			Subject: models.Subject{Kind: models.SubjectClient, ID: id}, Start: now, LastSeen: now, Evidence: []models.Evidence{
				{Name: "next_start", Value: float64(at.Unix())}, {Name: "next_end", Value: float64(at.Add(10 * time.Minute).Unix())}}}
	}
	for n := range 100 {
		g := e.newGuards(now)
		if len(g.windows) != 6 {
			t.Fatalf("%d windows; want 6", len(g.windows))
		}
		for i, w := range g.windows {
			if want := fmt.Sprintf("client:gpu%02d", 5-i); w.subject != want {
				t.Fatalf("call %d: window %d is %s's; want %s's (in start order)", n, i, w.subject, want)
			}
		}
	}
}

// TestRoundEffectAbsorbsLastBits: the store can give a number back with a
// different last bit from run to run (its decimal blocks depend on when it
// flushed and merged), and effects rounded to 6 decimals journaled that
// bit for large numbers: 78419353223.0535 and 78419353223.05351 B/s in two
// evals of one seed (CI stop 25). A number and its neighbours must round
// alike, and small numbers keep their 6 decimals.
func TestRoundEffectAbsorbsLastBits(t *testing.T) {
	for _, x := range []float64{78419353223.0535, 1.156825, 0.797116, 2.14e9 / 3, 1e15 / 7, 0.000262} {
		want := roundEffect(x)
		for _, y := range []float64{math.Nextafter(x, math.Inf(1)), math.Nextafter(x, 0), math.Nextafter(math.Nextafter(x, 0), 0)} {
			if got := roundEffect(y); got != want {
				t.Errorf("roundEffect(%v) = %v but roundEffect(%v) = %v: one bit apart must round alike", x, want, y, got)
			}
		}
	}
	if got := roundEffect(0.000262134); got != 0.000262 {
		t.Errorf("roundEffect(0.000262134) = %v; want 0.000262", got)
	}
	if got := roundEffect(1.2345678); got != 1.234568 {
		t.Errorf("roundEffect(1.2345678) = %v; want 1.234568", got)
	}
}
