package checkpoint

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/ballast-io/ballast/models"
)

// Finding kinds this analyzer emits.
const (
	KindBurst    = "checkpoint_burst"
	KindForecast = "checkpoint_forecast"
)

// Options tune the detector. Zero values take the defaults in brackets.
type Options struct {
	Params
	// Window is how much history each group keeps [1h].
	Window time.Duration
	// MaxSamples caps the samples kept per group; the oldest go first [8192].
	MaxSamples int
	// MinConfidence opens a forecast [0.6]; below ExitConfidence it closes [0.45].
	MinConfidence, ExitConfidence float64
}

func (o Options) withDefaults() Options {
	o.Params = o.Params.withDefaults()
	if o.Window == 0 {
		o.Window = time.Hour
	}
	if o.MaxSamples == 0 {
		o.MaxSamples = 8192
	}
	if o.MinConfidence == 0 {
		o.MinConfidence = 0.6
	}
	if o.ExitConfidence == 0 {
		o.ExitConfidence = 0.45
	}
	return o
}

// tracked is a burst with the id it was first reported under.
type tracked struct {
	id    string
	b     Burst
	final bool // reported closed; never reported again
}

type group struct {
	subject       models.Subject
	pts           []Point
	known         []tracked
	per           Periodicity
	perOK         bool
	forecastSince time.Time // zero when no forecast is open
	lastForecast  *models.Finding
	// raised: the newest sample, at the last Findings call's now, is
	// clearly above the idle level (Raised).
	raised bool
}

// Detector tracks the write-bandwidth series of many groups (jobs or client
// groups) and reports their bursts and forecasts. Feed it with Observe and
// read it with Findings; now must not go backwards. It is not safe for
// concurrent use.
type Detector struct {
	opts   Options
	groups map[models.Subject]*group
}

// New returns a detector with opts (zero values take the defaults).
func New(opts Options) (*Detector, error) {
	o := opts.withDefaults()
	switch {
	case o.ThresholdFrac <= 0 || o.ThresholdFrac >= 1:
		return nil, fmt.Errorf("invalid checkpoint options: ThresholdFrac %v is outside (0, 1)", o.ThresholdFrac)
	case o.MinBursts < 2:
		return nil, fmt.Errorf("invalid checkpoint options: MinBursts %d is below 2", o.MinBursts)
	case o.ExitConfidence > o.MinConfidence:
		return nil, fmt.Errorf("invalid checkpoint options: ExitConfidence %v is above MinConfidence %v", o.ExitConfidence, o.MinConfidence)
	case o.Window < 0 || o.MaxSamples < 16:
		return nil, fmt.Errorf("invalid checkpoint options: Window %s and MaxSamples %d must be positive (MaxSamples ≥ 16)", o.Window, o.MaxSamples)
	}
	return &Detector{opts: o, groups: map[models.Subject]*group{}}, nil
}

// Observe appends write-bandwidth samples of subject (a job or client group).
// Samples must be in time order, not after now, finite and non-negative.
func (d *Detector) Observe(now time.Time, subject models.Subject, pts ...Point) error {
	g := d.groups[subject]
	if g == nil {
		g = &group{subject: subject}
		d.groups[subject] = g
	}
	for _, p := range pts {
		switch {
		case math.IsNaN(p.BytesPerSec) || math.IsInf(p.BytesPerSec, 0) || p.BytesPerSec < 0:
			return fmt.Errorf("cannot observe write bandwidth of %q: value %v at %s is not a finite non-negative rate", subject, p.BytesPerSec, p.T.Format(time.RFC3339Nano))
		case p.T.After(now):
			return fmt.Errorf("cannot observe write bandwidth of %q: sample at %s is after now %s", subject, p.T.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano))
		case len(g.pts) > 0 && !p.T.After(g.pts[len(g.pts)-1].T):
			return fmt.Errorf("cannot observe write bandwidth of %q: sample at %s is not after the previous one at %s", subject, p.T.Format(time.RFC3339Nano), g.pts[len(g.pts)-1].T.Format(time.RFC3339Nano))
		}
		g.pts = append(g.pts, p)
	}
	cut := 0
	for cut < len(g.pts) && (now.Sub(g.pts[cut].T) > d.opts.Window || len(g.pts)-cut > d.opts.MaxSamples) {
		cut++
	}
	if cut > 0 {
		g.pts = append(g.pts[:0], g.pts[cut:]...)
	}
	return nil
}

// Forecast returns the current periodicity estimate of subject, when there is
// one with at least MinConfidence, with its next window rolled forward
// once a predicted burst is overdue by more than half a period
// (rollForward).
func (d *Detector) Forecast(now time.Time, subject models.Subject) (Periodicity, bool) {
	g := d.groups[subject]
	if g == nil || !g.perOK || g.per.Confidence < d.opts.MinConfidence {
		return Periodicity{}, false
	}
	return rollForward(g.per, now), true
}

// rollForward moves a prediction to the next lattice slot once now is past
// both its window's end and half a period after its predicted start. Until
// then an overdue burst keeps its window: a late checkpoint (a step that
// took longer, a job's ranks waiting on a straggler) is far likelier than a
// skipped one, and while it is less than half a period late the window it
// missed is the nearer of the two to when it comes; rolled at once, the
// forecast would name a time a whole period after a burst that is about to
// start, and a planner trusting it would start moving data into it.
func rollForward(p Periodicity, now time.Time) Periodicity {
	if p.Period <= 0 {
		return p
	}
	keep := keepUntil(p.Next, p.NextEnd, p.Period)
	if !keep.Before(now) {
		return p
	}
	k := now.Sub(keep)/p.Period + 1
	p.Next = p.Next.Add(k * p.Period)
	p.NextStart = p.NextStart.Add(k * p.Period)
	p.NextEnd = p.NextEnd.Add(k * p.Period)
	return p
}

// keepUntil is when a burst predicted at next, in a window ending at end,
// stops being the one expected: the later of the window's end and half a
// period after next.
func keepUntil(next, end time.Time, period time.Duration) time.Time {
	if half := next.Add(period / 2); half.After(end) {
		return half
	}
	return end
}

// Raised reports whether subject's newest sample, taken at the now of the
// last Findings call, is clearly above its idle level: above the cut over
// which the burst level is found (MinBandwidth, 6 × the idle noise and 3 ×
// the idle level; never with fewer than 16 samples of history). It is
// lower than the burst threshold on purpose: a sample is the mean over its
// interval, so the first sample of a burst that began late in the interval
// holds only a part of it and can stay below the threshold, and the burst
// is found one sample later. Raised alone is no burst (a log flush, a small
// write is raised too); a caller that has a second sign of a burst
// starting — the job's GPUs stopped together for a synchronous
// checkpoint — can take the two together for its start.
func (d *Detector) Raised(subject models.Subject) bool {
	g := d.groups[subject]
	return g != nil && g.raised
}

// Bursts returns the bursts of subject found by the last Findings call.
func (d *Detector) Bursts(subject models.Subject) []Burst {
	g := d.groups[subject]
	if g == nil {
		return nil
	}
	out := make([]Burst, len(g.known))
	for i, k := range g.known {
		out[i] = k.b
	}
	return out
}

// Findings analyses every group and returns, sorted by id: bursts that are
// going on or ended since they were last reported (each closed burst is
// reported once), and the open forecasts (and those that closed now).
func (d *Detector) Findings(now time.Time) []models.Finding {
	subjects := make([]models.Subject, 0, len(d.groups))
	for s := range d.groups {
		subjects = append(subjects, s)
	}
	sort.Slice(subjects, func(i, j int) bool { return subjects[i].String() < subjects[j].String() })
	var out []models.Finding
	for _, s := range subjects {
		g := d.groups[s]
		out = append(out, d.analyse(now, g)...)
		// A group that stopped reporting is forgotten once its history
		// and its bursts have aged out (its forecast closed above).
		if len(g.pts) == 0 && len(g.known) == 0 && g.forecastSince.IsZero() {
			delete(d.groups, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (d *Detector) analyse(now time.Time, g *group) []models.Finding {
	cut := 0
	for cut < len(g.pts) && now.Sub(g.pts[cut].T) > d.opts.Window {
		cut++
	}
	g.pts = g.pts[cut:]
	gr := resample(g.pts)
	bursts, raisedAbove := detect(&gr, d.opts.Params)
	n := len(g.pts)
	g.raised = n > 0 && g.pts[n-1].T.Equal(now) && g.pts[n-1].BytesPerSec > raisedAbove // false for a NaN cut
	g.per, g.perOK = estimate(&gr, bursts, d.opts.Params)
	// A silent group (a job that ended) keeps no forecast: once two
	// periods pass without a sample its rhythm is no longer evidence.
	if g.perOK && (n == 0 || now.Sub(g.pts[n-1].T) > 2*g.per.Period) {
		g.perOK = false
	}
	var out []models.Finding

	// Match detections to the bursts already reported, by overlap, so an id
	// survives a threshold that moves the edges by a sample.
	for _, b := range bursts {
		matched := false
		for i := range g.known {
			k := &g.known[i]
			if b.Start.Before(k.b.End.Add(gr.step)) && b.End.After(k.b.Start.Add(-gr.step)) {
				if !k.final {
					k.b = b
				}
				matched = true
				break
			}
		}
		if !matched {
			g.known = append(g.known, tracked{id: fmt.Sprintf("%s:%s:%d", KindBurst, g.subject, b.Start.UnixMilli()), b: b})
		}
	}
	keep := g.known[:0]
	for _, k := range g.known {
		if now.Sub(k.b.End) <= d.opts.Window {
			keep = append(keep, k)
		}
	}
	g.known = keep
	for i := range g.known {
		k := &g.known[i]
		if k.final {
			continue
		}
		f := burstFinding(g.subject, k, now)
		if !k.b.Open {
			k.final = true
		}
		out = append(out, f)
	}

	conf := g.per.Confidence
	switch open := !g.forecastSince.IsZero(); {
	case g.perOK && (conf >= d.opts.MinConfidence || open && conf >= d.opts.ExitConfidence):
		if !open {
			g.forecastSince = now
		}
		f := forecastFinding(g.subject, rollForward(g.per, now), g.forecastSince, now)
		g.lastForecast = &f
		out = append(out, f)
	case open:
		f := *g.lastForecast
		f.End = now
		f.Summary += " (periodicity lost)"
		out = append(out, f)
		g.forecastSince, g.lastForecast = time.Time{}, nil
	}
	return out
}

func burstFinding(s models.Subject, k *tracked, now time.Time) models.Finding {
	b := k.b
	f := models.Finding{
		ID:       k.id,
		Kind:     KindBurst,
		Subject:  s,
		Severity: models.SeverityInfo,
		Score:    math.Round(b.Bytes/1e6) / 1e3,
		Start:    b.Start,
		LastSeen: b.End,
		Summary: fmt.Sprintf("%s %s wrote %.3g GB in a %s burst at %.3g GB/s", s.Kind, s.ID, b.Bytes/1e9,
			b.End.Sub(b.Start).Round(time.Millisecond), b.MeanBandwidth/1e9),
		Evidence: []models.Evidence{
			{Name: "bytes", Value: math.Round(b.Bytes), Unit: "B"},
			{Name: "duration_seconds", Value: b.End.Sub(b.Start).Seconds(), Unit: "s"},
			{Name: "mean_bandwidth", Value: math.Round(b.MeanBandwidth), Unit: "B/s"},
			{Name: "peak_bandwidth", Value: math.Round(b.PeakBandwidth), Unit: "B/s"},
		},
	}
	if b.Open {
		f.LastSeen = now
		f.Summary = fmt.Sprintf("%s %s is writing a burst: %.3g GB so far at %.3g GB/s", s.Kind, s.ID, b.Bytes/1e9, b.MeanBandwidth/1e9)
	} else {
		f.End = b.End
	}
	return f
}

// Window is the burst window a checkpoint_forecast finding predicts, read
// back from its evidence: the predicted start, the next window and the
// period it repeats at.
type Window struct {
	Next, NextStart, NextEnd time.Time
	Period                   time.Duration
	Confidence               float64
}

// ForecastWindow reads the predicted window of a checkpoint_forecast
// finding; ok is false for another kind or incomplete evidence. A finding
// without next_expected (none is written without it) takes the window's
// middle for the predicted start.
func ForecastWindow(f models.Finding) (w Window, ok bool) {
	if f.Kind != KindForecast {
		return w, false
	}
	ns, ok1 := f.EvidenceValue("next_start")
	ne, ok2 := f.EvidenceValue("next_end")
	per, ok3 := f.EvidenceValue("period_seconds")
	if !ok1 || !ok2 || !ok3 || per <= 0 {
		return w, false
	}
	w.Confidence, _ = f.EvidenceValue("confidence")
	unix := func(sec float64) time.Time { return time.UnixMilli(int64(math.Round(sec * 1000))).UTC() }
	w.NextStart, w.NextEnd, w.Period = unix(ns), unix(ne), time.Duration(per*float64(time.Second))
	w.Next = w.NextStart.Add(w.NextEnd.Sub(w.NextStart) / 2)
	if nx, ok := f.EvidenceValue("next_expected"); ok {
		w.Next = unix(nx)
	}
	return w, true
}

// At returns the window of the series expected at t: the forecast window
// moved on by whole periods, by the rule the forecast itself follows (an
// overdue window stays until half a period after its predicted start).
func (w Window) At(t time.Time) (start, end time.Time) {
	p := rollForward(Periodicity{Period: w.Period, Next: w.Next, NextStart: w.NextStart, NextEnd: w.NextEnd}, t)
	return p.NextStart, p.NextEnd
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func forecastFinding(s models.Subject, p Periodicity, since, now time.Time) models.Finding {
	r3 := func(x float64) float64 { return math.Round(x*1000) / 1000 }
	overdue := ""
	if p.NextEnd.Before(now) {
		overdue = fmt.Sprintf(" (overdue by %s: a late burst is likelier than a skipped one; the window moves on half a period after its predicted start)",
			now.Sub(p.NextEnd).Round(time.Second))
	}
	return models.Finding{
		ID:       fmt.Sprintf("%s:%s:%d", KindForecast, s, since.UnixMilli()),
		Kind:     KindForecast,
		Subject:  s,
		Severity: models.SeverityInfo,
		Score:    r3(p.Confidence),
		Start:    since,
		LastSeen: now,
		Summary: fmt.Sprintf("%s %s writes a burst every %s (confidence %.2f); next expected %s–%s", s.Kind, s.ID,
			p.Period.Round(time.Millisecond), p.Confidence, p.NextStart.UTC().Format(time.RFC3339), p.NextEnd.UTC().Format(time.RFC3339)) + overdue,
		Evidence: []models.Evidence{
			{Name: "period_seconds", Value: r3(p.Period.Seconds()), Unit: "s"},
			{Name: "next_expected", Value: float64(p.Next.UnixMilli()) / 1000, Unit: models.UnitUnixSeconds},
			{Name: "next_start", Value: float64(p.NextStart.UnixMilli()) / 1000, Unit: models.UnitUnixSeconds, Note: "window opens"},
			{Name: "next_end", Value: float64(p.NextEnd.UnixMilli()) / 1000, Unit: models.UnitUnixSeconds, Note: "window closes"},
			{Name: "confidence", Value: r3(p.Confidence)},
			{Name: "dft_harmonic_share", Value: r3(p.DFTShare), Note: "share of spectral power on the harmonics of 1/period"},
			{Name: "acf_at_period", Value: r3(p.ACF)},
			{Name: "phase_coherence", Value: r3(p.Coherence), Note: "1 = every burst start on the fitted lattice"},
			{Name: "regularity", Value: r3(p.Regularity), Note: "exp(-(jitter/period)^2 / 0.005)"},
			{Name: "dft_period_seconds", Value: r3(p.DFTPeriod.Seconds()), Unit: "s"},
			{Name: "acf_period_seconds", Value: r3(p.ACFPeriod.Seconds()), Unit: "s"},
			{Name: "jitter_seconds", Value: r3(p.Jitter.Seconds()), Unit: "s"},
			{Name: "bursts", Value: float64(p.Bursts)},
			{Name: "missing_bursts", Value: float64(p.Missing)},
			{Name: "renewal_model", Value: b2f(p.Renewal), Note: "1 = period and next start from the intervals between bursts (jitter that adds up), 0 = from the lattice fit"},
		},
	}
}
