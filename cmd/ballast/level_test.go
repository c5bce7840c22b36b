package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestMDSStartedDuringStarvationKeepsTheFedLevel: an mds starts while two
// GPUs have been starved at 0.5 for 5 minutes; the 25 minutes before, fed,
// they read 1 − |N(0, 0.02)| (the host's gaps between steps), as the
// store's history shows. The loss it charges (to not-storage: no storage
// path is known) is counted against their fed level, the median of their
// fed readings (≈ 0.986), not against their highest reading (≈ 1.000),
// which would charge the gaps between steps as loss for as long as the
// starvation lasts.
func TestMDSStartedDuringStarvationKeepsTheFedLevel(t *testing.T) {
	t.Parallel() // mostly waiting
	dir := t.TempDir()
	cfg := filepath.Join(dir, "mds.yaml")
	if err := os.WriteFile(cfg, []byte("role: mds\nscrape:\n  interval: 1s\n  timeout: 1s\npipeline:\n  tick: 1s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startMDS(t, filepath.Join(dir, "data"), "--config", cfg)
	r := rand.New(rand.NewPCG(7, 8))
	now := time.Now()
	var b strings.Builder
	var fed []float64
	line := func(g int, v float64, at time.Time) {
		fmt.Fprintf(&b, "ballast_gpu_utilization_ratio{node=\"gpu00\",gpu=\"%d\",instance=\"gpu00:9752\"} %.6f %d\n", g, v, at.UnixMilli())
	}
	for s := 30 * 60; s > 0; s-- {
		at := now.Add(-time.Duration(s) * time.Second)
		for g := range 2 {
			v := 0.5
			if s > 5*60 {
				v = 1 - min(0.1, math.Abs(r.NormFloat64())*0.02)
				fed = append(fed, v)
			}
			line(g, v, at)
		}
	}
	p.importText(t, b.String())
	sort.Float64s(fed)
	median := fed[len(fed)/2]
	// starved readings every second from now on
	start := time.Now()
	for time.Since(start) < 15*time.Second {
		b.Reset()
		for g := range 2 {
			line(g, 0.5, time.Now())
		}
		p.importText(t, b.String())
		time.Sleep(time.Second)
	}
	sps := p.rawSamples(t, `ballast_gpu_lost_seconds_total{cause="not-storage"}`, start)
	if len(sps) < 5 {
		t.Fatalf("%d samples of the not-storage loss in 15 s; want one per tick\n%s", len(sps), p.logs)
	}
	first, last := sps[0], sps[len(sps)-1]
	secs := last.Timestamp.Sub(first.Timestamp).Seconds()
	level := 0.5 + float64(last.Value-first.Value)/secs/2
	t.Logf("fed readings: median %.4f, highest %.4f; level charged against %.4f over %.0f s", median, fed[len(fed)-1], level, secs)
	if math.Abs(level-median) > 0.004 {
		t.Errorf("loss counted against a level of %.4f; want the fed readings' median %.4f (their highest is %.4f)", level, median, fed[len(fed)-1])
	}
}
