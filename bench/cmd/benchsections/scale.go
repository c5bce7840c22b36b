package main

// The "scale" section (issue 16, docs/scale.md): the exposition and
// LAYOUTSTATS of a 1,000 DS × 24 NVMe + 1,000 GPU nodes × 8 GPUs fleet as
// the twin renders it, parsed by the ingest parser and written into the
// embedded store for a few 10 s rounds, in this process.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/ballast-io/ballast/cluster/pipeline"
	"github.com/ballast-io/ballast/collector/layoutstats"
	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/sim/twin"
	"github.com/ballast-io/ballast/storage"
	"github.com/ballast-io/ballast/storage/ingest"
)

const (
	scaleScenario = "bench/scenarios/scale-1000x24x1000.yaml"
	scaleRounds   = 6 // 10 s rounds written into the store (one simulated minute)
)

func scaleSection(string) (string, error) {
	sc, err := twin.LoadScenario(scaleScenario)
	if err != nil {
		return "", err
	}
	start := time.Now().Add(-time.Hour).Truncate(time.Minute)
	buildCPU := processCPU()
	tw, err := twin.New(sc, 1, start)
	if err != nil {
		return "", err
	}
	tw.Run(60) // fill queues and records
	buildCPU = processCPU() - buildCPU

	dir, err := os.MkdirTemp("", "benchscale-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	st, err := storage.OpenEmbedded(storage.Options{DataDir: filepath.Join(dir, "data"), Retention: 30 * 24 * time.Hour, LogLevel: "ERROR", DisableQueryCache: true})
	if err != nil {
		return "", err
	}
	defer st.Close(context.Background())

	type nodeKind struct {
		nodes, series, bytes int
	}
	kinds := map[string]*nodeKind{}
	// The default of 1M stripe keys is too few for this fleet (docs/scale.md).
	in, err := layoutstats.NewIngester(layoutstats.Options{MaxKeys: 16_000_000})
	if err != nil {
		return "", err
	}
	lsvc := layoutstats.NewService(in, st, pipeline.NewStripeHub(metrics.NewSet()))
	var lsCPU time.Duration
	var lsRows uint64
	writeFirst := time.Duration(0)
	var renderCPU, parseCPU, writeCPU, stepCPU time.Duration
	var renderWall, writeWall time.Duration
	var samples, lsReports, lsBatches int
	var buf bytes.Buffer
	var b ingest.Batch
	for round := 0; round < scaleRounds; round++ {
		c0 := processCPU()
		tw.Run(10)
		stepCPU += processCPU() - c0
		now := tw.Now()
		r0, c0 := st.RowsAdded(), processCPU()
		for _, bt := range tw.LayoutStats() {
			lsBatches++
			lsReports += len(bt.Reports)
			if _, err := lsvc.Accept(context.Background(), now, &bt); err != nil {
				return "", fmt.Errorf("cannot ingest LAYOUTSTATS of %s: %w", bt.ClientID, err)
			}
		}
		if err := lsvc.Tick(context.Background(), now); err != nil {
			return "", err
		}
		lsCPU += processCPU() - c0
		lsRows += st.RowsAdded() - r0
		w0CPU := writeCPU
		for _, n := range tw.Nodes() {
			buf.Reset()
			c0, w0 := processCPU(), time.Now()
			if err := tw.RenderNode(n.Name, &buf); err != nil {
				continue // a node the scenario took down
			}
			renderCPU += processCPU() - c0
			renderWall += time.Since(w0)
			lim := st.Limits(now)
			lim.DefaultTimestamp = now.UnixMilli()
			lim.ExtraLabels = []models.Label{{Name: "job", Value: "ballast-agents"}, {Name: "instance", Value: n.Name + ":9751"}}
			b.Reset()
			c0 = processCPU()
			if err := ingest.ParseText(buf.String(), &lim, &b); err != nil {
				return "", fmt.Errorf("cannot parse the exposition of %s: %w", n.Name, err)
			}
			parseCPU += processCPU() - c0
			c0, w0 = processCPU(), time.Now()
			if err := st.WriteBatch(&b); err != nil {
				return "", err
			}
			writeCPU += processCPU() - c0
			writeWall += time.Since(w0)
			samples += b.Len()
			if round == 0 {
				k := kinds[n.Role]
				if k == nil {
					k = &nodeKind{}
					kinds[n.Role] = k
				}
				k.nodes++
				k.series += b.Len()
				k.bytes += buf.Len()
			}
		}
		if round == 0 {
			writeFirst = writeCPU - w0CPU
		}
	}
	st.Flush()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	perRound := samples / scaleRounds

	var o strings.Builder
	o.WriteString("## Scale: the 1,000 DS × 24 NVMe + 1,000 GPU nodes × 8 GPUs fleet (issue 16)\n\n")
	o.WriteString(header("go run ./bench/cmd/benchsections -only scale   # twin, ingest parser and the embedded store in one process"))
	fmt.Fprintf(&o, "Scenario `%s` (simulated). One round = every node's exposition rendered by the twin, parsed by the ingest parser (`/api/v1/import/prometheus`'s), with `job` and `instance` added as a scrape does, and written into the embedded store; %d rounds 10 simulated seconds apart, after 60 s of warm-up. CPU is this process's (user+system); the twin's stepping is counted apart.\n\n", sc.Name, scaleRounds)
	o.WriteString("| node kind | nodes | series per node | exposition bytes per node |\n|---|---:|---:|---:|\n")
	for _, role := range []string{twin.RoleDS, twin.RoleClient} {
		if k := kinds[role]; k != nil && k.nodes > 0 {
			fmt.Fprintf(&o, "| %s | %d | %d | %d |\n", role, k.nodes, k.series/k.nodes, k.bytes/k.nodes)
		}
	}
	fmt.Fprintf(&o, "\n| per 10 s round | value |\n|---|---:|\n")
	fmt.Fprintf(&o, "| samples (= active series from agents) | %d |\n", perRound)
	fmt.Fprintf(&o, "| ingest rate at a 10 s scrape interval | %.0f samples/s |\n", float64(perRound)/10)
	fmt.Fprintf(&o, "| LAYOUTSTATS: client batches / per-file reports | %d / %d |\n", lsBatches/scaleRounds, lsReports/scaleRounds)
	fmt.Fprintf(&o, "| render CPU (twin exposition) | %.2f s (%.2f µs/sample) |\n", renderCPU.Seconds()/scaleRounds, float64(renderCPU.Microseconds())/float64(samples))
	fmt.Fprintf(&o, "| parse + validate CPU | %.2f s (%.2f µs/sample) |\n", parseCPU.Seconds()/scaleRounds, float64(parseCPU.Microseconds())/float64(samples))
	steady := writeCPU - writeFirst
	fmt.Fprintf(&o, "| store write (WriteBatch) CPU, first round (every series new) | %.2f s (%.2f µs/sample) |\n", writeFirst.Seconds(), float64(writeFirst.Microseconds())/float64(perRound))
	fmt.Fprintf(&o, "| store write CPU, later rounds (series known) | %.2f s (%.2f µs/sample); wall %.2f s per round over all rounds |\n", steady.Seconds()/(scaleRounds-1), float64(steady.Microseconds())/float64(samples-perRound), writeWall.Seconds()/scaleRounds)
	fmt.Fprintf(&o, "| LAYOUTSTATS ingest (difference, derive, store) | %.2f s CPU, %d samples stored |\n", lsCPU.Seconds()/scaleRounds, lsRows/scaleRounds)
	fmt.Fprintf(&o, "| LAYOUTSTATS stripe keys held after %d rounds | %d (default limit %d) |\n", scaleRounds, in.Keys(), layoutstats.DefaultMaxKeys)
	fmt.Fprintf(&o, "| twin physics, 10 simulated s | %.2f s CPU |\n", stepCPU.Seconds()/scaleRounds)
	fmt.Fprintf(&o, "\nAfter %d rounds: store on disk %.1f MiB (not merged yet), Go heap in use %.0f MiB, twin build and warm-up %.1f s CPU.\n",
		scaleRounds, float64(st.SizeBytes())/(1<<20), float64(ms.HeapInuse)/(1<<20), buildCPU.Seconds())
	return o.String(), nil
}

// processCPU is this process's user+system CPU time.
func processCPU() time.Duration { return statCPU("/proc/self/stat") }

// statCPU reads utime+stime of a /proc/PID/stat file.
func statCPU(path string) time.Duration {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	var ut, st int64
	fmt.Sscan(f[11], &ut)
	fmt.Sscan(f[12], &st)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}
