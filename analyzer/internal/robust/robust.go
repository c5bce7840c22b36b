// Package robust holds the outlier-resistant statistics the analyzers share:
// the median and the median absolute deviation (MAD), computed in place on a
// scratch slice so a tick over tens of thousands of subjects does not allocate.
package robust

import (
	"math"
	"slices"
)

// MADScale turns a MAD into a standard-deviation estimate for normal data.
const MADScale = 1.4826

// MedianMAD returns the median of xs and the median absolute deviation around
// it. It reorders xs and overwrites it with the deviations. Both are NaN for
// an empty slice.
func MedianMAD(xs []float64) (median, mad float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	median = Median(xs)
	for i, x := range xs {
		xs[i] = math.Abs(x - median)
	}
	return median, Median(xs)
}

// Median returns the median of xs, reordering xs in place; NaN when empty.
// It selects rather than sorts (expected O(n)), since a tick takes medians
// over tens of thousands of devices several times.
func Median(xs []float64) float64 {
	n := len(xs)
	if n == 0 {
		return math.NaN()
	}
	hi := nth(xs, n/2)
	if n%2 == 1 {
		return hi
	}
	// After nth, xs[:n/2] holds the smaller half: its maximum is the lower
	// middle value.
	return (slices.Max(xs[:n/2]) + hi) / 2
}

// nth reorders xs so that xs[k] is the value a sort would put there, with
// no larger value before it and no smaller after; it returns xs[k]. This is
// Hoare's quickselect with a median-of-three pivot, hand-written because
// neither the standard library nor gonum offers selection; after 64 rounds
// without convergence (adversarial input) it falls back to sorting.
func nth(xs []float64, k int) float64 {
	lo, hi := 0, len(xs)-1
	for round := 0; lo < hi; round++ {
		if round == 64 {
			slices.Sort(xs[lo : hi+1])
			break
		}
		mid := lo + (hi-lo)/2
		if xs[mid] < xs[lo] {
			xs[mid], xs[lo] = xs[lo], xs[mid]
		}
		if xs[hi] < xs[lo] {
			xs[hi], xs[lo] = xs[lo], xs[hi]
		}
		if xs[hi] < xs[mid] {
			xs[hi], xs[mid] = xs[mid], xs[hi]
		}
		p := xs[mid]
		i, j := lo, hi
		for i <= j {
			for xs[i] < p {
				i++
			}
			for xs[j] > p {
				j--
			}
			if i <= j {
				xs[i], xs[j] = xs[j], xs[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return xs[k]
		}
	}
	return xs[k]
}

// Score is the robust z-score of x against a peer median and MAD. The MAD is
// floored at floorFrac × |median| (and at tiny, for an all-zero peer set) so
// a perfectly even cluster does not turn noise into infinite scores.
func Score(x, median, mad, floorFrac float64) float64 {
	s := MADScale * mad
	if f := floorFrac * math.Abs(median); s < f {
		s = f
	}
	if s < 1e-12 {
		s = 1e-12
	}
	return (x - median) / s
}
