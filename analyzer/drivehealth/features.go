package drivehealth

import (
	"hash/fnv"
	"math"
	"time"
)

// Feature describes one input of the learned model.
type Feature struct {
	// Name is the feature's identifier in the model file and explanations.
	Name string
	// Unit is the unit of the raw value.
	Unit string
	// Log is true when the model sees log1p(max(0, value)) instead of the
	// value: error counters span five orders of magnitude.
	Log bool
}

// Features lists the model's inputs, computed per drive per day from the
// history up to that day only. Counters are those the Backblaze 2013 data
// fills for every model (SMART 5, 197, 194, 9); ATA 187/198 are left to the
// rules because the training data has none.
var Features = []Feature{
	{Name: "reallocated", Unit: "sectors", Log: true},
	{Name: "reallocated_delta_1d", Unit: "sectors", Log: true},
	{Name: "reallocated_delta_7d", Unit: "sectors", Log: true},
	{Name: "pending", Unit: "sectors", Log: true},
	{Name: "pending_delta_1d", Unit: "sectors", Log: true},
	{Name: "pending_delta_7d", Unit: "sectors", Log: true},
	{Name: "reallocated_growth_ratio_7d", Unit: "ratio", Log: true},
	{Name: "pending_growth_ratio_7d", Unit: "ratio", Log: true},
	{Name: "error_age", Unit: "days", Log: true},
	{Name: "temperature", Unit: "°C"},
	{Name: "power_on", Unit: "years"},
}

const day = 24 * time.Hour

// pendingSentinel: some Seagate drives report 65520 or more (0xFFF0 and up)
// current-pending sectors, constant for weeks on drives that keep working —
// a saturated or placeholder value, not a count. The model treats it as
// unknown; the rules and baselines see it as reported.
const pendingSentinel = 0xFFF0

// fPendingCount is Pending with the sentinel read as unknown.
var fPendingCount field = func(o *Observation) float64 {
	if o.Pending >= pendingSentinel {
		return math.NaN()
	}
	return o.Pending
}

// featureVector computes Features for the last observation of h (sorted,
// nothing later than its last element is used). Unknown values are NaN.
func featureVector(h []Observation) []float64 {
	now := h[len(h)-1].Time
	x := make([]float64, len(Features))
	cur := func(f field) float64 {
		v, _, ok := latest(h, f, now)
		if !ok {
			return math.NaN()
		}
		return v
	}
	delta := func(f field, w time.Duration) float64 {
		g := growthOver(h, f, now, w)
		if !g.OK {
			return 0
		}
		return g.Delta
	}
	x[0] = cur(fReallocated)
	x[1] = delta(fReallocated, day)
	x[2] = delta(fReallocated, 7*day)
	x[3] = cur(fPendingCount)
	x[4] = delta(fPendingCount, day)
	x[5] = delta(fPendingCount, 7*day)
	x[6] = growthRatio(h, fReallocated, now)
	x[7] = growthRatio(h, fPendingCount, now)
	x[8] = errorAge(h, now)
	x[9] = cur(func(o *Observation) float64 { return o.TemperatureC })
	x[10] = cur(fPowerOnHours) / (24 * 365.25)
	return x
}

// growthRatio is the rise of f over the last 7 days relative to its value
// 7 days ago (plus 10, so a drive going from 0 to 3 is not infinitely
// worse than one going from 1000 to 1100). A drive that has carried 20 000
// remapped sectors for years and adds 50 scores low; one that doubles in a
// week scores high.
func growthRatio(h []Observation, f field, now time.Time) float64 {
	g := growthOver(h, f, now, 7*day)
	if !g.OK {
		return 0
	}
	return g.Delta / (g.Now - g.Delta + 10)
}

// errorAge is the number of days since the first reading in h with
// reallocated or pending sectors above zero, 0 when none. Old, stable
// errors and fresh ones look the same in the raw counters; this tells them
// apart. It is bounded by the history's length.
func errorAge(h []Observation, now time.Time) float64 {
	for i := range h {
		if h[i].Reallocated > 0 || fPendingCount(&h[i]) > 0 {
			return now.Sub(h[i].Time).Hours() / 24
		}
	}
	return 0
}

// testShare is the share of drives (by serial) held out for evaluation.
const testShare = 30

// InTestSplit reports whether the drive with this serial belongs to the
// held-out test split. The split is a hash of the serial alone (FNV-1a,
// 30 % of the hash space), so it is deterministic, independent of row order
// and can never put one drive on both sides.
func InTestSplit(serial string) bool {
	h := fnv.New64a()
	h.Write([]byte(serial))
	return h.Sum64()%100 < testShare
}
