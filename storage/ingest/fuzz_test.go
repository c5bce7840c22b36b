package ingest

import (
	"errors"
	"math"
	"testing"

	"github.com/golang/snappy"
	"google.golang.org/protobuf/encoding/protowire"
)

// rwSeries renders one remote write 1.0 TimeSeries: label pairs, one sample.
func rwSeries(ls []string, ts int64, v float64) []byte {
	var tsb []byte
	for i := 0; i+1 < len(ls); i += 2 {
		var lb []byte
		lb = protowire.AppendTag(lb, 1, protowire.BytesType)
		lb = protowire.AppendString(lb, ls[i])
		lb = protowire.AppendTag(lb, 2, protowire.BytesType)
		lb = protowire.AppendString(lb, ls[i+1])
		tsb = protowire.AppendTag(tsb, 1, protowire.BytesType)
		tsb = protowire.AppendBytes(tsb, lb)
	}
	var sb []byte
	sb = protowire.AppendTag(sb, 1, protowire.Fixed64Type)
	sb = protowire.AppendFixed64(sb, math.Float64bits(v))
	sb = protowire.AppendTag(sb, 2, protowire.VarintType)
	sb = protowire.AppendVarint(sb, uint64(ts))
	tsb = protowire.AppendTag(tsb, 2, protowire.BytesType)
	return protowire.AppendBytes(tsb, sb)
}

// FuzzParseRemoteWrite feeds snappy blocks through DecodeSnappy and
// ParseRemoteWrite, as POST /api/v1/write does: whatever the body, nothing
// panics, a body-level error is not a *Rejected only when nothing was
// added, and every row added passes validation. Seeds: remote write 1.0
// requests (as Prometheus sends them) and a remote write 2.0 request (the
// symbols table and label references) sent where 1.0 is expected.
func FuzzParseRemoteWrite(f *testing.F) {
	var wr []byte
	for _, s := range [][]byte{
		rwSeries([]string{"__name__", "up", "job", "ballast-agents", "instance", "ds01:9751"}, 1_700_000_000_000, 1),
		rwSeries([]string{"__name__", "ballast_nvme_temperature_celsius", "device", "nvme0n1"}, 1_700_000_000_000, math.NaN()),
		rwSeries([]string{"__name__", "x"}, 0, math.Inf(1)),
		rwSeries([]string{"b", "2", "a", "1"}, -1, 0),
	} {
		wr = protowire.AppendTag(wr, 1, protowire.BytesType)
		wr = protowire.AppendBytes(wr, s)
	}
	f.Add(snappy.Encode(nil, wr))
	// Remote write 2.0: symbols (field 4), one series (field 5) with
	// packed label_refs and a sample.
	var v2, series, sample []byte
	for _, sym := range []string{"", "__name__", "rw2", "job", "x"} {
		v2 = protowire.AppendTag(v2, 4, protowire.BytesType)
		v2 = protowire.AppendString(v2, sym)
	}
	series = protowire.AppendTag(series, 1, protowire.BytesType)
	series = protowire.AppendBytes(series, []byte{1, 2, 3, 4})
	sample = protowire.AppendTag(sample, 1, protowire.Fixed64Type)
	sample = protowire.AppendFixed64(sample, math.Float64bits(1))
	sample = protowire.AppendTag(sample, 2, protowire.VarintType)
	sample = protowire.AppendVarint(sample, 1_700_000_000_000)
	series = protowire.AppendTag(series, 2, protowire.BytesType)
	series = protowire.AppendBytes(series, sample)
	v2 = protowire.AppendTag(v2, 5, protowire.BytesType)
	v2 = protowire.AppendBytes(v2, series)
	f.Add(snappy.Encode(nil, v2))
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, body []byte) {
		var b Batch
		lim := Limits{DefaultTimestamp: 1, MinTimestamp: 1, MaxTimestamp: math.MaxInt64 / 2}
		dec, err := DecodeSnappy(nil, body, 1<<20)
		if err != nil {
			return
		}
		err = ParseRemoteWrite(dec, &lim, &b)
		var rej *Rejected
		if err != nil && !errors.As(err, &rej) && b.Len() > 0 {
			t.Fatalf("body-level error %v after %d rows were added", err, b.Len())
		}
		for _, smp := range b.Samples() {
			if err := smp.Validate(); err != nil {
				t.Fatalf("accepted invalid sample %+v: %v", smp, err)
			}
		}
		if b.AsReceived() && !onlyLabelsAndSamples(dec) {
			t.Fatalf("AsReceived for a body with more than labels and samples in it")
		}
	})
}

// onlyLabelsAndSamples is onlySeries by protowire: whether every field of
// the WriteRequest is a series (1) and every field of a series a label (1)
// or a sample (2).
func onlyLabelsAndSamples(pb []byte) bool {
	for len(pb) > 0 {
		num, typ, n := protowire.ConsumeTag(pb)
		if n < 0 || num != 1 || typ != protowire.BytesType {
			return false
		}
		ts, m := protowire.ConsumeBytes(pb[n:])
		if m < 0 {
			return false
		}
		pb = pb[n+m:]
		for len(ts) > 0 {
			num, typ, n := protowire.ConsumeTag(ts)
			if n < 0 || (num != 1 && num != 2) || typ != protowire.BytesType {
				return false
			}
			m := protowire.ConsumeFieldValue(num, typ, ts[n:])
			if m < 0 {
				return false
			}
			ts = ts[n+m:]
		}
	}
	return true
}
