package capacity

import (
	"fmt"
	"math"
	"time"

	"github.com/ballast-io/ballast/models"
)

// KindThreshold is the finding kind for a subject predicted to reach a fill
// level.
const KindThreshold = "capacity_threshold"

// Findings returns one capacity_threshold finding per forecast whose
// subject is predicted (mean crossing) to reach any level within
// opt.FindingHorizon, or has reached one. The finding names the first such
// level; its evidence carries every level's days with the interval and the
// predicted date. Severity is critical when the full (last) level is
// predicted within opt.CriticalWithin or the second level is reached,
// warning otherwise. IDs are stable per subject.
func Findings(fs []*Forecast, opt Options) []models.Finding {
	opt = opt.WithDefaults()
	var out []models.Finding
	for _, f := range fs {
		if f == nil || len(f.Crossings) == 0 {
			continue
		}
		var first *Crossing
		for i := range f.Crossings {
			c := &f.Crossings[i]
			if c.Days.Finite() && float64(c.Days) <= opt.FindingHorizon.Hours()/24 {
				first = c
				break
			}
		}
		if first == nil {
			continue
		}
		// Crossings are ordered by level; the first within the horizon may be
		// an already reached one, so report the next level still ahead when
		// there is one.
		next := first
		for i := range f.Crossings {
			c := &f.Crossings[i]
			if !c.Reached && c.Days.Finite() && float64(c.Days) <= opt.FindingHorizon.Hours()/24 {
				next = c
				break
			}
		}
		sev := models.SeverityWarning
		full := f.Crossings[len(f.Crossings)-1]
		if (full.Days.Finite() && float64(full.Days) <= opt.CriticalWithin.Hours()/24) ||
			(len(f.Crossings) > 1 && f.Crossings[1].Reached) {
			sev = models.SeverityCritical
		}
		mean, lo, hi := next.At(f.Now)
		var summary string
		if next.Reached {
			summary = fmt.Sprintf("%s is %.1f %% full, past %s (%.0f %%)", f.Subject, 100*f.UsedRatio, next.Level.Name, 100*next.Level.Ratio)
		} else {
			summary = fmt.Sprintf("%s reaches %s (%.0f %%) in %s (%.0f %% interval %s to %s), growing %s/day",
				f.Subject, next.Level.Name, 100*next.Level.Ratio, fmtDays(next.Days), 100*f.Coverage,
				fmtDays(next.DaysLow), fmtDays(next.DaysHi), fmtBytes(f.Growth))
		}
		ev := []models.Evidence{
			{Name: "used_ratio", Value: round4(f.UsedRatio), Unit: "ratio"},
			{Name: "used", Value: math.Round(f.Used), Unit: "bytes"},
			{Name: "capacity", Value: math.Round(f.Capacity), Unit: "bytes"},
			{Name: "growth", Value: math.Round(f.Growth), Unit: "bytes/day"},
		}
		if !next.Reached {
			ev = append(ev, models.Evidence{Name: "predicted_date", Value: float64(mean.Unix()), Unit: models.UnitUnixSeconds,
				Note: fmt.Sprintf("%s, %.0f %% interval %s to %s", mean.Format(time.RFC3339), 100*f.Coverage, dateOr(lo), dateOr(hi))})
		}
		for _, c := range f.Crossings {
			pct := fmt.Sprintf("%.0f", 100*c.Level.Ratio)
			ev = append(ev,
				models.Evidence{Name: "days_to_" + pct, Value: daysValue(c.Days), Unit: "days", Note: c.Level.Name + noteInf(c.Days)},
				models.Evidence{Name: "days_to_" + pct + "_low", Value: daysValue(c.DaysLow), Unit: "days", Note: noteInf(c.DaysLow)},
				models.Evidence{Name: "days_to_" + pct + "_high", Value: daysValue(c.DaysHi), Unit: "days", Note: noteInf(c.DaysHi)})
		}
		score := 1 / (1 + math.Max(0, float64(next.Days))/7)
		out = append(out, models.Finding{
			ID: KindThreshold + "/" + f.Subject.String(), Kind: KindThreshold, Subject: f.Subject,
			Severity: sev, Score: round4(score), Start: f.Now, LastSeen: f.Now, Summary: summary, Evidence: ev,
		})
	}
	return out
}

// daysValue is d for evidence, -1 when beyond the horizon (the note says so).
func daysValue(d Days) float64 {
	if !d.Finite() {
		return -1
	}
	return round4(float64(d))
}

func noteInf(d Days) string {
	if d.Finite() {
		return ""
	}
	return " (beyond the forecast horizon)"
}

func dateOr(t time.Time) string {
	if t.IsZero() {
		return "beyond the horizon"
	}
	return t.Format(time.RFC3339)
}

func round4(v float64) float64 { return math.Round(v*1e4) / 1e4 }

// fmtDays renders a number of days for people.
func fmtDays(d Days) string {
	switch {
	case !d.Finite():
		return "never (within the horizon)"
	case d < 1:
		return fmt.Sprintf("%.1f h", float64(d)*24)
	default:
		return fmt.Sprintf("%.1f d", float64(d))
	}
}

// FormatDays renders a number of days as "3.2 d", "5.0 h", or "—" when
// beyond the horizon.
func FormatDays(d Days) string {
	if !d.Finite() {
		return "—"
	}
	return fmtDays(d)
}

// fmtBytes renders bytes in decimal units (as drive capacities are sold).
func fmtBytes(b float64) string { return FormatBytes(b) }

// FormatBytes renders bytes in decimal units: "1.23 TB".
func FormatBytes(b float64) string {
	if math.Abs(b) < 0.5 {
		return "0 B"
	}
	units := []string{"B", "kB", "MB", "GB", "TB", "PB", "EB"}
	v, i := b, 0
	for math.Abs(v) >= 1000 && i < len(units)-1 {
		v /= 1000
		i++
	}
	return fmt.Sprintf("%.2f %s", v, units[i])
}
