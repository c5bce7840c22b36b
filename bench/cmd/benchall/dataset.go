package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"

	vmprompb "github.com/VictoriaMetrics/VictoriaMetrics/lib/prompb"
	vmstorage "github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"
)

// dataset is a grid of series × timestamps, cut into batches of
// BatchPoints timestamps × at most BatchSeries consecutive series (with one
// timestamp: what one scrape round or one remote-write request of a fleet
// looks like). Every ingest path gets
// exactly these batches: as MetricRows for raw AddRows, as Prometheus text
// and as remote-write bodies for the HTTP paths.
type dataset struct {
	Name        string // for the report, e.g. "10k series @ 1 s"
	Metric      string
	Series      int
	Points      int           // timestamps per series
	Step        time.Duration // between timestamps
	Start       int64         // first timestamp, ms
	BatchSeries int           // series per batch (per body)
	BatchPoints int           // timestamps per batch; 0 means 1

	// TargetRawRatio is the target for ballast import ÷ raw
	// AddRows on this dataset; 0 means none.
	TargetRawRatio float64
}

// Samples is the number of samples in d.
func (d *dataset) Samples() int { return d.Series * d.Points }

// Last is the last timestamp of d in ms.
func (d *dataset) Last() int64 { return d.Start + int64(d.Points-1)*d.Step.Milliseconds() }

// batch is the timestamp indexes [p0, p1) of the series [lo, hi).
type batch struct{ p0, p1, lo, hi int }

// Samples is the number of samples in b.
func (b batch) Samples() int { return (b.p1 - b.p0) * (b.hi - b.lo) }

// Batches lists d's batches in ingest order: oldest timestamps first.
func (d *dataset) Batches() []batch {
	step := max(d.BatchPoints, 1)
	var out []batch
	for p := 0; p < d.Points; p += step {
		for lo := 0; lo < d.Series; lo += d.BatchSeries {
			out = append(out, batch{p, min(p+step, d.Points), lo, min(lo+d.BatchSeries, d.Series)})
		}
	}
	return out
}

// BatchSamples lists the number of samples of each batch.
func (d *dataset) BatchSamples() []int {
	bs := d.Batches()
	out := make([]int, len(bs))
	for i, b := range bs {
		out[i] = b.Samples()
	}
	return out
}

// shardSeries is the number of series per value of the shard label, so that
// a count query never touches more than this many series.
const shardSeries = 10000

// Shards is the number of distinct shard label values in d.
func (d *dataset) Shards() int { return (d.Series + shardSeries - 1) / shardSeries }

// labels returns every series' labels, sorted by name as remote write
// requires, __name__ first. Series i has instance host-(i/100), a 7-digit
// series id and its shard.
func (d *dataset) labels() [][]prompb.Label {
	out := make([][]prompb.Label, d.Series)
	for i := range out {
		out[i] = []prompb.Label{
			{Name: "__name__", Value: d.Metric},
			{Name: "instance", Value: fmt.Sprintf("host-%05d", i/100)},
			{Name: "job", Value: "bench"},
			{Name: "series", Value: fmt.Sprintf("%07d", i)},
			{Name: "shard", Value: fmt.Sprintf("%03d", i/shardSeries)},
		}
	}
	return out
}

// payloads are d's batches pre-rendered for every ingest path.
type payloads struct {
	namesRaw [][]byte // per series, for raw AddRows
	text     [][]byte // per batch, Prometheus text
	rw       [][]byte // per batch, snappy remote write
}

// render pre-renders every payload of d.
func (d *dataset) render() (*payloads, error) {
	ls := d.labels()
	rw, err := d.remoteWriteBodies(ls)
	if err != nil {
		return nil, err
	}
	return &payloads{namesRaw: metricNamesRaw(ls), text: d.textBodies(ls), rw: rw}, nil
}

// ts returns the timestamp of point p in ms.
func (d *dataset) ts(p int) int64 { return d.Start + int64(p)*d.Step.Milliseconds() }

// value returns the value of series i at point p: a counter whose rate
// depends on the series, as most pNFS and node metrics are.
func value(i, p int) float64 {
	return float64(i%1000)*1000 + float64(p)*float64(1+i%7)
}

// metricNamesRaw encodes every series name as lib/storage wants it
// (MarshalMetricNameRaw: any other encoding is silently dropped).
func metricNamesRaw(labels [][]prompb.Label) [][]byte {
	out := make([][]byte, len(labels))
	var pl []vmprompb.Label
	for i := range out {
		pl = pl[:0]
		for _, l := range labels[i] {
			pl = append(pl, vmprompb.Label{Name: l.Name, Value: l.Value})
		}
		out[i] = vmstorage.MarshalMetricNameRaw(nil, pl)
	}
	return out
}

// textBodies renders every batch as Prometheus text exposition with
// millisecond timestamps.
func (d *dataset) textBodies(labels [][]prompb.Label) [][]byte {
	prefixes := make([][]byte, d.Series)
	for i := range prefixes {
		b := append([]byte(nil), d.Metric...)
		b = append(b, '{')
		for j, l := range labels[i][1:] {
			if j > 0 {
				b = append(b, ',')
			}
			b = append(b, l.Name...)
			b = append(b, '=')
			b = strconv.AppendQuote(b, l.Value)
		}
		prefixes[i] = append(b, "} "...)
	}
	bs := d.Batches()
	out := make([][]byte, len(bs))
	for k, bt := range bs {
		var b []byte
		if k > 0 {
			b = make([]byte, 0, len(out[k-1]))
		}
		for p := bt.p0; p < bt.p1; p++ {
			ts := d.ts(p)
			for i := bt.lo; i < bt.hi; i++ {
				b = append(b, prefixes[i]...)
				b = strconv.AppendFloat(b, value(i, p), 'g', -1, 64)
				b = append(b, ' ')
				b = strconv.AppendInt(b, ts, 10)
				b = append(b, '\n')
			}
		}
		out[k] = b
	}
	return out
}

// remoteWriteBodies renders every batch as a snappy-compressed remote-write
// 1.0 WriteRequest, as Prometheus sends it.
func (d *dataset) remoteWriteBodies(labels [][]prompb.Label) ([][]byte, error) {
	bs := d.Batches()
	out := make([][]byte, len(bs))
	var pb []byte
	for k, bt := range bs {
		wr := prompb.WriteRequest{Timeseries: make([]prompb.TimeSeries, 0, bt.hi-bt.lo)}
		for i := bt.lo; i < bt.hi; i++ {
			ss := make([]prompb.Sample, 0, bt.p1-bt.p0)
			for p := bt.p0; p < bt.p1; p++ {
				ss = append(ss, prompb.Sample{Value: value(i, p), Timestamp: d.ts(p)})
			}
			wr.Timeseries = append(wr.Timeseries, prompb.TimeSeries{Labels: labels[i], Samples: ss})
		}
		size := wr.Size()
		if cap(pb) < size {
			pb = make([]byte, size)
		}
		n, err := wr.MarshalToSizedBuffer(pb[:size])
		if err != nil {
			return nil, fmt.Errorf("cannot marshal remote write request %d of %s: %w", k, d.Name, err)
		}
		out[k] = snappy.Encode(nil, pb[size-n:size])
	}
	return out, nil
}
