package capacity

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/ballast-io/ballast/analyzer/internal/robust"
	"github.com/ballast-io/ballast/models"
)

// Level is a fill level operators plan around, as a share of capacity.
type Level struct {
	Name  string  `json:"name"`
	Ratio float64 `json:"ratio"`
}

// DefaultLevels are Ceph's nearfull, backfillfull and full ratios, the
// levels storage operators know.
var DefaultLevels = []Level{{"nearfull", 0.85}, {"backfillfull", 0.90}, {"full", 0.95}}

const day = 24 * time.Hour

// Options tune the forecast. The zero value of every field means its
// default (DefaultOptions).
type Options struct {
	// Window is how much history is fitted; default 15 days (so that two
	// weeks fit and the weekly cycle can be modelled).
	Window time.Duration
	// HalfLife is the age at which a reading weighs half as much as the
	// newest in the trend fit; default 3 days. Shorter follows changes in
	// growth faster, longer averages more noise away.
	HalfLife time.Duration
	// Periods are the seasonal cycles tried: default one day and one week;
	// add the checkpoint cadence found by the checkpoint analyzer. A cycle is
	// fitted only when the history spans at least two of it and it is at
	// least four sample spacings long.
	Periods []time.Duration
	// Harmonics is the number of Fourier pairs per cycle; default 3 (enough
	// for a sawtooth-like fill-and-delete pattern to within a few percent).
	Harmonics int
	// Coverage is the probability the prediction interval is meant to hold;
	// default 0.9.
	Coverage float64
	// Horizon is how far ahead crossings are searched; default 365 days.
	Horizon time.Duration
	// Levels are the fill levels whose crossing is predicted; default
	// DefaultLevels.
	Levels []Level
	// MinHistory is the shortest history that is forecast; default 2 hours.
	MinHistory time.Duration
	// FindingHorizon: a capacity_threshold finding is raised when a level is
	// predicted within it (mean crossing); default 30 days.
	FindingHorizon time.Duration
	// CriticalWithin: the finding is critical when the full level is
	// predicted within it or the backfillfull level is already reached;
	// default 7 days.
	CriticalWithin time.Duration
}

// DefaultOptions returns the defaults documented on Options.
func DefaultOptions() Options {
	return Options{
		Window: 15 * day, HalfLife: 3 * day, Periods: []time.Duration{day, 7 * day},
		Harmonics: 3, Coverage: 0.9, Horizon: 365 * day, Levels: DefaultLevels,
		MinHistory: 2 * time.Hour, FindingHorizon: 30 * day, CriticalWithin: 7 * day,
	}
}

// WithPeriod returns a copy of o that also fits cycle p (e.g. the
// checkpoint cadence); p ≤ 0 or already present leaves it unchanged.
func (o Options) WithPeriod(p time.Duration) Options {
	o = o.WithDefaults()
	for _, q := range o.Periods {
		if q == p {
			return o
		}
	}
	if p > 0 {
		o.Periods = append(append([]time.Duration(nil), o.Periods...), p)
	}
	return o
}

// WithDefaults returns o with every zero field set to its default.
func (o Options) WithDefaults() Options {
	d := DefaultOptions()
	if o.Window <= 0 {
		o.Window = d.Window
	}
	if o.HalfLife <= 0 {
		o.HalfLife = d.HalfLife
	}
	if o.Periods == nil {
		o.Periods = d.Periods
	}
	if o.Harmonics <= 0 {
		o.Harmonics = d.Harmonics
	}
	if !(o.Coverage > 0 && o.Coverage < 1) {
		o.Coverage = d.Coverage
	}
	if o.Horizon <= 0 {
		o.Horizon = d.Horizon
	}
	if len(o.Levels) == 0 {
		o.Levels = d.Levels
	}
	if o.MinHistory <= 0 {
		o.MinHistory = d.MinHistory
	}
	if o.FindingHorizon <= 0 {
		o.FindingHorizon = d.FindingHorizon
	}
	if o.CriticalWithin <= 0 {
		o.CriticalWithin = d.CriticalWithin
	}
	return o
}

// Days is a duration in days; +Inf (beyond the horizon, or never) is
// written as null in JSON.
type Days float64

// MarshalJSON writes d with 4 decimals, or null when it is not finite.
func (d Days) MarshalJSON() ([]byte, error) {
	if math.IsInf(float64(d), 0) || math.IsNaN(float64(d)) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, math.Round(float64(d)*1e4)/1e4, 'f', -1, 64), nil
}

// UnmarshalJSON reads a number or null (+Inf).
func (d *Days) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*d = Days(math.Inf(1))
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*d = Days(f)
	return nil
}

// Finite reports whether d is a real number of days (not beyond the
// horizon).
func (d Days) Finite() bool { return !math.IsInf(float64(d), 0) && !math.IsNaN(float64(d)) }

// Crossing is the predicted time until one fill level: the mean path's
// first crossing and the interval from the upper band's (earliest) to the
// lower band's (latest) first crossing. Reached is true when the latest
// reading is already at or above the level.
type Crossing struct {
	Level   Level `json:"level"`
	Reached bool  `json:"reached"`
	Days    Days  `json:"days"`
	DaysLow Days  `json:"days_low"`
	DaysHi  Days  `json:"days_high"`
}

// At returns the crossing times as instants after now; zero times where
// beyond the horizon.
func (c Crossing) At(now time.Time) (mean, earliest, latest time.Time) {
	f := func(d Days) time.Time {
		if !d.Finite() {
			return time.Time{}
		}
		return now.Add(time.Duration(float64(d) * float64(day)))
	}
	return f(c.Days), f(c.DaysLow), f(c.DaysHi)
}

// Forecast is the fitted model of one series at Now and what it predicts.
// Byte quantities are in bytes, rates in bytes per day.
type Forecast struct {
	Subject   models.Subject  `json:"subject"`
	Pool      string          `json:"pool,omitempty"`
	Capacity  float64         `json:"capacity_bytes"`
	Now       time.Time       `json:"now"`
	From      time.Time       `json:"from"`
	To        time.Time       `json:"to"`
	Points    int             `json:"points"`
	Used      float64         `json:"used_bytes"`
	UsedRatio float64         `json:"used_ratio"`
	Growth    float64         `json:"growth_bytes_per_day"`
	Periods   []time.Duration `json:"periods_ns,omitempty"`
	Steps     []time.Time     `json:"steps,omitempty"`
	// ResidualSD is the robust spread of the fit's residuals, bytes, and
	// Autocorr their lag-1 autocorrelation.
	ResidualSD float64 `json:"residual_sd_bytes"`
	Autocorr   float64 `json:"residual_autocorr"`
	// LevelSD and GrowthSD are the error model's a and b: the forecast's
	// standard error at lead h days is sqrt(LevelSD² + (GrowthSD·h)²).
	LevelSD   float64    `json:"level_sd_bytes"`
	GrowthSD  float64    `json:"growth_sd_bytes_per_day"`
	Coverage  float64    `json:"coverage"`
	Crossings []Crossing `json:"crossings"`

	m *model
}

// BandPoint is the forecast at one time: mean and interval, bytes.
type BandPoint struct {
	T    time.Time `json:"t"`
	Mean float64   `json:"mean"`
	Lo   float64   `json:"lo"`
	Hi   float64   `json:"hi"`
}

// At returns the forecast mean and interval of used bytes at t (t ≥ Now;
// earlier t gives the fitted value with the lead-zero interval).
func (f *Forecast) At(t time.Time) BandPoint {
	x := t.Sub(f.Now).Hours() / 24
	m, sd := f.m.mean(x), f.m.sd(math.Max(0, x))
	return BandPoint{T: t, Mean: m * f.Capacity, Lo: (m - f.m.z*sd) * f.Capacity, Hi: (m + f.m.z*sd) * f.Capacity}
}

// Path samples the forecast at n+1 evenly spaced times from Now to until.
func (f *Forecast) Path(until time.Time, n int) []BandPoint {
	if n < 1 || !until.After(f.Now) {
		return nil
	}
	out := make([]BandPoint, 0, n+1)
	step := until.Sub(f.Now) / time.Duration(n)
	for i := 0; i <= n; i++ {
		out = append(out, f.At(f.Now.Add(time.Duration(i)*step)))
	}
	return out
}

// model is a fitted regression of the used ratio on time, x in days from
// origin (x ≤ 0 in the history).
type model struct {
	periods []float64 // days
	harm    []int
	steps   []float64 // x of the first reading after each level shift
	beta    []float64
	sigma   float64 // robust residual SD, ratio
	rho     float64 // lag-1 autocorrelation of residuals
	slopeSE float64 // analytic SE of the slope, widened for rho, ratio/day
	a2, b2  float64 // error model, ratio² and ratio²/day²
	z       float64
	// kink is the x of the latest level shift when the growth rate is
	// allowed to change there too (hasKink): a deleted tenant usually stops
	// writing as well.
	kink    float64
	hasKink bool
	// weekendHarm > 0 gives weekend days their own level and daily profile
	// (a Saturday/Sunday indicator, and the daily harmonics times it), fitted
	// when the daily cycle is and the history spans a week; weekOff is the
	// origin's time since Monday 00:00 UTC in days.
	weekendHarm int
	weekOff     float64
	// noCov skips the slope's analytic error (calibration refits do not
	// use it).
	noCov bool
}

// weekend reports whether x days from the origin falls on a Saturday or
// Sunday (UTC).
func (m *model) weekend(x float64) bool {
	d := math.Mod(m.weekOff+x, 7)
	if d < 0 {
		d += 7
	}
	return d >= 5
}

// minKinkSpan is the history after a level shift, in days, from which the
// growth after it is estimated on its own.
const minKinkSpan = 1.0

func (m *model) cols() int {
	n := 2 + len(m.steps)
	if m.hasKink {
		n++
	}
	for _, h := range m.harm {
		n += 2 * h
	}
	if m.weekendHarm > 0 {
		n += 1 + 2*m.weekendHarm
	}
	return n
}

func (m *model) row(x float64, dst []float64) {
	dst[0], dst[1] = 1, x
	k := 2
	for _, s := range m.steps {
		dst[k] = 0
		if x >= s {
			dst[k] = 1
		}
		k++
	}
	if m.hasKink {
		dst[k] = math.Max(0, x-m.kink)
		k++
	}
	for i, p := range m.periods {
		for h := 1; h <= m.harm[i]; h++ {
			a := 2 * math.Pi * float64(h) * x / p
			dst[k], dst[k+1] = math.Sin(a), math.Cos(a)
			k += 2
		}
	}
	if m.weekendHarm > 0 {
		we := 0.0
		if m.weekend(x) {
			we = 1
		}
		dst[k] = we
		k++
		for h := 1; h <= m.weekendHarm; h++ {
			a := 2 * math.Pi * float64(h) * x
			dst[k], dst[k+1] = we*math.Sin(a), we*math.Cos(a)
			k += 2
		}
	}
}

// slope is the trend's growth rate at the origin, ratio per day.
func (m *model) slope() float64 {
	if m.hasKink {
		return m.beta[1] + m.beta[2+len(m.steps)]
	}
	return m.beta[1]
}

func (m *model) mean(x float64) float64 {
	r := make([]float64, len(m.beta))
	m.row(x, r)
	return dot(r, m.beta)
}

func dot(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func (m *model) sd(h float64) float64 { return math.Sqrt(m.a2 + m.b2*h*h) }

// Fit forecasts series s at now from its readings in (now − Window, now].
func Fit(s Series, now time.Time, opt Options) (*Forecast, error) {
	opt = opt.WithDefaults()
	if err := s.Validate(); err != nil {
		return nil, err
	}
	x, u := window(s, now, opt.Window)
	if len(x) < 8 || (x[len(x)-1]-x[0])*float64(day) < float64(opt.MinHistory) {
		return nil, fmt.Errorf("cannot forecast %q: %d readings over %s before %s; want at least 8 over %s",
			s.Subject, len(x), spanOf(x), now.Format(time.RFC3339), opt.MinHistory)
	}
	m, err := fitModel(x, u, opt, sinceMonday(now), nil)
	if err != nil {
		return nil, fmt.Errorf("cannot forecast %q: %w", s.Subject, err)
	}
	m.z = distuv.UnitNormal.Quantile((1 + opt.Coverage) / 2)
	calibrate(m, x, u, opt)

	f := &Forecast{Subject: s.Subject, Pool: s.Pool, Capacity: s.Capacity, Now: now, Points: len(x),
		Coverage: opt.Coverage, m: m}
	f.From = now.Add(time.Duration(x[0] * float64(day))).Round(time.Second)
	f.To = now.Add(time.Duration(x[len(x)-1] * float64(day))).Round(time.Second)
	f.UsedRatio = u[len(u)-1]
	f.Used = f.UsedRatio * s.Capacity
	f.Growth = m.slope() * s.Capacity
	for _, p := range m.periods {
		f.Periods = append(f.Periods, time.Duration(p*float64(day)).Round(time.Second))
	}
	for _, st := range m.steps {
		f.Steps = append(f.Steps, now.Add(time.Duration(st*float64(day))).Round(time.Second))
	}
	f.ResidualSD, f.Autocorr = m.sigma*s.Capacity, m.rho
	f.LevelSD, f.GrowthSD = math.Sqrt(m.a2)*s.Capacity, math.Sqrt(m.b2)*s.Capacity
	f.Crossings = crossings(m, f.UsedRatio, opt)
	return f, nil
}

func spanOf(x []float64) time.Duration {
	if len(x) < 2 {
		return 0
	}
	return time.Duration((x[len(x)-1] - x[0]) * float64(day)).Round(time.Second)
}

// window returns the readings in (now − w, now] as days from now and used
// ratios.
func window(s Series, now time.Time, w time.Duration) (x, u []float64) {
	from := now.Add(-w)
	for _, p := range s.Used {
		if p.T.After(from) && !p.T.After(now) {
			x = append(x, p.T.Sub(now).Hours()/24)
			u = append(u, p.V/s.Capacity)
		}
	}
	return x, u
}

// sinceMonday is the time from the last Monday 00:00 UTC to t, in days.
func sinceMonday(t time.Time) float64 {
	t = t.UTC()
	wd := (int(t.Weekday()) + 6) % 7 // Monday = 0
	mid := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	return float64(wd) + t.Sub(mid).Hours()/24
}

// medianGap is the typical sample spacing in days.
func medianGap(x []float64) float64 {
	g := make([]float64, 0, len(x)-1)
	for i := 1; i < len(x); i++ {
		g = append(g, x[i]-x[i-1])
	}
	return robust.Median(g)
}

// fitModel chooses the seasonal terms and level shifts for readings (x, u)
// and fits them by Huber-reweighted, exponentially weighted least squares.
func fitModel(x, u []float64, opt Options, weekOff float64, like *model) (*model, error) {
	gap := medianGap(x)
	span := x[len(x)-1] - x[0]
	m := &model{weekOff: weekOff, noCov: like != nil}
	var all []float64
	for _, pd := range opt.Periods {
		p := pd.Hours() / 24
		all = append(all, p)
		if span < 2*p || p < 4*gap {
			continue
		}
		h := 0
		for k := 1; k <= opt.Harmonics && p/float64(k) >= 2.5*gap; k++ {
			h = k
		}
		if h > 0 {
			m.periods, m.harm = append(m.periods, p), append(m.harm, h)
		}
	}
	for i, p := range m.periods {
		if p == 1 && span >= 7 {
			m.weekendHarm = m.harm[i]
		}
	}
	if like != nil {
		// Calibration refits use the seasonal terms of the model being
		// calibrated, so its errors are measured, not a simpler model's.
		m.periods, m.harm, m.weekendHarm = like.periods, like.harm, like.weekendHarm
	}
	m.steps = detectSteps(x, u, all, gap)
	if n := len(m.steps); n > 0 && x[len(x)-1]-m.steps[n-1] >= minKinkSpan {
		m.kink, m.hasKink = m.steps[n-1], true
	}
	err := m.solve(x, u, opt.HalfLife.Hours()/24)
	if err != nil && like == nil && (len(m.periods) > 0 || len(m.steps) > 0) {
		// Gaps can leave seasonal or step columns without support; a plain
		// trend still forecasts.
		m.periods, m.harm, m.steps, m.hasKink, m.weekendHarm = nil, nil, nil, false, 0
		err = m.solve(x, u, opt.HalfLife.Hours()/24)
	}
	return m, err
}

// huberK is the Huber tuning constant in robust standard deviations.
const huberK = 2.5

func (m *model) solve(x, u []float64, halfLife float64) error {
	n, p := len(x), m.cols()
	if n <= p+2 {
		return fmt.Errorf("%d readings are too few for %d terms", n, p)
	}
	w := make([]float64, n)
	for i := range x {
		w[i] = math.Exp2(x[i] / halfLife)
	}
	X := mat.NewDense(n, p, nil)
	for i := range x {
		m.row(x[i], X.RawRowView(i))
	}
	rw := make([]float64, n)
	for i := range rw {
		rw[i] = 1
	}
	res := make([]float64, n)
	A := mat.NewDense(n, p, nil)
	b := mat.NewVecDense(n, nil)
	var beta mat.VecDense
	for iter := 0; iter < 5; iter++ {
		for i := 0; i < n; i++ {
			sw := math.Sqrt(w[i] * rw[i])
			ar, xr := A.RawRowView(i), X.RawRowView(i)
			for j := range ar {
				ar[j] = sw * xr[j]
			}
			b.SetVec(i, sw*u[i])
		}
		var qr mat.QR
		qr.Factorize(A)
		if err := qr.SolveVecTo(&beta, false, b); err != nil {
			return fmt.Errorf("cannot solve the trend fit: %w", err)
		}
		m.beta = append(m.beta[:0], beta.RawVector().Data...)
		for i := range x {
			res[i] = u[i] - dot(X.RawRowView(i), m.beta)
		}
		scale := recentScale(res, w)
		if scale <= 0 {
			break
		}
		for i := range rw {
			r := math.Abs(res[i]) / scale
			rw[i] = 1
			if r > huberK {
				rw[i] = huberK / r
			}
		}
	}
	m.sigma = recentScale(res, w)
	m.rho = lag1(res, w)
	if m.noCov {
		return nil
	}
	// Sandwich covariance of the weighted fit, σ²·(XᵀWX)⁻¹XᵀW²X(XᵀWX)⁻¹,
	// widened by (1+ρ)/(1−ρ) for AR(1) residuals.
	var xtwx, xtw2x, inv mat.Dense
	wx := mat.NewDense(n, p, nil)
	sx := mat.NewDense(n, p, nil)
	for i := 0; i < n; i++ {
		xr := X.RawRowView(i)
		for j := range xr {
			wx.Set(i, j, w[i]*xr[j])
			sx.Set(i, j, math.Sqrt(w[i])*xr[j])
		}
	}
	xtwx.Mul(sx.T(), sx)
	xtw2x.Mul(wx.T(), wx)
	if err := inv.Inverse(&xtwx); err != nil {
		return fmt.Errorf("cannot invert the trend fit's normal matrix: %w", err)
	}
	var cov mat.Dense
	cov.Product(&inv, &xtw2x, &inv)
	infl := (1 + m.rho) / (1 - m.rho)
	v := cov.At(1, 1)
	if m.hasKink {
		k := 2 + len(m.steps)
		v += cov.At(k, k) + 2*cov.At(1, k)
	}
	m.slopeSE = math.Sqrt(math.Max(0, v)*infl) * m.sigma
	return nil
}

// recentScale is the robust SD (1.4826·MAD) of the residuals whose weight
// is at least a quarter of the newest's (the last two half-lives).
func recentScale(res, w []float64) float64 {
	var r []float64
	for i := range res {
		if w[i] >= 0.25 {
			r = append(r, res[i])
		}
	}
	if len(r) < 4 {
		r = append(r[:0], res...)
	}
	_, mad := robust.MedianMAD(r)
	return robust.MADScale * mad
}

// lag1 is the lag-1 autocorrelation of the recent residuals, clamped to
// [0, 0.98] (negative autocorrelation only narrows errors; ignoring it is
// conservative).
func lag1(res, w []float64) float64 {
	var num, den, mean float64
	k := 0
	for i := range res {
		if w[i] >= 0.25 {
			mean += res[i]
			k++
		}
	}
	if k < 4 {
		return 0
	}
	mean /= float64(k)
	for i := range res {
		if w[i] < 0.25 {
			continue
		}
		d := res[i] - mean
		den += d * d
		if i > 0 && w[i-1] >= 0.25 {
			num += d * (res[i-1] - mean)
		}
	}
	if den == 0 {
		return 0
	}
	return math.Min(0.98, math.Max(0, num/den))
}

// Step detection constants: a jump is a candidate level shift when it is
// stepSigmas robust SDs of the first differences away from their median
// and at least minStep of capacity; at most maxSteps are modelled.
const (
	stepSigmas = 10
	minStep    = 0.002
	maxSteps   = 3
)

// detectSteps finds persistent level shifts in u: a jump far outside the
// spread of the differences that does not recur one seasonal period
// earlier or later (checkpoint deletes and nightly clean-ups recur and are
// left to the seasonal terms) and whose new level holds for the next
// readings (a lone spike is left to the Huber weights). It returns the x of
// the first reading after each shift, in time order.
func detectSteps(x, u []float64, periods []float64, gap float64) []float64 {
	n := len(u)
	if n < 16 {
		return nil
	}
	d := make([]float64, n-1)
	for i := range d {
		d[i] = u[i+1] - u[i]
	}
	med, mad := robust.MedianMAD(append([]float64(nil), d...))
	thr := math.Max(stepSigmas*robust.MADScale*mad, minStep)
	type cand struct {
		i   int
		dev float64
	}
	var cs []cand
	for i := range d {
		if dev := d[i] - med; math.Abs(dev) > thr {
			cs = append(cs, cand{i, dev})
		}
	}
	sort.Slice(cs, func(a, b int) bool {
		if math.Abs(cs[a].dev) != math.Abs(cs[b].dev) {
			return math.Abs(cs[a].dev) > math.Abs(cs[b].dev)
		}
		return cs[a].i < cs[b].i
	})
	recurs := func(c cand) bool {
		for _, p := range periods {
			for _, sgn := range []float64{-1, 1} {
				t := x[c.i+1] + sgn*p
				tol := math.Max(1.5*gap, 0.02*p)
				j := sort.SearchFloat64s(x, t-tol)
				for ; j < len(x) && x[j] <= t+tol; j++ {
					if j >= 1 && j-1 != c.i {
						if dev := d[j-1] - med; dev*c.dev > 0 && math.Abs(dev) > 0.5*math.Abs(c.dev) {
							return true
						}
					}
				}
			}
		}
		return false
	}
	const hold = 6
	var steps []float64
	for _, c := range cs {
		if len(steps) == maxSteps {
			break
		}
		if c.i+1 < hold || c.i+1+hold > n || recurs(c) || nearAny(x[c.i+1], steps, hold*gap*1.5) {
			continue
		}
		before := robust.Median(append([]float64(nil), u[c.i+1-hold:c.i+1]...))
		after := robust.Median(append([]float64(nil), u[c.i+1:c.i+1+hold]...))
		if math.Abs(after-before) < 0.5*math.Abs(c.dev) {
			continue
		}
		steps = append(steps, x[c.i+1])
	}
	sort.Float64s(steps)
	return steps
}

// minCalibration is the number of in-sample errors (about two origins'
// worth) from which the empirical error model is trusted alone.
const minCalibration = 60

// nearAny reports whether x is within d of any of xs. A shift spread over
// a few readings gives several large jumps; it is one step.
func nearAny(x float64, xs []float64, d float64) bool {
	for _, v := range xs {
		if math.Abs(x-v) <= d {
			return true
		}
	}
	return false
}

// calibrate sets the error model sd(h)² = a² + b²h² from the model's own
// errors: the same fit is repeated at origins 12 h, 24 h, … back inside the
// history and its errors on the readings after each origin are regressed on
// [1, h²]. a² is floored by the residual variance; b² by the analytic
// slope variance when there are fewer than minCalibration errors. With
// enough errors the band multiplier z becomes their empirical quantile.
func calibrate(m *model, x, u []float64, opt Options) {
	var e2, h2 []float64
	const stride = 0.5 // days
	minHist := math.Max(1, 2*opt.HalfLife.Hours()/24/3)
	for k := 1; k <= 8; k++ {
		o := -float64(k) * stride
		j := sort.SearchFloat64s(x, o+1e-12) // first reading after the origin
		if j < 8 || j >= len(x) || o-x[0] < minHist {
			break
		}
		xs := make([]float64, j)
		for i := range xs {
			xs[i] = x[i] - o
		}
		mo, err := fitModel(xs, u[:j], opt, m.weekOff+o, m)
		if err != nil {
			if mo, err = fitModel(xs, u[:j], opt, m.weekOff+o, nil); err != nil {
				continue
			}
		}
		every := max(1, (len(x)-j)/40)
		for i := j; i < len(x); i += every {
			h := x[i] - o
			e := u[i] - mo.mean(h)
			e2, h2 = append(e2, e*e), append(h2, h*h)
		}
	}
	a2, b2 := robustNNLS2(e2, h2)
	m.a2 = math.Max(a2, m.sigma*m.sigma)
	if len(e2) < minCalibration {
		// Too little history to see the model's own errors: fall back on
		// the analytic slope error, which the residuals' autocorrelation
		// makes wide (conservative).
		b2 = math.Max(b2, m.slopeSE*m.slopeSE)
	}
	m.b2 = b2
	if len(e2) >= minCalibration {
		// The errors are not normal (level shifts, unmodelled bursts give
		// them heavy tails and a narrow core), so the band's multiplier is
		// the empirical Coverage-quantile of the standardised errors rather
		// than the normal quantile.
		r := make([]float64, len(e2))
		for i := range e2 {
			r[i] = math.Sqrt(e2[i] / (m.a2 + m.b2*h2[i]))
		}
		sort.Float64s(r)
		m.z = stat.Quantile(opt.Coverage, stat.Empirical, r, nil)
	}
}

// robustNNLS2 fits e2 ≈ a + b·h2 (a, b ≥ 0), then refits twice leaving
// out errors beyond three of the fitted standard deviations: one unmodelled
// event (a clean-up inside the calibration span) should widen the interval
// it happened in, not every interval after it.
func robustNNLS2(e2, h2 []float64) (a, b float64) {
	a, b = nnls2(e2, h2)
	for iter := 0; iter < 2; iter++ {
		var ke, kh []float64
		for i := range e2 {
			if e2[i] <= 9*(a+b*h2[i]) {
				ke, kh = append(ke, e2[i]), append(kh, h2[i])
			}
		}
		if len(ke) < len(e2)/2 {
			break
		}
		a, b = nnls2(ke, kh)
	}
	return a, b
}

// nnls2 fits e2 ≈ a + b·h2 with a, b ≥ 0 by least squares.
func nnls2(e2, h2 []float64) (a, b float64) {
	n := float64(len(e2))
	if n == 0 {
		return 0, 0
	}
	var se, sh, shh, seh float64
	for i := range e2 {
		se += e2[i]
		sh += h2[i]
		shh += h2[i] * h2[i]
		seh += e2[i] * h2[i]
	}
	det := n*shh - sh*sh
	if det > 0 {
		a = (se*shh - sh*seh) / det
		b = (n*seh - sh*se) / det
	}
	switch {
	case det <= 0 || (a < 0 && b < 0):
		return se / n, 0
	case a < 0:
		return 0, seh / shh
	case b < 0:
		return se / n, 0
	}
	return a, b
}

// crossings searches the mean path and the band for the first time each
// level is reached, on a 10-minute grid for two weeks and hourly after
// (finer when a fitted cycle is shorter than two hours), interpolating
// between grid points.
func crossings(m *model, last float64, opt Options) []Crossing {
	inf := Days(math.Inf(1))
	out := make([]Crossing, len(opt.Levels))
	open := 0
	for i, l := range opt.Levels {
		out[i] = Crossing{Level: l, Days: inf, DaysLow: inf, DaysHi: inf}
		if last >= l.Ratio {
			out[i].Reached, out[i].Days, out[i].DaysLow, out[i].DaysHi = true, 0, 0, 0
			continue
		}
		open++
	}
	horizon := opt.Horizon.Hours() / 24
	r := make([]float64, len(m.beta))
	at := func(x float64) (mu, band float64) {
		m.row(x, r)
		return dot(r, m.beta), m.z * m.sd(x)
	}
	// The grid resolves the shortest fitted cycle (twelve steps a cycle),
	// so a checkpoint peak is not stepped over; a crossing between two grid
	// points is placed by linear interpolation.
	fine := 1.0 / 144
	for _, p := range m.periods {
		fine = math.Min(fine, p/12)
	}
	cross := func(prevX, prevV, x, v, l float64) Days {
		if x == 0 || v == prevV {
			return Days(x)
		}
		return Days(prevX + (l-prevV)/(v-prevV)*(x-prevX))
	}
	var pm, pb, px float64
	for k, x := 0, 0.0; x <= horizon && open > 0; k++ {
		if k > 0 {
			px = x
			if x < 14 {
				x = float64(k) * fine
			} else {
				x += math.Min(1.0/24, fine)
			}
		}
		mu, band := at(x)
		for i := range out {
			c := &out[i]
			if c.Reached || c.DaysHi.Finite() {
				continue
			}
			l := c.Level.Ratio
			if !c.DaysLow.Finite() && mu+band >= l {
				c.DaysLow = cross(px, pm+pb, x, mu+band, l)
			}
			if !c.Days.Finite() && mu >= l {
				c.Days = cross(px, pm, x, mu, l)
			}
			if mu-band >= l {
				c.DaysHi = cross(px, pm-pb, x, mu-band, l)
				open--
			}
		}
		pm, pb = mu, band
	}
	return out
}
