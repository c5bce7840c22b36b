package sim

import (
	"context"
	"testing"
	"time"

	"github.com/ballast-io/ballast/actuator"
	"github.com/ballast-io/ballast/internal/testkit"
	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/sim/twin"
	"github.com/ballast-io/ballast/storage"
)

// runReadAhead runs the readahead scenario for dur with method and
// returns the demo (stopped at cleanup).
func runReadAhead(t *testing.T, method string, dur time.Duration) *Demo {
	t.Helper()
	sc, err := twin.LoadScenario("readahead")
	if err != nil {
		t.Fatal(err)
	}
	opts := DemoOptions{Scenario: sc, Seed: 1, Duration: dur, OutDir: t.TempDir(), Listen: "127.0.0.1:0",
		Start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	if err := MethodOptions(&opts, method); err != nil {
		t.Fatal(err)
	}
	d, err := NewDemo(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(context.Background()) })
	if _, err := d.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestReadAheadLoopRaisesTheStarvedMount: on the twin's readahead
// scenario the mds's closed loop, through the GPU nodes' agents, raises
// the starved training mount's read-ahead and lowers the wasteful
// inference mount's within 6 simulated minutes, the raise verified
// effective.
func TestReadAheadLoopRaisesTheStarvedMount(t *testing.T) {
	if !testkit.OwnProcess(t) { // TestHotShardDemo opens this process's store
		return
	}
	d := runReadAhead(t, MethodBallast, 6*time.Minute)
	train, _, err := d.Twin().ReadAheadKB("gpu00")
	if err != nil {
		t.Fatal(err)
	}
	inf, _, _ := d.Twin().ReadAheadKB("inf00")
	if train <= 128 || inf >= 128 {
		t.Errorf("after 6 minutes the training mount reads ahead %d KiB and the inference mount %d KiB; want the first raised above 128 and the second lowered below it", train, inf)
	}
	as, err := d.MDS().Journal().Actions(storage.ActionFilter{Kind: models.ActionSetReadAhead})
	if err != nil {
		t.Fatal(err)
	}
	raised := false
	for _, a := range as {
		if a.Subject.ID == "gpu00" && a.Params[actuator.ParamDirection] == "raise" && a.State == models.ActionSucceeded && a.Effect != nil && a.Effect.Verdict == models.VerdictEffective {
			raised = true
		}
		if a.Params[actuator.ParamPolicy] != "closed_loop" {
			t.Errorf("action %s was not the closed loop's: %v", a.ID, a.Params)
		}
	}
	if !raised {
		t.Errorf("no effective raise of gpu00's read-ahead in %d actions: %+v", len(as), as)
	}

	// the static baselines turn the loop off (one embedded store per
	// process: their runs are eval's, ballast eval readahead)
	for _, m := range []string{MethodRAKernel, MethodRANfsrahead} {
		sc, _ := twin.LoadScenario("readahead")
		o := DemoOptions{Scenario: sc}
		if err := MethodOptions(&o, m); err != nil || !o.ReadAheadPolicyOff {
			t.Errorf("%s: policy off %v, err %v; want the loop off", m, o.ReadAheadPolicyOff, err)
		}
		want := sc.Topology.Clients[0].ReadAheadKB
		if m == MethodRANfsrahead {
			want = NfsraheadRsizeFactor * sc.Topology.Clients[0].RsizeKB
		}
		if got := o.Scenario.Topology.Clients[0].ReadAheadKB; got != want || sc.Topology.Clients[0].ReadAheadKB != 128 {
			t.Errorf("%s: mounts read ahead %v KiB, want %v (and the loaded scenario untouched: %v)", m, got, want, sc.Topology.Clients[0].ReadAheadKB)
		}
	}
}
