package main

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// readaheadSection measures the read-ahead throughput curve (issue 14,
// acceptance 2) on an ext4 loop device; the benchmark needs root and
// skips otherwise, which the section then says.
func readaheadSection(string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := []string{"test", "-run", "^$", "-bench", "BenchmarkReadAheadCurve", "-benchtime", "4x", "-v", "./cluster/agent/readahead"}
	out, err := run(ctx, nil, "go", cmd...)
	if err != nil {
		return "", err
	}
	if i := strings.Index(out, "--- SKIP"); i >= 0 {
		return "", fmt.Errorf("the benchmark skipped: %s", tail(out[i:]))
	}
	ls := parseBench(out)
	if len(ls) == 0 {
		return "", fmt.Errorf("no benchmark lines in:\n%s", tail(out))
	}
	var b strings.Builder
	b.WriteString("## Read-ahead throughput curve (issue 14)\n\n")
	b.WriteString(header("go " + strings.Join(cmd, " ")))
	b.WriteString("`BenchmarkReadAheadCurve` (cluster/agent/readahead/bench_test.go, root only): a 256 MiB file on ext4 on a loop device over a file of this machine's disk, its bdi's `read_ahead_kb` set to each value (every value once per round, in a new order each round, so that the load of a shared machine falls on all alike), the page cache of the file and of the loop's backing image dropped (`posix_fadvise(DONTNEED)`) before every run; 4 rounds. `sequential`: the whole file in 64 KiB reads; `random-pread`: 1,024 preads of 64 KiB at distinct random offsets; `random-mmap`: 2,048 distinct random 4 KiB pages touched through a shared mapping (how safetensors and `torch.load(mmap=True)` read model weights). `MB/s@KIB` is application bytes ÷ time at that `read_ahead_kb`; `dev/app@KIB` is bytes the loop device read ÷ bytes asked for; `KiB/io@KIB` is the mean size of the loop device's read I/Os (`/sys/block/loopN/stat`), which does not depend on the machine's load. Numbers on a shared VM disk are noisy run to run; the ratios between rows of one run are what the policy uses ([docs/readahead.md](docs/readahead.md)).\n\n")
	b.WriteString(benchTable(ls))
	seq128, ok1 := find(ls, "BenchmarkReadAheadCurve/sequential", "MB/s@128")
	best, bestRA := 0.0, ""
	for _, kb := range []string{"512", "2048", "8192", "15360"} {
		if v, ok := find(ls, "BenchmarkReadAheadCurve/sequential", "MB/s@"+kb); ok && v > best {
			best, bestRA = v, kb
		}
	}
	if ok1 && seq128 > 0 {
		fmt.Fprintf(&b, "\nSequential: the best value (%s KiB) reads %.2f× the 128 KiB default's throughput.", bestRA, best/seq128)
	}
	if a, ok := find(ls, "BenchmarkReadAheadCurve/sequential", "KiB/io@128"); ok {
		z, _ := find(ls, "BenchmarkReadAheadCurve/sequential", "KiB/io@15360")
		fmt.Fprintf(&b, " Its device reads grow from %.0f KiB (128 KiB read-ahead) to %.0f KiB (15 MiB) per I/O.", a, z)
	}
	r128, ok2 := find(ls, "BenchmarkReadAheadCurve/random-mmap", "dev/app@128")
	r15, ok3 := find(ls, "BenchmarkReadAheadCurve/random-mmap", "dev/app@15360")
	if ok2 && ok3 {
		fmt.Fprintf(&b, " Random through a mapping: the device reads %.1f× (128 KiB) to %.1f× (15 MiB) the bytes asked for.", r128, r15)
	}
	p128, ok4 := find(ls, "BenchmarkReadAheadCurve/random-pread", "dev/app@128")
	p15, ok5 := find(ls, "BenchmarkReadAheadCurve/random-pread", "dev/app@15360")
	if ok4 && ok5 {
		fmt.Fprintf(&b, " Random preads: %.2f× and %.2f× (Linux does not read ahead for reads it sees as random).", p128, p15)
	}
	b.WriteString("\n")
	return b.String(), nil
}
