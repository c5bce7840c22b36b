package drivehealth

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/ballast-io/ballast/models"
)

// Finding kinds produced by this package.
const (
	// KindFailureRisk is a drive that may fail: evacuate it.
	KindFailureRisk = "drive_failure_risk"
	// KindWearout is a drive near or past its rated endurance with its spare
	// still fine: plan a replacement, not an emergency.
	KindWearout = "drive_wearout"
)

// Hit is one rule that fired on a drive's history.
type Hit struct {
	// Rule names the rule, e.g. "pending_growth".
	Rule string
	// Kind is KindFailureRisk or KindWearout.
	Kind string
	// Severity is how urgent the condition is.
	Severity models.Severity
	// Risk is the failure risk in [0,1] this rule alone implies; wear-out
	// hits carry 0 because they are a plan, not a risk.
	Risk float64
	// Since is when the condition was first visible in the history.
	Since time.Time
	// Summary is one sentence for people.
	Summary string
	// Evidence is the numbers behind the hit.
	Evidence []models.Evidence
}

// RuleOptions are the thresholds of the rules. The zero value is not
// useful; start from DefaultRuleOptions.
type RuleOptions struct {
	// ShortWindow is the window for "is it getting worse now" (default 7 days).
	ShortWindow time.Duration
	// LongWindow is the window beyond which an old burst is forgotten
	// (default 30 days).
	LongWindow time.Duration
	// MediaErrorsCritical is the rise of media errors in ShortWindow that is
	// critical (default 10); any rise is a warning.
	MediaErrorsCritical float64
	// ReallocInfo, ReallocWarning and ReallocCritical are rises of
	// reallocated sectors (or SCSI grown defects) in ShortWindow (defaults
	// 1, 10, 100). Healthy HDDs in the Backblaze data remap a few sectors a
	// month, so a single remap is information, not an alarm.
	ReallocInfo, ReallocWarning, ReallocCritical float64
	// PendingWarning and PendingCritical are rises of pending sectors in
	// ShortWindow (defaults 1, 10).
	PendingWarning, PendingCritical float64
	// MediaErrorsLevelWarning, ReallocLevelWarning and PendingLevelWarning
	// are the counts from which the level alone warns, even from one
	// reading (defaults 1, 10, 1): any unrecovered read, ten or more
	// remapped sectors (in the Backblaze 2013 data drives first seen with
	// 1–9 failed no more often than drives with none, and drives with 10 or
	// more about ten times as often: docs/drive-model.md), any pending
	// sector. A level that has stood unchanged for LongWindow is
	// information. 0 turns a level rule off.
	MediaErrorsLevelWarning, ReallocLevelWarning, PendingLevelWarning float64
	// SpareMarginWarn is how close (percentage points) available spare may
	// come to its threshold while falling before it is a warning (default 10).
	SpareMarginWarn float64
	// WearInfoPercent is the percentage used from which wear-out is
	// reported as information (default 90); at 100 it is a warning.
	WearInfoPercent float64
	// WearHorizon: a drive whose percentage-used slope reaches 100 within
	// this horizon gets a wear-out warning (default 90 days).
	WearHorizon time.Duration
	// MaxTemperatureC is the temperature above which time is counted
	// (default 70 °C); HotHoursWarn hours above it in ShortWindow warn
	// (default 24).
	MaxTemperatureC, HotHoursWarn float64
	// WarnTempMinutes is the rise of NVMe warning-temperature time in
	// ShortWindow that warns (default 60 minutes).
	WarnTempMinutes float64
	// UnsafeShutdownsWarn is the rise of unsafe shutdowns in ShortWindow that
	// warns (default 3).
	UnsafeShutdownsWarn float64
	// LatencyWarnRatio and LatencyCriticalRatio are latency-to-peer-median
	// ratios (defaults 3 and 10) that must hold on every reading of the last
	// LatencyWindow (default 1 hour) with at least LatencyMinReadings (3).
	LatencyWarnRatio, LatencyCriticalRatio float64
	LatencyWindow                          time.Duration
	LatencyMinReadings                     int
}

// DefaultRuleOptions returns the documented defaults of RuleOptions.
func DefaultRuleOptions() RuleOptions {
	return RuleOptions{
		ShortWindow: 7 * 24 * time.Hour, LongWindow: 30 * 24 * time.Hour,
		MediaErrorsCritical: 10,
		ReallocInfo:         1, ReallocWarning: 10, ReallocCritical: 100,
		PendingWarning: 1, PendingCritical: 10,
		MediaErrorsLevelWarning: 1, ReallocLevelWarning: 10, PendingLevelWarning: 1,
		SpareMarginWarn: 10,
		WearInfoPercent: 90, WearHorizon: 90 * 24 * time.Hour,
		MaxTemperatureC: 70, HotHoursWarn: 24,
		WarnTempMinutes:     60,
		UnsafeShutdownsWarn: 3,
		LatencyWarnRatio:    3, LatencyCriticalRatio: 10,
		LatencyWindow: time.Hour, LatencyMinReadings: 3,
	}
}

// Risk each severity of a failure-risk rule implies, used when rules and
// the model are combined (the larger wins).
const (
	riskCritical = 0.99
	riskWarning  = 0.7
	riskInfo     = 0.3
)

func riskOf(s models.Severity) float64 {
	switch s {
	case models.SeverityCritical:
		return riskCritical
	case models.SeverityWarning:
		return riskWarning
	}
	return riskInfo
}

// rule inspects history h (sorted by time, nothing after now) and returns
// the hits it finds.
type rule func(h []Observation, now time.Time, o *RuleOptions) []Hit

// rules is every rule, in the order their hits are reported.
var rules = []rule{
	ruleSMARTStatus, ruleCriticalWarning, ruleSpare, ruleWearout,
	ruleMediaErrors, ruleReallocated, rulePending, ruleTemperature,
	ruleUnsafeShutdowns, ruleLatency,
}

// EvaluateRules runs every rule over h at now. h must be sorted by time;
// observations after now are ignored, so evaluating at an earlier now never
// sees later data.
func EvaluateRules(h []Observation, now time.Time, opt RuleOptions) []Hit {
	k := sort.Search(len(h), func(i int) bool { return h[i].Time.After(now) })
	h = h[:k]
	if len(h) == 0 {
		return nil
	}
	var out []Hit
	for _, r := range rules {
		out = append(out, r(h, now, &opt)...)
	}
	return out
}

func ev(name string, v float64, unit, note string) models.Evidence {
	return models.Evidence{Name: name, Value: v, Unit: unit, Note: note}
}

func failureHit(name string, s models.Severity, since time.Time, summary string, e ...models.Evidence) Hit {
	return Hit{Rule: name, Kind: KindFailureRisk, Severity: s, Risk: riskOf(s), Since: since, Summary: summary, Evidence: e}
}

// ruleSMARTStatus: the drive's own verdict (overall status or an ATA
// attribute at or below its vendor threshold).
func ruleSMARTStatus(h []Observation, now time.Time, _ *RuleOptions) []Hit {
	var out []Hit
	if v, t, ok := latest(h, fSMARTPassed, now); ok && v == 0 {
		out = append(out, failureHit("smart_status_failed", models.SeverityCritical, t,
			"the drive reports its overall SMART health as FAILED", ev("smart_passed", 0, "", "")))
	}
	last := h[len(h)-1]
	if len(last.FailingAttributes) > 0 {
		ids := make([]string, len(last.FailingAttributes))
		for i, id := range last.FailingAttributes {
			ids[i] = fmt.Sprint(id)
		}
		out = append(out, failureHit("ata_attribute_failing", models.SeverityCritical, last.Time,
			"ATA attribute(s) "+strings.Join(ids, ", ")+" at or below the vendor threshold",
			ev("failing_attributes", float64(len(ids)), "attributes", strings.Join(ids, ","))))
	}
	return out
}

// NVMe critical-warning bits (NVMe base specification, SMART / Health
// Information log page, byte 0).
const (
	cwSpare       = 0x01
	cwTemperature = 0x02
	cwReliability = 0x04
	cwReadOnly    = 0x08
	cwVolatile    = 0x10
	cwPMR         = 0x20
)

var cwNames = []struct {
	bit  int
	name string
}{
	{cwSpare, "available spare below threshold"},
	{cwTemperature, "temperature outside limits"},
	{cwReliability, "reliability degraded by media or internal errors"},
	{cwReadOnly, "media placed in read-only mode"},
	{cwVolatile, "volatile memory backup device failed"},
	{cwPMR, "persistent memory region unreliable"},
}

// ruleCriticalWarning: any NVMe critical-warning bit. Temperature alone is
// a warning; every other bit means the controller itself says the drive is
// failing.
func ruleCriticalWarning(h []Observation, now time.Time, _ *RuleOptions) []Hit {
	v, t, ok := latest(h, fCriticalBits, now)
	if !ok || v == 0 {
		return nil
	}
	bits := int(v)
	var names []string
	for _, c := range cwNames {
		if bits&c.bit != 0 {
			names = append(names, c.name)
		}
	}
	sev := models.SeverityCritical
	if bits&^cwTemperature == 0 {
		sev = models.SeverityWarning
	}
	return []Hit{failureHit("nvme_critical_warning", sev, t,
		fmt.Sprintf("NVMe critical warning 0x%02x: %s", bits, strings.Join(names, "; ")),
		ev("critical_warning", v, "bits", fmt.Sprintf("0x%02x", bits)))}
}

// ruleSpare: available spare at or below its threshold is critical; spare
// falling towards it is a warning.
func ruleSpare(h []Observation, now time.Time, o *RuleOptions) []Hit {
	spare, t, ok := latest(h, fSpare, now)
	thr, _, ok2 := latest(h, fSpareThreshold, now)
	if !ok || !ok2 {
		return nil
	}
	e := []models.Evidence{ev("available_spare", spare, "%", ""), ev("spare_threshold", thr, "%", "")}
	if spare <= thr {
		return []Hit{failureHit("spare_below_threshold", models.SeverityCritical, t,
			fmt.Sprintf("available spare %.0f%% is at or below its threshold %.0f%%", spare, thr), e...)}
	}
	first, _, ok := earliest(h, fSpare, now.Add(-o.LongWindow))
	if ok && first > spare && spare-thr <= o.SpareMarginWarn {
		since := firstRise(h, func(o *Observation) float64 { return -o.AvailableSpare }, now.Add(-o.LongWindow))
		e = append(e, ev("spare_drop", first-spare, "%", "since "+since.Format(time.DateOnly)))
		return []Hit{failureHit("spare_falling", models.SeverityWarning, since,
			fmt.Sprintf("available spare fell from %.0f%% to %.0f%%, %.0f points above its threshold", first, spare, spare-thr), e...)}
	}
	return nil
}

// spareFine reports whether spare is known to be above threshold (or
// unknown, as on drives that do not report it).
func spareFine(h []Observation, now time.Time) bool {
	spare, _, ok := latest(h, fSpare, now)
	thr, _, ok2 := latest(h, fSpareThreshold, now)
	return !ok || !ok2 || spare > thr
}

// ruleWearout: endurance used up (or about to be) with spare fine. This is
// a replacement plan, so it never raises the failure risk.
func ruleWearout(h []Observation, now time.Time, o *RuleOptions) []Hit {
	used, t, ok := latest(h, fPercentUsed, now)
	if !ok || !spareFine(h, now) {
		return nil
	}
	e := []models.Evidence{ev("percentage_used", used, "%", "")}
	g := growthOver(h, fPercentUsed, now, o.LongWindow)
	days := math.Inf(1)
	if slope := g.PerDay(); slope > 0 {
		days = math.Max(0, (100-used)/slope)
		e = append(e, ev("percentage_used_per_day", slope, "%/day", ""),
			ev("days_to_100_percent", math.Round(days), "days", ""))
	}
	// from is the percentage used at which the condition began: the info
	// level, or the level from which the current slope reaches 100 % within
	// the horizon; Since is the first reading at or above it, so the
	// finding keeps its start while the drive keeps wearing.
	var sev models.Severity
	from := o.WearInfoPercent
	horizonDays := o.WearHorizon.Hours() / 24
	switch {
	case used >= 100:
		sev = models.SeverityWarning
	case days <= horizonDays:
		sev = models.SeverityWarning
	case used >= o.WearInfoPercent:
		sev = models.SeverityInfo
	default:
		return nil
	}
	if slope := g.PerDay(); slope > 0 {
		from = math.Min(from, 100-slope*horizonDays)
	}
	for i := range h {
		if v := h[i].PercentageUsed; known(v) && v >= from {
			t = h[i].Time
			break
		}
	}
	summary := fmt.Sprintf("%.0f%% of rated endurance used, spare fine: plan a replacement", used)
	if used < 100 && !math.IsInf(days, 1) {
		summary += fmt.Sprintf(" (100%% in about %.0f days)", days)
	}
	return []Hit{{Rule: "wearout", Kind: KindWearout, Severity: sev, Since: t, Summary: summary, Evidence: e}}
}

// counter is one cumulative error counter the rules judge by its growth
// and by its level.
type counter struct {
	f                field
	name, what, unit string
	// info, warn and crit grade the rise over the short window.
	info, warn, crit float64
	// level is the count from which the level alone warns; 0 never.
	level float64
	// levelF reads the count the level is judged on when it differs from
	// f (pending without its placeholder value); nil means f.
	levelF field
	// why says what the level means for the drive and how sure that is;
	// means says it in a few words for the summary.
	why, means string
}

// counterRule judges one counter. Growth: the rise over the short window is
// graded; a rise only inside the long window is information; older bursts
// are forgotten; growth needs two readings. Level: a count at or above
// c.level warns even without growth — a lone reading, or a count that has
// not changed for less than the long window — because a drive that has
// already lost data or remapped many sectors fails far more often than one
// that has not, whether or not the counter is moving. Once the count has
// stood unchanged for the whole long window the level is information: the
// condition is old and stable. A level never makes a hit critical; only
// growth or the drive's own verdict does. One hit per counter: the level
// hit only when it is more severe than the growth hit.
func counterRule(h []Observation, now time.Time, o *RuleOptions, c counter) []Hit {
	var out Hit
	short := growthOver(h, c.f, now, o.ShortWindow)
	if short.OK {
		if g, ok := growthHit(h, now, o, c, short); ok {
			out = g
		}
	}
	if l, ok := levelHit(h, now, o, c); ok && severityRank(l.Severity) > severityRank(out.Severity) {
		out = l
	}
	if out.Rule == "" {
		return nil
	}
	return []Hit{out}
}

func growthHit(h []Observation, now time.Time, o *RuleOptions, c counter, short growth) (Hit, bool) {
	long := growthOver(h, c.f, now, o.LongWindow)
	var sev models.Severity
	d := short.Delta
	switch {
	case d >= c.crit:
		sev = models.SeverityCritical
	case d >= c.warn:
		sev = models.SeverityWarning
	case d >= c.info && d > 0:
		sev = models.SeverityInfo
	case long.OK && long.Delta > 0 && long.Delta >= c.info:
		sev = models.SeverityInfo
	default:
		return Hit{}, false
	}
	e := []models.Evidence{
		ev(c.name, short.Now, c.unit, "current value"),
		ev(c.name+"_delta_short", d, c.unit, fmt.Sprintf("rise over %.0f days", short.Span.Hours()/24)),
		ev(c.name+"_delta_long", long.Delta, c.unit, fmt.Sprintf("rise over %.0f days", long.Span.Hours()/24)),
	}
	since := firstRise(h, c.f, now.Add(-o.LongWindow))
	summary := fmt.Sprintf("%s rose by %.0f in %.0f days (now %.0f)", c.what, d, short.Span.Hours()/24, short.Now)
	if d == 0 {
		summary = fmt.Sprintf("%s rose by %.0f in the last %.0f days, none in the last %.0f", c.what, long.Delta, long.Span.Hours()/24, o.ShortWindow.Hours()/24)
	}
	return failureHit(c.name+"_growth", sev, since, summary, e...), true
}

// levelHit judges the counter's current count alone (see counterRule).
func levelHit(h []Observation, now time.Time, o *RuleOptions, c counter) (Hit, bool) {
	if c.levelF != nil {
		c.f = c.levelF
	}
	v, t, ok := latest(h, c.f, now)
	if !ok || c.level <= 0 || v < c.level {
		return Hit{}, false
	}
	// since: the first reading of the run at the current count; stable:
	// how long the count is known not to have changed.
	since := t
	for i := len(h) - 1; i >= 0; i-- {
		x := c.f(&h[i])
		if h[i].Time.After(now) || !known(x) {
			continue
		}
		if x != v {
			break
		}
		since = h[i].Time
	}
	stable := t.Sub(since)
	readings := 0
	for i := range h {
		if !h[i].Time.After(now) && known(c.f(&h[i])) {
			readings++
		}
	}
	sev := models.SeverityWarning
	var growthNote string
	switch {
	case stable >= o.LongWindow:
		sev = models.SeverityInfo
		growthNote = fmt.Sprintf("unchanged for %.0f days: an old, stable condition", stable.Hours()/24)
	case readings == 1:
		growthNote = "a single reading: whether the count is still rising is unknown until the next readings"
	default:
		growthNote = fmt.Sprintf("unchanged over %s of readings: too short to call it stable (%.0f days)", span(stable), o.LongWindow.Hours()/24)
	}
	e := []models.Evidence{
		ev(c.name, v, c.unit, "current value"),
		ev("readings", float64(readings), "", growthNote),
		ev(c.name+"_level_warning", c.level, c.unit, "count from which the level alone warns; "+c.why),
	}
	summary := fmt.Sprintf("%.0f %s on record: %s (%s)", v, c.what, c.means, growthNote)
	hit := failureHit(c.name+"_level", sev, since, summary, e...)
	return hit, true
}

// span words a duration for a summary: days, else hours, else minutes.
func span(d time.Duration) string {
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%.0f days", d.Hours()/24)
	case d >= 2*time.Hour:
		return fmt.Sprintf("%.0f hours", d.Hours())
	}
	return fmt.Sprintf("%.0f minutes", d.Minutes())
}

func severityRank(s models.Severity) int {
	switch s {
	case models.SeverityCritical:
		return 3
	case models.SeverityWarning:
		return 2
	case models.SeverityInfo:
		return 1
	}
	return 0
}

// firstRise returns the time of the first reading after from whose value is
// above the previous reading.
func firstRise(h []Observation, f field, from time.Time) time.Time {
	prev := math.NaN()
	for i := range h {
		v := f(&h[i])
		if !known(v) {
			continue
		}
		if known(prev) && v > prev && !h[i].Time.Before(from) {
			return h[i].Time
		}
		prev = v
	}
	return h[len(h)-1].Time
}

// ruleMediaErrors: unrecovered media errors (NVMe media errors, ATA 187 +
// 198, SCSI uncorrected errors), by growth and by level. NVMe error-log
// entries rising alongside are added as evidence; on their own they are
// not a sign of failure (most are rejected admin commands).
func ruleMediaErrors(h []Observation, now time.Time, o *RuleOptions) []Hit {
	hits := counterRule(h, now, o, counter{f: fMediaErrors, name: "media_errors", what: "unrecovered media errors", unit: "errors",
		info: 1, warn: 1, crit: o.MediaErrorsCritical, level: o.MediaErrorsLevelWarning,
		means: "data was already lost at least once; failure risk raised, by how much is uncertain",
		why: "each is a read the drive could not return, so data was already lost once; how soon such a drive fails is uncertain: " +
			"field studies find uncorrectable errors on many flash drives that keep working (Schroeder et al., FAST '16: 20–63 % of drives within four years), " +
			"while on disks a first offline-uncorrectable sector made failure within 60 days 39 times more likely (Pinheiro et al., FAST '07)"})
	if len(hits) == 1 {
		if g := growthOver(h, fErrLog, now, o.ShortWindow); g.OK {
			hits[0].Evidence = append(hits[0].Evidence, ev("error_log_entries_delta_short", g.Delta, "entries", ""))
		}
	}
	return hits
}

// ruleReallocated: reallocated sectors (ATA 5) or SCSI grown defects, by
// growth and by level.
func ruleReallocated(h []Observation, now time.Time, o *RuleOptions) []Hit {
	return counterRule(h, now, o, counter{f: fReallocated, name: "reallocated", what: "reallocated sectors", unit: "sectors",
		info: o.ReallocInfo, warn: o.ReallocWarning, crit: o.ReallocCritical, level: o.ReallocLevelWarning,
		means: "the surface is wearing out; failure risk raised",
		why:   "healthy disks remap a few sectors, so small counts are common; from this count on, drives in the Backblaze data failed far more often (odds below, when the model is loaded)"})
}

// rulePending: pending (unreadable, not yet remapped) sectors, by growth
// and by level. The 0xFFF0+ placeholder some Seagate drives report is not
// a count and is left out of the level.
func rulePending(h []Observation, now time.Time, o *RuleOptions) []Hit {
	return counterRule(h, now, o, counter{f: fPending, levelF: fPendingCount, name: "pending", what: "pending sectors", unit: "sectors",
		info: o.PendingWarning, warn: o.PendingWarning, crit: o.PendingCritical, level: o.PendingLevelWarning,
		means: "data unreadable now; failure risk raised",
		why:   "sectors the drive could not read and has not yet remapped: data unreadable now"})
}

// ruleTemperature: time spent hot, from NVMe temperature-time counters or
// from the temperature readings themselves (each reading counts until the
// next one).
func ruleTemperature(h []Observation, now time.Time, o *RuleOptions) []Hit {
	var e []models.Evidence
	warn := false
	if g := growthOver(h, fWarnTemp, now, o.ShortWindow); g.OK && g.Delta >= o.WarnTempMinutes {
		e = append(e, ev("warning_temp_minutes_delta", g.Delta, "min", ""))
		warn = true
	}
	if g := growthOver(h, fCritTemp, now, o.ShortWindow); g.OK && g.Delta > 0 {
		e = append(e, ev("critical_temp_minutes_delta", g.Delta, "min", ""))
		warn = true
	}
	var hot time.Duration
	from := now.Add(-o.ShortWindow)
	for i := range h {
		if h[i].Time.Before(from) || i+1 == len(h) {
			continue
		}
		if t := h[i].TemperatureC; known(t) && t > o.MaxTemperatureC {
			hot += h[i+1].Time.Sub(h[i].Time)
		}
	}
	if hot.Hours() >= o.HotHoursWarn {
		e = append(e, ev("hours_above_limit", hot.Hours(), "h", fmt.Sprintf("above %.0f °C", o.MaxTemperatureC)))
		warn = true
	}
	if !warn {
		return nil
	}
	return []Hit{failureHit("temperature_time", models.SeverityWarning, from,
		"the drive spent significant time above its temperature limit", e...)}
}

// ruleUnsafeShutdowns: repeated unsafe shutdowns (power loss without
// flush) in the short window.
func ruleUnsafeShutdowns(h []Observation, now time.Time, o *RuleOptions) []Hit {
	g := growthOver(h, fUnsafe, now, o.ShortWindow)
	if !g.OK || g.Delta < o.UnsafeShutdownsWarn {
		return nil
	}
	return []Hit{failureHit("unsafe_shutdowns", models.SeverityWarning, firstRise(h, fUnsafe, now.Add(-o.ShortWindow)),
		fmt.Sprintf("%.0f unsafe shutdowns in %.0f days", g.Delta, g.Span.Hours()/24),
		ev("unsafe_shutdowns_delta", g.Delta, "shutdowns", ""), ev("unsafe_shutdowns", g.Now, "shutdowns", ""))}
}

// ruleLatency: the drive is persistently slower than its peers. Every
// reading in the last LatencyWindow must be an outlier, so one slow spike
// does not fire.
func ruleLatency(h []Observation, now time.Time, o *RuleOptions) []Hit {
	from := now.Add(-o.LatencyWindow)
	n := 0
	minRatio := math.Inf(1)
	var since time.Time
	for i := len(h) - 1; i >= 0 && h[i].Time.After(from); i-- {
		r := h[i].LatencyVsPeers
		if !known(r) {
			continue
		}
		n++
		minRatio = math.Min(minRatio, r)
		since = h[i].Time
	}
	if n < o.LatencyMinReadings || minRatio < o.LatencyWarnRatio {
		return nil
	}
	sev := models.SeverityWarning
	if minRatio >= o.LatencyCriticalRatio {
		sev = models.SeverityCritical
	}
	return []Hit{failureHit("latency_outlier", sev, since,
		fmt.Sprintf("I/O latency at least %.1f× the peer median on all %d readings of the last %s", minRatio, n, o.LatencyWindow),
		ev("latency_vs_peers_min", minRatio, "ratio", ""), ev("readings", float64(n), "", ""))}
}
