package drivehealth

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/ballast-io/ballast/models"
)

// Assessment is what the rules and the model say about one drive at one
// time.
type Assessment struct {
	// Risk is the combined failure risk in [0,1]: the larger of the model's
	// risk and the risk implied by the most severe failure-risk rule.
	Risk float64
	// ModelRisk is the model's risk, NaN when the model does not apply
	// (not an ATA drive, or no model given).
	ModelRisk float64
	// Explanation lists the failure-risk rules that fired (warning or worse)
	// and then the model features that push the risk up most.
	Explanation []Explanation
	// Window is the predicted failure window when the model's risk is in
	// one of its bands.
	Window *Window
	// Hits are every rule hit, wear-out and information included.
	Hits []Hit
	// ModelSince is the first reading of the current unbroken run of
	// readings whose model risk passed the model's 1 % threshold (zero when
	// the latest does not), looking back at most modelLookback readings.
	ModelSince time.Time
}

// modelLookback bounds how far Assess walks back to date a model-driven
// finding; each step rescores a prefix of the history.
const modelLookback = 64

// Assess scores history h (sorted by time) at now, using nothing after now.
// m may be nil: then only the rules decide.
func Assess(h []Observation, now time.Time, m *Model, opt RuleOptions) Assessment {
	k := sort.Search(len(h), func(i int) bool { return h[i].Time.After(now) })
	h = h[:k]
	a := Assessment{ModelRisk: math.NaN()}
	if len(h) == 0 {
		return a
	}
	a.Hits = EvaluateRules(h, now, opt)
	if m != nil {
		addLevelOdds(a.Hits, m, h[len(h)-1].Protocol)
	}
	for _, hit := range a.Hits {
		if hit.Kind != KindFailureRisk {
			continue
		}
		a.Risk = math.Max(a.Risk, hit.Risk)
		if hit.Severity != models.SeverityInfo {
			a.Explanation = append(a.Explanation, Explanation{Feature: "rule:" + hit.Rule, Value: hit.Risk, Unit: "risk", Note: hit.Summary})
		}
	}
	if m != nil && m.Applies(h) {
		risk, ex := m.Score(h)
		a.ModelRisk = risk
		a.Risk = math.Max(a.Risk, risk)
		a.Explanation = append(a.Explanation, ex...)
		if w, ok := m.Window(risk); ok {
			a.Window = &w
		}
		if thr, ok := m.ThresholdAt(0.01); ok && risk > thr {
			a.ModelSince = h[len(h)-1].Time
			for k := len(h) - 1; k > 0 && len(h)-k <= modelLookback; k-- {
				if r, _ := m.Score(h[:k]); r <= thr {
					break
				}
				a.ModelSince = h[k-1].Time
			}
		}
	}
	return a
}

// addLevelOdds adds to each level hit on reallocated or pending sectors how
// much more often training drives at that level failed (Model.Levels): the
// size of the risk and, through its interval, how sure it is.
func addLevelOdds(hits []Hit, m *Model, p Protocol) {
	for i := range hits {
		counter, ok := strings.CutSuffix(hits[i].Rule, "_level")
		if !ok || len(hits[i].Evidence) == 0 {
			continue
		}
		v := hits[i].Evidence[0].Value // the current count
		l, ok := m.LevelOddsFor(counter, v)
		if !ok {
			continue
		}
		to := "or more"
		if l.To > 0 {
			to = fmt.Sprintf("to %g", float64(l.To)-1)
		}
		note := fmt.Sprintf("95 %% interval %.3g–%.3g; %s: %d of %d drives first seen with %g %s %s failed, against %d of %d with none",
			float64(l.Low), float64(l.High), m.Source, l.Failed, l.Failed+l.Healthy, float64(l.From), to, counter, l.BaseFailed, l.BaseFailed+l.BaseHealthy)
		if p == ProtocolSCSI {
			note += " (measured on ATA disks; SCSI grown defects are the same remapping)"
		}
		hits[i].Evidence = append(hits[i].Evidence, models.Evidence{Name: "failure_odds_ratio", Value: float64(l.OddsRatio), Note: note})
		hits[i].Summary += fmt.Sprintf("; drives at this level failed with %.3g× the odds of drives with none (95 %% interval %.3g–%.3g)",
			float64(l.OddsRatio), float64(l.Low), float64(l.High))
	}
}

// Findings turns an assessment of subject at now into findings: one
// drive_failure_risk when a rule at warning or worse fired or the model's
// risk passed its 1 % false-positive threshold, and one drive_wearout when
// the wear-out rule fired. IDs are stable per subject and kind.
func Findings(subject models.Subject, a Assessment, m *Model, now time.Time) []models.Finding {
	var out []models.Finding
	if f, ok := failureFinding(subject, a, m, now); ok {
		out = append(out, f)
	}
	for _, hit := range a.Hits {
		if hit.Kind != KindWearout {
			continue
		}
		out = append(out, models.Finding{
			ID: KindWearout + "/" + subject.String(), Kind: KindWearout, Subject: subject,
			Severity: hit.Severity, Score: 0, Start: minTime(hit.Since, now), LastSeen: now,
			Summary: hit.Summary, Evidence: hit.Evidence,
		})
	}
	return out
}

func failureFinding(subject models.Subject, a Assessment, m *Model, now time.Time) (models.Finding, bool) {
	sev := models.Severity("")
	start := now
	var summaries []string
	var evidence []models.Evidence
	for _, hit := range a.Hits {
		if hit.Kind != KindFailureRisk || hit.Severity == models.SeverityInfo {
			continue
		}
		sev = maxSeverity(sev, hit.Severity)
		start = minTime(start, hit.Since)
		summaries = append(summaries, hit.Summary)
		for _, e := range hit.Evidence {
			e.Series = hit.Rule
			evidence = append(evidence, e)
		}
	}
	if m != nil && known(a.ModelRisk) {
		warn, ok1 := m.ThresholdAt(0.01)
		crit, ok2 := m.ThresholdAt(0.001)
		msev := models.Severity("")
		switch {
		case ok2 && a.ModelRisk > crit:
			msev = models.SeverityCritical
		case ok1 && a.ModelRisk > warn:
			msev = models.SeverityWarning
		}
		if msev != "" {
			sev = maxSeverity(sev, msev)
			start = minTime(start, a.ModelSince)
			s := fmt.Sprintf("model risk %.2f", a.ModelRisk)
			if a.Window != nil {
				s += fmt.Sprintf(", failure likely in %.0f–%.0f days", float64(a.Window.FromDays), float64(a.Window.ToDays))
			}
			summaries = append(summaries, s)
			evidence = append(evidence, models.Evidence{Name: "model_risk", Value: a.ModelRisk, Series: "model"})
			if a.Window != nil {
				evidence = append(evidence,
					models.Evidence{Name: "failure_window_from", Value: float64(a.Window.FromDays), Unit: "days", Series: "model"},
					models.Evidence{Name: "failure_window_to", Value: float64(a.Window.ToDays), Unit: "days", Series: "model"})
			}
			for _, e := range a.Explanation {
				if strings.HasPrefix(e.Feature, "rule:") {
					continue
				}
				evidence = append(evidence, models.Evidence{Name: e.Feature, Value: e.Value, Unit: e.Unit, Series: "model",
					Note: fmt.Sprintf("higher than %.1f%% of healthy drive-days; +%.2f log-odds", e.HealthyPercentile, e.Contribution)})
			}
		}
	}
	if sev == "" {
		return models.Finding{}, false
	}
	return models.Finding{
		ID: KindFailureRisk + "/" + subject.String(), Kind: KindFailureRisk, Subject: subject,
		Severity: sev, Score: a.Risk, Start: start, LastSeen: now,
		Summary: strings.Join(summaries, "; "), Evidence: evidence,
	}, true
}

func maxSeverity(a, b models.Severity) models.Severity {
	if severityRank(b) > severityRank(a) {
		return b
	}
	return a
}

func minTime(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}

// Analyze is the analyzer entry point: it assesses one device's history at
// now and returns its findings. m may be nil (rules only).
func Analyze(device string, h []Observation, now time.Time, m *Model, opt RuleOptions) []models.Finding {
	subject := models.Subject{Kind: models.SubjectDevice, ID: device}
	return Findings(subject, Assess(h, now, m, opt), m, now)
}
