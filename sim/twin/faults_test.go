package twin

import (
	"strings"
	"testing"
)

// driveHistory runs tw to just past the failing drive's failure and
// returns, per tick, the drive's media errors, error-log entries, latency
// outlier and temperature excursion.
func driveHistory(t *testing.T, tw *Twin, name string, ticks int) [][4]float64 {
	t.Helper()
	d := tw.findDevice(name)
	if d < 0 {
		t.Fatalf("no device %s", name)
	}
	out := make([][4]float64, 0, ticks)
	for i := 0; i < ticks; i++ {
		tw.Step()
		dv := &tw.dev[d]
		out = append(out, [4]float64{dv.smart.mediaErr, dv.smart.errLog, dv.outlier, dv.smart.excursion})
	}
	return out
}

// TestFailingDriveNoiseIgnoresWorkloads: two twins of one seed whose
// workloads draw differently (the second runs an extra inference job that
// picks files at random) see the same failing-drive history tick by tick,
// because a fault draws its noise from its own source.
func TestFailingDriveNoiseIgnoresWorkloads(t *testing.T) {
	extra := strings.Replace(failingDrive, "  clients: [{count: 1, gpus: 8}]",
		"  clients: [{count: 1, gpus: 8}, {name_prefix: inf, count: 1, gpus: 1}]", 1)
	extra = strings.Replace(extra, "faults:",
		"  - {name: s, kind: inference, clients: inf, dataset: d, streams: 4, queue_depth: 4, read_kb: 64, rate_mbps: 200}\nfaults:", 1)
	if extra == failingDrive {
		t.Fatal("the extra workload was not added")
	}
	a, b := build(t, failingDrive), build(t, extra)
	if len(b.jobs) != len(a.jobs)+1 {
		t.Fatalf("jobs: %d and %d; want one more in the second twin", len(a.jobs), len(b.jobs))
	}
	const ticks = 71 * 60 // the drive degrades from 10 min and fails at 70
	ha := driveHistory(t, a, "ds01/nvme1n1", ticks)
	hb := driveHistory(t, b, "ds01/nvme1n1", ticks)
	sawErr, sawOutlier, sawExcursion := false, false, false
	for i := range ha {
		if ha[i] != hb[i] {
			t.Fatalf("tick %d: failing drive (media errors, error log, outlier, excursion) %v with one workload, %v with two", i, ha[i], hb[i])
		}
		sawErr = sawErr || ha[i][0] > 0
		sawOutlier = sawOutlier || ha[i][2] > 1
		sawExcursion = sawExcursion || ha[i][3] > 0
	}
	if !sawErr || !sawOutlier || !sawExcursion {
		t.Fatalf("media errors %v, outliers %v, excursions %v: the drive's noise was not exercised", sawErr, sawOutlier, sawExcursion)
	}
	// the twins' shared sources now stand at different places: the
	// workloads drew differently
	if ra, rb := a.rng.Uint64(), b.rng.Uint64(); ra == rb {
		t.Fatalf("the twins' sources agree (%#x): the extra workload drew nothing", ra)
	}
}
