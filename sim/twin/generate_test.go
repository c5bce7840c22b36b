package twin

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestGeneratedScenariosValidateAndBuild checks seeds 1..200: each scenario
// validates, builds a twin (device, port and file names resolve, layouts
// and datasets fit their pools), keeps its faults inside the run, and the
// seeds together reach every fault kind and the subtle intensities the
// generator promises (docs/scenarios.md).
func TestGeneratedScenariosValidateAndBuild(t *testing.T) {
	kinds := map[string]int{}
	var twoPools, inference, analytics, twoJobs, subtleShard, subtlePort, noFault int
	for seed := uint64(1); seed <= 200; seed++ {
		sc, err := GenerateScenario(seed)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if _, err := New(sc, 1, epoch); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if n := len(sc.Faults); n > 4 {
			t.Errorf("seed %d: %d faults; want at most 4", seed, n)
		}
		if len(sc.Faults) == 0 {
			noFault++
		}
		for i, f := range sc.Faults {
			kinds[f.Kind]++
			if f.Start <= 0 || f.Start >= sc.Duration || f.End > sc.Duration {
				t.Errorf("seed %d: fault %d (%s) runs %s..%s outside the %s run", seed, i, f.Kind, f.Start, f.End, sc.Duration)
			}
			switch f.Kind {
			case FaultHotShard:
				if f.Share < 0.3 {
					subtleShard++
				}
			case FaultPortSaturation:
				if f.Gbps < 1.15*portSpeed(sc, f.Port) {
					subtlePort++
				}
			}
		}
		if len(sc.Topology.DataServers) == 2 {
			twoPools++
		}
		jobs := 0
		for _, w := range sc.Workloads {
			switch w.Kind {
			case KindInference:
				inference++
			case KindAnalytics:
				analytics++
			case KindTraining:
				jobs++
			}
		}
		if jobs == 2 {
			twoJobs++
		}
	}
	for _, k := range []string{FaultFailingDrive, FaultSlowDrive, FaultHotShard, FaultNodeLoss, FaultPortSaturation, FaultCapacityPressure, FaultWorkloadShift} {
		if kinds[k] == 0 {
			t.Errorf("no seed in 1..200 generated a %s fault", k)
		}
	}
	for name, n := range map[string]int{"two pools": twoPools, "inference": inference, "analytics": analytics, "two training jobs": twoJobs,
		"hot shard share under 0.3": subtleShard, "port under 1.15× its speed": subtlePort, "no fault": noFault} {
		if n == 0 {
			t.Errorf("no seed in 1..200 has %s", name)
		}
	}
}

func portSpeed(sc *Scenario, port string) float64 {
	host := strings.TrimPrefix(port, "sw/")
	for _, g := range sc.Topology.DataServers {
		if strings.HasPrefix(host, g.NamePrefix) {
			return g.PortGbps
		}
	}
	for _, g := range sc.Topology.Clients {
		if strings.HasPrefix(host, g.NamePrefix) {
			return g.PortGbps
		}
	}
	return 0
}

func TestGenerateScenarioIsDeterministic(t *testing.T) {
	a, err := GenerateScenario(42)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := GenerateScenario(42)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("seed 42 gave two different scenarios")
	}
	// Different seeds differ in more than their name and description.
	seen := map[string]uint64{}
	for seed := uint64(1); seed <= 200; seed++ {
		sc, _ := GenerateScenario(seed)
		sc.Name, sc.Description = "", ""
		y, err := MarshalScenario(sc)
		if err != nil {
			t.Fatal(err)
		}
		if prev, ok := seen[string(y)]; ok {
			t.Fatalf("seeds %d and %d gave the same scenario", prev, seed)
		}
		seen[string(y)] = seed
	}
}

// TestScenarioRoundTrip writes generated and shipped scenarios out and
// parses them back: the same scenario comes back.
func TestScenarioRoundTrip(t *testing.T) {
	var scs []*Scenario
	for seed := uint64(1); seed <= 50; seed++ {
		sc, err := GenerateScenario(seed)
		if err != nil {
			t.Fatal(err)
		}
		scs = append(scs, sc)
	}
	for _, n := range ScenarioNames() {
		scs = append(scs, mustLoad(t, n))
	}
	for _, sc := range scs {
		y, err := MarshalScenario(sc)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseScenario(bytes.NewReader(y), sc.Name)
		if err != nil {
			t.Fatalf("%s: written out, it does not parse back: %v\n%s", sc.Name, err, y)
		}
		if !reflect.DeepEqual(back, sc) {
			y2, _ := MarshalScenario(back)
			t.Fatalf("%s: parsed back to a different scenario:\n%s\nwant:\n%s", sc.Name, y2, y)
		}
	}
}

func TestLoadGeneratedScenario(t *testing.T) {
	sc, err := LoadScenario("generated:7")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := GenerateScenario(7)
	if !reflect.DeepEqual(sc, want) {
		t.Fatal("generated:7 loaded a scenario other than GenerateScenario(7)")
	}
	if sc.Name != "generated:7" {
		t.Errorf("name %q; want generated:7", sc.Name)
	}
	for _, bad := range []string{"generated:", "generated:x", "generated:-1"} {
		if _, err := LoadScenario(bad); err == nil || !strings.Contains(err.Error(), "not a seed") {
			t.Errorf("%s: %v; want an error saying it is not a seed", bad, err)
		}
	}
}

// TestGeneratedScenarioRuns steps the twin through generated scenarios for
// 90 simulated seconds, once as generated and once with every fault moved
// to start at 10 s, so that each fault's placement is exercised.
func TestGeneratedScenarioRuns(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4} {
		for _, early := range []bool{false, true} {
			sc, err := GenerateScenario(seed)
			if err != nil {
				t.Fatal(err)
			}
			if early {
				for i := range sc.Faults {
					f := &sc.Faults[i]
					if f.End != 0 {
						f.End = 10*time.Second + (f.End-f.Start)/60
					}
					f.Start = 10 * time.Second
				}
			}
			tw, err := New(sc, seed, epoch)
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			tw.Run(90)
			if tw.Elapsed() != 90*time.Second {
				t.Fatalf("seed %d: ran %s; want 90s", seed, tw.Elapsed())
			}
			st := tw.GPUStats()
			if !(st.AllocatedSeconds > 0) || st.UtilMean < 0 || st.UtilMean > 1 {
				t.Errorf("seed %d (faults early %v): GPU allocated %v s, utilisation %v", seed, early, st.AllocatedSeconds, st.UtilMean)
			}
		}
	}
}
