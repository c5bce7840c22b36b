package sim

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"

	"github.com/ballast-io/ballast/analyzer/capacity"
	"github.com/ballast-io/ballast/analyzer/drivehealth"
	"github.com/ballast-io/ballast/cluster/report"
	"github.com/ballast-io/ballast/models"
)

// pools maps the scenario's node-name prefixes to pools, longest prefix
// first (as report.ReadOptions.Pools wants them).
func (d *Demo) pools() [][2]string {
	var pools [][2]string
	for _, g := range d.opts.Scenario.Topology.DataServers {
		pools = append(pools, [2]string{g.NamePrefix, g.Pool})
	}
	sort.SliceStable(pools, func(i, j int) bool { return len(pools[i][0]) > len(pools[j][0]) })
	return pools
}

// poolOf returns the pool of the data server named node.
func (d *Demo) poolOf(node string) string {
	return report.PoolOf(map[string]string{"node": node}, "pool", d.pools())
}

// reportPoints bounds the readings per drive the demo's report reads.
const reportPoints = 2000

// WriteCapacityReport writes the capacity forecasts report of the run so
// far into OutDir/report (report.html, report.md, report.json) and returns
// that folder. It reads what `ballast report capacity` reads from a real
// mds — the data servers' filesystem series, through the store's MetricsQL
// engine — with the pools of the scenario's topology (as an operator's
// --pools would give them) and, as drives at risk, the drive_failure_risk
// and drive_wearout findings the analysis pipeline holds open at the end.
// It uses none of the twin's ground truth.
func (d *Demo) WriteCapacityReport(ctx context.Context) (string, error) {
	st := d.mds.Store()
	st.Flush()
	start, at := d.opts.Start, d.tw.Now()
	step := d.opts.ScrapeInterval
	if span := at.Sub(start); span/step > reportPoints {
		step = (span / reportPoints).Round(d.opts.ScrapeInterval)
	}
	pools := d.pools()
	ro := report.ReadOptions{Start: start, End: at, Step: step, Match: `role="ds"`, Pools: pools}
	devs, err := report.ReadDevices(ctx, report.FromStore(st), ro)
	if err != nil {
		return "", err
	}
	in := report.Input{
		At: at, Source: fmt.Sprintf("ballast demo: cluster twin (simulated), scenario %s, seed %d, read from the demo's store", d.opts.Scenario.Name, d.opts.Seed),
		UsedMetric: report.UsedQuery(ro), CapacityMetric: report.SizeQuery(ro), Devices: devs,
		Options: capacity.DefaultOptions(),
	}
	// A demo is hours of simulated time, not the weeks a forecast wants:
	// forecast what there is (at least 8 readings over a quarter of the
	// run, up to the default 2 h) and let the report say how short it is.
	if q := at.Sub(start) / 4; q < in.Options.MinHistory {
		in.Options.MinHistory = q
	}
	for _, f := range d.findings() {
		if f.Active() && f.Subject.Kind == models.SubjectDevice && (f.Kind == drivehealth.KindFailureRisk || f.Kind == drivehealth.KindWearout) {
			in.AtRisk = append(in.AtRisk, report.DriveRisk{Device: f.Subject.ID, Kind: f.Kind, Severity: f.Severity, Risk: f.Score, Summary: f.Summary})
		}
	}
	sort.Slice(in.AtRisk, func(i, j int) bool { return in.AtRisk[i].Device < in.AtRisk[j].Device })
	in.AtRisk = report.MatchDevices(report.DedupeRisks(in.AtRisk), devs)
	in.Notes = append(in.Notes,
		fmt.Sprintf("Pools from the scenario's topology (node-name prefix → pool): %v.", pools),
		"Drives at risk: the drive_failure_risk and drive_wearout findings the demo's analysis pipeline holds open at the report time.")
	dir := filepath.Join(d.opts.OutDir, "report")
	if err := report.Render(dir, in); err != nil {
		return "", err
	}
	return dir, nil
}
