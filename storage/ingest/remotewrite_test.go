package ingest

import (
	"math"
	"testing"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/prompb"

	"github.com/ballast-io/ballast/models"
)

// TestAsReceived: a remote-write body is forwardable as received only when
// it holds exactly the batch's rows — every sample valid as it is, nothing
// added, changed or left out, nothing but labels and samples in it.
func TestAsReceived(t *testing.T) {
	const ts = 1_700_000_000_000
	series := func(name, dev string, v float64, t int64) prompb.TimeSeries {
		return prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: name}, {Name: "device", Value: dev}},
			Samples: []prompb.Sample{{Value: v, Timestamp: t}}}
	}
	valid := prompb.WriteRequest{Timeseries: []prompb.TimeSeries{series("a_bytes", "nvme0n1", 1, ts), series("a_bytes", "nvme1n1", 2, ts), series("b_ops", "nvme0n1", 3, ts)}}
	pb := valid.MarshalProtobuf(nil)
	lim := Limits{MinTimestamp: ts - 1000, MaxTimestamp: ts + 1000}

	withMetadata := valid
	withMetadata.Metadata = []prompb.MetricMetadata{{MetricFamilyName: "a_bytes", Type: 1, Help: "bytes"}}
	// An empty exemplar (TimeSeries field 3) after the first series' sample:
	// prompb's unmarshaler skips it, so the rows are the same.
	one := prompb.WriteRequest{Timeseries: valid.Timeseries[:1]}
	ts0 := one.MarshalProtobuf(nil)[2:] // the series message, past its tag and length
	withExemplar := append([]byte{0x0a, byte(len(ts0) + 2)}, ts0...)
	withExemplar = append(withExemplar, 0x1a, 0x00)
	rest := prompb.WriteRequest{Timeseries: valid.Timeseries[1:]}
	withExemplar = append(withExemplar, rest.MarshalProtobuf(nil)...)

	nan := prompb.WriteRequest{Timeseries: append([]prompb.TimeSeries{series("a_bytes", "nvme2n1", math.NaN(), ts)}, valid.Timeseries...)}
	old := prompb.WriteRequest{Timeseries: append([]prompb.TimeSeries{series("a_bytes", "nvme2n1", 4, ts-5000)}, valid.Timeseries...)}
	// An empty name first: the name check that is done once per run of
	// equal names must still run for it.
	emptyName := prompb.WriteRequest{Timeseries: append([]prompb.TimeSeries{series("", "nvme2n1", 4, ts)}, valid.Timeseries...)}
	badLabel := prompb.WriteRequest{Timeseries: append([]prompb.TimeSeries{{Labels: []prompb.Label{{Name: "__name__", Value: "a_bytes"}, {Name: "bad-name", Value: "x"}},
		Samples: []prompb.Sample{{Value: 1, Timestamp: ts}}}}, valid.Timeseries...)}

	for _, c := range []struct {
		name    string
		pb      []byte
		lim     Limits
		pre     bool // the batch already holds a row
		wantErr bool
		want    bool
	}{
		{name: "valid", pb: pb, lim: lim, want: true},
		{name: "extra label", pb: pb, lim: Limits{MinTimestamp: lim.MinTimestamp, ExtraLabels: []models.Label{{Name: "site", Value: "x"}}}},
		{name: "default label", pb: pb, lim: Limits{MinTimestamp: lim.MinTimestamp, DefaultLabels: []models.Label{{Name: "node", Value: "x"}}}},
		{name: "batch not empty", pb: pb, lim: lim, pre: true},
		{name: "metadata", pb: withMetadata.MarshalProtobuf(nil), lim: lim},
		{name: "exemplar", pb: withExemplar, lim: lim},
		{name: "NaN left out", pb: nan.MarshalProtobuf(nil), lim: lim},
		{name: "sample too old", pb: old.MarshalProtobuf(nil), lim: lim, wantErr: true},
		{name: "empty metric name", pb: emptyName.MarshalProtobuf(nil), lim: lim, wantErr: true},
		{name: "bad label name", pb: badLabel.MarshalProtobuf(nil), lim: lim, wantErr: true},
	} {
		var b Batch
		if c.pre {
			if err := b.AddSamples([]models.Sample{{Name: "c", Timestamp: ts}}, &lim); err != nil {
				t.Fatal(err)
			}
		}
		err := ParseRemoteWrite(c.pb, &c.lim, &b)
		if (err != nil) != c.wantErr {
			t.Errorf("%s: err %v; want error %v", c.name, err, c.wantErr)
		}
		if got := b.AsReceived(); got != c.want {
			t.Errorf("%s: AsReceived %v; want %v", c.name, got, c.want)
		}
		if want := 3 + btoi(c.pre); b.Len() != want {
			t.Errorf("%s: %d rows; want %d (the valid samples)", c.name, b.Len(), want)
		}
		if c.want {
			// Anything added afterwards makes the batch more than the body.
			if err := b.AddSamples([]models.Sample{{Name: "c", Timestamp: ts}}, &lim); err != nil || b.AsReceived() {
				t.Errorf("%s: after AddSamples AsReceived %v (err %v); want false", c.name, b.AsReceived(), err)
			}
			b.Reset()
			if b.AsReceived() {
				t.Errorf("%s: after Reset AsReceived true; want false", c.name)
			}
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestValidateLabelsSkipsOnlyWhatPassed: the batch's label check, which
// skips what the previous set settled, gives models.ValidateLabels' answer
// for every set of a sequence that changes values, names and order.
func TestValidateLabelsSkipsOnlyWhatPassed(t *testing.T) {
	l := func(kv ...string) []models.Label {
		var ls []models.Label
		for i := 0; i+1 < len(kv); i += 2 {
			ls = append(ls, models.Label{Name: kv[i], Value: kv[i+1]})
		}
		return ls
	}
	long := string(make([]byte, models.MaxLabelValueBytes+1))
	seq := [][]models.Label{
		l("job", "a", "instance", "x"),
		l("job", "a", "instance", "y"),
		l("job", "a", "instance", "\xff"), // bad value after a set that passed
		l("job", "a", "instance", "z"),
		l("job", long, "instance", "z"), // too long
		l("job", "a", "job", "b"),       // duplicate: names differ from the last set passed
		l("job", "a", "instance", "z"),
		l("instance", "z", "job", "a"),      // same names, other order
		l("instance", "z", "bad-name", "a"), // bad name
		l("instance", "z", "job", "a", "x", "1"),
		l("instance", "z", "job", "a", "x", "\xc3"),
	}
	var b Batch
	for i, ls := range seq {
		want := models.ValidateLabels(ls)
		got := b.validateLabels(ls)
		if (got == nil) != (want == nil) || (got != nil && got.Error() != want.Error()) {
			t.Errorf("set %d %v: got %v; want %v", i, ls, got, want)
		}
	}
}
