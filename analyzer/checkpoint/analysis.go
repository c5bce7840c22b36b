// Package checkpoint finds checkpoint write bursts in a job's (or client
// group's) write-bandwidth series, estimates their period with frequency
// methods in the spirit of FTIO (Tarraf et al., "FTIO: Detecting I/O
// periodicity using frequency techniques", 2023) and predicts the next burst
// window.
//
// The period comes from three views of the same series, each robust to a
// different failure: the discrete Fourier transform (gonum's FFT; the
// dominant frequency and the share of spectral power on its harmonics), the
// autocorrelation (its first peak is the fundamental even when narrow bursts
// put as much power on harmonics as on the fundamental), and a least-squares
// fit of the burst start times to a lattice t = a + n·P, where each burst's
// index n is rounded from the coarse period, so a missing burst is a skipped
// n rather than a doubled interval and jitter averages out. The confidence is
// the mean of the harmonic power share, the autocorrelation at the period and
// the regularity of the burst starts (their jitter relative to the period),
// scaled down when lattice slots are empty or shared. Both spectra are of the burst
// indicator signal, so spikes inside a burst do not drown its rhythm.
package checkpoint

import (
	"math"
	"math/cmplx"
	"slices"
	"sort"
	"time"

	"gonum.org/v1/gonum/dsp/fourier"

	"github.com/ballast-io/ballast/analyzer/internal/robust"
)

// Point is one write-bandwidth sample of a group: BytesPerSec is the mean
// rate over the sampling interval that ends at T (a counter difference over
// the interval, as a monitoring system computes it), so a burst found in the
// sample at T began up to one interval before T.
type Point struct {
	T           time.Time
	BytesPerSec float64
}

// Burst is one observed write burst.
type Burst struct {
	Start, End    time.Time
	Bytes         float64 // integral of the bandwidth over the burst
	MeanBandwidth float64 // Bytes / (End - Start)
	PeakBandwidth float64
	// Open is true when the burst reaches the last sample: it may go on.
	Open bool
}

// Periodicity is the estimated period of a group's bursts and the next burst
// it predicts.
type Periodicity struct {
	Period time.Duration
	// Confidence is 0..1: the mean of DFTShare, ACF and Regularity, times
	// the share of lattice slots holding a burst, times the share of bursts
	// that have a slot of their own.
	Confidence float64
	// DFTShare is the share of non-DC spectral power on the harmonics of 1/Period.
	DFTShare float64
	// ACF is the normalised autocorrelation of the series at lag Period.
	ACF float64
	// Coherence is |mean of exp(2πi·start/Period)| over the bursts: 1 when
	// every start falls on the lattice, near 0 when starts are random.
	Coherence float64
	// Regularity is exp(−(jitter/period)² / (2·0.05²)).
	Regularity float64
	// DFTPeriod and ACFPeriod are the coarse estimates before the fit.
	DFTPeriod, ACFPeriod time.Duration
	// Jitter is the RMS distance of burst starts from the fitted lattice.
	Jitter time.Duration
	// Bursts is how many bursts the fit used; Missing how many lattice slots
	// between the first and last of them had no burst.
	Bursts, Missing int
	// Next is the predicted start: the lattice point after the last burst
	// (the last start plus the period in the renewal view), moved by the
	// bursts' mean onset inside their first sample.
	Next time.Time
	// NextStart and NextEnd bound the predicted next burst: the lattice
	// point after the last burst, widened by twice the jitter, ending after
	// the median burst duration.
	NextStart, NextEnd time.Time
	// Anchor is the fitted lattice origin (the time of slot 0).
	Anchor time.Time
	// Renewal is true when the period, jitter, confidence and next start
	// come from the intervals between bursts (jitter that adds up from
	// burst to burst) instead of the lattice fit: Period is their mean,
	// Jitter their spread, Next the last start plus Period.
	Renewal bool
}

// Params tune burst detection and period estimation. Zero values take the
// defaults in brackets.
type Params struct {
	// MinBandwidth is the absolute floor of a burst [1 MB/s].
	MinBandwidth float64
	// ThresholdFrac places the burst threshold between the series' 10th
	// percentile (the idle level) and the median of its clearly raised
	// samples (the burst level) [0.2].
	ThresholdFrac float64
	// MergeGap joins bursts separated by less than this [3 sample steps].
	MergeGap time.Duration
	// MinBursts is the number of bursts needed to estimate a period [3].
	MinBursts int
}

func (p Params) withDefaults() Params {
	if p.MinBandwidth == 0 {
		p.MinBandwidth = 1e6
	}
	if p.ThresholdFrac == 0 {
		p.ThresholdFrac = 0.2
	}
	if p.MinBursts == 0 {
		p.MinBursts = 3
	}
	return p
}

// grid is a series resampled on a uniform step.
type grid struct {
	t0   time.Time
	step time.Duration
	v    []float64 // NaN where no sample fell
	// lv caches levels(v, lvBW): detect and estimate both need them, and v
	// does not change once resample has built it
	lv   *[3]float64
	lvBW float64
}

func (g *grid) at(i int) time.Time { return g.t0.Add(time.Duration(i) * g.step) }

// levels returns levels(g.v, minBW), computed once per grid.
func (g *grid) levels(minBW float64) (base, cut, busy float64) {
	if g.lv == nil || g.lvBW != minBW {
		b, c, u := levels(g.v, minBW)
		g.lv, g.lvBW = &[3]float64{b, c, u}, minBW
	}
	return g.lv[0], g.lv[1], g.lv[2]
}

// resample puts pts (sorted by time) on a uniform grid whose step is the
// median spacing of the samples; several samples in one cell are averaged.
func resample(pts []Point) grid {
	if len(pts) < 2 {
		return grid{}
	}
	gaps := make([]float64, 0, len(pts)-1)
	for i := 1; i < len(pts); i++ {
		if d := pts[i].T.Sub(pts[i-1].T); d > 0 {
			gaps = append(gaps, float64(d))
		}
	}
	if len(gaps) == 0 {
		return grid{}
	}
	step := time.Duration(robust.Median(gaps))
	n := int(pts[len(pts)-1].T.Sub(pts[0].T)/step) + 1
	// Cell i covers the sampling interval that ends at the i-th step after
	// the first sample: [t0 + i·step, t0 + (i+1)·step) with t0 one step
	// before the first sample.
	g := grid{t0: pts[0].T.Add(-step), step: step, v: make([]float64, n)}
	cnt := make([]int, n)
	for _, p := range pts {
		i := int((p.T.Sub(pts[0].T) + step/2) / step)
		if i >= n {
			i = n - 1
		}
		g.v[i] += p.BytesPerSec
		cnt[i]++
	}
	for i := range g.v {
		if cnt[i] == 0 {
			g.v[i] = math.NaN()
		} else {
			g.v[i] /= float64(cnt[i])
		}
	}
	return g
}

// minSamples is the history needed before anything is called a burst: with
// fewer, the idle level and its noise cannot be told apart.
const minSamples = 16

// levels returns the idle level, the cut above which a value is clearly
// raised over it, and the burst level of the known values (NaN cut and
// busy level when there are fewer than minSamples; NaN busy level when
// none stands out).
// The idle level is the 10th percentile, not the median, so a history that
// bursts fill for more than half still finds its idle floor. The noise
// around it is the smaller of two estimates: the median deviation of the
// lower half from it (robust when most samples are idle), and the spread
// of the lower tail alone, (q20 − q5) ÷ 0.80 (the width of that quantile
// band of a normal distribution, in σ): a periodic workload busy 75 % of
// the time fills the lower half with busy samples, and the lower-half
// estimate then puts the cut-off above the bursts themselves. The burst
// level is the median of the values clearly above idle: above minBW, above
// 6 robust deviations (the lower half's deviation underestimates the idle
// spread) and above three times the idle level. A median, not a peak
// quantile, because bursts are spiky: a cache-absorbed first instant can
// run 30× the sustained rate, and a threshold tied to it would cut bursts
// apart.
func levels(v []float64, minBW float64) (base, cut, busy float64) {
	known := make([]float64, 0, len(v))
	for _, x := range v {
		if !math.IsNaN(x) {
			known = append(known, x)
		}
	}
	if len(known) < minSamples {
		return 0, math.NaN(), math.NaN()
	}
	slices.Sort(known)
	q := func(p float64) float64 { return known[int(p*float64(len(known)))] }
	base = q(0.10)
	lower := known[:len(known)/2+1]
	dev := make([]float64, len(lower))
	for i, x := range lower {
		dev[i] = x - base
	}
	noise := min(robust.MADScale*robust.Median(dev), (q(0.20)-q(0.05))/0.80)
	cut = max(minBW, base+6*noise, 3*base)
	i := sort.SearchFloat64s(known, math.Nextafter(cut, math.Inf(1)))
	if i == len(known) {
		return base, cut, math.NaN() // nothing stands out: no bursts
	}
	return base, cut, robust.Median(known[i:])
}

// DetectBursts finds write bursts in pts (sorted by time): maximal runs of
// samples above max(MinBandwidth, idle + ThresholdFrac·(busy − idle)), where
// idle is the series' 10th percentile and busy the median of the clearly
// raised samples,
// runs closer than MergeGap joined. A missing sample inside a run does not
// break it.
func DetectBursts(pts []Point, p Params) []Burst {
	p = p.withDefaults()
	g := resample(pts)
	bursts, _ := detect(&g, p)
	return bursts
}

// detect returns the bursts on g and the cut above which a value is
// clearly raised over the idle level (levels; NaN with too little history).
func detect(g *grid, p Params) ([]Burst, float64) {
	if len(g.v) == 0 {
		return nil, math.NaN()
	}
	base, cut, busy := g.levels(p.MinBandwidth)
	if math.IsNaN(busy) {
		return nil, cut
	}
	thr := math.Max(p.MinBandwidth, base+p.ThresholdFrac*(busy-base))
	merge := p.MergeGap
	if merge == 0 {
		merge = 3 * g.step
	}
	var out []Burst
	sec := g.step.Seconds()
	in := false
	var cur Burst
	lastHigh := -1
	for i, x := range g.v {
		switch {
		case x > thr:
			if !in {
				if n := len(out); n > 0 && g.at(i).Sub(out[n-1].End) < merge {
					cur = out[n-1] // join the previous burst
					out = out[:n-1]
					// The gap's own bytes belong to the burst too.
					for j := int(cur.End.Sub(g.t0) / g.step); j < i; j++ {
						if !math.IsNaN(g.v[j]) {
							cur.Bytes += g.v[j] * sec
						}
					}
				} else {
					cur = Burst{Start: g.at(i)}
				}
				in = true
			}
			cur.Bytes += x * sec
			cur.PeakBandwidth = math.Max(cur.PeakBandwidth, x)
			lastHigh = i
		case math.IsNaN(x) && in:
			// unknown: keep the run open
		case in:
			cur.End = g.at(lastHigh + 1)
			out = append(out, cur)
			in = false
		}
	}
	if in {
		cur.End = g.at(lastHigh + 1)
		cur.Open = true
		out = append(out, cur)
	}
	for i := range out {
		if d := out[i].End.Sub(out[i].Start).Seconds(); d > 0 {
			out[i].MeanBandwidth = out[i].Bytes / d
		}
	}
	return out, cut
}

// EstimatePeriod estimates the period of the bursts in pts (sorted by time)
// and predicts the next one. ok is false when there are fewer than MinBursts
// bursts or no period can be found.
func EstimatePeriod(pts []Point, p Params) (Periodicity, []Burst, bool) {
	p = p.withDefaults()
	g := resample(pts)
	bursts, _ := detect(&g, p)
	per, ok := estimate(&g, bursts, p)
	return per, bursts, ok
}

func estimate(g *grid, bursts []Burst, p Params) (Periodicity, bool) {
	if len(bursts) < p.MinBursts || len(g.v) < 8 {
		return Periodicity{}, false
	}
	// The spectra are taken of the burst indicator (1 inside a burst, 0
	// outside, mean removed), not of the raw bandwidth: within-burst spikes
	// (cache absorption, stragglers) would otherwise dominate both and hide
	// the periodicity of the bursts themselves.
	x := make([]float64, len(g.v))
	for _, b := range bursts {
		i0 := int((b.Start.Sub(g.t0) + g.step/2) / g.step)
		i1 := int((b.End.Sub(g.t0) + g.step/2) / g.step)
		for i := max(i0, 0); i < min(i1, len(x)); i++ {
			x[i] = 1
		}
	}
	mean := 0.0
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	for i := range x {
		x[i] -= mean
	}
	sec := g.step.Seconds()
	// The DFT runs on the newest m ≤ n samples, m with no prime factor
	// above 5: gonum's FFT falls back to O(n²) work on large prime factors.
	xs := x[len(x)-smooth(len(x)):]
	span := float64(len(xs)) * sec

	// DFT: dominant non-DC bin, refined by parabolic interpolation.
	fft := fourier.NewFFT(len(xs))
	coef := fft.Coefficients(nil, xs)
	pow := make([]float64, len(coef))
	total := 0.0
	for k := 1; k < len(coef); k++ {
		pow[k] = real(coef[k])*real(coef[k]) + imag(coef[k])*imag(coef[k])
		total += pow[k]
	}
	if total == 0 {
		return Periodicity{}, false
	}
	kmax := 1
	for k := 2; k < len(pow); k++ {
		// Periods shorter than two samples are not resolvable bursts.
		if pow[k] > pow[kmax] {
			kmax = k
		}
	}
	dftPeriod := span / interp(pow, kmax)

	// Autocorrelation through the FFT of the zero-padded series.
	acf := autocorr(x)
	acfLag := firstPeak(acf)
	acfPeriod := 0.0
	if acfLag > 0 {
		acfPeriod = interp(acf, acfLag) * sec
	}

	// Coarse period: the autocorrelation's first peak names the fundamental;
	// the DFT maximum may sit on a harmonic, so it is the fallback.
	coarse := acfPeriod
	if coarse <= 0 {
		coarse = dftPeriod
	}
	// Lattice fit of burst starts.
	starts := make([]float64, len(bursts))
	durs := make([]float64, len(bursts))
	// A burst's start is the beginning of its first raised sample's
	// interval; it began somewhere inside it (onset), so predictions from
	// those starts come early by about half a sample on average. The fit
	// keeps the whole-sample starts (an offset common to all moves no
	// period), and the predicted start moves by the mean offset of the
	// bursts before the newest: the newest's level is not known while it
	// lasts, and so the forecast moves only when a burst is added.
	base, _, busy := g.levels(p.MinBandwidth)
	shift := 0.0
	for i, b := range bursts {
		starts[i] = b.Start.Sub(g.t0).Seconds()
		durs[i] = b.End.Sub(b.Start).Seconds()
		if i < len(bursts)-1 {
			shift += onset(g, b, base, busy) - starts[i]
		}
	}
	// To the second: the offsets are read against burst levels that vary,
	// and a forecast should not move by milliseconds as they drift.
	if len(bursts) > 1 {
		shift = math.Round(shift / float64(len(bursts)-1))
	}
	a, period, rms, n, missing := fitLattice(starts, coarse)
	if period <= 0 || n < p.MinBursts {
		return Periodicity{}, false
	}
	per := Periodicity{
		Period:    seconds(period),
		DFTPeriod: seconds(dftPeriod),
		ACFPeriod: seconds(acfPeriod),
		Jitter:    seconds(rms),
		Bursts:    n,
		Missing:   missing,
		Anchor:    g.t0.Add(seconds(a)),
	}
	per.DFTShare = harmonicShare(pow, span/period, total)
	if lag := period / sec; lag < float64(len(acf)-1) {
		per.ACF = math.Max(0, lerp(acf, lag))
	}
	var z complex128
	for _, s := range starts {
		z += cmplx.Exp(complex(0, 2*math.Pi*(s-a)/period))
	}
	per.Coherence = cmplx.Abs(z) / float64(len(starts))
	// A lattice with many empty slots fits anything (halve the period and
	// every set of starts looks periodic), so the confidence is scaled by
	// the share of slots that hold a burst.
	// Bursts sharing a slot mean more bursts than the rhythm explains.
	// Regularity is a Gaussian in the relative jitter (σ = 5 % of the period):
	// sharper than the coherence, which stays near 1 up to 10 % jitter.
	rel := rms / period
	per.Regularity = math.Exp(-rel * rel / (2 * 0.05 * 0.05))
	per.Confidence = (per.DFTShare + per.ACF + per.Regularity) / 3 *
		float64(n) / float64(n+missing) * float64(n) / float64(len(starts))

	// Next slot after the last burst start.
	last := starts[len(starts)-1]
	k := math.Round((last-a)/period) + 1
	next := a + k*period
	slack := math.Max(2*rms, sec)
	dur := robust.Median(durs)

	// The renewal view: a job that checkpoints every N steps, or a fixed
	// time after its previous checkpoint ended, has jitter that adds up
	// from burst to burst, so its starts drift off any lattice (with ±25 %
	// per interval, by a third of a period after four bursts) while each
	// interval stays close to the period. It takes over when the lattice's
	// starts stray (regularity below 0.5: an RMS residual above 6 % of the
	// period) and it is the more confident.
	if rp, rsd, rconf, ok := renewalFit(starts, p.MinBursts); ok && per.Regularity < 0.5 && rconf > per.Confidence {
		per.Period, per.Jitter, per.Confidence = seconds(rp), seconds(rsd), rconf
		per.Renewal = true
		next = last + rp
		slack = math.Max(2*rsd, sec)
	}
	next += shift
	per.Next = g.t0.Add(seconds(next))
	per.NextStart = g.t0.Add(seconds(next - slack))
	per.NextEnd = g.t0.Add(seconds(next + dur + slack))
	return per, true
}

// renewalCV is the spread of intervals (σ ÷ period) at which the renewal
// view's confidence falls to e^(−1/2) ≈ 0.61, just above MinConfidence's
// default: ±25 % uniform jitter (σ 0.144) scores 0.77, intervals drawn
// from 0.3–1.7 periods (σ 0.40) 0.14.
const renewalCV = 0.2

// renewalFit estimates the period of burst starts as a renewal process:
// the mean of the intervals between consecutive starts, an interval
// holding k periods (k rounded against their median, within a quarter
// period of it: missed bursts) counted as k intervals of interval/k.
// It needs MinBursts + 2 bursts (two intervals more than the lattice:
// two or three intervals of random gaps are alike too often). conf is the regularity
// exp(−cv²/(2·renewalCV²)) of the intervals, scaled by the share of
// periods that held a burst.
func renewalFit(starts []float64, minBursts int) (period, sd, conf float64, ok bool) {
	if len(starts) < minBursts+2 {
		return 0, 0, 0, false
	}
	ivs := make([]float64, 0, len(starts)-1)
	for i := 1; i < len(starts); i++ {
		ivs = append(ivs, starts[i]-starts[i-1])
	}
	med := robust.Median(ivs)
	if med <= 0 {
		return 0, 0, 0, false
	}
	norm := make([]float64, 0, len(ivs))
	slots := 0
	for _, iv := range ivs {
		k := math.Max(1, math.Round(iv/med))
		if math.Abs(iv/med-k) > 0.25 {
			// not close to a multiple of the period: a long gap, not
			// missed bursts (splitting it would flatter random gaps)
			k = 1
		}
		slots += int(k)
		for range int(k) {
			norm = append(norm, iv/k)
		}
	}
	// The mean, not the median: for jitter that is symmetric around the
	// period it is the more efficient estimate (≈ 20 % less spread for
	// uniform jitter), and missed bursts were already split above.
	for _, x := range norm {
		period += x
	}
	period /= float64(len(norm))
	for _, x := range norm {
		sd += (x - period) * (x - period)
	}
	sd = math.Sqrt(sd / float64(len(norm)))
	// A few intervals of random gaps can look alike by chance: the spread
	// is taken (1 + 1/n) times its sample value, n intervals, a margin
	// that fades as evidence accumulates.
	cv := sd / period * (1 + 1/float64(len(norm)))
	conf = math.Exp(-cv*cv/(2*renewalCV*renewalCV)) * float64(len(ivs)) / float64(slots)
	return period, sd, conf, true
}

// fitLattice fits starts ≈ a + n·P with n rounded from the coarse period,
// by least squares, twice (the second pass re-rounds with the fitted P). It
// returns a, P, the RMS residual, the number of distinct slots used and the
// number of empty slots between the first and the last.
func fitLattice(starts []float64, coarse float64) (a, period, rms float64, used, missing int) {
	if coarse <= 0 || len(starts) < 2 {
		return 0, 0, 0, 0, 0
	}
	period = coarse
	a = starts[0]
	idx := make([]float64, len(starts))
	for pass := 0; pass < 2; pass++ {
		for i, s := range starts {
			idx[i] = math.Round((s - a) / period)
		}
		// Least squares s = a + P·n.
		var sn, ss, snn, sns float64
		m := float64(len(starts))
		for i, s := range starts {
			sn += idx[i]
			ss += s
			snn += idx[i] * idx[i]
			sns += idx[i] * s
		}
		den := m*snn - sn*sn
		if den == 0 {
			return 0, 0, 0, 0, 0
		}
		period = (m*sns - sn*ss) / den
		a = (ss - period*sn) / m
		if period <= 0 {
			return 0, 0, 0, 0, 0
		}
	}
	slots := map[float64]bool{}
	for i, s := range starts {
		r := s - (a + period*idx[i])
		rms += r * r
		slots[idx[i]] = true
	}
	rms = math.Sqrt(rms / float64(len(starts)))
	keys := make([]float64, 0, len(slots))
	for k := range slots {
		keys = append(keys, k)
	}
	sort.Float64s(keys)
	used = len(keys)
	missing = int(keys[len(keys)-1]-keys[0]) + 1 - used
	return a, period, rms, used, missing
}

// smooth returns the largest m ≤ n whose prime factors are all 2, 3 or 5.
func smooth(n int) int {
	for m := n; m > 1; m-- {
		r := m
		for _, p := range []int{2, 3, 5} {
			for r%p == 0 {
				r /= p
			}
		}
		if r == 1 {
			return m
		}
	}
	return n
}

// autocorr returns the normalised autocorrelation of x for lags 0..len(x)/2,
// computed as the inverse FFT of the power spectrum of x zero-padded to a
// power of two ≥ 2n (Wiener–Khinchin), so it is linear, not circular.
func autocorr(x []float64) []float64 {
	n := len(x)
	m := 1
	for m < 2*n {
		m <<= 1
	}
	padded := make([]float64, m)
	copy(padded, x)
	fft := fourier.NewFFT(m)
	c := fft.Coefficients(nil, padded)
	for i, v := range c {
		c[i] = complex(real(v)*real(v)+imag(v)*imag(v), 0)
	}
	r := fft.Sequence(nil, c)[:n/2+1]
	if r[0] <= 0 {
		return make([]float64, len(r))
	}
	r0 := r[0]
	for i := range r {
		// Unbiased: divide by the number of overlapping pairs.
		r[i] = r[i] / r0 * float64(n) / float64(n-i)
	}
	return r
}

// firstPeak returns the lag of the first local maximum of the
// autocorrelation after it first drops below zero, if that maximum is at
// least 0.1; 0 when there is none.
func firstPeak(r []float64) int {
	i := 1
	for i < len(r) && r[i] > 0 {
		i++
	}
	best, bestLag := 0.1, 0
	for ; i < len(r)-1; i++ {
		if r[i] >= r[i-1] && r[i] >= r[i+1] && r[i] > best {
			best, bestLag = r[i], i
			// Take the first peak that is not beaten by the next one soon
			// after (a jittered peak may be split in two).
			j := i + 1
			for ; j < len(r)-1 && j < i+1+i/4; j++ {
				if r[j] > best {
					best, bestLag = r[j], j
				}
			}
			return bestLag
		}
	}
	return 0
}

// harmonicShare is the share of the non-DC power within one bin of the
// harmonics of f0 (in cycles per span).
func harmonicShare(pow []float64, f0, total float64) float64 {
	if f0 < 0.5 {
		return 0
	}
	got := 0.0
	seen := map[int]bool{}
	for h := 1; float64(h)*f0 < float64(len(pow))+1; h++ {
		c := int(math.Round(float64(h) * f0))
		for k := c - 1; k <= c+1; k++ {
			if k >= 1 && k < len(pow) && !seen[k] {
				seen[k] = true
				got += pow[k]
			}
		}
	}
	return math.Min(1, got/total)
}

// interp refines the position of a local maximum at i by fitting a parabola
// through its neighbours.
func interp(y []float64, i int) float64 {
	if i <= 0 || i >= len(y)-1 {
		return float64(i)
	}
	den := y[i-1] - 2*y[i] + y[i+1]
	if den == 0 {
		return float64(i)
	}
	d := 0.5 * (y[i-1] - y[i+1]) / den
	if d > 0.5 || d < -0.5 {
		return float64(i)
	}
	return float64(i) + d
}

// lerp reads y at a fractional index.
func lerp(y []float64, x float64) float64 {
	i := int(x)
	if i+1 >= len(y) {
		return y[len(y)-1]
	}
	f := x - float64(i)
	return y[i]*(1-f) + y[i+1]*f
}

func seconds(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }

// onset is the start of burst b, in seconds after g.t0, inside its first
// sample's interval. A sample is the mean rate over its interval, so the
// first sample of a burst that began late in the interval holds only that
// part of it: the start is the interval's end less the share of a sample
// the first one holds, (first − idle) ÷ (level − idle) of a step, where
// level is the median of the burst's other samples but its last (partial
// too, at the end), or of all raised samples of the series while the burst
// has no other yet. A first sample at or above the level is a full one:
// the start stays at the interval's beginning.
func onset(g *grid, b Burst, base, busy float64) float64 {
	i := int((b.Start.Sub(g.t0) + g.step/2) / g.step)
	j := int((b.End.Sub(g.t0) + g.step/2) / g.step) // one past the last cell
	start := float64(i) * g.step.Seconds()
	if i < 0 || i >= len(g.v) || j > len(g.v) {
		return start
	}
	var full []float64
	for k := i + 1; k < j; k++ {
		if !math.IsNaN(g.v[k]) && (k < j-1 || j-i <= 2) {
			full = append(full, g.v[k])
		}
	}
	lvl := busy
	if len(full) > 0 {
		lvl = robust.Median(full)
	}
	if !(lvl > base) {
		return start
	}
	f := min(1, max(0, (g.v[i]-base)/(lvl-base)))
	return start + (1-f)*g.step.Seconds()
}
