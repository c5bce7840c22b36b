package robust

import (
	"math"
	"testing"
)

func TestMedianMAD(t *testing.T) {
	m, d := MedianMAD([]float64{1, 2, 3, 4, 100})
	if m != 3 || d != 1 {
		t.Fatalf("MedianMAD = %v, %v; want 3, 1", m, d)
	}
	m, _ = MedianMAD([]float64{4, 1, 3, 2})
	if m != 2.5 {
		t.Fatalf("even median = %v; want 2.5", m)
	}
	if m, d := MedianMAD(nil); !math.IsNaN(m) || !math.IsNaN(d) {
		t.Fatalf("empty MedianMAD = %v, %v; want NaN, NaN", m, d)
	}
}

func TestScoreFloorsMAD(t *testing.T) {
	// MAD 0 around median 100, floor 10 %: scale 10.
	if got := Score(150, 100, 0, 0.1); got != 5 {
		t.Fatalf("Score = %v; want 5", got)
	}
	if got := Score(150, 100, 10, 0.1); math.Abs(got-50/14.826) > 1e-9 {
		t.Fatalf("Score = %v; want %v", got, 50/14.826)
	}
}
