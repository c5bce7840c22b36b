package checkpoint

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ballast-io/ballast/analyzer/internal/robust"
	"github.com/ballast-io/ballast/models"
)

// renewal is a checkpointing job whose every interval is the period
// ± jitter, uniformly (a renewal process, as a job that checkpoints every
// N steps with varying step times, and as the twin draws them), sampled
// every 10 s; bursts of dur at ≈ 2 GB/s over ≈ 5 MB/s of background
// writes.
func renewal(period, jitter, dur time.Duration, n int, seed uint64) (pts []Point, starts []time.Time) {
	r := rand.New(rand.NewPCG(seed, 25))
	at := t0.Add(period)
	for range n {
		starts = append(starts, at)
		at = at.Add(period + time.Duration((2*r.Float64()-1)*float64(jitter)))
	}
	end := starts[len(starts)-1].Add(period)
	for t := t0; !t.After(end); t = t.Add(10 * time.Second) {
		v := 5e6 * (0.5 + r.Float64())
		for _, st := range starts {
			if !t.Before(st) && t.Before(st.Add(dur)) {
				v = 2e9 * (0.8 + 0.4*r.Float64())
			}
		}
		pts = append(pts, Point{T: t, BytesPerSec: v})
	}
	return pts, starts
}

// medianGap is the true period as eval scores it: the median gap between
// burst starts.
func medianGap(starts []time.Time) time.Duration {
	var gaps []float64
	for i := 1; i < len(starts); i++ {
		gaps = append(gaps, starts[i].Sub(starts[i-1]).Seconds())
	}
	return time.Duration(robust.Median(gaps) * float64(time.Second))
}

// TestRenewalJitterKeepsAForecast: checkpoints every 10 min ± 25 %
// (each interval drawn anew, so the starts drift off any lattice) get a
// forecast in every seed once five bursts were seen, most of the time,
// with a period near the realised one. Before the renewal view, the
// lattice fit's regularity put the confidence below 0.6 in 3 of 5 seeds
// and no forecast was made. The error is against the median realised gap
// (as eval scores it), itself noisy with nine gaps: ≤ 12 % here, not the
// ≤ 5 % of regular checkpoints.
func TestRenewalJitterKeepsAForecast(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		pts, starts := renewal(10*time.Minute, 150*time.Second, 40*time.Second, 10, seed)
		truth := medianGap(starts).Seconds()
		d, err := New(Options{})
		if err != nil {
			t.Fatal(err)
		}
		sub := models.Subject{Kind: models.SubjectJob, ID: "j"}
		var errs []float64
		ticks, with := 0, 0
		for _, p := range pts {
			if err := d.Observe(p.T, sub, p); err != nil {
				t.Fatal(err)
			}
			d.Findings(p.T)
			per, ok := d.Forecast(p.T, sub)
			if p.T.Before(starts[4].Add(time.Minute)) {
				continue
			}
			ticks++
			if ok {
				with++
				errs = append(errs, math.Abs(per.Period.Seconds()-truth)/truth)
			}
		}
		if 2*with < ticks {
			t.Errorf("seed %d: a forecast in %d of %d ticks after the fifth burst; want at least half", seed, with, ticks)
			continue
		}
		if e := robust.Median(errs); e > 0.12 {
			t.Errorf("seed %d: median period error %.3f against the realised %s; want ≤ 0.12", seed, e, time.Duration(truth*float64(time.Second)))
		}
	}
}
