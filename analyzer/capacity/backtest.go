package capacity

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/ballast-io/ballast/analyzer/internal/robust"
)

// BacktestOptions set up a backtest.
type BacktestOptions struct {
	// Forecast are the forecast options under test.
	Forecast Options
	// Warmup is the history every origin has; default 7 days.
	Warmup time.Duration
	// Stride is the time between forecast origins; default 12 hours.
	Stride time.Duration
	// BaselineRange is predict_linear's range; default 2 days (Ceph's).
	BaselineRange time.Duration
	// Buckets are the upper edges, in days, of the lead-time buckets that
	// errors are grouped by (by the true time to the level); default
	// 1, 3, 7, 14, 28.
	Buckets []float64
	// Cap clamps predicted days (both methods) so that "never" scores as a
	// finite miss; default 60 days.
	Cap float64
}

// WithDefaults returns o with every zero field set to its default.
func (o BacktestOptions) WithDefaults() BacktestOptions {
	o.Forecast = o.Forecast.WithDefaults()
	if o.Warmup <= 0 {
		o.Warmup = 7 * day
	}
	if o.Stride <= 0 {
		o.Stride = 12 * time.Hour
	}
	if o.BaselineRange <= 0 {
		o.BaselineRange = 2 * day
	}
	if len(o.Buckets) == 0 {
		o.Buckets = []float64{1, 3, 7, 14, 28}
	}
	if !(o.Cap > 0) {
		o.Cap = 60
	}
	return o
}

// BacktestCase is one prediction scored against what happened: at Origin,
// series Subject was predicted to reach Level; Actual is when it did.
type BacktestCase struct {
	Series string    `json:"series"`
	Origin time.Time `json:"origin"`
	Level  float64   `json:"level"`
	Actual float64   `json:"actual_days"`
	// After is the previous reading's lead: the level was crossed in
	// (After, Actual].
	After    float64 `json:"after_days"`
	Ballast  Days    `json:"ballast_days"`
	Low      Days    `json:"ballast_low"`
	High     Days    `json:"ballast_high"`
	Baseline Days    `json:"predict_linear_days"`
}

// Covered reports whether the interval meets (After, Actual], the span in
// which the readings say the level was crossed.
func (c BacktestCase) Covered() bool {
	const eps = 1e-6 // days; rounding of the crossing search
	return float64(c.Low) <= c.Actual+eps && c.After <= float64(c.High)+eps
}

// BacktestBucket aggregates the cases whose true lead time falls in
// (From, To] days.
type BacktestBucket struct {
	From, To    float64
	N           int
	MAEBallast  float64
	MAEBaseline float64
	// MedAE… are the median absolute errors, less swayed by the clamp.
	MedAEBallast  float64
	MedAEBaseline float64
	Coverage      float64
}

// BacktestResult is the outcome of a backtest.
type BacktestResult struct {
	Options  BacktestOptions
	Series   int
	Origins  int
	Censored int // (origin, level) pairs whose level was not reached in the data
	Failed   int // origins where a forecast could not be made
	Cases    []BacktestCase
	Buckets  []BacktestBucket
	All      BacktestBucket
}

// Backtest forecasts each series at origins every Stride from Warmup after
// its first reading, using only readings up to the origin, with the model
// and with predict_linear over BaselineRange, and scores the days to every
// level against the first reading at or above it after the origin. Pairs
// where the level was already reached at the origin or is never reached in
// the data are left out (the latter counted as censored).
func Backtest(series []Series, opt BacktestOptions) BacktestResult {
	opt = opt.WithDefaults()
	res := BacktestResult{Options: opt, Series: len(series)}
	for _, s := range series {
		if len(s.Used) < 2 {
			continue
		}
		first, last := s.Used[0].T, s.Used[len(s.Used)-1].T
		for o := first.Add(opt.Warmup); !o.After(last); o = o.Add(opt.Stride) {
			k := sort.Search(len(s.Used), func(i int) bool { return s.Used[i].T.After(o) })
			if k == 0 || k == len(s.Used) {
				continue
			}
			res.Origins++
			fc, err := Fit(s, o, opt.Forecast)
			if err != nil {
				res.Failed++
				continue
			}
			at, slope, ok := PredictLinear(s.Used, o, opt.BaselineRange)
			for ci, l := range opt.Forecast.Levels {
				level := l.Ratio * s.Capacity
				if s.Used[k-1].V >= level {
					continue
				}
				j := k
				for j < len(s.Used) && s.Used[j].V < level {
					j++
				}
				if j == len(s.Used) {
					res.Censored++
					continue
				}
				c := BacktestCase{Series: s.Subject.String(), Origin: o, Level: l.Ratio,
					Actual: s.Used[j].T.Sub(o).Hours() / 24, After: math.Max(0, s.Used[j-1].T.Sub(o).Hours()/24), Ballast: fc.Crossings[ci].Days,
					Low: fc.Crossings[ci].DaysLow, High: fc.Crossings[ci].DaysHi, Baseline: Days(math.Inf(1))}
				if ok {
					c.Baseline = LinearDays(at, slope, level)
				}
				res.Cases = append(res.Cases, c)
			}
		}
	}
	lo := 0.0
	for _, hi := range opt.Buckets {
		res.Buckets = append(res.Buckets, res.Score(lo, hi))
		lo = hi
	}
	res.All = res.Score(0, math.Inf(1))
	return res
}

// Score aggregates the cases whose true lead time is in (from, to] days.
func (r *BacktestResult) Score(from, to float64) BacktestBucket {
	b := BacktestBucket{From: from, To: to}
	clamp := func(d Days) float64 { return math.Min(float64(d), r.Options.Cap) }
	covered := 0
	var eb, el []float64
	for _, c := range r.Cases {
		if !(c.Actual > from && c.Actual <= to) {
			continue
		}
		b.N++
		eb = append(eb, math.Abs(clamp(c.Ballast)-c.Actual))
		el = append(el, math.Abs(clamp(c.Baseline)-c.Actual))
		b.MAEBallast += eb[len(eb)-1]
		b.MAEBaseline += el[len(el)-1]
		if c.Covered() {
			covered++
		}
	}
	if b.N > 0 {
		b.MAEBallast /= float64(b.N)
		b.MAEBaseline /= float64(b.N)
		b.MedAEBallast, b.MedAEBaseline = robust.Median(eb), robust.Median(el)
		b.Coverage = float64(covered) / float64(b.N)
	}
	return b
}

// WriteMarkdown writes the result as a markdown table: per lead-time
// bucket, the number of predictions, both methods' mean absolute error of
// the days to the level, their ratio and the interval coverage.
func (r *BacktestResult) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "| true time to level | predictions | MAE ballast (d) | MAE predict_linear 2d (d) | ballast ÷ predict_linear | median abs error ballast / predict_linear (d) | %.0f %% interval coverage |\n", 100*r.Options.Forecast.Coverage)
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|\n")
	row := func(name string, k BacktestBucket) {
		if k.N == 0 {
			fmt.Fprintf(&b, "| %s | 0 | — | — | — | — | — |\n", name)
			return
		}
		ratio := "—"
		if k.MAEBaseline > 0 {
			ratio = fmt.Sprintf("%.2f", k.MAEBallast/k.MAEBaseline)
		}
		fmt.Fprintf(&b, "| %s | %d | %.2f | %.2f | %s | %.2f / %.2f | %.1f %% |\n", name, k.N, k.MAEBallast, k.MAEBaseline, ratio, k.MedAEBallast, k.MedAEBaseline, 100*k.Coverage)
	}
	for _, k := range r.Buckets {
		row(fmt.Sprintf("%g–%g d", k.From, k.To), k)
	}
	row("**all**", r.All)
	fmt.Fprintf(&b, "\n%d series, %d forecast origins (%d could not be forecast), %d scored predictions; %d (origin, level) pairs left out because the level was not reached before the data ended. Predicted days are clamped at %g d for both methods.\n",
		r.Series, r.Origins, r.Failed, len(r.Cases), r.Censored, r.Options.Cap)
	_, err := io.WriteString(w, b.String())
	return err
}
