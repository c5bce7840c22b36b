package capacity

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ballast-io/ballast/models"
)

var t0 = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC) // a Monday

const tb = 1e12

// gen samples f (days since t0 → used ratio) every step for days days and
// returns the series (capacity 100 TB) and the time of the last reading.
func gen(days float64, step time.Duration, f func(x float64) float64) (Series, time.Time) {
	s := Series{Subject: models.Subject{Kind: models.SubjectPool, ID: "p"}, Capacity: 100 * tb}
	var last time.Time
	for t := t0; t.Sub(t0).Hours()/24 <= days; t = t.Add(step) {
		s.Used = append(s.Used, Point{T: t, V: f(t.Sub(t0).Hours()/24) * s.Capacity})
		last = t
	}
	return s, last
}

// firstCrossing scans f from x0 on a fine grid for the first x where
// f(x) ≥ level.
func firstCrossing(f func(float64) float64, x0, level float64) float64 {
	for x := x0; x < x0+400; x += 1.0 / 1440 {
		if f(x) >= level {
			return x - x0
		}
	}
	return math.Inf(1)
}

func near(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol {
		t.Errorf("%s: got %.4f; want %.4f ± %.4f", what, got, want, tol)
	}
}

func TestFitLinear(t *testing.T) {
	f := func(x float64) float64 { return 0.5 + 0.01*x }
	s, now := gen(14, 5*time.Minute, f)
	fc, err := Fit(s, now, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	near(t, "growth TB/day", fc.Growth/tb, 1, 1e-6)
	near(t, "used ratio", fc.UsedRatio, 0.64, 1e-9)
	for i, want := range []float64{21, 26, 31} {
		c := fc.Crossings[i]
		near(t, c.Level.Name+" days", float64(c.Days), want, 0.01)
		if !(float64(c.DaysLow) <= want+1e-6 && want-1e-6 <= float64(c.DaysHi)) {
			t.Errorf("%s: interval [%v, %v] misses %v", c.Level.Name, c.DaysLow, c.DaysHi, want)
		}
		if float64(c.DaysHi-c.DaysLow) > 0.5 {
			t.Errorf("%s: interval [%v, %v] too wide for an exact line", c.Level.Name, c.DaysLow, c.DaysHi)
		}
	}
	if len(fc.Steps) != 0 {
		t.Errorf("steps %v in a straight line", fc.Steps)
	}
}

func TestFitLinearDaily(t *testing.T) {
	f := func(x float64) float64 { return 0.5 + 0.01*x + 0.03*math.Sin(2*math.Pi*x) }
	s, now := gen(14, 5*time.Minute, f)
	fc, err := Fit(s, now, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(fc.Periods) == 0 || fc.Periods[0] != day {
		t.Fatalf("periods %v; want the daily cycle fitted", fc.Periods)
	}
	near(t, "growth TB/day", fc.Growth/tb, 1, 0.01)
	x0 := now.Sub(t0).Hours() / 24
	for _, c := range fc.Crossings {
		want := firstCrossing(f, x0, c.Level.Ratio)
		near(t, c.Level.Name+" days", float64(c.Days), want, 0.05)
	}
	// The same series with a straight-line model reaches 85 % about a day
	// later than the daily peak does.
	opt := DefaultOptions()
	opt.Periods = []time.Duration{}
	lin, err := Fit(s, now, opt)
	if err != nil {
		t.Fatal(err)
	}
	if d := float64(lin.Crossings[0].Days - fc.Crossings[0].Days); d < 0.5 {
		t.Errorf("without the daily cycle 85 %% comes %.2f d later; want the peak to come ≥ 0.5 d earlier", d)
	}
}

func TestFitStepChange(t *testing.T) {
	// 1 %/day growth; a clean-up removed 10 % five days before the end.
	f := func(x float64) float64 {
		v := 0.5 + 0.01*x
		if x >= 9 {
			v -= 0.10
		}
		return v
	}
	s, now := gen(14, 5*time.Minute, f)
	fc, err := Fit(s, now, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(fc.Steps) != 1 || !fc.Steps[0].Equal(t0.Add(9*day)) {
		t.Fatalf("steps %v; want one at %v", fc.Steps, t0.Add(9*day))
	}
	near(t, "growth TB/day", fc.Growth/tb, 1, 1e-4)
	near(t, "days to 85%", float64(fc.Crossings[0].Days), 31, 0.02)
	// predict_linear over 2 days sees the right slope too here (the step is
	// older than its range), but over 7 days it would not.
	if _, slope, ok := PredictLinear(s.Used, now, 7*day); !ok || math.Abs(slope*86400/tb-1) < 0.5 {
		t.Errorf("7-day predict_linear slope %.3f TB/day; expected the step to bend it away from 1", slope*86400/tb)
	}
}

func TestFitFlat(t *testing.T) {
	s, now := gen(10, 10*time.Minute, func(float64) float64 { return 0.6 })
	fc, err := Fit(s, now, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	near(t, "growth", fc.Growth, 0, 1)
	for _, c := range fc.Crossings {
		if c.Days.Finite() || c.DaysLow.Finite() || c.DaysHi.Finite() || c.Reached {
			t.Errorf("%s: %+v; want never", c.Level.Name, c)
		}
	}
	if got := Findings([]*Forecast{fc}, DefaultOptions()); len(got) != 0 {
		t.Errorf("flat series gave findings %+v", got)
	}
}

// TestFitNoisy checks calibration on many noisy series: AR(1) noise around
// a line with a daily cycle; the 90 % interval of the days to 90 % should
// hold the truth in most of them and the mean be close.
func TestFitNoisy(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	hits, n := 0, 40
	var absErr float64
	for k := 0; k < n; k++ {
		slope := 0.005 + 0.01*r.Float64()
		e := 0.0
		var noise []float64
		for i := 0; i < 20*96+1; i++ {
			e = 0.9*e + 0.002*r.NormFloat64()
			noise = append(noise, e)
		}
		f := func(x float64) float64 { return 0.4 + slope*x + 0.01*math.Sin(2*math.Pi*x) }
		s, now := gen(20, 15*time.Minute, func(x float64) float64 { return f(x) + noise[int(math.Round(x*96))] })
		fc, err := Fit(s, now, DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		want := firstCrossing(f, 20, 0.9)
		c := fc.Crossings[1]
		absErr += math.Abs(float64(c.Days) - want)
		if float64(c.DaysLow) <= want && want <= float64(c.DaysHi) {
			hits++
		}
		near(t, "growth", fc.Growth/fc.Capacity, slope, 0.002)
	}
	if cov := float64(hits) / float64(n); cov < 0.8 {
		t.Errorf("interval coverage %.2f; want ≥ 0.8", cov)
	}
	if mae := absErr / float64(n); mae > 1.5 {
		t.Errorf("mean abs error %.2f d; want ≤ 1.5", mae)
	}
}

func TestFitReachedAndFindings(t *testing.T) {
	s, now := gen(7, 10*time.Minute, func(x float64) float64 { return 0.80 + 0.02*x })
	fc, err := Fit(s, now, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	c := fc.Crossings
	if !c[0].Reached || !c[1].Reached || c[2].Reached {
		t.Fatalf("reached = %v %v %v; want true true false", c[0].Reached, c[1].Reached, c[2].Reached)
	}
	near(t, "days to 95%", float64(c[2].Days), 0.5, 0.01)
	fs := Findings([]*Forecast{fc}, DefaultOptions())
	if len(fs) != 1 {
		t.Fatalf("findings %d; want 1", len(fs))
	}
	f := fs[0]
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	if f.Kind != KindThreshold || f.Severity != models.SeverityCritical || f.ID != "capacity_threshold/pool:p" {
		t.Errorf("finding %s %s %s; want capacity_threshold critical capacity_threshold/pool:p", f.Kind, f.Severity, f.ID)
	}
	var date *models.Evidence
	for i := range f.Evidence {
		if f.Evidence[i].Name == "predicted_date" {
			date = &f.Evidence[i]
		}
	}
	if date == nil || math.Abs(date.Value-float64(now.Add(12*time.Hour).Unix())) > 600 {
		t.Errorf("predicted_date evidence %+v; want about %v", date, now.Add(12*time.Hour))
	}
}

func TestFitErrors(t *testing.T) {
	short, now := gen(1.0/24, 10*time.Minute, func(float64) float64 { return 0.5 })
	zero, _ := gen(2, time.Hour, func(float64) float64 { return 0.5 })
	zero.Capacity = 0
	order, _ := gen(2, time.Hour, func(float64) float64 { return 0.5 })
	order.Used[3].T = order.Used[1].T
	neg, _ := gen(2, time.Hour, func(float64) float64 { return 0.5 })
	neg.Used[2].V = -1
	for name, s := range map[string]Series{"short": short, "zero capacity": zero, "out of order": order, "negative": neg} {
		if _, err := Fit(s, now.Add(2*day), DefaultOptions()); err == nil {
			t.Errorf("%s: no error", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

// TestFitStepAndSlopeChange: a tenant deleted five days ago also stopped
// writing, so growth halved at the step; the forecast follows the new
// growth, not a blend.
func TestFitStepAndSlopeChange(t *testing.T) {
	f := func(x float64) float64 {
		if x < 9 {
			return 0.4 + 0.02*x
		}
		return 0.4 + 0.02*9 - 0.12 + 0.01*(x-9)
	}
	s, now := gen(14, 5*time.Minute, f)
	fc, err := Fit(s, now, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	near(t, "growth TB/day", fc.Growth/tb, 1, 0.01)
	// 51 % now, 1 %/day: 85 % in 34 days.
	near(t, "days to 85%", float64(fc.Crossings[0].Days), 34, 0.2)
	// A step only hours old keeps the old growth: too little data after it.
	s2, now2 := gen(9.2, 5*time.Minute, f)
	fc2, err := Fit(s2, now2, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(fc2.Steps) != 1 {
		t.Fatalf("steps %v; want the one at day 9", fc2.Steps)
	}
	near(t, "growth just after the step, TB/day", fc2.Growth/tb, 2, 0.05)
}

// TestFitWeekendProfile: a tenant writes 4 % of capacity during weekday
// working hours and deletes it each evening; weekends are quiet. Fitted on
// a Friday evening, the forecast has no bump on Saturday or Sunday and
// one again on Monday.
func TestFitWeekendProfile(t *testing.T) {
	bump := func(x float64) float64 {
		d := math.Floor(x)
		wd := int(d) % 7 // t0 is a Monday
		h := (x - d) * 24
		if wd >= 5 || h < 8 || h >= 19 {
			return 0
		}
		return 0.04 * (h - 8) / 11
	}
	f := func(x float64) float64 { return 0.5 + 0.005*x + bump(x) }
	s, now := gen(11.8, 10*time.Minute, f) // ends Friday of week 2, 19:12
	fc, err := Fit(s, now, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	at := func(d, h float64) float64 {
		return fc.At(t0.Add(time.Duration((d*24+h)*float64(time.Hour)))).Mean / fc.Capacity
	}
	near(t, "Saturday 18:00", at(12, 18), f(12.75), 0.006)
	near(t, "Sunday 18:00", at(13, 18), f(13.75), 0.006)
	// Three harmonics round the ramp's peak off, so Monday's bump is
	// checked against Sunday's quiet evening with a looser tolerance.
	near(t, "Monday 18:00 − Sunday 18:00", at(14, 18)-at(13, 18), f(14.75)-f(13.75), 0.012)
}
