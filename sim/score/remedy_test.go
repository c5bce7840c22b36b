package score

import (
	"math"
	"testing"
	"time"

	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/sim/twin"
)

// remedyRun builds 10 s samples of one 8-GPU job over 40 min whose
// utilisation is util(t) (minutes since the start), paused from 20 to 21
// min for a checkpoint, and two devices whose user bytes grow at 100 and
// 300 B/s.
func remedyRun(util func(min float64) float64) []RemedySample {
	var ss []RemedySample
	var j twin.JobGPU
	var d0, d1 float64
	for s := 0; s <= 40*60; s += 10 {
		m := float64(s) / 60
		if s > 0 {
			j.Allocated += 80
			if m > 20 && m <= 21 {
				j.Paused += 80
			} else {
				j.Busy += 80 * util(m)
			}
			d0 += 1000
			d1 += 3000
		}
		ss = append(ss, RemedySample{At: r0.Add(time.Duration(s) * time.Second), Jobs: []twin.JobGPU{j},
			DeviceBytes: []float64{d0, d1}, Active: []bool{true, true}})
	}
	return ss
}

var r0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func remedyInput(ss []RemedySample) RemedyInput {
	return RemedyInput{
		Method: "ballast", Samples: ss, End: r0.Add(40 * time.Minute),
		Devices: []twin.DeviceLoad{{Name: "ds00/nvme0n1", Pool: "fast"}, {Name: "ds01/nvme0n1", Pool: "fast"}},
		Truth: []twin.TruthRecord{
			{Kind: "hot_shard", Subject: models.Subject{Kind: models.SubjectStripe, ID: "a#0"}, Start: r0.Add(10 * time.Minute), End: r0.Add(35 * time.Minute)},
			{Kind: "hot_shard", Subject: models.Subject{Kind: models.SubjectStripe, ID: "a#1"}, Start: r0.Add(10 * time.Minute), End: r0.Add(35 * time.Minute)},
		},
		Actions: []models.Action{
			{ID: "p1", Kind: models.ActionRebalance, State: models.ActionSucceeded, Plan: &models.ActionPlan{LowerBoundBytes: 100},
				Progress: &models.ActionProgress{MovesTotal: 2, MovesDone: 2, BytesMoved: 105}, Effect: &models.ActionEffect{Verdict: models.VerdictEffective}},
			{ID: "p1:m:1", Parent: "p1", Kind: models.ActionMoveStripe},
			{ID: "p2", Kind: models.ActionRebalance, State: models.ActionRunning, Plan: &models.ActionPlan{LowerBoundBytes: 100},
				Progress: &models.ActionProgress{MovesTotal: 4, MovesDone: 1, BytesMoved: 50}},
		},
		OtherInCheckpoints: 7,
	}
}

func TestScoreRemedyRecoveredInTime(t *testing.T) {
	// utilisation 0.8 for 3 minutes after the onset, then 0.99; the
	// checkpoint pause at 20 min is not a dip
	ss := remedyRun(func(m float64) float64 {
		if m > 10 && m <= 13 {
			return 0.8
		}
		return 0.99
	})
	r := ScoreRemedy(remedyInput(ss))
	if r.Hotspots != 1 || r.Affected != 1 || r.Recovered != 1 {
		t.Fatalf("hotspots %d, affected %d, recovered %d; want 1, 1, 1 (one onset shared by two records)", r.Hotspots, r.Affected, r.Recovered)
	}
	if v := float64(r.RecoverMedian); v < 170 || v > 190 {
		t.Errorf("time to recover %.0f s; want 180 (the first clean minute starts 3 min after the onset)", v)
	}
	if v := float64(r.AffectedUtil); math.Abs(v-0.99) > 1e-9 {
		t.Errorf("affected util %.4f; want 0.99 (the pause left out)", v)
	}
	if v := float64(r.MaxMean); math.Abs(v-1.5) > 1e-9 {
		t.Errorf("max/mean %.3f; want 1.5 (300 ÷ 200)", v)
	}
	// p2 is still running: only p1's bytes count against its bound
	if float64(r.CostRatio) != 1.05 || r.BytesMoved != 155 {
		t.Errorf("cost ratio %v over %d bytes moved; want 1.05 from the finished plan, 155 bytes in all", r.CostRatio, r.BytesMoved)
	}
	if r.Plans != 2 || r.Acted != 2 || r.Measured != 1 || r.Verdicts["effective"] != 1 || r.Verdicts["none"] != 1 {
		t.Errorf("plans %d, acted %d, measured %d, verdicts %v; want 2, 2, 1, effective 1 and none 1", r.Plans, r.Acted, r.Measured, r.Verdicts)
	}
	if r.CheckpointBytes != 7 {
		t.Errorf("checkpoint bytes %v; want 7", r.CheckpointBytes)
	}
}

func TestScoreRemedyNeverRecovered(t *testing.T) {
	// back at 0.99 only 8 minutes after the onset, then down again
	// before the end: not recovered at all
	ss := remedyRun(func(m float64) float64 {
		if m > 10 && m <= 18 || m > 33 && m <= 35 {
			return 0.8
		}
		return 0.99
	})
	r := ScoreRemedy(remedyInput(ss))
	if r.Affected != 1 || r.Recovered != 0 || !math.IsInf(float64(r.RecoverMedian), 1) {
		t.Errorf("affected %d, recovered %d, median %v; want 1, 0, +Inf", r.Affected, r.Recovered, r.RecoverMedian)
	}
	// late but lasting: recovered, not in time
	ss = remedyRun(func(m float64) float64 {
		if m > 10 && m <= 18 {
			return 0.8
		}
		return 0.99
	})
	r = ScoreRemedy(remedyInput(ss))
	if r.Recovered != 0 || float64(r.RecoverMedian) < 470 || float64(r.RecoverMedian) > 490 {
		t.Errorf("recovered in time %d, median %v; want 0 and 480 s", r.Recovered, r.RecoverMedian)
	}
}
