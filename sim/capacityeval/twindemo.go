package capacityeval

import (
	"fmt"
	"sort"
	"time"

	"github.com/ballast-io/ballast/cluster/report"

	"github.com/ballast-io/ballast/analyzer/drivehealth"
	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/sim/twin"
)

// TwinInput runs the stretched capacity-pressure scenario for seed over
// days, with every pool sampled and one scratch drive (scr01/nvme2n1)
// degrading from 60 % of the run until it would fail at its end, and
// returns the report input at report time at (from the start): used bytes
// every 5 minutes, and the drives the drive-health rules and model flag
// from their hourly SMART history. It is how the example report
// (docs/img/capacity-report.png) is made, with no cluster and no store.
func TwinInput(seed uint64, days int, at time.Duration) (report.Input, error) {
	run, err := CapacityScenario(seed, days)
	if err != nil {
		return report.Input{}, err
	}
	if at <= run.BurnIn || at > run.Scenario.Duration {
		return report.Input{}, fmt.Errorf("cannot build the twin report: report time %s is outside the sampled run (%s to %s)", at, run.BurnIn, run.Scenario.Duration)
	}
	run.AllPools = true
	run.Health = &drivehealth.Readings{}
	const failing = "scr01/nvme2n1"
	run.Scenario.Faults = append(run.Scenario.Faults, twin.Fault{
		Kind: twin.FaultFailingDrive, Device: failing,
		Start: time.Duration(0.6 * float64(run.Scenario.Duration)), End: run.Scenario.Duration,
		MediaErrors: 5000, FinalSpare: 2, WearRise: 8, TempExcursC: 25, OutlierRate: 0.2, FinalSpeed: 0.3,
	})
	devs, err := run.Simulate()
	if err != nil {
		return report.Input{}, err
	}
	now := run.Start.Add(at)
	in := report.Input{At: now, Source: fmt.Sprintf("cluster twin, scenario %s (seed %d), read in process", run.Scenario.Name, seed),
		UsedMetric: "twin NVMe namespace utilisation (twin.Smart)", CapacityMetric: models.MetricDriveCapacity,
		Devices: devs,
		Notes: []string{fmt.Sprintf("The scratch pool is filled by a %s; %s degrades from day %.1f.",
			joinAnd(run.Tenants), failing, 0.6*float64(days))},
	}
	m, err := drivehealth.DefaultModel()
	if err != nil {
		return report.Input{}, err
	}
	opt := drivehealth.DefaultRuleOptions()
	hist := run.Health.Histories()
	ids := make([]string, 0, len(hist))
	for id := range hist {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		a := drivehealth.Assess(hist[id], now, m, opt)
		for _, f := range drivehealth.Findings(models.Subject{Kind: models.SubjectDevice, ID: id}, a, m, now) {
			in.AtRisk = append(in.AtRisk, report.DriveRisk{Device: id, Kind: f.Kind, Severity: f.Severity, Risk: a.Risk, Summary: f.Summary})
		}
	}
	in.AtRisk = report.MatchDevices(in.AtRisk, devs)
	return in, nil
}

func joinAnd(xs []string) string {
	switch len(xs) {
	case 0:
		return ""
	case 1:
		return xs[0]
	}
	s := xs[0]
	for _, x := range xs[1 : len(xs)-1] {
		s += ", " + x
	}
	return s + " and " + xs[len(xs)-1]
}
