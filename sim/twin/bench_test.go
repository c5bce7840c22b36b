package twin

import (
	"io"
	"testing"
	"time"
)

// benchScenario builds a cluster of nDS data servers × drives NVMe drives
// and nodes GPU nodes × 8 GPUs running one training job with periodic
// checkpoints, a hot shard and a failing drive, so that every code path of
// a tick runs.
func benchScenario(nDS, drives, nodes int) *Scenario {
	sc := &Scenario{
		Name:     "bench",
		Duration: time.Hour,
		Topology: Topology{
			DataServers: []DSGroup{{Count: nDS, Drives: drives, Spares: 1, Pool: "fast"}},
			Clients:     []ClientGroup{{Count: nodes, GPUs: 8}},
		},
		Datasets: []Dataset{{Name: "imagenet", Pool: "fast", Files: 256 * nDS, FileSizeMB: 1000}},
		Workloads: []Workload{{
			Name: "train", Kind: KindTraining, Clients: "gpu", Dataset: "imagenet",
			SamplesPerSec: 2000, BytesPerSample: 500000,
			Checkpoint: &Checkpoint{SizeGB: 30 * float64(nodes), Interval: 10 * time.Minute, Jitter: 30 * time.Second},
		}},
		Faults: []Fault{
			{Kind: FaultHotShard, Dataset: "imagenet", Files: []int{17}, Share: 0.3, Start: 5 * time.Minute},
			{Kind: FaultFailingDrive, Device: hostName("ds", 3, nDS) + "/nvme2n1", Start: time.Minute, End: 50 * time.Minute},
		},
	}
	sc.applyDefaults()
	if err := sc.validate(); err != nil {
		panic(err)
	}
	return sc
}

func benchTwin(b *testing.B, nDS, drives, nodes int) {
	tw, err := New(benchScenario(nDS, drives, nodes), 1, time.Unix(0, 0))
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 120; i++ { // warm up: fill queues, create records
		tw.Step()
	}
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	for i := 0; i < b.N; i++ {
		tw.Step()
	}
	wall := time.Since(start).Seconds()
	b.ReportMetric(float64(b.N)*tw.dt/wall, "sim-s/wall-s")
	// the benchmark is single-threaded, so CPU time is the time on one
	// core, whatever else the machine runs
	if cpu := (cpuTime() - cpu0).Seconds(); cpu > 0 {
		b.ReportMetric(float64(b.N)*tw.dt/cpu, "sim-s/cpu-s")
	}
}

// BenchmarkTwin16DS8NVMe64GPU is the small target cluster of issue 3.
func BenchmarkTwin16DS8NVMe64GPU(b *testing.B) { benchTwin(b, 16, 8, 8) }

// BenchmarkTwin128DS24NVMe1024GPU is the large cluster of issue 3.
func BenchmarkTwin128DS24NVMe1024GPU(b *testing.B) { benchTwin(b, 128, 24, 128) }

// BenchmarkRenderNode measures one scrape of a data server and of a client
// of the baseline scenario.
func BenchmarkRenderNode(b *testing.B) {
	sc, err := LoadScenario("baseline")
	if err != nil {
		b.Fatal(err)
	}
	tw, err := New(sc, 1, time.Unix(0, 0))
	if err != nil {
		b.Fatal(err)
	}
	tw.Run(60)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, n := range []string{"ds03", "gpu03"} {
			if err := tw.RenderNode(n, io.Discard); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkLayoutStats measures building the clients' LAYOUTSTATS batches
// every 10 simulated seconds (the demo's cadence) on the baseline scenario.
func BenchmarkLayoutStats(b *testing.B) {
	sc, err := LoadScenario("baseline")
	if err != nil {
		b.Fatal(err)
	}
	tw, err := New(sc, 1, time.Unix(0, 0))
	if err != nil {
		b.Fatal(err)
	}
	tw.Run(600)
	tw.LayoutStats()
	b.ResetTimer()
	n := 0
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		tw.Run(10)
		b.StartTimer()
		for _, bt := range tw.LayoutStats() {
			n += len(bt.Reports)
		}
	}
	b.ReportMetric(float64(n)/float64(b.N), "reports/op")
}
