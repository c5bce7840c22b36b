package ingest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/prompb"
	vmstorage "github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"
)

// BenchmarkIngestPath is ballast's own work on one push body before
// lib/storage's AddRows: decode, validate and encode the rows as
// MetricRows (what Embedded.WriteBatch hands to the store). The bodies
// are those of `make bench` (bench/cmd/benchall): 10,000 series
// bench_ingest{job,instance,series,shard} with one sample each; the
// remote-write body with 10 samples per series is what Prometheus sends
// when it catches up (a series' label set is checked and encoded once).
//
//	go test -run '^$' -bench IngestPath -benchmem ./storage/ingest
//
// cpu-ns/sample is the process's user+system CPU time over the loop
// (getrusage), the measure to compare on a loaded machine.
func BenchmarkIngestPath(b *testing.B) {
	const series, ts0 = 10_000, 1_700_000_000_000
	labels := func(i int) []prompb.Label {
		return []prompb.Label{
			{Name: "__name__", Value: "bench_ingest"},
			{Name: "job", Value: "bench"},
			{Name: "instance", Value: fmt.Sprintf("host-%05d", i/10)},
			{Name: "series", Value: fmt.Sprintf("%07d", i)},
			{Name: "shard", Value: fmt.Sprintf("%03d", i/10_000)},
		}
	}
	var text strings.Builder
	var one, ten prompb.WriteRequest
	for i := range series {
		ls := labels(i)
		fmt.Fprintf(&text, "bench_ingest{job=%q,instance=%q,series=%q,shard=%q} %d %d\n", ls[1].Value, ls[2].Value, ls[3].Value, ls[4].Value, i, ts0)
		one.Timeseries = append(one.Timeseries, prompb.TimeSeries{Labels: ls, Samples: []prompb.Sample{{Value: float64(i), Timestamp: ts0}}})
		if i < series/10 {
			var ss []prompb.Sample
			for j := range 10 {
				ss = append(ss, prompb.Sample{Value: float64(i + j), Timestamp: ts0 + int64(j)*1000})
			}
			ten.Timeseries = append(ten.Timeseries, prompb.TimeSeries{Labels: ls, Samples: ss})
		}
	}
	lim := Limits{MinTimestamp: ts0 - 3600_000, MaxTimestamp: ts0 + 3600_000, DefaultTimestamp: ts0}
	body := text.String()
	pbOne, pbTen := one.MarshalProtobuf(nil), ten.MarshalProtobuf(nil)
	for _, c := range []struct {
		name  string
		parse func(*Batch) error
	}{
		{"text_10k", func(bt *Batch) error { return ParseText(body, &lim, bt) }},
		{"remote_write_10k", func(bt *Batch) error { return ParseRemoteWrite(pbOne, &lim, bt) }},
		{"remote_write_1k_x10", func(bt *Batch) error { return ParseRemoteWrite(pbTen, &lim, bt) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			var bt Batch
			var rows []vmstorage.MetricRow
			var buf []byte
			cpu0 := cpuTime()
			for b.Loop() {
				bt.Reset()
				if err := c.parse(&bt); err != nil {
					b.Fatal(err)
				}
				for next := 0; next < bt.Len(); {
					rows, buf, next = bt.MetricRows(rows[:0], buf, next, 4<<20)
				}
				if bt.Len() != series {
					b.Fatalf("%d rows; want %d", bt.Len(), series)
				}
			}
			cpu := cpuTime() - cpu0
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*series), "ns/sample")
			b.ReportMetric(float64(cpu)/float64(b.N*series), "cpu-ns/sample")
		})
	}
}
