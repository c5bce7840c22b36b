package actuator

import (
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ballast-io/ballast/models"
)

// staleIngest stands in for the LAYOUTSTATS ingest behind the device
// series verification reads: clients report the components of each
// file's current layout every tick, and a component's last rate keeps
// counting on its device for hold after its last report, as the real
// ingest keeps it for StaleAfter (plus a sweep and an emit). A component
// a commit retired stops reporting, so its old device reads its load for
// hold after the switch.
type staleIngest struct {
	hold   time.Duration
	last   map[[2]string]time.Time
	rate   map[[2]string]float64
	series map[time.Time]map[string]float64 // per tick: device → bytes/s
}

// report reads m's layouts at now; fileRate is a file's total rate,
// spread evenly over its first mirror's components. It returns the
// heat of the reported components, for the engine's planner.
func (s *staleIngest) report(m *memMover, now time.Time, fileRate func(string) float64) map[[2]string]float64 {
	heat := map[[2]string]float64{}
	m.mu.Lock()
	for name, l := range m.layouts {
		cs := l.Mirrors[0]
		for _, c := range cs {
			k := [2]string{c.Device, c.Handle}
			heat[k] = fileRate(name) / float64(len(cs))
			s.last[k], s.rate[k] = now, heat[k]
		}
	}
	m.mu.Unlock()
	load := map[string]float64{}
	for k, t := range s.last {
		if now.Sub(t) <= s.hold {
			load[k[0]] += s.rate[k]
		}
	}
	s.series[now] = load
	return heat
}

var deviceRegex = regexp.MustCompile(models.LabelLayoutStatsDeviceID + `=~"([^"]*)"`)

var windowRegex = regexp.MustCompile(`\[([0-9]+)s\]`)

// measure answers the engine's queries of the device series: the sum
// over the devices named of their mean over the query's window ending at
// at, or the max or mean over devices of that mean. Other numbers are
// unknown.
func (s *staleIngest) measure() func(string, time.Time) (float64, bool) {
	return func(expr string, at time.Time) (float64, bool) {
		if !strings.Contains(expr, models.MetricLayoutStatsDeviceBytes) {
			return 0, false
		}
		mt := deviceRegex.FindStringSubmatch(expr)
		wt := windowRegex.FindStringSubmatch(expr)
		if mt == nil || wt == nil {
			return 0, false
		}
		secs, _ := strconv.Atoi(wt[1])
		window := time.Duration(secs) * time.Second
		devs := strings.Split(mt[1], "|")
		mean := map[string]float64{}
		n := 0
		for t, load := range s.series {
			if t.After(at.Add(-window)) && !t.After(at) {
				n++
				for _, d := range devs {
					mean[d] += load[d]
				}
			}
		}
		if n == 0 {
			return 0, false
		}
		vs := make([]float64, 0, len(devs))
		sum, mx := 0.0, 0.0
		sort.Strings(devs)
		for _, d := range devs {
			v := mean[d] / float64(n)
			vs = append(vs, v)
			sum += v
			mx = math.Max(mx, v)
		}
		switch {
		case strings.HasPrefix(expr, "max("):
			return mx, true
		case strings.HasPrefix(expr, "avg(sum by"):
			return sum / float64(len(vs)), true
		case strings.HasPrefix(expr, "sum("):
			return sum, true
		}
		return 0, false
	}
}

// TestEffectWaitsForRetiredComponents: the numbers after a plan are its
// cluster's after the change, not the old placement still counted by the
// ingest beside the new one. A stripe move (hotCluster: six of d0's
// stripes to d1–d3, d0 600 → 300 B/s, pool max/mean 2.1 → 1.05) and a
// restripe (hotFileCluster: big from d0, d1 over all four, d0 and d1
// 500 → 300, max/mean 1.67 → 1) are measured with a stale hold of 2 min,
// longer than the move's grace (20 s) and the verify window (30 s): an
// after-window taken when the moves end reads d0 at its old load.
func TestEffectWaitsForRetiredComponents(t *testing.T) {
	const hold = 2 * time.Minute
	cases := []struct {
		name          string
		cluster       func() *memMover
		fileRate      func(string) float64
		source, ratio float64 // the true after numbers
	}{
		{"move", func() *memMover { m, _ := hotCluster(); return m }, func(f string) float64 {
			if strings.HasPrefix(f, "a") {
				return 50
			}
			return 30
		}, 300, 300.0 / 285},
		{"restripe", func() *memMover { m, _ := hotFileCluster(true); return m }, func(f string) float64 {
			if f == "big" {
				return 800
			}
			return 25
		}, 600, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.cluster()
			cfg := rebalanceConfig(models.ModeAuto)
			r := newRig(t, m, cfg, "", func(o *Options) { o.RateHold = hold })
			s := &staleIngest{hold: hold, last: map[[2]string]time.Time{}, rate: map[[2]string]float64{}, series: map[time.Time]map[string]float64{}}
			r.measure = s.measure()
			hot := hotspot("d0", t0)
			for range 60 {
				r.heat(s.report(m, r.now, tc.fileRate))
				r.tick(hot)
			}
			ps := r.plans()
			if len(ps) != 1 || ps[0].Effect == nil {
				t.Fatalf("plans %+v; want one with an effect", ps)
			}
			p := ps[0]
			if p.State != models.ActionSucceeded || p.Effect.Verdict != models.VerdictEffective {
				t.Fatalf("plan %s, effect %+v; want succeeded and effective", p.State, p.Effect)
			}
			var last time.Time
			for _, k := range append(r.moves(), r.restripes()...) {
				if k.Move.CommittedAt.After(last) {
					last = k.Move.CommittedAt
				}
			}
			if from := p.Effect.MeasuredAt.Add(-time.Duration(cfg.Verify.Window)); from.Before(last.Add(hold)) {
				t.Errorf("after-window from %s, last commit %s: want it to start %s after the commit at the earliest",
					from.Format(time.TimeOnly), last.Format(time.TimeOnly), hold)
			}
			a := p.Effect.After
			if got := a[EffectSourceLoad]; math.Abs(got-tc.source) > 1e-6*tc.source {
				t.Errorf("source load after %.6g; want %.6g (the retired components no longer count)", got, tc.source)
			}
			if got := a[EffectPoolMaxMean]; math.Abs(got-tc.ratio) > 1e-6 {
				t.Errorf("pool max/mean after %.6g; want %.6g", got, tc.ratio)
			}
		})
	}
}

// TestBeforeWindowStartsAtTheOnset: a plan's before numbers are the
// condition's that motivated it, not a blend with the minutes before it
// began. Synthetic load: d0's twelve files read 25 B/s each until the
// onset (d0 300 B/s, d1–d3 180), then 50 (d0 600, pool max/mean
// 600/285); the hotspot finding, with that onset, reaches the engine
// later; verify.window is 2 min. A plan that starts 40 s after the onset
// averages those 40 s only (over the whole window it would read d0 at
// about 425 B/s); one that starts 10 s after it reads the minimum of 2
// samples (20 s) and says it reaches back before the onset; one that
// starts 3 min after it reads the whole window.
func TestBeforeWindowStartsAtTheOnset(t *testing.T) {
	const window = 2 * time.Minute
	onset := t0.Add(3 * time.Minute)
	cases := []struct {
		name  string
		seen  time.Duration // after the onset
		short bool          // a window at the minimum, with a note saying so
	}{
		{"since the onset", 40 * time.Second, false},
		{"minimum samples", 10 * time.Second, true},
		{"older than the window", 3 * time.Minute, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := hotCluster()
			cfg := rebalanceConfig(models.ModeAuto)
			cfg.Verify.Window = Duration(window)
			r := newRig(t, m, cfg, "", func(o *Options) { o.SampleInterval = 10 * time.Second })
			s := &staleIngest{last: map[[2]string]time.Time{}, rate: map[[2]string]float64{}, series: map[time.Time]map[string]float64{}}
			r.measure = s.measure()
			rate := func(f string) float64 {
				switch {
				case !strings.HasPrefix(f, "a"):
					return 30
				case r.now.Before(onset):
					return 25
				}
				return 50
			}
			hot := hotspot("d0", onset)
			var p models.Action
			for range 60 {
				r.heat(s.report(m, r.now, rate))
				if r.now.Before(onset.Add(tc.seen)) {
					r.tick()
				} else {
					r.tick(hot)
				}
				if ps := r.plans(); len(ps) == 1 && ps[0].Effect != nil {
					p = ps[0]
					break
				}
			}
			if p.Effect == nil {
				t.Fatalf("no plan started: %+v", r.plans())
			}
			if !p.Onset.Equal(onset) {
				t.Errorf("plan onset %s; want the finding's start %s", p.Onset.Format(time.TimeOnly), onset.Format(time.TimeOnly))
			}
			since := p.Started.Sub(onset)
			b, note := p.Effect.Before, p.Effect.BeforeNote
			switch {
			case since >= window:
				if p.Effect.BeforeWindow != 0 || note != "" || p.Effect.Window != window {
					t.Errorf("started %s after the onset: effect window %s, before-window %s (%q); want verify.window only", since, p.Effect.Window, p.Effect.BeforeWindow, note)
				}
			case tc.short:
				if p.Effect.BeforeWindow != 20*time.Second || !strings.Contains(note, "before the condition") {
					t.Errorf("started %s after the onset: before-window %s (%q); want the 20-s minimum, saying it reaches back before the onset", since, p.Effect.BeforeWindow, note)
				}
				return
			default:
				if p.Effect.BeforeWindow != since || !strings.Contains(note, "since the onset of hotspot:device:d0") {
					t.Errorf("started %s after the onset: before-window %s (%q); want %s, from the onset", since, p.Effect.BeforeWindow, note, since)
				}
			}
			if got := b[EffectSourceLoad]; got != 600 {
				t.Errorf("source load before %.6g; want 600 (d0 since the onset)", got)
			}
			if got, want := b[EffectPoolMaxMean], roundEffect(600.0/285); got != want {
				t.Errorf("pool max/mean before %.6g; want %.6g", got, want)
			}
		})
	}
}
