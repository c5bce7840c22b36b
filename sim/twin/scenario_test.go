package twin

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ballast-io/ballast/models"
)

func TestShippedScenarios(t *testing.T) {
	want := []string{"baseline", "capacity-pressure", "checkpoint-storm", "failing-drive", "hot-shard", "mixed", "node-loss", "port-saturation", "quiet-cluster", "readahead"}
	if got := strings.Join(ScenarioNames(), ","); got != strings.Join(want, ",") {
		t.Fatalf("shipped scenarios %s; want %s", got, strings.Join(want, ","))
	}
	for _, n := range want {
		sc, err := LoadScenario(n)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		if sc.Name != n {
			t.Errorf("scenario file %s.yaml is named %q", n, sc.Name)
		}
		tw, err := New(sc, 1, epoch)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		tw.Run(120)
	}
}

func TestLoadScenarioByPath(t *testing.T) {
	p := filepath.Join(t.TempDir(), "mine.yaml")
	if err := os.WriteFile(p, []byte(ampleStorage), 0o644); err != nil {
		t.Fatal(err)
	}
	sc, err := LoadScenario(p)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Name != "ample" || sc.Topology.DataServers[0].Drive.ReadMBps != 6500 {
		t.Fatalf("loaded %q with drive read %v MB/s; want ample with the 6500 MB/s default", sc.Name, sc.Topology.DataServers[0].Drive.ReadMBps)
	}
	if _, err := LoadScenario("no-such-scenario"); err == nil || !strings.Contains(err.Error(), "baseline") {
		t.Fatalf("unknown name: %v; want an error listing the shipped scenarios", err)
	}
	if _, err := LoadScenario(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Fatal("missing file loaded")
	}
}

func TestScenarioErrorsNameFieldAndValue(t *testing.T) {
	base := ampleStorage
	cases := []struct {
		name, from, to string
		want           []string
	}{
		{"unknown field", "pool: fast, nic_gbps: 400", "pool: fast, nic_gbps: 400, colour: red", []string{"colour"}},
		{"zero count", "count: 8, drives: 8", "count: 0, drives: 8", []string{"topology.data_servers[0].count", "0"}},
		{"bad pool", "{name: d, pool: fast", "{name: d, pool: slow", []string{"datasets[0].pool", "slow"}},
		{"bad kind", "kind: training", "kind: juggling", []string{"workloads[0].kind", "juggling"}},
		{"bad dataset", "dataset: d,", "dataset: e,", []string{"workloads[0].dataset", "e"}},
		{"negative rate", "bytes_per_sample: 100000", "bytes_per_sample: -5", []string{"workloads[0].bytes_per_sample", "-5"}},
		{"bad duration", "name: ample", "name: ample\ntick: soon", []string{"soon"}},
		{"bad placement", "file_size_mb: 1000", "file_size_mb: 1000, layout: {placement: scatter}", []string{"datasets[0].layout.placement", "scatter"}},
		{"no clients of group", "clients: gpu, dataset", "clients: cpu, dataset", []string{"workloads[0].clients", "cpu"}},
		// fail was parsed and silently ignored once; now it is refused.
		{"intensity above 1", "workloads:", "faults:\n  - {kind: slow_drive, device: ds00/nvme0n1, start: 1m, intensity: 1.5}\nworkloads:", []string{"faults[0].intensity", "1.5"}},
		{"graded node loss", "workloads:", "faults:\n  - {kind: node_loss, ds: ds00, start: 1m, intensity: 0.5}\nworkloads:", []string{"faults[0].intensity", "0.5", "node_loss"}},
		{"fail is not a field", "workloads:", "faults:\n  - {kind: failing_drive, device: ds00/nvme0n1, start: 1m, end: 2m, fail: false}\nworkloads:", []string{"faults[0].fail", "false", "not supported"}},
	}
	for _, c := range cases {
		y := strings.Replace(base, c.from, c.to, 1)
		if y == base {
			t.Fatalf("%s: replacement %q not found", c.name, c.from)
		}
		_, err := ParseScenario(strings.NewReader(y), "case")
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", c.name, err, w)
			}
		}
	}
	bad := strings.Replace(base, "workloads:", "faults:\n  - {kind: failing_drive, device: ds99/nvme0n1, start: 1m, end: 2m}\nworkloads:", 1)
	sc, err := ParseScenario(strings.NewReader(bad), "case")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(sc, 1, epoch); err == nil || !strings.Contains(err.Error(), "ds99/nvme0n1") {
		t.Fatalf("unknown fault device: %v; want an error naming it", err)
	}
}

func TestCapacityPressureFillsAndFailsCheckpoints(t *testing.T) {
	tw, err := New(mustLoad(t, "capacity-pressure"), 1, epoch)
	if err != nil {
		t.Fatal(err)
	}
	tw.Run(100 * 60)
	kinds := map[string]int{}
	failed := 0
	for _, r := range tw.Truth() {
		kinds[r.Kind]++
		if r.Kind == "checkpoint_burst" && r.Params["failed"] == "enospc" {
			failed++
		}
	}
	if kinds["device_full"] == 0 || failed == 0 {
		t.Fatalf("truth %v with %d ENOSPC checkpoints; want full devices and failed checkpoints", kinds, failed)
	}
	tw.Run(15 * 60)
	for _, r := range tw.Truth() {
		if r.Kind == "device_full" && r.End.IsZero() {
			t.Fatalf("device %s still full after the other tenant deleted its data", r.Subject.ID)
		}
	}
}

func TestApplyRejectsBadActions(t *testing.T) {
	tw := build(t, hotDevice)
	cases := []struct {
		a    models.Action
		want string
	}{
		{act(models.ActionMoveStripe, models.SubjectStripe, "d/shard-99999#0", nil), "no stripe"},
		{act(models.ActionMoveStripe, models.SubjectDevice, "ds00/nvme0n1", nil), "subject of kind"},
		{act(models.ActionMoveStripe, models.SubjectStripe, "d/shard-00000#0", map[string]string{"to": "ds00/nvme0n1"}), "already on"},
		{act(models.ActionMoveStripe, models.SubjectStripe, "d/shard-00000#0", map[string]string{"to": "nowhere"}), "no device"},
		{act(models.ActionSetReadAhead, models.SubjectClient, "gpu00", map[string]string{"read_ahead_kb": "lots"}), "read_ahead_kb"},
		{act(models.ActionSetReadAhead, models.SubjectClient, "gpu99", map[string]string{"read_ahead_kb": "1024"}), "no client"},
		{act(models.ActionThrottleMigration, models.SubjectCluster, "all", map[string]string{"mbps": "-1"}), "mbps"},
		{act("reboot_everything", models.SubjectCluster, "all", nil), "unknown action kind"},
	}
	for _, c := range cases {
		err := tw.Apply(c.a)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %v: error %v; want one mentioning %q", c.a.Kind, c.a.Subject, err, c.want)
		}
	}
	dry := act(models.ActionEvacuateDevice, models.SubjectDevice, "ds00/nvme0n1", nil)
	dry.DryRun = true
	if err := tw.Apply(dry); err == nil {
		t.Fatal("a dry-run action was applied")
	}
}

func TestPromoteSpareReplacesDevice(t *testing.T) {
	y := strings.Replace(hotDevice, "drives: 2, pool: fast", "drives: 2, spares: 1, pool: fast", 1)
	tw := build(t, y)
	tw.Run(30)
	if err := tw.Apply(act(models.ActionPromoteSpare, models.SubjectDevice, "ds01/nvme0n1", nil)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3600 && len(tw.migQueue) > 0; i++ {
		tw.Step()
	}
	old, sp := tw.findDevice("ds01/nvme0n1"), tw.findDevice("ds01/nvme2n1")
	if !tw.dev[old].retired || tw.dev[old].used > 1 {
		t.Fatalf("replaced device: retired %v, %.0f bytes left", tw.dev[old].retired, tw.dev[old].used)
	}
	if tw.dev[sp].spare || tw.dev[sp].used < 1e9 {
		t.Fatalf("spare: still spare %v, holds %.0f bytes", tw.dev[sp].spare, tw.dev[sp].used)
	}
	if hs, _ := tw.Smart("ds01"); hs[2].DataUnitsWritten*512000 < tw.dev[sp].used*0.99 {
		t.Fatalf("spare wrote %.0f bytes by SMART but holds %.0f", hs[2].DataUnitsWritten*512000, tw.dev[sp].used)
	}
}

// A spare brought online joins its pool while a capacity_pressure fault
// fills that pool: the fill must reach the new device too, not index past
// the devices the pool had when the fault began (generated:9 crashed so).
func TestSpareOnlineDuringCapacityPressure(t *testing.T) {
	y := strings.Replace(hotDevice, "drives: 2, pool: fast", "drives: 2, spares: 1, pool: fast", 1)
	y = strings.Replace(y, "faults:\n", "faults:\n  - {kind: capacity_pressure, pool: fast, mbps: 800, start: 0s, end: 60s}\n", 1)
	tw := build(t, y)
	tw.Run(10)
	if err := tw.SetDeviceState(tw.DeviceID("ds01/nvme2n1"), "online"); err != nil {
		t.Fatal(err)
	}
	tw.Run(60)
	sp := tw.findDevice("ds01/nvme2n1")
	if tw.dev[sp].spare {
		t.Fatal("ds01/nvme2n1 is still a spare")
	}
	if u := tw.dev[sp].used; u > 1 {
		t.Fatalf("the fault ended, yet the new device holds %.0f bytes of its fill", u)
	}
}

// TestFaultIntensity: intensity grades what a fault does, not what the
// scenario says: a slow drive at intensity 0.5 of factor 0.2 runs at 0.6 of
// its speed, a hot shard at 0.4 of share 0.5 takes 0.2 of the picks, and
// the scenario (what --print-scenario writes) keeps its fields.
func TestFaultIntensity(t *testing.T) {
	y := strings.Replace(ampleStorage, "workloads:", `faults:
  - {kind: slow_drive, device: ds00/nvme0n1, start: 0s, factor: 0.2, intensity: 0.5}
  - {kind: hot_shard, dataset: d, files: [3], share: 0.5, start: 0s, intensity: 0.4}
workloads:`, 1)
	sc, err := ParseScenario(strings.NewReader(y), "case")
	if err != nil {
		t.Fatal(err)
	}
	tw, err := New(sc, 1, epoch)
	if err != nil {
		t.Fatal(err)
	}
	tw.Run(2)
	if h := tw.dev[tw.findDevice("ds00/nvme0n1")].health; math.Abs(h-0.6) > 1e-12 {
		t.Errorf("slow drive at intensity 0.5 of factor 0.2: speed %v; want 0.6", h)
	}
	hot := 0
	for _, j := range tw.jobs {
		for _, h := range j.hot {
			hot++
			if math.Abs(h.share-0.2) > 1e-12 {
				t.Errorf("hot shard at intensity 0.4 of share 0.5: share %v; want 0.2", h.share)
			}
		}
	}
	if hot == 0 {
		t.Errorf("the hot shard never took effect")
	}
	if f := sc.Faults[0]; f.Factor != 0.2 || f.Intensity != 0.5 || sc.Faults[1].Share != 0.5 {
		t.Errorf("the scenario changed: %+v, %+v", f, sc.Faults[1])
	}
	g := Fault{Kind: FaultWorkloadShift, Factor: 3, Intensity: 0.25}.Graded()
	if g.Factor != 1.5 {
		t.Errorf("workload shift ×3 at intensity 0.25: factor %v; want 1.5", g.Factor)
	}
}
