package capacity

import (
	"math"
	"time"
)

// PredictLinear is Prometheus' predict_linear(v[rng], 0) evaluated at now,
// returned as the fitted value at now and the slope per second: ordinary
// least squares over the readings in the left-open range (now − rng, now],
// with the intercept taken at now, as promql/functions.go linearRegression
// does. ok is false with fewer than two readings. Ceph's
// CephPoolGrowthWarning and node_exporter's disk-fill alerts use it over
// two days; Backtest uses it as the baseline.
func PredictLinear(pts []Point, now time.Time, rng time.Duration) (atNow, slope float64, ok bool) {
	var n, sumX, sumY, sumXY, sumX2 float64
	from := now.Add(-rng)
	var x0 float64
	first := true
	constX := true
	for _, p := range pts {
		if !p.T.After(from) || p.T.After(now) {
			continue
		}
		x := p.T.Sub(now).Seconds()
		if first {
			x0, first = x, false
		} else if x != x0 {
			constX = false
		}
		n++
		sumX += x
		sumY += p.V
		sumXY += x * p.V
		sumX2 += x * x
	}
	if n < 2 {
		return 0, 0, false
	}
	if constX {
		return sumY / n, 0, true
	}
	covXY := sumXY - sumX*sumY/n
	varX := sumX2 - sumX*sumX/n
	slope = covXY / varX
	return sumY/n - slope*sumX/n, slope, true
}

// LinearDays is the time in days until a predict_linear fit reaches level
// bytes: 0 when the fitted value at now is already there, +Inf when the
// slope is not positive (predict_linear never gets there).
func LinearDays(atNow, slope, level float64) Days {
	if atNow >= level {
		return 0
	}
	if !(slope > 0) {
		return Days(math.Inf(1))
	}
	return Days((level - atNow) / slope / 86400)
}
