package twin

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ballast-io/ballast/models"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func parse(t *testing.T, y string) *Scenario {
	t.Helper()
	sc, err := ParseScenario(strings.NewReader(y), t.Name())
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// shipped loads the shipped scenario name and builds its twin, seed 1 at
// epoch.
func shipped(t *testing.T, name string) (*Scenario, *Twin) {
	t.Helper()
	sc, err := LoadScenario(name)
	if err != nil {
		t.Fatal(err)
	}
	tw, err := New(sc, 1, epoch)
	if err != nil {
		t.Fatal(err)
	}
	return sc, tw
}

// fedUtil is the least mean utilisation of GPUs that never wait for data:
// the host's step gaps take |N(0, stepGapSigma)| of each tick, 0.016 on
// average (fleet.go).
const fedUtil = 0.975

func build(t *testing.T, y string) *Twin {
	t.Helper()
	tw, err := New(parse(t, y), 7, epoch)
	if err != nil {
		t.Fatal(err)
	}
	return tw
}

// gpuUtil runs n ticks and returns the mean busy fraction of the GPUs of
// client nodes whose names start with prefix.
func gpuUtil(tw *Twin, n int, prefix string) float64 {
	sum, cnt := 0.0, 0
	for i := 0; i < n; i++ {
		tw.Step()
		for c := range tw.cli {
			if !strings.HasPrefix(tw.cli[c].name, prefix) {
				continue
			}
			for _, u := range tw.GPUUtil(tw.cli[c].name) {
				sum += u
				cnt++
			}
		}
	}
	return sum / float64(cnt)
}

// devUtil runs n ticks and returns the mean utilisation of device name.
func devUtil(tw *Twin, n int, name string) float64 {
	d := tw.findDevice(name)
	sum := 0.0
	for i := 0; i < n; i++ {
		tw.Step()
		sum += tw.dev[d].util
	}
	return sum / float64(n)
}

func act(kind models.ActionKind, sk models.SubjectKind, id string, params map[string]string) models.Action {
	return models.Action{ID: "test-" + string(kind) + "-" + id, Kind: kind, Subject: models.Subject{Kind: sk, ID: id}, Params: params, State: models.ActionApproved, Created: epoch}
}

func TestServedNeverExceedsLimits(t *testing.T) {
	for _, name := range []string{"mixed", "hot-shard", "checkpoint-storm", "capacity-pressure"} {
		ticks := 1500
		if name == "capacity-pressure" {
			ticks = 100 * 60 // until the scratch pool is full
		}
		_, tw := shipped(t, name)
		moved := false
		for i := 0; i < ticks; i++ {
			tw.Step()
			if i == 700 && !moved { // migrations must obey the limits too
				if err := tw.Apply(act(models.ActionEvacuateDevice, models.SubjectDevice, "ds01/nvme1n1", nil)); err != nil {
					t.Fatal(err)
				}
				moved = true
			}
			for r := range tw.resCap {
				if tw.resUsed[r] > tw.resCap[r]*(1+1e-12) {
					t.Fatalf("%s tick %d: resource %v served %g; capacity %g", name, i, tw.subjectOf(int(tw.causeOfRes(int32(r))), r), tw.resUsed[r], tw.resCap[r])
				}
			}
			for d := range tw.dev {
				if tw.dev[d].used > tw.dev[d].capBytes*(1+1e-12) {
					t.Fatalf("%s tick %d: device %s holds %g bytes; capacity %g", name, i, tw.dev[d].name, tw.dev[d].used, tw.dev[d].capBytes)
				}
			}
		}
	}
}

const ampleStorage = `
name: ample
topology:
  data_servers: [{count: 8, drives: 8, pool: fast, nic_gbps: 400}]
  clients: [{count: 2, gpus: 8}]
datasets: [{name: d, pool: fast, files: 512, file_size_mb: 1000}]
workloads:
  - {name: j, kind: training, clients: gpu, dataset: d, samples_per_sec: 1000, bytes_per_sample: 100000}
`

func TestAmpleStorageKeepsGPUsBusy(t *testing.T) {
	for _, tick := range []string{"1s", "250ms", "5s"} {
		tw := build(t, strings.Replace(ampleStorage, "name: ample", "name: ample\ntick: "+tick, 1))
		n := int(600 / tw.dt)
		if u := gpuUtil(tw, n, "gpu"); u < fedUtil {
			t.Fatalf("tick %s: GPU utilisation %.4f with storage far above demand; want ≥ %.3f", tick, u, fedUtil)
		}
		g := tw.GPUStats()
		if g.UtilMean < fedUtil {
			t.Fatalf("tick %s: GPUStats utilisation %.4f; want ≥ %.3f", tick, g.UtilMean, fedUtil)
		}
		if g.AllocatedSeconds < 16*590 || g.AllocatedSeconds > 16*610 {
			t.Fatalf("tick %s: %v allocated GPU-seconds in 600 s with 16 GPUs", tick, g.AllocatedSeconds)
		}
	}
}

// Two jobs read datasets in separate pools; one device of pool a is slowed
// to 2 % of its speed.
const twoPools = `
name: two-pools
topology:
  data_servers:
    - {name_prefix: a, count: 2, drives: 2, pool: pa}
    - {name_prefix: b, count: 2, drives: 2, pool: pb}
  clients:
    - {name_prefix: ga, count: 1, gpus: 8}
    - {name_prefix: gb, count: 1, gpus: 8}
datasets:
  - {name: da, pool: pa, files: 256, file_size_mb: 500}
  - {name: db, pool: pb, files: 256, file_size_mb: 500}
workloads:
  - {name: ja, kind: training, clients: ga, dataset: da, samples_per_sec: 2000, bytes_per_sample: 500000, prefetch_mb: 512}
  - {name: jb, kind: training, clients: gb, dataset: db, samples_per_sec: 2000, bytes_per_sample: 500000, prefetch_mb: 512}
faults:
  - {kind: slow_drive, device: a01/nvme0n1, factor: 0.02, start: 300s}
`

func TestSaturatedDeviceStarvesOnlyItsGPUs(t *testing.T) {
	tw := build(t, twoPools)
	beforeA, beforeB := 0.0, 0.0
	for i := 0; i < 300; i++ {
		tw.Step()
		beforeA += mean(tw.GPUUtil("ga00"))
		beforeB += mean(tw.GPUUtil("gb00"))
	}
	beforeA, beforeB = beforeA/300, beforeB/300
	afterA, afterB := 0.0, 0.0
	for i := 0; i < 300; i++ {
		tw.Step()
		if i >= 100 { // the prefetch queues drain first
			afterA += mean(tw.GPUUtil("ga00"))
			afterB += mean(tw.GPUUtil("gb00"))
		}
	}
	afterA, afterB = afterA/200, afterB/200
	if beforeA < fedUtil || beforeB < fedUtil {
		t.Fatalf("before the fault: utilisation %.3f (pool a) and %.3f (pool b); want both ≥ %.3f", beforeA, beforeB, fedUtil)
	}
	if afterA > 0.5 {
		t.Fatalf("GPUs reading the slowed device: utilisation %.3f; want it to drop below 0.5", afterA)
	}
	if afterB < fedUtil {
		t.Fatalf("GPUs of the other pool: utilisation %.3f; want ≥ %.3f", afterB, fedUtil)
	}
	g := tw.GPUStats()
	blamed := 0.0
	for _, s := range g.IdleBySubject {
		if s.Subject.ID == "a01/nvme0n1" {
			blamed += s.Seconds
		}
	}
	total := 0.0
	for _, v := range g.IdleByCause {
		total += v
	}
	if blamed < 0.9*total {
		t.Fatalf("idle GPU-seconds blamed on a01/nvme0n1: %.0f of %.0f; want ≥ 90 %%", blamed, total)
	}
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// The checkpoint pool has 8 drives of 1000 MB/s write, with an IOPS rating
// that makes the per-request overhead zero, so the achievable write
// bandwidth is 8 GB/s; the network (400 Gbit/s everywhere) is not a limit.
const syncCheckpoint = `
name: sync-checkpoint
topology:
  data_servers:
    - {name_prefix: d, count: 2, drives: 4, pool: data, nic_gbps: 400}
    - name_prefix: c
      count: 2
      drives: 4
      pool: ckpt
      nic_gbps: 400
      drive: {write_mbps: 1000, write_iops: 244140.625}
  clients: [{count: 1, gpus: 8, nic_gbps: 400}]
datasets: [{name: d, pool: data, files: 128, file_size_mb: 1000}]
workloads:
  - name: j
    kind: training
    clients: gpu
    dataset: d
    samples_per_sec: 1000
    bytes_per_sample: 100000
    checkpoint: {size_gb: 800, interval: 10m, first: 60s, mode: sync, pool: ckpt, queue_depth: 64, layout: {stripe_count: 8}}
`

func TestSyncCheckpointPausesForSizeOverBandwidth(t *testing.T) {
	tw := build(t, syncCheckpoint)
	for i := 0; i < 400; i++ {
		tw.Step()
	}
	want := 800e9 / 8e9 // seconds
	g := tw.GPUStats()
	pause := g.IdleByCause["checkpoint"] / 8
	if pause < 0.95*want || pause > 1.05*want {
		t.Fatalf("GPUs paused %.1f s for the checkpoint; want %.1f s ± 5 %%", pause, want)
	}
	var burst *TruthRecord
	for _, r := range tw.Truth() {
		if r.Kind == "checkpoint_burst" {
			burst = &r
			break
		}
	}
	if burst == nil || burst.End.IsZero() {
		t.Fatalf("no completed checkpoint_burst truth record: %+v", tw.Truth())
	}
	if d := burst.End.Sub(burst.Start).Seconds(); d < 0.95*want || d > 1.05*want {
		t.Fatalf("checkpoint_burst lasted %.1f s; want %.1f s ± 5 %%", d, want)
	}
	if u := gpuUtil(tw, 100, "gpu"); u < fedUtil {
		t.Fatalf("GPU utilisation after the checkpoint %.3f; want ≥ %.3f", u, fedUtil)
	}
}

// Three hot files land on the same device: stripe_count 1, round-robin
// over 8 devices, files 0, 8 and 16.
const hotDevice = `
name: hot-device
topology:
  data_servers: [{count: 4, drives: 2, pool: fast}]
  clients: [{count: 2, gpus: 8}]
datasets: [{name: d, pool: fast, files: 256, file_size_mb: 1000, layout: {stripe_count: 1}}]
workloads:
  - {name: j, kind: training, clients: gpu, dataset: d, samples_per_sec: 2000, bytes_per_sample: 500000, prefetch_mb: 512}
faults:
  - {kind: hot_shard, dataset: d, files: [0, 8, 16], share: 0.8}
migration: {mbps: 3000}
`

func TestMovingHotStripesRelievesDevice(t *testing.T) {
	tw := build(t, hotDevice)
	hot := tw.dev[tw.stripes[tw.files[0].first].dev].name
	for _, f := range []int{8, 16} {
		if got := tw.dev[tw.stripes[tw.files[f].first].dev].name; got != hot {
			t.Fatalf("file %d is on %s, not with file 0 on %s; the test's placement assumption broke", f, got, hot)
		}
	}
	tw.Run(200)
	devBefore := devUtil(tw, 300, hot)
	gpuBefore := gpuUtil(tw, 300, "gpu")
	if devBefore < 0.9 || gpuBefore > 0.9 {
		t.Fatalf("before the move: %s utilisation %.3f and GPU utilisation %.3f; want a saturated device starving GPUs", hot, devBefore, gpuBefore)
	}
	for i, to := range []string{"ds01/nvme1n1", "ds02/nvme1n1"} {
		id := tw.stripeID(tw.files[8*(i+1)].first)
		if err := tw.Apply(act(models.ActionMoveStripe, models.SubjectStripe, id, map[string]string{"to": to})); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 600 && len(tw.migQueue) > 0; i++ {
		tw.Step()
	}
	if len(tw.migQueue) > 0 {
		t.Fatalf("moves did not complete in 600 s")
	}
	if d := tw.dev[tw.stripes[tw.files[8].first].dev].name; d != "ds01/nvme1n1" {
		t.Fatalf("after the move file 8 is on %s; want ds01/nvme1n1", d)
	}
	tw.Run(100)
	devAfter := devUtil(tw, 300, hot)
	gpuAfter := gpuUtil(tw, 300, "gpu")
	if devAfter > devBefore-0.2 {
		t.Fatalf("%s utilisation %.3f → %.3f; want it to fall by more than 0.2", hot, devBefore, devAfter)
	}
	if gpuAfter < gpuBefore+0.1 {
		t.Fatalf("GPU utilisation %.3f → %.3f; want it to rise by more than 0.1", gpuBefore, gpuAfter)
	}
}

// readAheadRun measures client goodput in bytes/s of one workload at a
// given read-ahead.
func readAheadRun(t *testing.T, kind string, raKB string) float64 {
	y := `
name: ra
topology:
  data_servers: [{count: 4, drives: 1, pool: fast}]
  clients: [{name_prefix: c, count: 1, gpus: 0}]
datasets: [{name: d, pool: fast, files: 64, file_size_mb: 100000}]
workloads:
  - {name: w, kind: ` + kind + `, clients: c, dataset: d, streams: 2, queue_depth: 16, read_kb: 64}
`
	tw := build(t, y)
	if err := tw.Apply(act(models.ActionSetReadAhead, models.SubjectClient, "c00", map[string]string{"read_ahead_kb": raKB})); err != nil {
		t.Fatal(err)
	}
	tw.Run(50)
	before := tw.cli[0].readGood
	tw.Run(200)
	return (tw.cli[0].readGood - before) / 200
}

func TestReadAheadSequentialPlateauAndRandomWaste(t *testing.T) {
	ras := []string{"16", "64", "256", "1024", "4096", "16384", "65536", "262144"}
	var seq, rnd []float64
	for _, ra := range ras {
		seq = append(seq, readAheadRun(t, KindAnalytics, ra))
		rnd = append(rnd, readAheadRun(t, KindInference, ra))
	}
	for i := 1; i < len(ras); i++ {
		if seq[i] < seq[i-1]*0.99 {
			t.Errorf("sequential goodput fell from %.3g to %.3g B/s when read-ahead grew from %s to %s KiB", seq[i-1], seq[i], ras[i-1], ras[i])
		}
	}
	if seq[2] < 1.5*seq[0] {
		t.Errorf("sequential goodput %.3g B/s at 16 KiB vs %.3g at 256 KiB; want read-ahead to raise it", seq[0], seq[2])
	}
	last := len(ras) - 1
	if seq[last] > seq[last-1]*1.05 {
		t.Errorf("sequential goodput still rising at the largest read-ahead (%.3g → %.3g B/s); want a plateau", seq[last-1], seq[last])
	}
	// random 64 KiB reads: a window above the read size fetches bytes
	// nobody asked for
	for i := 2; i < len(ras); i++ {
		if rnd[i] > rnd[i-1]*1.01 {
			t.Errorf("random-read goodput rose from %.3g to %.3g B/s when read-ahead grew from %s to %s KiB", rnd[i-1], rnd[i], ras[i-1], ras[i])
		}
	}
	if rnd[last] > 0.5*rnd[1] {
		t.Errorf("random-read goodput %.3g B/s at 64 KiB vs %.3g at 64 MiB; want large read-ahead to waste most of it", rnd[1], rnd[last])
	}
	t.Logf("sequential B/s by read-ahead %v: %.3g", ras, seq)
	t.Logf("random B/s by read-ahead %v: %.3g", ras, rnd)
}

// An unthrottled scan reads pool a's only device flat out; a stripe of a
// second dataset on that device is then moved to pool b.
const migrationContention = `
name: migration
topology:
  data_servers:
    - {name_prefix: a, count: 1, drives: 1, pool: pa}
    - {name_prefix: b, count: 1, drives: 1, pool: pb}
  clients: [{name_prefix: c, count: 1, gpus: 0, read_ahead_kb: 16384}]
datasets:
  - {name: hot, pool: pa, files: 4, file_size_mb: 1000000, layout: {stripe_count: 1}}
  - {name: cold, pool: pa, files: 1, file_size_mb: 500000, layout: {stripe_count: 1}}
workloads:
  - {name: scan, kind: analytics, clients: c, dataset: hot, streams: 4}
migration: {mbps: 3000}
`

func TestMigrationSlowsUserIO(t *testing.T) {
	tw := build(t, migrationContention)
	tw.Run(30)
	rate := func(n int) float64 {
		b := tw.cli[0].readGood
		tw.Run(int64(n))
		return (tw.cli[0].readGood - b) / float64(n)
	}
	before := rate(60)
	if err := tw.Apply(act(models.ActionMoveStripe, models.SubjectStripe, "cold/shard-00000#0", map[string]string{"to": "b00/nvme0n1"})); err != nil {
		t.Fatal(err)
	}
	during := rate(60)
	if len(tw.migQueue) == 0 {
		t.Fatal("the move finished within a minute; the test needs it running")
	}
	if during > 0.9*before {
		t.Fatalf("scan read %.3g B/s before the move and %.3g B/s during it; want the copy to slow it by more than 10 %%", before, during)
	}
	if err := tw.Apply(act(models.ActionThrottleMigration, models.SubjectCluster, "all", map[string]string{"mbps": "100"})); err != nil {
		t.Fatal(err)
	}
	tw.Run(5)
	throttled := rate(60)
	if throttled < during*1.1 {
		t.Fatalf("throttling the copy to 100 MB/s left the scan at %.3g B/s (was %.3g); want it faster", throttled, during)
	}
}

const failingDrive = `
name: failing
topology:
  data_servers: [{count: 2, drives: 2, pool: fast}]
  clients: [{count: 1, gpus: 8}]
datasets: [{name: d, pool: fast, files: 64, file_size_mb: 1000}]
workloads:
  - {name: j, kind: training, clients: gpu, dataset: d, samples_per_sec: 1000, bytes_per_sample: 200000}
faults:
  - {kind: failing_drive, device: ds01/nvme1n1, start: 10m, end: 70m, media_errors: 4000, final_spare: 3, wear_rise: 6, temp_excursion_c: 40}
`

// failingSmart is the SMART output of failingDrive's degrading drive.
func failingSmart(t *testing.T, tw *Twin) SmartHealth {
	t.Helper()
	hs, err := tw.Smart("ds01")
	if err != nil {
		t.Fatal(err)
	}
	return hs[1]
}

func TestFailingDriveSMARTMoves(t *testing.T) {
	tw := build(t, failingDrive)
	get := func() SmartHealth { return failingSmart(t, tw) }
	tw.Run(600)
	h0 := get()
	// the spare a healthy drive drew from the real fleet (fleet.go)
	if h0.MediaErrors != 0 || h0.AvailableSpare < 90 || h0.CriticalWarning != 0 {
		t.Fatalf("healthy drive before onset: %+v", h0)
	}
	prev := h0
	maxTemp := 0.0
	sawReliability := false
	for m := 1; m <= 59; m++ {
		for i := 0; i < 60; i++ {
			tw.Step()
			maxTemp = max(maxTemp, tw.dev[tw.findDevice("ds01/nvme1n1")].smart.tempC)
		}
		h := get()
		if h.MediaErrors < prev.MediaErrors || h.ErrorLogEntries < prev.ErrorLogEntries || h.AvailableSpare > prev.AvailableSpare || h.PercentageUsed < prev.PercentageUsed {
			t.Fatalf("minute %d: SMART went backwards: %+v after %+v", m, h, prev)
		}
		// spare is consumed by retired blocks, so it holds until the
		// first media error
		if h.MediaErrors == 0 && h.AvailableSpare != h0.AvailableSpare {
			t.Fatalf("minute %d: available spare %v → %v with no media error", m, h0.AvailableSpare, h.AvailableSpare)
		}
		sawReliability = sawReliability || h.CriticalWarning&cwReliability != 0
		prev = h
	}
	if prev.MediaErrors < 0.8*4000*0.9 || prev.MediaErrors > 4000*1.1 {
		t.Errorf("media errors a minute before failure: %v; want about 4000 × (59/60)³", prev.MediaErrors)
	}
	if prev.ErrorLogEntries < prev.MediaErrors {
		t.Errorf("error log entries %v below media errors %v", prev.ErrorLogEntries, prev.MediaErrors)
	}
	// 3 % final spare, from h0's spare as media errors reach (59/60)³ of theirs
	if want := math.Floor(h0.AvailableSpare - (h0.AvailableSpare-3)*prev.MediaErrors/4000); prev.AvailableSpare < want-1 || prev.AvailableSpare > want+1 || prev.CriticalWarning&cwSpare == 0 {
		t.Errorf("available spare %v, critical warning %#x a minute before failure; want ≈ %v %% with the spare bit set", prev.AvailableSpare, prev.CriticalWarning, want)
	}
	if prev.PercentageUsed < h0.PercentageUsed+5 {
		t.Errorf("percentage used %v → %v; want a rise of about 6", h0.PercentageUsed, prev.PercentageUsed)
	}
	if !sawReliability {
		t.Errorf("reliability-degraded bit never set")
	}
	if maxTemp < ambientC+20 {
		t.Errorf("highest temperature %.1f °C; want an excursion of about +40 °C", maxTemp)
	}
	tw.Run(120)
	h := get()
	if h.Up {
		t.Fatalf("drive still up after its failure time: %+v", h)
	}
	if tw.GPUStats().IOErrors == 0 {
		t.Fatalf("no I/O errors after the drive failed")
	}
	kinds := map[string]bool{}
	for _, r := range tw.Truth() {
		if r.Subject.ID == "ds01/nvme1n1" {
			kinds[r.Kind] = true
		}
	}
	if !kinds["failing_drive"] || !kinds["drive_failed"] {
		t.Fatalf("truth for the drive: %v; want failing_drive and drive_failed", kinds)
	}
}

// TestReplacingFailingDriveAvoidsErrors replaces the degrading drive with
// a spare before it fails: its stripes move, and its failure then costs no
// I/O errors. (Evacuating it instead is refused here: every file already
// has a component on each of the four drives.)
func TestReplacingFailingDriveAvoidsErrors(t *testing.T) {
	tw := build(t, strings.Replace(failingDrive, "drives: 2, pool: fast", "drives: 2, spares: 1, pool: fast", 1))
	tw.Run(30 * 60)
	if err := tw.Apply(act(models.ActionEvacuateDevice, models.SubjectDevice, "ds01/nvme1n1", nil)); err == nil {
		t.Fatal("evacuating a drive whose files cover every drive of the pool was accepted")
	}
	if err := tw.Apply(act(models.ActionPromoteSpare, models.SubjectDevice, "ds01/nvme1n1", nil)); err != nil {
		t.Fatal(err)
	}
	tw.Run(45 * 60) // the drive fails at 70 min
	d := tw.findDevice("ds01/nvme1n1")
	if !tw.dev[d].failed {
		t.Fatal("the drive did not fail")
	}
	for s := range tw.stripes {
		if tw.stripes[s].dev == d && tw.stripes[s].bytes > 0 {
			t.Fatalf("stripe %s still on the evacuated drive", tw.stripeID(int32(s)))
		}
	}
	if e := tw.GPUStats().IOErrors; e != 0 {
		t.Fatalf("%v I/O errors after evacuating the drive before it failed; want 0", e)
	}
	if u := gpuUtil(tw, 60, "gpu"); u < fedUtil {
		t.Fatalf("GPU utilisation %.3f after the evacuated drive failed; want ≥ %.3f", u, fedUtil)
	}
}

// Two hot_shard faults on one dataset: while both are on, each takes its
// share of the picks; when the first ends, the second stays hot (once the
// second overwrote the first, and the first's end cleared both).
func TestTwoHotShardsOnOneDataset(t *testing.T) {
	tw := build(t, strings.Replace(hotDevice, "  - {kind: hot_shard, dataset: d, files: [0, 8, 16], share: 0.8}",
		"  - {kind: hot_shard, dataset: d, files: [3], share: 0.3, start: 0s, end: 120s}\n  - {kind: hot_shard, dataset: d, files: [5], share: 0.3, start: 60s}", 1))
	share := func() (f3, f5 float64) {
		j := &tw.jobs[0]
		n := 20000
		first := tw.datasets[j.dataset].firstFile
		for range n {
			switch tw.nextFile(j, streamSeqRead) - first {
			case 3:
				f3++
			case 5:
				f5++
			}
		}
		return f3 / float64(n), f5 / float64(n)
	}
	tw.Run(90)
	if a, b := share(); math.Abs(a-0.3) > 0.03 || math.Abs(b-0.3) > 0.03 {
		t.Fatalf("both faults on: files 3 and 5 get %.3f and %.3f of the picks; want 0.3 each", a, b)
	}
	tw.Run(60)
	if a, b := share(); a > 0.01 || math.Abs(b-0.3) > 0.03 {
		t.Fatalf("first fault over: files 3 and 5 get %.3f and %.3f of the picks; want 0 and 0.3", a, b)
	}
}

// TestEquallyLimitedStripesShareTheLoss: checkpoint-storm's bursts fill
// every DS NIC at once and its files are striped four-wide over the eight
// DSs, so every stripe of a stream falls short alike. The GPUs' idle time
// is the shortfall of all of them, split in proportion: every DS NIC gets
// a like part, not the first stripe's DS all of it (docs/scenarios.md).
func TestEquallyLimitedStripesShareTheLoss(t *testing.T) {
	_, tw := shipped(t, "checkpoint-storm")
	for tw.Elapsed() < 25*time.Minute {
		tw.Step()
	}
	byDS := map[string]float64{}
	for _, s := range tw.GPUStats().IdleBySubject {
		if s.Cause == "ds_nic" {
			byDS[s.Subject.ID] += s.Seconds
		}
	}
	lo, hi := math.Inf(1), 0.0
	for _, v := range byDS {
		lo, hi = min(lo, v), max(hi, v)
	}
	if len(byDS) != 8 || hi <= 0 || lo < hi/2 {
		t.Fatalf("ds_nic idle GPU-seconds by DS %v; want all eight DSs, none below half the largest", byDS)
	}
	// Each DS's minute record carries the whole idle of the stalls it
	// co-limited, more than its own part.
	co := 0
	for _, r := range tw.Truth() {
		if r.Kind == "gpu_idle" && r.Params["cause"] == "ds_nic" {
			if w, ok := r.Params["gpu_seconds_colimited"].(float64); ok && w > r.Params["gpu_seconds"].(float64) {
				co++
			}
		}
	}
	if co == 0 {
		t.Error("no ds_nic gpu_idle record with gpu_seconds_colimited above its gpu_seconds")
	}
}

// A paused held copy moves no bytes and keeps its place; resumed, it goes
// on from where it stopped.
func TestPausedCopyMovesNothing(t *testing.T) {
	tw := build(t, migrationContention)
	tw.Run(30)
	to := ""
	for _, d := range tw.Devices() {
		if d.Name == "b00/nvme0n1" {
			to = d.ID
		}
	}
	if _, _, err := tw.StartCopy("cold/shard-00000", 0, to, 0, false, "mv1"); err != nil {
		t.Fatal(err)
	}
	moved := func() float64 {
		m, _, err := tw.StartCopy("cold/shard-00000", 0, to, 0, false, "mv1")
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	tw.Run(10)
	m0 := moved()
	if m0 <= 0 {
		t.Fatal("the copy moved nothing in 10 s; the test needs it running")
	}
	if err := tw.PauseCopy("cold/shard-00000", 0, to, true); err != nil {
		t.Fatal(err)
	}
	tw.Run(60)
	if m := moved(); m != m0 {
		t.Fatalf("a paused copy moved from %.0f to %.0f bytes; want none", m0, m)
	}
	if err := tw.PauseCopy("cold/shard-00000", 0, to, false); err != nil {
		t.Fatal(err)
	}
	tw.Run(10)
	if m := moved(); m <= m0 {
		t.Fatalf("a resumed copy stayed at %.0f bytes; want it going on", m)
	}
}

// smallShards is ampleStorage with 100 MB shards read by two workers per
// GPU at 1 GB/s per GPU: each worker needs five shards a second.
const smallShards = `
name: small-shards
topology:
  data_servers: [{count: 8, drives: 8, pool: fast, nic_gbps: 400}]
  clients: [{count: 2, gpus: 8}]
datasets: [{name: d, pool: fast, files: 2048, file_size_mb: 100}]
workloads:
  - {name: j, kind: training, clients: gpu, dataset: d, samples_per_sec: 2000, bytes_per_sample: 500000, workers: 2, prefetch_mb: 1024}
`

// A data-loader worker goes on into its next shard within a tick, as a
// real one does, so storage far above demand keeps the GPUs busy however
// small the shards are against what a worker reads per second (the twin
// used to cap it at one shard per tick: 2 × 100 MB ÷ 1 GB/s = 0.2 here).
func TestLoaderReadsOnIntoItsNextShard(t *testing.T) {
	tw := build(t, smallShards)
	gpuUtil(tw, 60, "gpu") // the queues fill first
	if u := gpuUtil(tw, 300, "gpu"); u < 0.98 {
		t.Fatalf("GPU utilisation %.3f with 100 MB shards on ample storage; want ≥ 0.98", u)
	}
	// each shard opened once: 16 GPUs × 1 GB/s over 360 s in 100 MB shards
	opens := 0.0
	for c := range tw.cli {
		opens += tw.cli[c].opens
	}
	if want := 16 * 1e9 * 360 / 100e6; opens < 0.9*want || opens > 1.1*want+64 {
		t.Fatalf("%.0f files opened; want about %.0f", opens, want)
	}
	g := tw.GPUStats()
	for cause, sec := range g.IdleByCause {
		if cause != "loader" && sec > 1 {
			t.Fatalf("%.1f idle GPU-seconds blamed on %s with ample storage", sec, cause)
		}
	}
}

// tinyShards is a job no storage can feed: 10 MB shards at 1 GB/s per GPU
// and one worker, more shards a second than a worker opens (maxOpens), so
// the loader limits it; a drive is slowed for a minute in between.
const tinyShards = `
name: tiny-shards
topology:
  data_servers: [{count: 8, drives: 8, pool: fast, nic_gbps: 400}]
  clients: [{count: 2, gpus: 8}]
datasets: [{name: d, pool: fast, files: 4096, file_size_mb: 10, layout: {stripe_count: 1}}]
workloads:
  - {name: j, kind: training, clients: gpu, dataset: d, samples_per_sec: 2000, bytes_per_sample: 500000, workers: 1, prefetch_mb: 512}
faults:
  - {kind: slow_drive, device: ds01/nvme0n1, factor: 0.001, start: 60s, end: 120s}
`

// storageIdle sums the idle GPU-seconds the truth books on storage causes.
func storageIdle(g GPUStats) float64 {
	s := 0.0
	for cause, v := range g.IdleByCause {
		if cause != "loader" && cause != "checkpoint" {
			s += v
		}
	}
	return s
}

// A shortfall explains at most the GPU work it withheld: once the slowed
// drive is repaired, a job the loader limits is idle for the loader's
// sake, and what the drive withheld is charged at most once, never more
// than the prefetch queue could have held (the truth used to keep blaming
// the drive for all the idle after its last shortfall).
func TestStallChargesOnlyWithheldWork(t *testing.T) {
	tw := build(t, tinyShards)
	tw.Run(60)
	before := storageIdle(tw.GPUStats())
	tw.Run(70)
	during := storageIdle(tw.GPUStats()) - before
	if during < 1 {
		t.Fatalf("%.2f idle GPU-seconds blamed on storage while a drive ran at 0.1 %%; want some", during)
	}
	g0 := tw.GPUStats()
	tw.Run(300)
	g1 := tw.GPUStats()
	after := storageIdle(g1) - storageIdle(g0)
	loader := g1.IdleByCause["loader"] - g0.IdleByCause["loader"]
	// 16 GPUs, each owed at most its 512 MB queue at 1 GB/s
	if after > 16*0.512+1e-6 {
		t.Fatalf("%.1f idle GPU-seconds blamed on storage in the 300 s after the repair (%.1f on the loader); want ≤ %.1f", after, loader, 16*0.512)
	}
	if loader < 16*300*0.5 {
		t.Fatalf("%.1f idle GPU-seconds on the loader in 300 s of a loader-bound job; want most of its idle", loader)
	}
}

// A loader worker hung on a lost data server is withheld all it wanted,
// not only the rest of the shard it hangs on: the GPU idle of the hang is
// the lost server's, not the loader's.
func TestHangWithholdsAllTheWorkerWanted(t *testing.T) {
	tw := build(t, strings.Replace(smallShards, "workloads:", "faults:\n  - {kind: node_loss, ds: ds01, start: 60s, end: 180s}\nworkloads:", 1))
	tw.Run(60)
	g0 := tw.GPUStats()
	tw.Run(120)
	g1 := tw.GPUStats()
	down := g1.IdleByCause["node_down"] - g0.IdleByCause["node_down"]
	loader := g1.IdleByCause["loader"] - g0.IdleByCause["loader"]
	if down < 16*60 || loader > 0.02*down {
		t.Fatalf("while ds01 was lost: %.0f idle GPU-seconds on node_down, %.0f on the loader; want the hang's idle on node_down", down, loader)
	}
}

// oneSlowWorker is one GPU fed by four workers at 1 GB/s from 50 GB
// shards on drives of their own (stripe_count 1), so each worker stays on
// its first shard for the whole test.
const oneSlowWorker = `
name: one-slow-worker
topology:
  data_servers: [{count: 8, drives: 1, pool: fast, nic_gbps: 400}]
  clients: [{count: 1, gpus: 1}]
datasets: [{name: d, pool: fast, files: 8, file_size_mb: 50000, layout: {stripe_count: 1}}]
workloads:
  - {name: j, kind: training, clients: gpu, dataset: d, samples_per_sec: 2000, bytes_per_sample: 500000, workers: 4, prefetch_mb: 512}
`

// A data loader yields batches in order, one from each worker in turn, so
// one worker behind a slow drive holds the GPU to workers × its rate once
// the others' bounded prefetch is full, and the others read only what the
// GPU takes from them; the idle is the slow drive's (the twin used to let
// the others make up for it out of a shared queue: the GPU stayed busy).
func TestOneSlowWorkerHoldsTheGPUInOrder(t *testing.T) {
	tw := build(t, oneSlowWorker)
	tw.Step()
	j := &tw.jobs[0]
	slow := &tw.streams[j.first]
	d := tw.stripes[tw.files[slow.file].first].dev
	tw.dev[d].health = 0.01 // well below the worker's 250 MB/s
	tw.Run(30)              // the slow worker's prefetch drains, the others' fill
	if f := slow.file; tw.stripes[tw.files[f].first].dev != d {
		t.Fatalf("the slow worker left its shard; the test needs it on the slow drive")
	}
	g0 := tw.GPUStats()
	const n, w = 60, 4
	slowGot, consumed := 0.0, 0.0
	otherGot := make([]float64, w)
	for i := 0; i < n; i++ {
		tw.Step()
		slowGot += slow.got
		for k := 1; k < w; k++ {
			otherGot[k] += tw.streams[j.first+int32(k)].got
		}
		consumed += tw.gpus[j.gpus[0]].busy * j.perGPU * tw.dt
	}
	held := 512e6 / w // what the slow worker may have held at the start
	if limit := w * (slowGot + held); consumed > limit {
		t.Fatalf("the GPU consumed %.0f MB in %d s while the slow worker delivered %.0f MB; want ≤ %d × (that + its %.0f MB prefetch) = %.0f MB",
			consumed/1e6, n, slowGot/1e6, w, held/1e6, limit/1e6)
	}
	for k := 1; k < w; k++ {
		if limit := consumed/w + held + j.perGPU*tw.dt/w; otherGot[k] > limit {
			t.Fatalf("worker %d read %.0f MB while the GPU took %.0f MB from it; want ≤ %.0f MB (a full prefetch reads no further)",
				k, otherGot[k]/1e6, consumed/w/1e6, limit/1e6)
		}
	}
	g1 := tw.GPUStats()
	idle := float64(n) - consumed/j.perGPU
	onDrive := 0.0
	for _, s := range g1.IdleBySubject {
		if s.Cause == "device" && s.Subject.ID == tw.dev[d].name {
			onDrive += s.Seconds
			for _, s0 := range g0.IdleBySubject {
				if s0.Cause == s.Cause && s0.Subject == s.Subject {
					onDrive -= s0.Seconds
				}
			}
		}
	}
	if idle < n/2 || onDrive < 0.9*idle {
		t.Fatalf("%.1f idle GPU-seconds in %d s, %.1f of them blamed on the slow drive %s; want most of %d s idle, ≥ 90 %% on the drive",
			idle, n, onDrive, tw.dev[d].name, n)
	}
}

// chainTick runs oneSlowWorker's GPU with one worker (1 GB/s) whose
// prefetch is full and which finishes the last 350 MB of a shard on one
// drive, held at queueing multiplier hotQ (1: no queue), and goes on into
// a shard on another, idle drive within one tick, with its read-ahead
// scaled by raScale; it returns the twin, the worker, the hot drive and
// the read-ahead's subject.
func chainTick(t *testing.T, hotQ, raScale float64) (*Twin, *stream, int32, int32) {
	t.Helper()
	tw := build(t, strings.Replace(oneSlowWorker, "workers: 4", "workers: 1", 1))
	tw.Run(20) // the worker's prefetch fills
	j := &tw.jobs[0]
	st := &tw.streams[j.first]
	a, b := (st.file+1)%8, (st.file+2)%8 // shards the worker is not on
	st.file, st.pos, st.ahead = a, tw.files[a].size-350e6, []int32{b}
	hot := tw.stripes[tw.files[a].first].dev
	if tw.stripes[tw.files[b].first].dev == hot {
		t.Fatal("both shards on one drive; the test needs two")
	}
	tw.cli[st.client].ra *= raScale
	tw.dev[hot].qmul = hotQ
	tw.Step()
	return tw, st, hot, int32(tw.cliBase + slotsPerHost*int(st.client) + slotNICRx)
}

// A worker that spends most of a tick finishing a shard on a hot drive
// and runs out of time in its next shard on an idle one ran out of time on
// both: the shortfall is split over the two shards by the time the worker
// spent on each, the hot drive's part on the drive and the idle shard's
// on the read-ahead (docs/scenarios.md, step 9). The twin used to book it
// all on the read-ahead, as if the last shard alone had taken the tick.
// Either repair gives the whole shortfall back: the drive without its
// queue, or a read-ahead large enough for the idle shard.
func TestChainShortfallFollowsTheTimeSpent(t *testing.T) {
	tw, st, hot, ra := chainTick(t, 20, 1)
	if len(st.segs) != 2 || st.segs[0].time <= 0 || st.segs[1].time <= 0 {
		t.Fatalf("the worker read %d shards (times %v); want the hot one, then the idle one", len(st.segs), st.segs)
	}
	short := 0.0
	for _, l := range st.losses {
		short += l.amt
	}
	onDrive, onRA := 0.0, 0.0
	for _, l := range st.losses {
		switch {
		case l.cause == causeDevice && l.subj == hot:
			onDrive += l.amt
		case l.cause == causeReadAhead && l.subj == ra:
			onRA += l.amt
		default:
			t.Fatalf("shortfall of %.0f MB on %s %s; want it on the hot drive and the read-ahead only", l.amt/1e6, causeNames[l.cause], tw.subjectOf(int(l.cause), int(l.subj)))
		}
	}
	tHot, tIdle := st.segs[0].time, st.segs[1].time
	if short < 50e6 || tHot < 2*tIdle {
		t.Fatalf("shortfall %.0f MB, %.2f s on the hot shard, %.2f s on the idle one; the test needs a shortfall and most of the tick on the hot drive", short/1e6, tHot, tIdle)
	}
	if want := short * tHot / (tHot + tIdle); math.Abs(onDrive-want) > 1e-6*short {
		t.Errorf("%.1f MB of the %.1f MB shortfall on the hot drive, %.1f MB on the read-ahead; want %.1f MB on the drive (%.2f s of the worker's %.2f s)",
			onDrive/1e6, short/1e6, onRA/1e6, want/1e6, tHot, tHot+tIdle)
	}
	// what each repair gives back: all of it
	if _, st, _, _ := chainTick(t, 1, 1); st.lossAmt > 1e-6*short {
		t.Errorf("the drive without its queue: %.1f MB short; want the whole %.1f MB given back", st.lossAmt/1e6, short/1e6)
	}
	if _, st, _, _ := chainTick(t, 20, 4); st.lossAmt > 1e-6*short {
		t.Errorf("a 4× read-ahead: %.1f MB short; want the whole %.1f MB given back", st.lossAmt/1e6, short/1e6)
	}
}

// TestFlowCoefficients checks each flow's units per byte along its path:
// device time per byte at its devices (read at a copy's source, written at
// its destination), 1 at every network resource and at free space.
func TestFlowCoefficients(t *testing.T) {
	_, tw := shipped(t, "hot-shard")
	seen := map[uint8]int{}
	for i := 0; i < 720; i++ {
		if i == 650 {
			if err := tw.Apply(act(models.ActionEvacuateDevice, models.SubjectDevice, "ds01/nvme1n1", nil)); err != nil {
				t.Fatal(err)
			}
		}
		tw.Step()
		for fi := range tw.flows {
			f := &tw.flows[fi]
			if f.err >= 0 {
				continue
			}
			seen[f.src]++
			devs := 0
			for k := uint8(0); k < f.n; k++ {
				r := f.res[k]
				if int(r) >= len(tw.dev) {
					if got := f.coef(k); got != 1 {
						t.Fatalf("tick %d flow %d (src %d) resource %d at %d: %g units per byte, want 1", i, fi, f.src, r, k, got)
					}
					continue
				}
				write := f.write
				if f.src == srcMigration {
					write = devs > 0
				}
				devs++
				want := tw.devCoef(r, f.req, write)
				if got := f.coef(k); math.Abs(got-want) > 1e-12*want {
					t.Fatalf("tick %d flow %d (src %d) device %d at %d: %g s per byte, want %g", i, fi, f.src, r, k, got, want)
				}
			}
		}
	}
	if seen[srcStream] == 0 || seen[srcMigration] == 0 {
		t.Fatalf("flows seen by source %v: want streams and copies", seen)
	}
}

// TestFailingDriveEvidenceTime: the failing_drive truth record carries
// when the drive first differed in the exported SMART values (any of
// media errors, error-log entries, available spare, critical warning) and
// when it first logged an error, each the tick whose Smart output first
// showed it, in seconds after the onset.
func TestFailingDriveEvidenceTime(t *testing.T) {
	tw := build(t, failingDrive)
	get := func() SmartHealth { return failingSmart(t, tw) }
	tw.Run(590)
	h0 := get()
	var evidence, errAt time.Time
	for i := 0; i < 3600 && errAt.IsZero(); i++ {
		tick := tw.Now()
		tw.Step()
		h := get()
		differs := h.MediaErrors != h0.MediaErrors || h.ErrorLogEntries != h0.ErrorLogEntries
		if evidence.IsZero() && (differs || h.AvailableSpare != h0.AvailableSpare || h.CriticalWarning != h0.CriticalWarning) {
			evidence = tick
		}
		if errAt.IsZero() && differs {
			errAt = tick
		}
	}
	if evidence.IsZero() || errAt.IsZero() {
		t.Fatalf("the drive's SMART values never changed in the first hour of the fault")
	}
	var rec *TruthRecord
	all := tw.Truth()
	for i := range all {
		if all[i].Kind == "failing_drive" {
			rec = &all[i]
		}
	}
	if rec == nil {
		t.Fatal("no failing_drive truth record")
	}
	for param, want := range map[string]time.Time{"evidence_after_onset_s": evidence, "error_after_onset_s": errAt} {
		got, ok := rec.Params[param].(float64)
		if !ok {
			t.Fatalf("failing_drive params %v lack %s", rec.Params, param)
		}
		if w := want.Sub(rec.Start).Seconds(); got != w {
			t.Errorf("%s = %v; the Smart output first changed %v s after the onset", param, got, w)
		}
	}
}
