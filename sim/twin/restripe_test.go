package twin

import (
	"errors"
	"strings"
	"testing"
)

// hotWideFile: one file of two components takes 60 % of a job's reads
// (9.6 of 16 GB/s, on two drives of 2 GB/s); 8 data servers × 2 drives
// share the rest.
const hotWideFile = `
name: hot-wide-file
topology:
  data_servers: [{count: 8, drives: 2, pool: fast, drive: {read_mbps: 2000}}]
  clients: [{count: 2, gpus: 8}]
datasets: [{name: d, pool: fast, files: 512, file_size_mb: 1000, layout: {stripe_count: 2}}]
workloads:
  - {name: j, kind: training, clients: gpu, dataset: d, samples_per_sec: 2000, bytes_per_sample: 500000, prefetch_mb: 512}
faults:
  - {kind: hot_shard, dataset: d, files: [5], share: 0.6}
migration: {mbps: 3000}
`

// userMaxMean runs n ticks and returns max ÷ mean of the user bytes the
// devices carried in them.
func userMaxMean(tw *Twin, n int64) float64 {
	a := tw.DeviceLoads()
	tw.Run(n)
	b := tw.DeviceLoads()
	sum, mx := 0.0, 0.0
	for d := range b {
		l := b[d].UserBytes - a[d].UserBytes
		sum += l
		mx = max(mx, l)
	}
	return mx / (sum / float64(len(b)))
}

func ids(tw *Twin) []string {
	out := make([]string, 0, len(tw.dev))
	for _, d := range tw.Devices() {
		out = append(out, d.ID)
	}
	return out
}

// A file hotter than any device can carry spreads its reads over the
// components of its new width once its restripe commits: every device
// carries its share, and the GPUs the hot file starved recover.
func TestRestripeSpreadsLoad(t *testing.T) {
	tw := build(t, hotWideFile)
	file := tw.files[tw.datasets[0].firstFile+5].name
	tw.Run(60)
	before := userMaxMean(tw, 120)
	gpuBefore := gpuUtil(tw, 60, "gpu")
	if before < 3 {
		t.Fatalf("max/mean device load %.2f before the restripe; the test needs the hot file to dominate two devices", before)
	}
	gen, comps, err := tw.FileLayout(file)
	if err != nil {
		t.Fatal(err)
	}
	from := []string{comps[0].DeviceID, comps[1].DeviceID}
	to := ids(tw) // all 16 devices
	if _, _, err := tw.StartRestripe(file, gen, from, to, 0, false, "rs1"); err != nil {
		t.Fatal(err)
	}
	// before the commit the layout and its load stay as they were
	if _, c2, _ := tw.FileLayout(file); len(c2) != 2 {
		t.Fatalf("the layout has %d components before the commit; want 2", len(c2))
	}
	if err := tw.CommitRestripe(file, from, to, gen); err == nil || errors.Is(err, ErrStale) {
		t.Fatalf("commit before the read-back: got %v; want a refusal that is not stale", err)
	}
	done := false
	for i := 0; i < 300 && !done; i++ {
		tw.Step()
		if _, copied, err := tw.StartRestripe(file, gen, from, to, 0, false, "rs1"); err != nil {
			t.Fatal(err)
		} else if copied {
			done, err = tw.VerifyRestripe(file, to)
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	if !done {
		t.Fatal("the restripe was not copied and read back in 300 s")
	}
	if err := tw.CommitRestripe(file, from, to, gen+1); !errors.Is(err, ErrStale) {
		t.Fatalf("commit on a wrong generation: got %v; want ErrStale", err)
	}
	usedBefore := 0.0
	for d := range tw.dev {
		usedBefore += tw.dev[d].used
	}
	if err := tw.CommitRestripe(file, from, to, gen); err != nil {
		t.Fatal(err)
	}
	if err := tw.CommitRestripe(file, from, to, gen); err != nil {
		t.Fatalf("a repeated commit: %v; want nil (idempotent)", err)
	}
	gen2, c2, _ := tw.FileLayout(file)
	if len(c2) != 16 || gen2 != gen+1 {
		t.Fatalf("after the commit: %d components at generation %d; want 16 at %d", len(c2), gen2, gen+1)
	}
	handles := map[string]bool{}
	for _, c := range append(comps, c2...) {
		if handles[c.Handle] {
			t.Fatalf("handle %s used twice across the old and new components", c.Handle)
		}
		handles[c.Handle] = true
	}
	if err := tw.AbortRestripe(file, to); err == nil {
		t.Fatal("abort after the commit succeeded; want a refusal")
	}
	if err := tw.CleanupRestripe(file, to); err != nil {
		t.Fatal(err)
	}
	usedAfter := 0.0
	for d := range tw.dev {
		usedAfter += tw.dev[d].used
	}
	// the old components' 1000 MB are freed (writes of checkpoints aside:
	// this scenario has none)
	if diff := usedBefore - usedAfter; diff < 0.99e9 || diff > 1.01e9 {
		t.Errorf("cleanup freed %.0f bytes; want the old components' 1e9", diff)
	}
	for _, id := range from {
		cs, _ := tw.DeviceComponents(id)
		n := 0
		for _, c := range cs {
			if c.File == file {
				n++
			}
		}
		if n != 1 {
			t.Errorf("device %s lists %d components of %s after the cleanup; want its one new component", id, n, file)
		}
	}
	tw.Run(60)
	after := userMaxMean(tw, 120)
	gpuAfter := gpuUtil(tw, 60, "gpu")
	if after > 1.3 {
		t.Errorf("max/mean device load %.2f → %.2f; want the file's reads spread (≤ 1.3)", before, after)
	}
	if gpuAfter < gpuBefore+0.05 {
		t.Errorf("GPU utilisation %.3f → %.3f; want it to rise", gpuBefore, gpuAfter)
	}
	if testing.Verbose() {
		t.Logf("max/mean %.2f → %.2f, GPU utilisation %.3f → %.3f", before, after, gpuBefore, gpuAfter)
	}
}

// An aborted restripe frees what it copied and leaves the layout alone.
func TestRestripeAbortFreesCopy(t *testing.T) {
	tw := build(t, hotWideFile)
	file := tw.files[tw.datasets[0].firstFile+5].name
	tw.Run(10)
	gen, comps, _ := tw.FileLayout(file)
	from := []string{comps[0].DeviceID, comps[1].DeviceID}
	to := ids(tw)[:6]
	for _, c := range from {
		if !strings.Contains(strings.Join(to, ","), c) {
			to = append(to, c)
		}
	}
	used := func() float64 {
		s := 0.0
		for d := range tw.dev {
			s += tw.dev[d].used
		}
		return s
	}
	u0 := used()
	if _, _, err := tw.StartRestripe(file, gen, from, to, 0, false, "rs2"); err != nil {
		t.Fatal(err)
	}
	cs, _ := tw.DeviceComponents(from[0])
	for _, c := range cs {
		if c.File == file && !c.Busy {
			t.Errorf("component of %s not busy while it restripes", file)
		}
	}
	tw.Run(2)
	if used() <= u0 {
		t.Fatal("the restripe copied nothing in 2 s; the test needs it under way")
	}
	if err := tw.AbortRestripe(file, to); err != nil {
		t.Fatal(err)
	}
	if d := used() - u0; d > 1 || d < -1 {
		t.Errorf("after the abort %.0f bytes more are used; want the copy freed", d)
	}
	if g, c, _ := tw.FileLayout(file); g != gen || len(c) != 2 || c[0].Busy {
		t.Errorf("after the abort: generation %d, %d components, busy %v; want %d, 2, not busy", g, len(c), c[0].Busy, gen)
	}
}
