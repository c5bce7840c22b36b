// Package capacityeval is the capacity forecasting backtest on the cluster
// twin behind `ballast eval capacity` (docs/eval/capacity.md), and the
// in-process twin report behind docs/img/capacity-report.png.
package capacityeval

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/ballast-io/ballast/analyzer/capacity"
	"github.com/ballast-io/ballast/analyzer/drivehealth"
	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/sim/twin"
)

// CapacityRun describes one stretched capacity-pressure run of the twin.
type CapacityRun struct {
	Seed   uint64
	Days   int
	Tick   time.Duration
	Sample time.Duration
	BurnIn time.Duration
	Start  time.Time
	Pool   string
	// AllPools samples every pool's drives, not only Pool's.
	AllPools bool
	// Health, when set, is filled with every sampled drive's SMART
	// series, read hourly from the data servers' exposition and keyed
	// "<node>/<controller>" as the mds keys them.
	Health   *drivehealth.Readings
	Tenants  []string // what fills the pool, in words
	Scenario *twin.Scenario
}

// CapacityScenario derives a multi-day capacity scenario for seed from the
// shipped capacity-pressure scenario: the same topology, datasets and
// checkpointing training job (1.5 TB every 15 min, keep 3, on the 15.4 TB
// scratch pool), run for days at tick 60 s, with the 90-minute 4 GB/s
// burst (which fills the pool within the hour) replaced by three tenants
// whose rates are drawn from seed:
//
//   - a steady tenant writing 4–7 MB/s for the whole run (the trend);
//   - a working-hours tenant writing 5–15 MB/s on weekdays from about
//     08:00 to about 19:00 and deleting its data each evening (a daily and
//     weekly cycle);
//   - a project tenant writing 1.5–3 MB/s from the start and deleting all
//     of it on a day between 6 and 10 (a step change and a change of
//     growth).
//
// The first BurnIn (one day) is not sampled: in it the job writes its
// first three checkpoints into an empty pool, a start-up ramp no real
// history has.
//
// The twin's capacity_pressure fault models each tenant (it writes while
// active and removes what it wrote when it ends).
func CapacityScenario(seed uint64, days int) (*CapacityRun, error) {
	if days < 2 {
		return nil, fmt.Errorf("cannot build the capacity scenario: %d days; want at least 2", days)
	}
	sc, err := twin.LoadScenario("capacity-pressure")
	if err != nil {
		return nil, err
	}
	run := &CapacityRun{Seed: seed, Days: days, Tick: time.Minute, Sample: 5 * time.Minute, BurnIn: 24 * time.Hour,
		Start: time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), Pool: "scratch", Scenario: sc}
	sc.Name = fmt.Sprintf("capacity-pressure-%dd-seed%d", days, seed)
	sc.Tick, sc.Duration = run.Tick, time.Duration(days)*24*time.Hour
	r := rand.New(rand.NewPCG(seed, 0x636170616369))
	steady := 4 + 3*r.Float64()
	work := 5 + 10*r.Float64()
	project := 1.5 + 1.5*r.Float64()
	cleanup := time.Duration((6 + 4*r.Float64()) * float64(24*time.Hour)).Round(time.Hour)
	fault := func(mbps float64, start, end time.Duration) twin.Fault {
		return twin.Fault{Kind: twin.FaultCapacityPressure, Pool: run.Pool, MBps: mbps, Start: start, End: end}
	}
	sc.Faults = []twin.Fault{fault(steady, time.Minute, 0), fault(project, time.Minute, cleanup)}
	for d := 0; d < days; d++ {
		if wd := run.Start.AddDate(0, 0, d).Weekday(); wd == time.Saturday || wd == time.Sunday {
			continue
		}
		on := time.Duration(d)*24*time.Hour + 8*time.Hour + time.Duration(r.IntN(60))*time.Minute
		off := time.Duration(d)*24*time.Hour + 19*time.Hour + time.Duration(r.IntN(60))*time.Minute
		sc.Faults = append(sc.Faults, fault(work*(0.8+0.4*r.Float64()), on, off))
	}
	run.Tenants = []string{
		fmt.Sprintf("steady tenant %.1f MB/s for the whole run", steady),
		fmt.Sprintf("working-hours tenant about %.1f MB/s on weekdays 08–19 h, deleted each evening", work),
		fmt.Sprintf("project tenant %.1f MB/s, all deleted after %.1f d", project, cleanup.Hours()/24),
	}
	return run, nil
}

// Simulate runs the scenario and returns the used bytes of every drive of
// the run's pool (of every pool with AllPools), read every Sample after BurnIn from the twin's raw NVMe source (twin.Smart,
// the namespace utilisation a drive reports) — not from the twin's
// internal state. The twin's exposition has no used-bytes series yet, so
// this is the closest a real agent's view gets.
func (run *CapacityRun) Simulate() ([]capacity.DeviceSeries, error) {
	tw, err := twin.New(run.Scenario, run.Seed, run.Start)
	if err != nil {
		return nil, err
	}
	pools := dsPools(run.Scenario, tw.Nodes())
	byDev := map[string]*capacity.DeviceSeries{}
	var order []string
	sample := func() error {
		for _, n := range tw.Nodes() {
			if n.Role != twin.RoleDS || (!run.AllPools && pools[n.Name] != run.Pool) {
				continue
			}
			sm, err := tw.Smart(n.Name)
			if err != nil {
				continue // a lost DS cannot be read, as with a real agent
			}
			for _, h := range sm {
				if !h.Up {
					continue
				}
				id := n.Name + "/" + h.Namespace
				d := byDev[id]
				if d == nil {
					d = &capacity.DeviceSeries{Device: id, DS: n.Name, Pool: pools[n.Name]}
					byDev[id] = d
					order = append(order, id)
				}
				d.Capacity = h.CapacityBytes
				d.Used = append(d.Used, capacity.Point{T: tw.Now(), V: h.UsedBytes})
			}
		}
		return nil
	}
	every, hourly := int(run.Sample/run.Tick), int(time.Hour/run.Tick)
	for k := 0; tw.Elapsed() < run.Scenario.Duration; k++ {
		if k%every == 0 && tw.Elapsed() >= run.BurnIn {
			if err := sample(); err != nil {
				return nil, err
			}
		}
		if run.Health != nil && k%hourly == 0 {
			run.sampleHealth(tw, pools)
		}
		tw.Step()
	}
	out := make([]capacity.DeviceSeries, 0, len(order))
	for _, id := range order {
		out = append(out, *byDev[id])
	}
	return out, nil
}

// sampleHealth records the SMART series each data server's agent would
// expose now (the twin's exposition), for the drives of the sampled pools,
// through the one series → observation mapping (drivehealth.Readings),
// under "<node>/<device>" as the mds names them.
func (run *CapacityRun) sampleHealth(tw *twin.Twin, pools map[string]string) {
	for _, n := range tw.Nodes() {
		if n.Role != twin.RoleDS || (!run.AllPools && pools[n.Name] != run.Pool) {
			continue
		}
		samples, err := tw.NodeSamples(n.Name)
		if err != nil {
			continue // a node that is down exposes nothing
		}
		for _, s := range samples {
			labels := s.Labels()
			if dev := models.LabelValue(labels, "device"); dev != "" {
				run.Health.Add(n.Name+"/"+dev, tw.Now(), s.Name, labels, s.Value)
			}
		}
	}
}

// dsPools maps data-server names to pools from the scenario's topology
// (nodes are listed in topology order), as the MDS knows from its config.
func dsPools(sc *twin.Scenario, nodes []twin.Node) map[string]string {
	out := map[string]string{}
	g, left := 0, 0
	if len(sc.Topology.DataServers) > 0 {
		left = sc.Topology.DataServers[0].Count
	}
	for _, n := range nodes {
		if n.Role != twin.RoleDS {
			continue
		}
		for left == 0 && g+1 < len(sc.Topology.DataServers) {
			g++
			left = sc.Topology.DataServers[g].Count
		}
		out[n.Name] = sc.Topology.DataServers[g].Pool
		left--
	}
	return out
}
