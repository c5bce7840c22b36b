package sim

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/ballast-io/ballast/sim/twin"
	"github.com/ballast-io/ballast/storage"
)

// TestHotShardDemo runs the stages on the twin's hot-shard scenario through
// the demo (store, scrapes, LAYOUTSTATS) and checks that the hot shard's
// devices are found, named as the twin names its drives (ds04/nvme4n1),
// and that every stage ran without error.
func TestHotShardDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the twin for 15 simulated minutes")
	}
	sc, err := twin.LoadScenario("hot-shard")
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDemo(DemoOptions{
		Scenario: sc, Seed: 1, Duration: 15 * time.Minute, OutDir: t.TempDir(), Listen: "127.0.0.1:0",
		Start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
	})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := d.Run(context.Background())
	defer d.Stop(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	an := d.MDS().Analysis()
	// found, not necessarily still active: the demo's actuators restripe
	// the hot shard, which ends the hot spot
	fs, err := d.MDS().Journal().Findings(storage.FindingFilter{Kind: "hotspot"})
	if err != nil {
		t.Fatal(err)
	}
	hot := map[string]bool{}
	for _, f := range fs {
		if f.Subject.Kind == "device" {
			hot[f.Subject.ID] = true // named through the device table: the twin's drive names
		}
	}
	for _, tr := range d.Twin().Truth() {
		if tr.Kind == "hot_shard" {
			if dev, _ := tr.Params["device"].(string); !hot[dev] {
				t.Errorf("hot shard device %s: no hotspot finding; got %v", dev, hot)
			}
		}
	}
	// The idle GPU-seconds blamed per cause are also stored as a series,
	// so dashboards see the same totals as the scoring records.
	var blamed float64
	for _, b := range an.Blame() {
		blamed += b.Seconds
	}
	d.MDS().Store().Flush()
	ss, err := d.MDS().Store().Query(context.Background(), `sum(ballast_gpu_lost_seconds_total)`, sum.End)
	if err != nil {
		t.Fatal(err)
	}
	if blamed == 0 || len(ss) != 1 || math.Abs(ss[0].Values[len(ss[0].Values)-1]-blamed) > 1 {
		t.Errorf("sum(ballast_gpu_lost_seconds_total) at the end: got %v; want %.1f GPU-seconds blamed", ss, blamed)
	}
	if len(an.Labels()) == 0 {
		t.Error("no workload window was labelled")
	}
	t.Logf("speed-up ×%.0f, findings %v", sum.SpeedUp, sum.FindingsByKind)
}
