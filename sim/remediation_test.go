package sim

import (
	"testing"

	"github.com/ballast-io/ballast/models"
)

// TestRemediationCountsRestripes: a plan whose only child is a restripe
// reports it among its planned moves, so the summary reads 1/1, not 1/0.
func TestRemediationCountsRestripes(t *testing.T) {
	acts := []models.Action{
		{ID: "p", Kind: models.ActionRebalance, State: models.ActionSucceeded,
			Plan:     &models.ActionPlan{Moves: 0, Restripes: 1, LowerBoundBytes: 9},
			Progress: &models.ActionProgress{MovesTotal: 1, MovesDone: 1, BytesMoved: 10}},
		{ID: "p:r:1", Parent: "p", Kind: models.ActionRestripeFile, State: models.ActionSucceeded},
	}
	r := remediation(acts, models.ModeAuto)
	if r.Plans != 1 || len(r.Each) != 1 {
		t.Fatalf("got %d plans, %d summaries; want 1, 1", r.Plans, len(r.Each))
	}
	if p := r.Each[0]; p.Moves != 1 || p.MovesDone != 1 {
		t.Errorf("plan with one restripe: moves %d/%d; want 1/1", p.MovesDone, p.Moves)
	}
}
