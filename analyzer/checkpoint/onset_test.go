package checkpoint

import (
	"math"
	"testing"
	"time"

	"github.com/ballast-io/ballast/models"
)

// meanRateSeries is a job writing a dur-long burst at 2 GB/s every period
// from first, sampled every 10 s as a monitoring system computes a rate:
// each sample is the mean over the 10 s that end at it, so the first
// sample of a burst that began late in its interval holds only a part of
// it. About 5 MB/s of background writes.
func meanRateSeries(first, period, dur time.Duration, n int) (pts []Point, starts []time.Time) {
	for i := range n {
		starts = append(starts, t0.Add(first+time.Duration(i)*period))
	}
	const step = 10 * time.Second
	end := starts[n-1].Add(period)
	for at := t0.Add(step); !at.After(end); at = at.Add(step) {
		busy := 0.0
		for _, s := range starts {
			lo, hi := s, s.Add(dur)
			if w := at.Add(-step); w.After(lo) {
				lo = w
			}
			if at.Before(hi) {
				hi = at
			}
			if hi.After(lo) {
				busy += hi.Sub(lo).Seconds()
			}
		}
		// the background varies a little, as real idle writes do
		bg := 5e6 * (1 + 0.1*math.Sin(float64(at.Unix())/7))
		pts = append(pts, Point{T: at, BytesPerSec: bg + 2e9*busy/step.Seconds()})
	}
	return pts, starts
}

// TestForecastStartsWithinTheFirstSample: bursts that begin 7 s into a
// 10 s sampling interval (their first sample holds 3 s of a burst, 30 % of
// its rate) every 10 min exactly. The predicted start must fall within 2 s
// of the real one. Taking each burst's start at the beginning of its first
// raised sample's interval put every start, and so the prediction, 7 s
// early; the start is now read from how much of the burst the first
// sample holds.
func TestForecastStartsWithinTheFirstSample(t *testing.T) {
	pts, starts := meanRateSeries(5*time.Minute+7*time.Second, 10*time.Minute, time.Minute, 5)
	d, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	sub := models.Subject{Kind: models.SubjectJob, ID: "j"}
	checked := 0
	for _, p := range pts {
		if err := d.Observe(p.T, sub, p); err != nil {
			t.Fatal(err)
		}
		d.Findings(p.T)
		per, ok := d.Forecast(p.T, sub)
		if !ok || p.T.Before(starts[2].Add(2*time.Minute)) || !p.T.Before(starts[4]) {
			continue
		}
		want := starts[3]
		if p.T.After(starts[3]) {
			want = starts[4]
		}
		checked++
		if e := per.Next.Sub(want); e.Abs() > 2*time.Second {
			t.Fatalf("at %s: predicted start %s, real %s: %s off; want within 2 s", p.T.Sub(t0), per.Next.Sub(t0), want.Sub(t0), e)
		}
	}
	if checked == 0 {
		t.Fatal("no forecast after the third burst")
	}
}
