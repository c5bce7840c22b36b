package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/ballast-io/ballast/analyzer/capacity"
	"github.com/ballast-io/ballast/analyzer/drivehealth"
	"github.com/ballast-io/ballast/cluster/report"
	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/storage"
)

// CapacityReportStage writes the capacity forecasts report on a schedule
// from the mds: every Every it reads the data servers' filesystem series
// (Window of history) and the drive findings open in the journal, and
// renders report.html, report.md and report.json into Dir, replacing the
// previous report. It returns no findings (the capacity stage does that).
type CapacityReportStage struct {
	Store   report.RangeQuerier
	Journal *storage.Journal
	Dir     string
	Every   time.Duration
	// Window of history read; default 15 days.
	Window time.Duration
	next   time.Time
}

// Name implements Stage.
func (c *CapacityReportStage) Name() string { return "capacity-report" }

// Run implements Stage. The first report is written one hour after start
// (Every after it, when shorter), when some history exists, then every
// Every.
func (c *CapacityReportStage) Run(ctx context.Context, now time.Time) ([]models.Finding, error) {
	if c.next.IsZero() {
		c.next = now.Add(min(time.Hour, c.Every))
	}
	if now.Before(c.next) {
		return nil, nil
	}
	c.next = now.Add(c.Every)
	window := c.Window
	if window <= 0 {
		window = 15 * 24 * time.Hour
	}
	ro := report.ReadOptions{Start: now.Add(-window), End: now, Step: max(time.Minute, window/2000).Truncate(time.Minute), Match: `role="ds"`}
	devs, err := report.ReadDevices(ctx, report.FromStore(c.Store), ro)
	if err != nil {
		return nil, err
	}
	in := report.Input{
		At: now, Source: "ballast mds (scheduled report)",
		UsedMetric: report.UsedQuery(ro), CapacityMetric: report.SizeQuery(ro), Devices: devs,
		Options: capacity.DefaultOptions(),
	}
	active := true
	fs, err := c.Journal.Findings(storage.FindingFilter{Active: &active})
	if err != nil {
		return nil, err
	}
	for _, f := range fs {
		if f.Subject.Kind == models.SubjectDevice && (f.Kind == drivehealth.KindFailureRisk || f.Kind == drivehealth.KindWearout) {
			in.AtRisk = append(in.AtRisk, report.DriveRisk{Device: f.Subject.ID, Kind: f.Kind, Severity: f.Severity, Risk: f.Score, Summary: f.Summary})
		}
	}
	in.AtRisk = report.MatchDevices(report.DedupeRisks(in.AtRisk), devs)
	in.Notes = append(in.Notes, "Drives at risk: the drive_failure_risk and drive_wearout findings open in the mds journal at the report time.")
	if err := report.Render(c.Dir, in); err != nil {
		return nil, fmt.Errorf("cannot write the capacity report to %q: %w", c.Dir, err)
	}
	return nil, nil
}
