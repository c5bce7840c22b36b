package capacity

import (
	"math"
	"testing"
	"time"
)

// BenchmarkFit14d5m fits two weeks of 5-minute readings with the daily and
// weekly cycles and the interval calibration.
func BenchmarkFit14d5m(b *testing.B) {
	s, now := gen(14, 5*time.Minute, func(x float64) float64 { return 0.5 + 0.01*x + 0.02*math.Sin(2*math.Pi*x) })
	for b.Loop() {
		if _, err := Fit(s, now, DefaultOptions()); err != nil {
			b.Fatal(err)
		}
	}
}
