// Package drivehealth predicts failing drives. It combines explicit rules
// over a drive's SMART history (NVMe health log, ATA attributes, SCSI
// counters, latency relative to peers) with a logistic-regression model
// trained offline on the Backblaze 2013 data, and turns both into
// drive_failure_risk and drive_wearout findings.
//
// Its input is one mapping from the SMART series ballast's agents expose
// (Readings), used alike for the store, the query API, smartctl files
// decoded by the agent's collector, a Backblaze CSV (ParseBackblaze) and
// the twin. The package is pure: it reads no files or clock, takes `now`
// as an argument and starts no goroutines, so the same input always gives
// the same output.
package drivehealth

import (
	"math"
	"slices"
	"time"
)

// Protocol is how a drive speaks SMART.
type Protocol string

// Protocols understood by the rules.
const (
	ProtocolNVMe Protocol = "nvme"
	ProtocolATA  Protocol = "ata"
	ProtocolSCSI Protocol = "scsi"
)

// Observation is one reading of a drive's health counters at Time. Every
// numeric field is NaN when the source did not report it (use NewObservation
// to get an all-unknown value); a zero means "reported as zero". Counters are
// cumulative as the drive reports them; the rules turn them into rates over
// windows.
type Observation struct {
	// Time is when the reading was taken.
	Time time.Time
	// Protocol is the drive's protocol; it selects which rules apply.
	Protocol Protocol

	// SMARTPassed is the drive's own overall verdict (smartctl
	// smart_status.passed); NaN unknown, 1 passed, 0 failed.
	SMARTPassed float64
	// CriticalWarning is the NVMe critical-warning byte (bit field).
	CriticalWarning float64
	// AvailableSpare is NVMe available spare, percent.
	AvailableSpare float64
	// SpareThreshold is NVMe available-spare threshold, percent.
	SpareThreshold float64
	// PercentageUsed is NVMe percentage used (endurance estimate), percent;
	// may exceed 100.
	PercentageUsed float64
	// MediaErrors is the count of unrecovered data-integrity errors: NVMe
	// media_errors, ATA 187 (reported uncorrectable) + 198 (offline
	// uncorrectable), SCSI total uncorrected errors.
	MediaErrors float64
	// ErrLogEntries is the NVMe error-information log entry count. It counts
	// every command error, most of them harmless (aborted or unsupported
	// commands), so it only matters together with media errors.
	ErrLogEntries float64
	// Reallocated is ATA 5 (reallocated sectors) or the SCSI grown defect
	// list length, sectors.
	Reallocated float64
	// Pending is ATA 197 (current pending sectors), sectors.
	Pending float64
	// TemperatureC is the current composite temperature, degrees Celsius.
	TemperatureC float64
	// WarningTempMinutes is NVMe warning composite temperature time, minutes
	// (cumulative).
	WarningTempMinutes float64
	// CriticalTempMinutes is NVMe critical composite temperature time,
	// minutes (cumulative).
	CriticalTempMinutes float64
	// UnsafeShutdowns is the NVMe unsafe shutdown count (cumulative).
	UnsafeShutdowns float64
	// PowerOnHours is the drive's power-on time, hours.
	PowerOnHours float64
	// LatencyVsPeers is the drive's I/O latency divided by the median
	// latency of its peers (same model on the same DS, from diskstats or
	// LAYOUTSTATS) over the same interval; 1 is typical.
	LatencyVsPeers float64
	// FailingAttributes lists ATA attribute ids whose normalised value is at
	// or below the vendor threshold now (the drive's own pre-fail verdict).
	FailingAttributes []int
}

// NewObservation returns an Observation at t with every counter unknown.
func NewObservation(t time.Time, p Protocol) Observation {
	n := math.NaN()
	return Observation{
		Time: t, Protocol: p,
		SMARTPassed: n, CriticalWarning: n, AvailableSpare: n, SpareThreshold: n,
		PercentageUsed: n, MediaErrors: n, ErrLogEntries: n, Reallocated: n,
		Pending: n, TemperatureC: n, WarningTempMinutes: n, CriticalTempMinutes: n,
		UnsafeShutdowns: n, PowerOnHours: n, LatencyVsPeers: n,
	}
}

// known reports whether v was reported.
func known(v float64) bool { return !math.IsNaN(v) }

// failureEvidence are the fields the failure-risk rules judge by their
// level or the drive's own verdict: SMART status, NVMe critical warning,
// spare and its threshold, and the error counters (media errors,
// reallocated and pending sectors). The error-information log is left out:
// most of its entries are harmless command errors.
var failureEvidence = []field{fSMARTPassed, fCriticalBits, fSpare, fSpareThreshold, fMediaErrors, fReallocated, fPending}

// EvidenceChanged reports whether cur shows failure evidence that prev did
// not: a changed SMART verdict, critical warning, spare or spare threshold,
// a changed error counter (media errors, reallocated or pending sectors),
// or an ATA attribute newly at or below its threshold. Counters that move
// on every healthy drive (data units, power-on time, temperature, the
// error-information log) are not evidence. cur may be a partial reading
// (EvidenceSeries only): a field unknown in cur is no evidence. A caller
// that reads drives more often than it assesses them uses it to judge such
// a drive at once.
func EvidenceChanged(prev, cur Observation) bool {
	for _, f := range failureEvidence {
		if v := f(&cur); known(v) && v != f(&prev) { // a NaN in prev differs too
			return true
		}
	}
	for _, id := range cur.FailingAttributes {
		if !slices.Contains(prev.FailingAttributes, id) {
			return true
		}
	}
	return false
}

// field selects one numeric field of an Observation; rules and features use
// it to walk a history without repeating the loop for every counter.
type field func(o *Observation) float64

var (
	fMediaErrors    field = func(o *Observation) float64 { return o.MediaErrors }
	fErrLog         field = func(o *Observation) float64 { return o.ErrLogEntries }
	fReallocated    field = func(o *Observation) float64 { return o.Reallocated }
	fPending        field = func(o *Observation) float64 { return o.Pending }
	fPercentUsed    field = func(o *Observation) float64 { return o.PercentageUsed }
	fSpare          field = func(o *Observation) float64 { return o.AvailableSpare }
	fWarnTemp       field = func(o *Observation) float64 { return o.WarningTempMinutes }
	fCritTemp       field = func(o *Observation) float64 { return o.CriticalTempMinutes }
	fUnsafe         field = func(o *Observation) float64 { return o.UnsafeShutdowns }
	fPowerOnHours   field = func(o *Observation) float64 { return o.PowerOnHours }
	fCriticalBits   field = func(o *Observation) float64 { return o.CriticalWarning }
	fSMARTPassed    field = func(o *Observation) float64 { return o.SMARTPassed }
	fSpareThreshold field = func(o *Observation) float64 { return o.SpareThreshold }
)

// latest returns the newest known value of f in h (sorted by time) at or
// before t, the time it was seen, and whether there was one.
func latest(h []Observation, f field, t time.Time) (float64, time.Time, bool) {
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].Time.After(t) {
			continue
		}
		if v := f(&h[i]); known(v) {
			return v, h[i].Time, true
		}
	}
	return 0, time.Time{}, false
}

// earliest returns the oldest known value of f in h at or after t.
func earliest(h []Observation, f field, t time.Time) (float64, time.Time, bool) {
	for i := range h {
		if h[i].Time.Before(t) {
			continue
		}
		if v := f(&h[i]); known(v) {
			return v, h[i].Time, true
		}
	}
	return 0, time.Time{}, false
}

// growth is how much a cumulative counter rose over a window.
type growth struct {
	// Now is the latest value; Delta the rise over the window (never
	// negative: a reset or a replaced drive counts as no rise); Span the time
	// the rise was measured over (shorter than the window when the history
	// is); OK is false when fewer than two readings exist in the window.
	Now, Delta float64
	Span       time.Duration
	OK         bool
}

// PerDay is the rise per day over the measured span.
func (g growth) PerDay() float64 {
	if !g.OK || g.Span <= 0 {
		return 0
	}
	return g.Delta / (g.Span.Hours() / 24)
}

// growthOver measures how much f rose between now-window and now. The base
// is the last reading at or before now-window, or the first reading inside
// the window when the history is shorter.
func growthOver(h []Observation, f field, now time.Time, window time.Duration) growth {
	cur, tc, ok := latest(h, f, now)
	if !ok {
		return growth{}
	}
	base, tb, ok := latest(h, f, now.Add(-window))
	if !ok {
		base, tb, ok = earliest(h, f, now.Add(-window))
	}
	if !ok || !tb.Before(tc) {
		return growth{Now: cur}
	}
	return growth{Now: cur, Delta: math.Max(0, cur-base), Span: tc.Sub(tb), OK: true}
}
