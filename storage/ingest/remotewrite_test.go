package ingest

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/prompb"
	vmstorage "github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"

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
		l("instance", "z", "job", "a", "x", "1"),
		l("instance", "\xff", "job", "b", "y", "1"),           // bad value before names differ
		l("instance", "z", "job", "b", "x", "\xff", "y", "2"), // value differs before a label more
		l("instance", "z", "job", "", "x", "1"),
	}
	var b Batch
	check := func(i int, ls []models.Label) {
		t.Helper()
		want := models.ValidateLabels(ls)
		n, _, got := b.checkLabels("m", ls)
		if (got == nil) != (want == nil) || (got != nil && got.Error() != want.Error()) {
			t.Fatalf("set %d %v: got %v; want %v", i, ls, got, want)
		}
		if got == nil && n != labelSetBytes("m", ls) {
			t.Fatalf("set %d %v: %d bytes; want labelSetBytes' %d", i, ls, n, labelSetBytes("m", ls))
		}
	}
	for i, ls := range seq {
		check(i, ls)
	}
	// And random sequences from a small alphabet, so that consecutive sets
	// often share names and values.
	r := rand.New(rand.NewPCG(1, 17))
	names := []string{"job", "instance", "a", "bad-name", "__name__", ""}
	values := []string{"", "x", "y", "\xff", long}
	for i := range 20000 {
		ls := make([]models.Label, r.IntN(5))
		for j := range ls {
			ls[j] = models.Label{Name: names[r.IntN(len(names))], Value: values[r.IntN(len(values))]}
		}
		if r.IntN(3) > 0 && len(b.passed) > 0 {
			// The last set that passed with a value or two changed.
			ls = append(ls[:0], b.passed...)
			for range 1 + r.IntN(2) {
				ls[r.IntN(len(ls))].Value = values[r.IntN(len(values))]
			}
		}
		check(i, ls)
	}
}

// TestSeriesAfterBadValueIsItsOwn: a series rejected for a bad value after
// values that passed leaves no trace in the next one: a series equal to
// what the rejected one would have made of the previous set is encoded
// as itself, not taken for the previous series.
func TestSeriesAfterBadValueIsItsOwn(t *testing.T) {
	const ts = 1_700_000_000_000
	lim := Limits{MinTimestamp: ts - 1000, MaxTimestamp: ts + 1000}
	l := func(job, instance string) []prompb.Label {
		return []prompb.Label{{Name: "__name__", Value: "m"}, {Name: "job", Value: job}, {Name: "instance", Value: instance}}
	}
	smp := []prompb.Sample{{Value: 1, Timestamp: ts}}
	var b Batch
	rejected := 0
	b.AddTimeSeries([]prompb.TimeSeries{
		{Labels: l("a", "x"), Samples: smp},
		{Labels: l("b", "\xff"), Samples: smp}, // job passes, instance does not
		{Labels: l("b", "x"), Samples: smp},
	}, &lim, func(error, int) { rejected++ })
	if rejected != 1 || b.Len() != 2 {
		t.Fatalf("%d rejected, %d rows; want 1 and 2", rejected, b.Len())
	}
	rows, _, _ := b.MetricRows(nil, nil, 0, 1<<20)
	for i, want := range [][]prompb.Label{l("a", "x"), l("b", "x")} {
		if w := vmstorage.MarshalMetricNameRaw(nil, want); string(rows[i].MetricNameRaw) != string(w) {
			t.Errorf("row %d: name %q; want %q", i, rows[i].MetricNameRaw, w)
		}
	}
}

// TestRandomSeriesEncodedAsThemselves: over random runs of series that
// share names and values (so that the checks and encodings reused from
// the previous series are exercised), a series is rejected exactly when
// models.ValidateLabels rejects its labels, and every row's name is
// lib/storage's MarshalMetricNameRaw of its own series.
func TestRandomSeriesEncodedAsThemselves(t *testing.T) {
	const ts = 1_700_000_000_000
	lim := Limits{MinTimestamp: ts - 1000, MaxTimestamp: ts + 1000}
	r := rand.New(rand.NewPCG(3, 17))
	names := []string{"job", "instance", "bad-name", "a"}
	values := []string{"", "x", "y", "\xff", "\xff", "x"}
	var tss []prompb.TimeSeries
	var want [][]byte
	for range 20000 {
		var ls []prompb.Label
		if len(tss) > 0 && r.IntN(4) > 0 {
			// The previous series, some values or the metric changed
			// or not.
			ls = append(ls, tss[len(tss)-1].Labels...)
			if r.IntN(8) == 0 {
				ls[0].Value = []string{"m", "n"}[r.IntN(2)]
			}
			for k := 1; k < len(ls); k++ {
				if r.IntN(3) == 0 {
					ls[k].Value = values[r.IntN(len(values))]
				}
			}
		} else {
			ls = []prompb.Label{{Name: "__name__", Value: []string{"m", "n"}[r.IntN(2)]}}
			if r.IntN(2) == 0 {
				// The usual shape: the same names in the same order.
				ls = append(ls, prompb.Label{Name: "job", Value: "x"}, prompb.Label{Name: "instance", Value: "x"})
			}
			for range r.IntN(3) {
				ls = append(ls, prompb.Label{Name: names[r.IntN(len(names))], Value: values[r.IntN(len(values))]})
			}
		}
		tss = append(tss, prompb.TimeSeries{Labels: ls, Samples: []prompb.Sample{{Value: 1, Timestamp: ts}}})
		if models.ValidateLabels(labelsOf(ls[1:])) == nil {
			want = append(want, vmstorage.MarshalMetricNameRaw(nil, append([]prompb.Label(nil), ls...)))
		}
	}
	var b Batch
	rejected := 0
	b.AddTimeSeries(tss, &lim, func(error, int) { rejected++ })
	if b.Len() != len(want) || rejected != len(tss)-len(want) {
		t.Fatalf("%d rows, %d rejected; want %d and %d", b.Len(), rejected, len(want), len(tss)-len(want))
	}
	rows, _, _ := b.MetricRows(nil, nil, 0, 1<<30)
	for i := range rows {
		if string(rows[i].MetricNameRaw) != string(want[i]) {
			t.Fatalf("row %d: name %q; want %q", i, rows[i].MetricNameRaw, want[i])
		}
	}
}

// TestSeriesCheckedAndEncodedOnce: a remote-write series' labels are kept
// and its name encoded once for all its samples, and consecutive text
// lines of one series share the first one's; the rows' names are what
// lib/storage's own MarshalMetricNameRaw gives, a sample rejected for its
// timestamp costs only itself, and a series of which nothing is kept
// leaves nothing behind.
func TestSeriesCheckedAndEncodedOnce(t *testing.T) {
	const ts = 1_700_000_000_000
	lim := Limits{MinTimestamp: ts - 1000, MaxTimestamp: ts + 1000}
	ls := []prompb.Label{{Name: "__name__", Value: "a_bytes"}, {Name: "device", Value: "nvme0n1"}, {Name: "empty", Value: ""}}
	wr := prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		{Labels: ls, Samples: []prompb.Sample{{Value: 1, Timestamp: ts}, {Value: 2, Timestamp: ts - 5000}, {Value: 3, Timestamp: ts + 1}}},
		// Nothing of this one is kept: a NaN and a sample too old.
		{Labels: []prompb.Label{{Name: "__name__", Value: "b"}, {Name: "x", Value: "1"}},
			Samples: []prompb.Sample{{Value: math.NaN(), Timestamp: ts}, {Value: 1, Timestamp: ts - 5000}}},
	}}
	var b Batch
	err := ParseRemoteWrite(wr.MarshalProtobuf(nil), &lim, &b)
	var rej *Rejected
	if !errors.As(err, &rej) || rej.Count != 2 || !strings.Contains(err.Error(), `timeseries 0 ({"__name__"="a_bytes","device"="nvme0n1","empty"=""}): sample 1: timestamp`) ||
		!strings.Contains(err.Error(), `timeseries 1 ({"__name__"="b","x"="1"}): sample 1: timestamp`) {
		t.Fatalf("err %v; want the two old samples rejected, each by series and sample", err)
	}
	if b.Len() != 2 || b.NaNs() != 1 {
		t.Fatalf("%d rows, %d NaNs; want 2 and 1", b.Len(), b.NaNs())
	}
	if len(b.labels) != 2 {
		t.Errorf("%d labels kept; want series 0's 2, once", len(b.labels))
	}
	want := vmstorage.MarshalMetricNameRaw(nil, append([]prompb.Label(nil), ls...))
	if string(b.names) != string(want) {
		t.Errorf("encoded names %q; want series 0's name once, %q", b.names, want)
	}
	rows, _, _ := b.MetricRows(nil, nil, 0, 1<<20)
	for i, r := range rows {
		if string(r.MetricNameRaw) != string(want) {
			t.Errorf("row %d name %q; want %q", i, r.MetricNameRaw, want)
		}
	}
	if rows[0].Value != 1 || rows[1].Value != 3 {
		t.Errorf("rows %+v; want values 1 and 3", rows)
	}

	b.Reset()
	body := "m{a=\"1\"} 1 1700000000000\nm{a=\"1\"} 2 1700000000500\nm{a=\"2\"} 3 1700000000000\nm{a=\"1\"} 4 1700000000900\n"
	if err := ParseText(body, &lim, &b); err != nil {
		t.Fatal(err)
	}
	if b.Len() != 4 || len(b.labels) != 3 {
		t.Errorf("%d rows, %d labels; want 4 rows and 3 label sets (the second line shares the first's)", b.Len(), len(b.labels))
	}
	rows, _, _ = b.MetricRows(rows[:0], nil, 0, 1<<20)
	for i, a := range []string{"1", "1", "2", "1"} {
		want := vmstorage.MarshalMetricNameRaw(nil, []prompb.Label{{Name: "__name__", Value: "m"}, {Name: "a", Value: a}})
		if string(rows[i].MetricNameRaw) != string(want) {
			t.Errorf("row %d name %q; want %q", i, rows[i].MetricNameRaw, want)
		}
	}
	if got := b.Samples(); len(got) != 4 || got[1].Labels[0] != (models.Label{Name: "a", Value: "1"}) || got[1].Value != 2 {
		t.Errorf("samples %+v; want the second as m{a=1} 2", got)
	}
}

// TestEncodedNamesBounded: a text body whose series do not repeat line
// after line keeps at most maxEncodedNames of names encoded as it is
// parsed (a 30 MB body would otherwise hold one name per line, ~50 MB,
// for its whole life); MetricRows encodes the rest, byte for byte as
// MarshalMetricNameRaw, in chunks of maxBytes.
func TestEncodedNamesBounded(t *testing.T) {
	const ts = 1_700_000_000_000
	lim := Limits{MinTimestamp: ts - 1000, MaxTimestamp: ts + 1000}
	var body strings.Builder
	const lines = 120_000
	for i := range lines {
		fmt.Fprintf(&body, "bounded_names{series=\"%06d\",pad=\"%s\"} %d %d\n", i%50_000, "abcdefghijklmnopqrstuvwxyz", i, ts)
	}
	var b Batch
	if err := ParseText(body.String(), &lim, &b); err != nil {
		t.Fatal(err)
	}
	if b.Len() != lines {
		t.Fatalf("%d rows; want %d", b.Len(), lines)
	}
	if n := len(b.names); n > maxEncodedNames+1024 {
		t.Errorf("%d bytes of names encoded while parsing; want at most about %d", n, maxEncodedNames)
	}
	var rows []vmstorage.MetricRow
	var buf []byte
	chunks := 0
	for next := 0; next < b.Len(); chunks++ {
		start := next
		rows, buf, next = b.MetricRows(rows[:0], buf, next, 256<<10)
		for i, r := range rows {
			line := start + i
			want := vmstorage.MarshalMetricNameRaw(nil, []prompb.Label{{Name: "__name__", Value: "bounded_names"},
				{Name: "series", Value: fmt.Sprintf("%06d", line%50_000)}, {Name: "pad", Value: "abcdefghijklmnopqrstuvwxyz"}})
			if string(r.MetricNameRaw) != string(want) || r.Value != float64(line) {
				t.Fatalf("row %d: name %q value %v; want %q and %d", line, r.MetricNameRaw, r.Value, want, line)
			}
		}
	}
	if chunks < 2 {
		t.Errorf("%d chunks of 256 KiB for %d rows; want several", chunks, lines)
	}
}
