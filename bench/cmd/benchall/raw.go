package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/encoding"
	vmstorage "github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"
)

// precisionBits is what VictoriaMetrics' own insert path uses: lossless.
const precisionBits = 64

// ingestResult is one ingest path on one dataset.
type ingestResult struct {
	Samples  int           // samples sent
	Acked    int           // samples acknowledged (204, or AddRows returned)
	Elapsed  time.Duration // first send to last acknowledgement
	Stored   int64         // samples found in the store afterwards; -1 if not counted
	PeakRSS  int64         // bytes (VmHWM) of the server process; 0 for in-process
	Note     string        // anything the reader must know about this number
	Err      error
	Searched time.Duration // time from the last ack until all rows were found
	// CPU is the CPU time the storing process used while ingesting: the
	// server for HTTP paths (the client is not counted), this process for
	// raw AddRows. 0 if unknown.
	CPU time.Duration
}

// CPUPerSample is CPU time per acknowledged sample; 0 if unknown.
func (r *ingestResult) CPUPerSample() time.Duration {
	if r == nil || r.Err != nil || r.CPU <= 0 || r.Acked == 0 {
		return 0
	}
	return r.CPU / time.Duration(r.Acked)
}

// Rate is acknowledged samples per second.
func (r *ingestResult) Rate() float64 {
	if r == nil || r.Err != nil || r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Acked) / r.Elapsed.Seconds()
}

// runRaw opens lib/storage directly in dir and adds every batch of d with
// `writers` goroutines, one AddRows call per batch. flag.CommandLine must be
// parsed before (VictoriaMetrics reads its memory limits from it).
func runRaw(ctx context.Context, d *dataset, p *payloads, dir string, writers int) (res ingestResult) {
	res.Samples = d.Samples()
	res.Stored = -1
	if err := encoding.CheckPrecisionBits(precisionBits); err != nil {
		res.Err = err
		return res
	}
	s := vmstorage.MustOpenStorage(dir, vmstorage.OpenOptions{})
	defer s.MustClose()

	bs := d.Batches()
	var next, acked atomic.Int64
	var wg sync.WaitGroup
	cpu0 := selfCPU()
	start := time.Now()
	for range writers {
		wg.Go(func() {
			rows := make([]vmstorage.MetricRow, 0, d.BatchSeries*max(d.BatchPoints, 1))
			for ctx.Err() == nil {
				k := int(next.Add(1)) - 1
				if k >= len(bs) {
					return
				}
				bt := bs[k]
				rows = rows[:0]
				for pt := bt.p0; pt < bt.p1; pt++ {
					ts := d.ts(pt)
					for i := bt.lo; i < bt.hi; i++ {
						rows = append(rows, vmstorage.MetricRow{MetricNameRaw: p.namesRaw[i], Timestamp: ts, Value: value(i, pt)})
					}
				}
				s.AddRows(rows, precisionBits)
				acked.Add(int64(len(rows)))
			}
		})
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	res.CPU = selfCPU() - cpu0
	res.Acked = int(acked.Load())
	if err := ctx.Err(); err != nil {
		res.Err = fmt.Errorf("raw AddRows on %s interrupted: %w", d.Name, err)
		return res
	}

	t := time.Now()
	s.DebugFlush()
	var m vmstorage.Metrics
	s.UpdateMetrics(&m)
	res.Searched = time.Since(t)
	res.Stored = int64(m.TableMetrics.TotalRowsCount())
	if dropped := m.TooSmallTimestampRows + m.TooBigTimestampRows + m.InvalidRawMetricNames; dropped > 0 {
		res.Note = fmt.Sprintf("lib/storage dropped %d rows (too small ts %d, too big ts %d, invalid names %d)",
			dropped, m.TooSmallTimestampRows, m.TooBigTimestampRows, m.InvalidRawMetricNames)
	}
	return res
}
