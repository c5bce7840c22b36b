package checkpoint

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/ballast-io/ballast/analyzer/internal/golden"
	"github.com/ballast-io/ballast/models"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

var job = models.Subject{Kind: models.SubjectJob, ID: "train-llm"}

// synth is a checkpointing job sampled every 10 s: bursts of dur at 2 GB/s
// every period, start jittered uniformly by ±jitter, bursts listed in skip
// missing, background writes of about 5 MB/s, and sample drop-outs.
type synth struct {
	period, dur, jitter time.Duration
	skip                map[int]bool
	n                   int // bursts
	random              bool
	seed                uint64
}

func (s synth) starts() []time.Time {
	r := rand.New(rand.NewPCG(s.seed, 99))
	var out []time.Time
	at := t0.Add(5 * time.Minute)
	for i := range s.n {
		st := at
		if s.random {
			at = at.Add(time.Duration((0.3 + 1.4*r.Float64()) * float64(s.period)))
		} else {
			st = t0.Add(5*time.Minute + time.Duration(i)*s.period + time.Duration((2*r.Float64()-1)*float64(s.jitter)))
		}
		if !s.skip[i] {
			out = append(out, st)
		}
	}
	return out
}

func (s synth) series(until time.Time) []Point {
	r := rand.New(rand.NewPCG(s.seed, 7))
	starts := s.starts()
	var pts []Point
	for at := t0; !at.After(until); at = at.Add(10 * time.Second) {
		if r.IntN(50) == 0 {
			continue // a scrape that never arrived
		}
		v := 5e6 * (0.5 + r.Float64())
		for _, st := range starts {
			if !at.Before(st) && at.Before(st.Add(s.dur)) {
				v = 2e9 * (0.8 + 0.4*r.Float64())
			}
		}
		pts = append(pts, Point{T: at, BytesPerSec: v})
	}
	return pts
}

// drive feeds the series tick by tick (one sample per 10 s tick) and
// collects the latest version of every finding.
func drive(t *testing.T, d *Detector, pts []Point) map[string]models.Finding {
	t.Helper()
	seen := map[string]models.Finding{}
	for i, p := range pts {
		if err := d.Observe(p.T, job, p); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 || i == len(pts)-1 {
			for _, f := range d.Findings(p.T) {
				if err := f.Validate(); err != nil {
					t.Fatal(err)
				}
				seen[f.ID] = f
			}
		}
	}
	return seen
}

func byKind(m map[string]models.Finding, kind string) []models.Finding {
	var out []models.Finding
	for _, f := range m {
		if f.Kind == kind {
			out = append(out, f)
		}
	}
	return out
}

func evidence(f models.Finding, name string) float64 {
	for _, e := range f.Evidence {
		if e.Name == name {
			return e.Value
		}
	}
	return math.NaN()
}

// TestPeriodicJobWithJitterAndMissingBurst: 10 bursts every 10 min, ±20 s
// jitter, the 5th missing. Expect 9 bursts, one forecast, period within 5 %
// and a next start within 10 % of the period once three bursts are seen.
func TestPeriodicJobWithJitterAndMissingBurst(t *testing.T) {
	s := synth{period: 10 * time.Minute, dur: time.Minute, jitter: 20 * time.Second, skip: map[int]bool{4: true}, n: 10, seed: 1}
	d, err := New(Options{Window: 3 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	end := t0.Add(5*time.Minute + 10*s.period)
	got := drive(t, d, s.series(end))
	golden.Check(t, "periodic_job.json", sortedFindings(got))

	if b := byKind(got, KindBurst); len(b) != 9 {
		t.Errorf("got %d burst findings; want 9 (10 bursts, one missing)", len(b))
	}
	fc := byKind(got, KindForecast)
	if len(fc) != 1 {
		t.Fatalf("got %d forecast findings; want 1 that stays open", len(fc))
	}
	if p := evidence(fc[0], "period_seconds"); math.Abs(p-600)/600 > 0.05 {
		t.Errorf("period %.1f s; want 600 s ± 5 %%", p)
	}
}

// TestForecastAfterThreeBursts checks the prediction made right after the
// third burst against the fourth burst's real start.
func TestForecastAfterThreeBursts(t *testing.T) {
	s := synth{period: 10 * time.Minute, dur: time.Minute, jitter: 20 * time.Second, n: 6, seed: 3}
	starts := s.starts()
	now := starts[2].Add(2 * time.Minute)
	d, _ := New(Options{})
	for _, p := range s.series(now) {
		if err := d.Observe(now, job, p); err != nil {
			t.Fatal(err)
		}
	}
	d.Findings(now)
	p, ok := d.Forecast(now, job)
	if !ok {
		t.Fatalf("no forecast after three bursts")
	}
	if e := math.Abs(p.Period.Seconds()-600) / 600; e > 0.05 {
		t.Errorf("period %s; want 10m ± 5 %%", p.Period)
	}
	// The window is the predicted start widened by the jitter slack.
	mid := p.Next
	if e := math.Abs(mid.Sub(starts[3]).Seconds()) / 600; e > 0.10 {
		t.Errorf("predicted start %s (window %s–%s); real start %s: error %.1f %% of the period; want ≤ 10 %%",
			mid.Format(time.TimeOnly), p.NextStart.Format(time.TimeOnly), p.NextEnd.Format(time.TimeOnly), starts[3].Format(time.TimeOnly), 100*e)
	}
}

// TestOverdueBurstKeepsItsWindow: four bursts every 10 min, the fifth
// not come yet. Past its window's end the forecast still names that window
// (a late burst is likelier than a skipped one, and it is the nearer of the
// two windows until half a period late), and the finding says it is
// overdue; half a period after the predicted start the window moves on one
// period, and later by whole periods.
func TestOverdueBurstKeepsItsWindow(t *testing.T) {
	s := synth{period: 10 * time.Minute, dur: time.Minute, jitter: 5 * time.Second, skip: map[int]bool{4: true, 5: true, 6: true}, n: 7, seed: 2}
	starts := s.starts()
	at := func(now time.Time) (Periodicity, []models.Finding) {
		t.Helper()
		d, _ := New(Options{})
		for _, p := range s.series(now) {
			if err := d.Observe(now, job, p); err != nil {
				t.Fatal(err)
			}
		}
		fs := d.Findings(now)
		p, ok := d.Forecast(now, job)
		if !ok {
			t.Fatalf("%s: no forecast after four bursts", now.Format(time.TimeOnly))
		}
		return p, fs
	}
	due, _ := at(starts[3].Add(3 * time.Minute))
	if e := math.Abs(due.Next.Sub(starts[3].Add(s.period)).Seconds()); e > 30 {
		t.Fatalf("forecast before the fifth burst is due: next %s; want about %s", due.Next.Format(time.TimeOnly), starts[3].Add(s.period).Format(time.TimeOnly))
	}
	late := due.NextEnd.Add(2 * time.Minute)
	p, fs := at(late)
	if !p.NextStart.Equal(due.NextStart) || !p.NextEnd.Equal(due.NextEnd) {
		t.Errorf("%s, the burst %s late: window %s–%s; want the overdue window %s–%s kept", late.Format(time.TimeOnly), late.Sub(due.NextEnd),
			p.NextStart.Format(time.TimeOnly), p.NextEnd.Format(time.TimeOnly), due.NextStart.Format(time.TimeOnly), due.NextEnd.Format(time.TimeOnly))
	}
	var fc []models.Finding
	for _, f := range fs {
		if f.Kind == KindForecast {
			fc = append(fc, f)
		}
	}
	if len(fc) != 1 || !strings.Contains(fc[0].Summary, "overdue by 2m0s") {
		t.Errorf("forecast findings %v; want one saying it is overdue by 2m0s", fc)
	}
	for _, c := range []struct {
		after time.Duration
		k     int
	}{{s.period/2 + time.Second, 1}, {s.period + s.period/2 + time.Second, 2}} {
		now := due.Next.Add(c.after)
		p, _ := at(now)
		// the refit on a longer quiet tail may move the lattice by seconds
		if want := due.NextStart.Add(time.Duration(c.k) * s.period); math.Abs(p.NextStart.Sub(want).Seconds()) > 15 {
			t.Errorf("%s after the predicted start: window opens %s; want %s (moved on %d period(s))", c.after, p.NextStart.Format(time.TimeOnly), want.Format(time.TimeOnly), c.k)
		}
	}
}

// TestRandomBurstsGetNoForecast: bursts at random gaps of 0.3–1.7 periods
// are bursts, not a rhythm: no forecast may be issued.
func TestRandomBurstsGetNoForecast(t *testing.T) {
	s := synth{period: 10 * time.Minute, dur: time.Minute, n: 10, random: true, seed: 5}
	d, _ := New(Options{Window: 3 * time.Hour})
	got := drive(t, d, s.series(t0.Add(2*time.Hour)))
	if len(byKind(got, KindBurst)) < 8 {
		t.Errorf("got %d bursts; want the random bursts found", len(byKind(got, KindBurst)))
	}
	for _, f := range byKind(got, KindForecast) {
		t.Errorf("forecast for aperiodic bursts: %s", f.Summary)
	}
}

func TestObserveRejectsBadSamples(t *testing.T) {
	d, _ := New(Options{})
	for _, p := range []Point{{T: t0, BytesPerSec: math.NaN()}, {T: t0, BytesPerSec: -1}, {T: t0.Add(time.Hour), BytesPerSec: 1}} {
		if err := d.Observe(t0, job, p); err == nil {
			t.Errorf("Observe(%v): got nil error; want one", p)
		}
	}
	if err := d.Observe(t0, job, Point{T: t0, BytesPerSec: 1}); err != nil {
		t.Fatal(err)
	}
	if err := d.Observe(t0, job, Point{T: t0, BytesPerSec: 1}); err == nil {
		t.Error("Observe of a repeated timestamp: got nil error; want one")
	}
}

func sortedFindings(m map[string]models.Finding) []models.Finding {
	out := make([]models.Finding, 0, len(m))
	for _, f := range m {
		out = append(out, f)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].ID < out[j-1].ID; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// TestSilentJobLosesForecast: a periodic job that stops reporting keeps its
// forecast for two periods at most, then the forecast closes and the group
// is forgotten once its history ages out.
func TestSilentJobLosesForecast(t *testing.T) {
	s := synth{period: 10 * time.Minute, dur: time.Minute, n: 6, seed: 3}
	end := t0.Add(5*time.Minute + 6*s.period)
	d, _ := New(Options{Window: time.Hour})
	drive(t, d, s.series(end))
	if _, ok := d.Forecast(end, job); !ok {
		t.Fatal("no forecast while the job reports")
	}
	later := end.Add(25 * time.Minute)
	var closed bool
	for _, f := range d.Findings(later) {
		if f.Kind == KindForecast && !f.Active() {
			closed = true
		}
	}
	if !closed {
		t.Errorf("forecast still open 25 min after the job went silent")
	}
	d.Findings(end.Add(3 * time.Hour))
	if len(d.groups) != 0 {
		t.Errorf("silent group still tracked after its history aged out")
	}
}

func TestForecastWindowRoundTrips(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	p := Periodicity{Period: 15 * time.Minute, Confidence: 0.9,
		Next: now.Add(5 * time.Minute), NextStart: now.Add(4 * time.Minute), NextEnd: now.Add(7 * time.Minute)}
	f := forecastFinding(models.Subject{Kind: models.SubjectJob, ID: "train-a"}, p, now.Add(-time.Hour), now)
	w, ok := ForecastWindow(f)
	if !ok || !w.NextStart.Equal(p.NextStart) || !w.NextEnd.Equal(p.NextEnd) || w.Period != p.Period || w.Confidence != 0.9 {
		t.Fatalf("ForecastWindow: got %+v, %v; want the finding's window %s–%s every %s", w, ok, p.NextStart, p.NextEnd, p.Period)
	}
	if !w.Next.Equal(p.Next) {
		t.Errorf("ForecastWindow: predicted start %s; want %s", w.Next, p.Next)
	}
	// Forty minutes later the window has moved on by two periods: the one
	// predicted for +35m, 5 minutes overdue, is still the one expected;
	// from half a period after its start (+42m30s) the next is.
	for _, c := range []struct{ at, moved time.Duration }{{40 * time.Minute, 30 * time.Minute}, {42*time.Minute + 31*time.Second, 45 * time.Minute}} {
		s, e := w.At(now.Add(c.at))
		if want := p.NextStart.Add(c.moved); !s.Equal(want) || !e.Equal(p.NextEnd.Add(c.moved)) {
			t.Errorf("At(+%s): got %s–%s; want %s–%s", c.at, s, e, want, p.NextEnd.Add(c.moved))
		}
	}
	if _, ok := ForecastWindow(models.Finding{Kind: KindBurst}); ok {
		t.Error("ForecastWindow of a burst: got ok; want not a forecast")
	}
}

// TestRaisedMarksAPartialFirstSample: a job writes about 5 MB/s between
// checkpoints of 2 GB/s. A checkpoint that began a second before a sample
// puts a tenth of its rate in it: under the burst threshold (no burst
// yet) but raised above idle. Idle samples are not raised, nor is a job
// with no sample at now.
func TestRaisedMarksAPartialFirstSample(t *testing.T) {
	d, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	rate := func(i int) float64 {
		switch {
		case i >= 20 && i < 23:
			return 2e9
		case i == 30:
			return 0.2e9
		}
		return 5e6 + float64(i%3)*1e5
	}
	for i := range 31 {
		now := t0.Add(time.Duration(i) * 10 * time.Second)
		if err := d.Observe(now, job, Point{T: now, BytesPerSec: rate(i)}); err != nil {
			t.Fatal(err)
		}
		fs := d.Findings(now)
		open := false
		for _, f := range fs {
			open = open || f.Kind == KindBurst && f.Active()
		}
		want := i >= 20 && i < 23 || i == 30
		if got := d.Raised(job); got != want {
			t.Errorf("sample %d (%.3g B/s): Raised %v; want %v", i, rate(i), got, want)
		}
		if wantOpen := i >= 20 && i < 23; open != wantOpen {
			t.Errorf("sample %d: burst open %v; want %v", i, open, wantOpen)
		}
	}
	later := t0.Add(305 * time.Second)
	d.Findings(later)
	if d.Raised(job) {
		t.Error("Raised at a now with no sample; want false")
	}
	if d.Raised(models.Subject{Kind: models.SubjectJob, ID: "other"}) {
		t.Error("Raised for a job never observed; want false")
	}
}
