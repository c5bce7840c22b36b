package robust

import (
	"math"
	"math/rand/v2"
	"slices"
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

func TestMedianMatchesSort(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for n := 1; n < 300; n++ {
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = float64(r.IntN(20)) // many ties
		}
		s := slices.Clone(xs)
		slices.Sort(s)
		want := s[n/2]
		if n%2 == 0 {
			want = (s[n/2-1] + s[n/2]) / 2
		}
		if got := Median(xs); got != want {
			t.Fatalf("n=%d: Median = %v; want %v", n, got, want)
		}
	}
}
