package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/ballast-io/ballast/sim"
)

// TestEvalReadAheadTargetsPerSeed: the section judges each target per seed
// against static-kernel-default of the same seed, takes the scenario's
// first training job as the starved one, and says "never" for a job that
// did not reach 95 %.
func TestEvalReadAheadTargetsPerSeed(t *testing.T) {
	rep := func(bps, reached, p99 float64, kept int) map[string]any {
		r := map[string]any{"changes": 3.0, "not_helped": float64(kept + 1), "rolled_back": 1.0, "not_helped_kept": float64(kept)}
		job := map[string]any{"name": "train", "kind": "training", "read_bytes_per_second": bps, "gpu_util": 0.9, "gpu_util_after_10m": 0.97}
		if reached >= 0 {
			job["gpu_util_95_reached_seconds"] = reached
		}
		other := map[string]any{"name": "train-edge", "kind": "training", "read_bytes_per_second": 1e12, "gpu_util": 0.3}
		inf := map[string]any{"name": "serve", "kind": "inference", "read_latency_p99_ms": p99, "amplification": 1.0}
		r["jobs"] = []any{job, other, inf}
		return map[string]any{"readahead_scores": r}
	}
	res := raResults{}
	res.add(1, sim.MethodRAKernel, rep(2e9, -1, 1.0, 0))
	res.add(1, sim.MethodBallast, rep(4e9, 240, 1.02, 0)) // meets every target
	res.add(2, sim.MethodRAKernel, rep(2e9, -1, 1.0, 0))
	res.add(2, sim.MethodBallast, rep(2.5e9, 900, 1.2, 1)) // misses every target
	var b bytes.Buffer
	writeReadAheadMarkdown(&b, "ballast eval readahead --seeds 2", "readahead", 30*time.Minute, res, 2)
	md := b.String()
	for _, want := range []string{
		"| training read throughput ÷ static-kernel-default's (≥ 1.5) | 2.00 | 1.25 | 1 of 2 |",
		"| training GPU utilisation ≥ 95 % within 10 min (s to reach it and stay) | 240 | 900 | 1 of 2 |",
		"| inference p99 read latency ÷ static-kernel-default's (≤ 1.05) | 1.020 | 1.200 | 1 of 2 |",
		"| changes that did not help and were not rolled back (0) | 0 | 1 | 1 of 2 |",
		"| static-kernel-default | 2.00 ± 0.00 | 1.00 ± 0.00 |",
		"| never |",
		"| static-nfsrahead | no run finished |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("section lacks %q:\n%s", want, md)
		}
	}
}
