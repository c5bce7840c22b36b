package capacityeval

import (
	"testing"

	"github.com/ballast-io/ballast/analyzer/capacity"
)

func TestCapacityScenario(t *testing.T) {
	if _, err := CapacityScenario(1, 1); err == nil {
		t.Error("a 1-day run built; want an error")
	}
	run, err := CapacityScenario(3, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Tenants) != 3 || run.Scenario.Duration.Hours() != 72 {
		t.Errorf("tenants %q, duration %v; want 3 tenants, 72h", run.Tenants, run.Scenario.Duration)
	}
	devs, err := run.Simulate()
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 16 {
		t.Fatalf("%d drives sampled; want the scratch pool's 16", len(devs))
	}
	for _, d := range devs {
		if d.Pool != "scratch" || d.Capacity != 960e9 || len(d.Used) != 2*288 {
			t.Fatalf("drive %s: pool %q capacity %g, %d readings; want scratch, 960 GB, 576", d.Device, d.Pool, d.Capacity, len(d.Used))
		}
	}
	var pool capacity.Series
	for _, s := range capacity.Aggregate(devs) {
		if s.Subject.String() == "pool:scratch" {
			pool = s
		}
	}
	first, last := pool.Used[0].V/pool.Capacity, pool.Used[len(pool.Used)-1].V/pool.Capacity
	// Checkpoints hold 3–4.5 TB of 15.4 TB; the tenants add 0.3–0.9 TB a day.
	if first < 0.15 || first > 0.5 || last <= first {
		t.Errorf("scratch pool from %.3f to %.3f full; want a start between 0.15 and 0.5 and growth", first, last)
	}
	// The same seed gives the same series.
	again, err := CapacityScenario(3, 3)
	if err != nil {
		t.Fatal(err)
	}
	devs2, err := again.Simulate()
	if err != nil {
		t.Fatal(err)
	}
	for i := range devs {
		for k := range devs[i].Used {
			if devs[i].Used[k] != devs2[i].Used[k] {
				t.Fatalf("run 2 differs at %s reading %d", devs[i].Device, k)
			}
		}
	}
}
