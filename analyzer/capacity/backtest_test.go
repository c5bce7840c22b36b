package capacity

import (
	"math"
	"strings"
	"testing"
	"time"
)

// TestFitCheckpointCadence: a 15-minute sawtooth (a checkpoint written,
// the oldest deleted) on a slow trend. Passed in as a period, the cadence
// is fitted and the first crossing lands on a sawtooth peak.
func TestFitCheckpointCadence(t *testing.T) {
	saw := func(x float64) float64 {
		ph := math.Mod(x*96, 1) // 15-minute phase
		return 0.6 + 0.02*x + 0.04*ph
	}
	s, now := gen(3, time.Minute, saw)
	opt := DefaultOptions().WithPeriod(15 * time.Minute)
	fc, err := Fit(s, now, opt)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range fc.Periods {
		found = found || p == 15*time.Minute
	}
	if !found {
		t.Fatalf("periods %v; want the 15 min cadence fitted", fc.Periods)
	}
	x0 := now.Sub(t0).Hours() / 24
	want := firstCrossing(saw, x0, 0.9)
	plain, err := Fit(s, now, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	errWith := math.Abs(float64(fc.Crossings[1].Days) - want)
	errPlain := math.Abs(float64(plain.Crossings[1].Days) - want)
	if errWith > errPlain-0.5 {
		t.Errorf("error with the cadence %.3f d, without %.3f d; want at least 0.5 d better", errWith, errPlain)
	}
	// Three harmonics round the sawtooth's corner; eight get the peak.
	opt.Harmonics = 8
	fine, err := Fit(s, now, opt)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "days to 90% with 8 harmonics", float64(fine.Crossings[1].Days), want, 0.25)
	if opt2 := opt.WithPeriod(15 * time.Minute); len(opt2.Periods) != len(opt.Periods) {
		t.Errorf("WithPeriod added a period twice: %v", opt2.Periods)
	}
}

// TestBacktestKnownAnswers: on exact lines both methods are right, and
// the interval holds the truth; a line that falls never crosses
// (censored).
func TestBacktestKnownAnswers(t *testing.T) {
	up, _ := gen(20, 30*time.Minute, func(x float64) float64 { return 0.5 + 0.02*x })
	down, _ := gen(20, 30*time.Minute, func(x float64) float64 { return 0.5 - 0.01*x })
	down.Subject.ID = "down"
	res := Backtest([]Series{up, down}, BacktestOptions{Stride: day})
	// up crosses 85 % at day 17.5, 90 % at 20; origins at days 7..20.
	if res.Series != 2 || res.Origins != 2*13 {
		t.Errorf("series %d origins %d; want 2 and 26", res.Series, res.Origins)
	}
	if res.Censored != 13*3+13*1 { // down: every level; up: 95 % never reached
		t.Errorf("censored %d; want %d", res.Censored, 13*3+13)
	}
	if res.All.N != len(res.Cases) || res.All.N == 0 {
		t.Fatalf("all = %+v with %d cases", res.All, len(res.Cases))
	}
	for _, c := range res.Cases {
		if math.Abs(float64(c.Ballast)-c.Actual) > 0.03 || math.Abs(float64(c.Baseline)-c.Actual) > 0.03 {
			t.Errorf("%v level %.2f: ballast %.3f, predict_linear %.3f; want both %.3f", c.Origin, c.Level, c.Ballast, c.Baseline, c.Actual)
		}
	}
	if res.All.Coverage < 0.9 {
		t.Errorf("coverage %.2f on exact lines; want ≥ 0.9", res.All.Coverage)
	}
	var b strings.Builder
	if err := res.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| **all** |", "MAE predict_linear 2d", "2 series, 26 forecast origins"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, b.String())
		}
	}
}
