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

// Median returns the median of xs, sorting xs in place; NaN when empty.
func Median(xs []float64) float64 {
	n := len(xs)
	if n == 0 {
		return math.NaN()
	}
	slices.Sort(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
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
