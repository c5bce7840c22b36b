package pipeline

import (
	"context"
	"time"

	"github.com/ballast-io/ballast/models"
)

// MetricFindingActive is the series of active findings, one per finding
// kind, subject and severity: 1 while active, 0 once when it ends, so that
// dashboards and alert rules can use findings like any metric.
const MetricFindingActive = "ballast_finding_active"

// FindingsRecorder is the first actuator of every tick: it journals the
// tick's findings (durable across restarts) and writes
// ballast_finding_active for them.
type FindingsRecorder struct {
	Journal  FindingsJournal
	Appender Appender
}

// FindingsJournal is where findings are kept (storage.Journal).
type FindingsJournal interface {
	UpsertFindings(fs []models.Finding) error
}

// Name implements Actuator.
func (r *FindingsRecorder) Name() string { return "findings" }

// Reconcile implements Actuator.
func (r *FindingsRecorder) Reconcile(ctx context.Context, now time.Time, fs []models.Finding) error {
	if len(fs) == 0 {
		return nil
	}
	if err := r.Journal.UpsertFindings(fs); err != nil {
		return err
	}
	samples := make([]models.Sample, 0, len(fs))
	for _, f := range fs {
		v := 1.0
		if !f.Active() {
			v = 0
		}
		samples = append(samples, models.Sample{
			Name: MetricFindingActive,
			Labels: []models.Label{
				{Name: "kind", Value: f.Kind},
				{Name: "subject", Value: f.Subject.String()},
				{Name: "severity", Value: string(f.Severity)},
			},
			Timestamp: now.UnixMilli(),
			Value:     v,
		})
	}
	return r.Appender.Append(ctx, samples)
}

// SeriesRecorder is an actuator that writes series derived by the stages
// (what they computed this tick beyond findings, such as GPU-seconds lost
// by cause), so that dashboards and alert rules can read them like any
// metric.
type SeriesRecorder struct {
	// Label names the actuator in the pipeline status.
	Label string
	// Series returns the samples to write at now.
	Series   func(now time.Time) []models.Sample
	Appender Appender
}

// Name implements Actuator.
func (r *SeriesRecorder) Name() string { return r.Label }

// Reconcile implements Actuator.
func (r *SeriesRecorder) Reconcile(ctx context.Context, now time.Time, _ []models.Finding) error {
	s := r.Series(now)
	if len(s) == 0 {
		return nil
	}
	return r.Appender.Append(ctx, s)
}
