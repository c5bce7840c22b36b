package main

// The "actuator" section (issue 11): how long ballast's rebalancer takes
// to plan for a 1,000 DS × 24 devices fleet with 10 M stripes and 10 hot
// devices, on one core, and its memory.

import (
	"context"
	"fmt"
	"strings"
	"time"
)

func actuatorSection(string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := []string{"test", "-run", "^$", "-bench", "BenchmarkRebalance10MStripes", "-benchtime", "3x", "-cpu", "1", "./actuator/plan"}
	out, err := run(ctx, nil, "go", cmd...)
	if err != nil {
		return "", err
	}
	ls := parseBench(out)
	cpu, ok := find(ls, "BenchmarkRebalance10MStripes", "cpu-ms/plan")
	if !ok {
		return "", fmt.Errorf("no cpu-ms/plan in the benchmark's output:\n%s", tail(out))
	}
	wall, _ := find(ls, "BenchmarkRebalance10MStripes", "wall-ms/plan")
	rss, _ := find(ls, "BenchmarkRebalance10MStripes", "peak-RSS-MiB")
	snap, _ := find(ls, "BenchmarkRebalance10MStripes", "snapshot-MiB")
	var b strings.Builder
	b.WriteString("## Remediation planning (issue 11)\n\n")
	b.WriteString(header("go " + strings.Join(cmd, " ")))
	b.WriteString("`BenchmarkRebalance10MStripes` (actuator/plan/bench_test.go): ballast's load-aware rebalancer (`plan.Rebalance`, what the engine runs for a pool with a hotspot) on a snapshot of 1,000 data servers × 24 devices in one pool and 10 M stripes (2.5 M files × 4 components of 256 MiB on four data servers, skewed heat), 10 of the devices hot (≈ 3× the mean load, the excess on 300 of their stripes) and named as the hotspot findings name them. Time per plan on one core (`-cpu 1`, GOMAXPROCS=1): wall, and the process's CPU time (user + system), the steadier figure on a shared machine; memory: the columnar snapshot and the test process's peak RSS (VmHWM: the snapshot, the plan and the generator's garbage). `moves`, `bytes/bound` (bytes ÷ the plan's lower bound) and `max/mean-after` (the pool's, predicted) describe the plan; the pool's max/mean stays above 1.05 because the skewed heat makes other devices busy that no finding names (the plan relieves only the named ones).\n\n")
	b.WriteString(benchTable(ls))
	fmt.Fprintf(&b, "\n| target | measured | |\n|---|---|---|\n")
	fmt.Fprintf(&b, "| planning 1,000 DS × 24 devices × 10 M stripes with 10 hot devices ≤ 1 s on one core | %.0f ms of CPU per plan (%.0f ms wall, load average in the header) | %s |\n", cpu, wall, verdict(cpu <= 1000))
	fmt.Fprintf(&b, "| peak memory | %.0f MiB peak RSS, %.0f MiB of it the snapshot | (no target) |\n", rss, snap)
	return b.String(), nil
}
