package main

// The "durability" section (issue 10): ingest throughput of the embedded
// store with storage.durability wal against window, in one run.
//
// Each round starts a fresh `ballast mds --durability MODE` and pushes the
// same pre-rendered remote-write bodies (10k series, one sample each) with
// durWriters concurrent clients, timing until the last one is answered
// 204: with wal every answer waited for its WAL fsync. The modes alternate,
// durRounds rounds each, and the median counts, so a change in the
// machine's load during the run hits both.

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
)

const (
	durSeries  = 10000
	durSteps   = 100 // bodies, timestamps 10 s apart
	durWriters = 8   // like Prometheus' remote-write shards
	durRounds  = 5
)

type durRun struct {
	rate   float64 // samples/s
	cpuUS  float64 // mds CPU µs per sample
	fsyncs float64
}

func durabilitySection(ballast string) (string, error) {
	defer killAll()
	bodies := render(durSeries, durSteps, time.Now().Add(-time.Hour))
	total := durSeries * durSteps
	runs := map[string][]durRun{}
	modes := []string{"window", "wal"}
	for r := 0; r < durRounds; r++ {
		for _, mode := range modes {
			res, err := runIngest(ballast, []string{"--durability", mode}, bodies, total)
			if err != nil {
				return "", fmt.Errorf("%s: %w", mode, err)
			}
			runs[mode] = append(runs[mode], res)
		}
	}
	med := map[string]durRun{}
	for _, mode := range modes {
		rs := runs[mode]
		sort.Slice(rs, func(i, j int) bool { return rs[i].rate < rs[j].rate })
		med[mode] = rs[len(rs)/2]
	}
	ratio := med["wal"].rate / med["window"].rate
	var b strings.Builder
	b.WriteString("## Durability: wal against window (embedded store)\n\n")
	b.WriteString(header("make build && go run ./bench/cmd/benchsections -ballast bin/ballast -only durability"))
	fmt.Fprintf(&b, "Ingest through `/api/v1/write` of a fresh `ballast mds --durability MODE`: %d bodies of %d series (one sample each), %d concurrent clients, until the last 204; median of %d alternating rounds per mode. With `wal` each answer waits for the fsync of its WAL group.\n\n",
		durSteps, durSeries, durWriters, durRounds)
	b.WriteString("| mode | samples/s (median) | each round | mds CPU µs/sample | WAL fsyncs per run |\n|---|---|---|---|---|\n")
	for _, mode := range modes {
		var each []string
		for _, r := range runs[mode] {
			each = append(each, fmtNum(r.rate))
		}
		fsyncs := "—"
		if mode == "wal" {
			fsyncs = fmtNum(med[mode].fsyncs)
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %.2f | %s |\n", mode, fmtNum(med[mode].rate), strings.Join(each, ", "), med[mode].cpuUS, fsyncs)
	}
	fmt.Fprintf(&b, "\n`wal` / `window` throughput: **%.2f×** (target ≥ 0.8× at 10k series): %s. mds CPU per sample `wal` / `window`: %.2f× (less sensitive than throughput to other load on the machine).\n",
		ratio, verdict(ratio >= 0.8), med["wal"].cpuUS/med["window"].cpuUS)
	return b.String(), nil
}

// runIngest starts a fresh mds with flags, posts bodies from durWriters
// clients and measures throughput to the last answer and the mds's CPU per
// sample (plus its WAL fsyncs; NaN without a WAL).
func runIngest(ballast string, flags []string, bodies [][]byte, total int) (durRun, error) {
	data, err := os.MkdirTemp("", "benchingest-")
	if err != nil {
		return durRun{}, err
	}
	defer os.RemoveAll(data)
	port, err := freePort()
	if err != nil {
		return durRun{}, err
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	args := append([]string{"mds", "--listen", base[len("http://"):], "--data-dir", data, "--log-level", "warn"}, flags...)
	p, err := startProc("ballast", ballast, args...)
	if err != nil {
		return durRun{}, err
	}
	defer p.stop()
	if err := waitHTTP(base+"/readyz", time.Minute); err != nil {
		return durRun{}, err
	}
	cpu0 := p.cpu()
	start := time.Now()
	if err := postN(base+"/api/v1/write", bodies, durWriters); err != nil {
		return durRun{}, err
	}
	wall := time.Since(start)
	return durRun{
		rate:   float64(total) / wall.Seconds(),
		cpuUS:  float64((p.cpu() - cpu0).Microseconds()) / float64(total),
		fsyncs: metric(base, "ballast_storage_wal_fsyncs_total"),
	}, nil
}
