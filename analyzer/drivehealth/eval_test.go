package drivehealth

import (
	"math"
	"strings"
	"testing"
	"time"
)

func evalMethods(t *testing.T) (*Model, []Method) {
	t.Helper()
	m, err := DefaultModel()
	if err != nil {
		t.Fatal(err)
	}
	return m, []Method{BallastMethod(m, DefaultRuleOptions()), ModelMethod(m), StaticRuleMethod(), CephDiffMethod()}
}

func TestEvaluateBackblaze(t *testing.T) {
	_, methods := evalMethods(t)
	r := Evaluate(loadDrives(t), methods)
	if r.TrainDrives+r.TestDrives != 737 || r.AllFailed != 78 {
		t.Fatalf("got %d+%d drives, %d failed; want 737, 78", r.TrainDrives, r.TestDrives, r.AllFailed)
	}
	if r.CeilingAll != 55 {
		t.Errorf("got %d failed drives with any SMART signal; want 55 (counted independently from the CSV)", r.CeilingAll)
	}
	for _, m := range r.Methods {
		if !(m.AUC > 0.5 && m.AUC <= 1) {
			t.Errorf("%s: AUC %v; want in (0.5, 1]", m.Name, m.AUC)
		}
		for _, p := range append(m.TrainChosen, m.TestROC...) {
			if p.TPR < 0 || p.TPR > 1 || p.FPR < 0 || p.FPR > 1 {
				t.Errorf("%s: point %+v out of range", m.Name, p)
			}
			if p.TPR > float64(r.CeilingTest)/float64(r.TestFailed)+1e-9 && p.Threshold > 0 {
				// A drive with no signal can still be flagged by the model
				// (temperature, age), so this is only a sanity bound for the
				// count-based baselines.
				if strings.Contains(m.Name, "Ceph") || strings.Contains(m.Name, "static") {
					t.Errorf("%s: TPR %v above the signal ceiling", m.Name, p.TPR)
				}
			}
		}
	}
	// The shipped scorer must beat both baselines where it matters most
	// (strict false-positive budgets, thresholds from the train split).
	ballast, static, ceph := r.Methods[0], r.Methods[2], r.Methods[3]
	if ballast.TrainChosen[0].TPR <= math.Max(static.TrainChosen[0].TPR, ceph.TrainChosen[0].TPR) {
		t.Errorf("at FPR 0.1 %%: ballast TPR %v not above baselines %v / %v", ballast.TrainChosen[0].TPR, static.TrainChosen[0].TPR, ceph.TrainChosen[0].TPR)
	}
}

func TestThresholdAndAUC(t *testing.T) {
	d := func(failed bool, scores ...float64) driveSeries {
		s := driveSeries{failed: failed, fail: t0.Add(time.Duration(len(scores)-1) * day), max: math.Inf(-1)}
		for i, v := range scores {
			s.days = append(s.days, t0.Add(time.Duration(i)*day))
			s.scores = append(s.scores, v)
			s.max = math.Max(s.max, v)
		}
		return s
	}
	s := []driveSeries{d(false, 0.1, 0.2), d(false, 0.5), d(false, 0.3), d(true, 0.1, 0.9), d(true, 0.9, 0.4, 0.4)}
	// AUC: both failed drives peak at 0.9, above all 3 healthy → 1.
	if got := auc(s); got != 1 {
		t.Errorf("auc: got %v; want 1", got)
	}
	if got := auc([]driveSeries{d(false, 0.5), d(true, 0.5), d(true, 0.2), d(false, 0.1)}); got != 0.625 {
		t.Errorf("auc with a tie: got %v; want (0.5+1+0+1)/4 = 0.625", got)
	}
	// No healthy drive may be flagged: threshold just above 0.5.
	th := thresholdFor(s, 0.1)
	if !(th > 0.5 && th < 0.5000001) {
		t.Errorf("threshold at FPR 0.1: got %v; want just above 0.5", th)
	}
	p := pointAt(s, th, 0.1)
	if p.FPR != 0 || p.TPR != 1 || p.TruePositives != 2 || p.MedianLead != 1 {
		t.Errorf("got %+v; want FPR 0, TPR 1, median lead (0+2)/2 = 1 day", p)
	}
	// One of three healthy may be flagged.
	if th := thresholdFor(s, 0.34); th != math.Nextafter(0.3, 1) {
		t.Errorf("threshold at FPR 0.34: got %v; want just above 0.3", th)
	}
	if p := pointAt(s, thresholdFor(s, 0.34), 0.34); math.Abs(p.FPR-1.0/3) > 1e-12 {
		t.Errorf("FPR at the 0.34 threshold: got %v; want 1/3", p.FPR)
	}
	// Ties: two healthy drives at 0.5 with one allowed flag none of them.
	tied := []driveSeries{d(false, 0.5), d(false, 0.5), d(false, 0.1), d(true, 0.5)}
	if p := pointAt(tied, thresholdFor(tied, 0.34), 0.34); p.FPR != 0 || p.TPR != 0 {
		t.Errorf("tied scores: got %+v; want nothing flagged", p)
	}
}
