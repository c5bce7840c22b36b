package checkpoint

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ballast-io/ballast/models"
)

// loaderEpochs is shaped like `iostat -x 1` (rkB/s) of a data-loading
// benchmark: after a short idle lead-in, epochs of period ≈ 33 s (±1 s)
// whose first ≈ 25 s read at ≈ 1.2 GB/s with per-second noise of ±25 %
// and occasional dips to a third (a shard boundary), then ≈ 8 s of idle
// (evaluation, shuffling) with a few MB/s of background reads: busy ≈ 75 %
// of the time. No real capture of this shape is in the repository (the
// FTIO fixtures are write traces); the shape is the one issue 15 reports
// from such a run.
func loaderEpochs(epochs int, seed uint64) (pts []Point, period time.Duration) {
	r := rand.New(rand.NewPCG(seed, 33))
	at := t0
	idle := func(n int) {
		for range n {
			at = at.Add(time.Second)
			pts = append(pts, Point{T: at, BytesPerSec: 2e6 * (0.5 + r.Float64())})
		}
	}
	idle(6)
	for range epochs {
		busy := 24 + r.IntN(3)
		for range busy {
			at = at.Add(time.Second)
			v := 1.2e9 * (0.75 + 0.5*r.Float64())
			if r.IntN(12) == 0 {
				v /= 3
			}
			pts = append(pts, Point{T: at, BytesPerSec: v})
		}
		idle(33 - busy + r.IntN(3) - 1)
	}
	idle(8)
	return pts, 33 * time.Second
}

// TestBusyMajorityPeriodicityKeepsItsForecast: a periodic series busy
// ≈ 75 % of the time keeps its forecast, within 5 % of the true period,
// from the moment the forecast first appears to the end of the run. Once
// the idle noise was taken from the lower half of the samples, which a
// busy majority fills with busy samples, so the burst cut-off rose above
// the bursts and the forecast was lost after the third epoch.
func TestBusyMajorityPeriodicityKeepsItsForecast(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		pts, period := loaderEpochs(6, seed)
		d, err := New(Options{})
		if err != nil {
			t.Fatal(err)
		}
		subject := models.Subject{Kind: models.SubjectJob, ID: "loader"}
		first := time.Time{}
		for _, p := range pts {
			if err := d.Observe(p.T, subject, p); err != nil {
				t.Fatal(err)
			}
			d.Findings(p.T)
			per, ok := d.Forecast(p.T, subject)
			if first.IsZero() {
				if ok {
					first = p.T
				} else {
					continue
				}
			}
			if !ok {
				t.Fatalf("seed %d: forecast lost at %s (first at %s)", seed, p.T.Sub(t0), first.Sub(t0))
			}
			if e := math.Abs(per.Period.Seconds()-period.Seconds()) / period.Seconds(); e > 0.05 {
				t.Fatalf("seed %d: at %s the period is %s; want %s within 5 %%", seed, p.T.Sub(t0), per.Period, period)
			}
		}
		if first.IsZero() || first.Sub(t0) > 4*period {
			t.Fatalf("seed %d: forecast first at %s; want one by the fourth epoch", seed, first.Sub(t0))
		}
	}
}
