package report

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ballast-io/ballast/analyzer/capacity"
)

// fakeQuerier answers the two queries ReadDevices makes from fixed series.
type fakeQuerier struct {
	used, size []QuerySeries
	exprs      []string
}

func (f *fakeQuerier) QueryRange(_ context.Context, expr string, _, _ time.Time, _ time.Duration) ([]QuerySeries, error) {
	f.exprs = append(f.exprs, expr)
	if strings.Contains(expr, " - ") {
		return f.used, nil
	}
	return f.size, nil
}

func TestReadDevices(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	pts := func(vs ...float64) []capacity.Point {
		var out []capacity.Point
		for i, v := range vs {
			out = append(out, capacity.Point{T: t0.Add(time.Duration(i) * time.Hour), V: v})
		}
		return out
	}
	l := func(node, dev, pool string) map[string]string {
		m := map[string]string{"node": node, "device": dev}
		if pool != "" {
			m["pool"] = pool
		}
		return m
	}
	q := &fakeQuerier{
		used: []QuerySeries{
			{l("scr01", "nvme0n1", ""), pts(math.NaN(), 1, 2, 3)},
			{l("ds00", "nvme1n1", "gold"), pts(5, 5)},
			{l("ds00", "nvme0n1", ""), pts(4)},
			{l("ds09", "nvme7n1", ""), pts(4)}, // no size: left out
		},
		size: []QuerySeries{
			{l("scr01", "nvme0n1", ""), pts(10, 10, 12, math.NaN())},
			{l("ds00", "nvme1n1", "gold"), pts(20)},
			{l("ds00", "nvme0n1", ""), pts(20)},
		},
	}
	o := ReadOptions{Start: t0, End: t0.Add(3 * time.Hour), Step: time.Hour, Match: `role="ds"`, Pools: [][2]string{{"scr", "scratch"}, {"ds", "fast"}}}
	devs, err := ReadDevices(context.Background(), q, o)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		dev, ds, pool string
		cap           float64
		n             int
	}{{"ds00/nvme0n1", "ds00", "fast", 20, 1}, {"ds00/nvme1n1", "ds00", "gold", 20, 2}, {"scr01/nvme0n1", "scr01", "scratch", 12, 3}}
	if len(devs) != len(want) {
		t.Fatalf("got %d devices %+v; want %d", len(devs), devs, len(want))
	}
	for i, w := range want {
		d := devs[i]
		if d.Device != w.dev || d.DS != w.ds || d.Pool != w.pool || d.Capacity != w.cap || len(d.Used) != w.n {
			t.Errorf("device %d = %s ds %s pool %s cap %v %d points; want %+v", i, d.Device, d.DS, d.Pool, d.Capacity, len(d.Used), w)
		}
	}
	wantUsed := `max by (node, device, pool) (ballast_filesystem_size_bytes{role="ds"} - ballast_filesystem_avail_bytes{role="ds"})`
	if len(q.exprs) != 2 || q.exprs[0] != wantUsed || q.exprs[1] != `max by (node, device, pool) (ballast_filesystem_size_bytes{role="ds"})` {
		t.Errorf("queries %q; want used %q then size", q.exprs, wantUsed)
	}

	if _, err := ReadDevices(context.Background(), &fakeQuerier{}, o); err == nil || !strings.Contains(err.Error(), "no series ballast_filesystem_size_bytes") {
		t.Errorf("no series: err = %v", err)
	}
	o.Step = 0
	if _, err := ReadDevices(context.Background(), q, o); err == nil {
		t.Error("step 0: no error")
	}
}

func TestMatchDevicesAndDedupe(t *testing.T) {
	devs := []capacity.DeviceSeries{{Device: "ds01/nvme2n1"}, {Device: "ds01/sdb"}}
	rs := DedupeRisks([]DriveRisk{
		{Device: "ds01/nvme2", Kind: "drive_wearout", Risk: 0.2},
		{Device: "ds01/nvme2", Kind: "drive_wearout", Risk: 0.4},
		{Device: "ds01/sdb", Kind: "drive_failure_risk", Risk: 0.9},
		{Device: "ds01/nvme9", Kind: "drive_failure_risk", Risk: 0.5},
	})
	rs = MatchDevices(rs, devs)
	if len(rs) != 3 || rs[0].Device != "ds01/nvme2n1" || rs[0].Risk != 0.4 || rs[1].Device != "ds01/sdb" || rs[2].Device != "ds01/nvme9" {
		t.Errorf("got %+v; want ds01/nvme2n1 (0.4), ds01/sdb, ds01/nvme9 unchanged", rs)
	}
}
