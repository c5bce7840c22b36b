package ingest

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	vmstorage "github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"

	"github.com/ballast-io/ballast/models"
)

func TestParseTextLinesAndTimestamps(t *testing.T) {
	body := "# HELP x help\n# TYPE x counter\nx{a=\"1\"} 1 1700000000000\n\nx{a=\"2\"} 2\ny 3.5 1700000001\n"
	var b Batch
	lim := Limits{DefaultTimestamp: 42, ExtraLabels: []models.Label{{Name: "node", Value: "ds01"}, {Name: "a", Value: "over"}}}
	if err := ParseText(body, &lim, &b); err != nil {
		t.Fatal(err)
	}
	got := b.Samples()
	if len(got) != 3 {
		t.Fatalf("got %d samples; want 3", len(got))
	}
	// explicit ms timestamp, default timestamp, and seconds read as ms
	for i, want := range []int64{1700000000000, 42, 1700000001000} {
		if got[i].Timestamp != want {
			t.Errorf("sample %d: timestamp %d; want %d", i, got[i].Timestamp, want)
		}
	}
	// extra labels are added and override same-named labels
	if got[0].Label("node") != "ds01" || got[0].Label("a") != "over" {
		t.Errorf("labels %v; want node=ds01 and a overridden", got[0].Labels)
	}
}

func TestParseTextKeepsValidLinesAndNamesBadOnes(t *testing.T) {
	var b Batch
	lim := Limits{}
	if err := ParseText("ok 1\n", &lim, &b); err != nil {
		t.Fatal(err)
	}
	err := ParseText("a 1\nb 2\n\n# c\nbad-name 3\nc{x=\"1} 2\nd NaN\n", &lim, &b)
	var rej *Rejected
	if !errors.As(err, &rej) {
		t.Fatalf("got %v; want a *Rejected", err)
	}
	if rej.Count != 2 || rej.ByReason[ReasonName] != 1 || rej.ByReason[ReasonParse] != 1 {
		t.Errorf("got %d rejected %v; want 2: one metric name, one parse", rej.Count, rej.ByReason)
	}
	if len(rej.Errs) != 2 || !strings.HasPrefix(rej.Errs[0].Error(), "line 5: ") || !strings.HasPrefix(rej.Errs[1].Error(), "line 6: ") {
		t.Errorf("got %v; want errors naming lines 5 and 6", rej.Errs)
	}
	// ok from before, a and b; d is NaN: accepted, counted, not a row.
	if b.Len() != 3 || b.NaNs() != 1 {
		t.Errorf("batch has %d rows and %d NaNs; want 3 and 1", b.Len(), b.NaNs())
	}
}

func TestRejectedSpellsOutTheFirstFew(t *testing.T) {
	var body strings.Builder
	for i := 0; i < 8; i++ {
		body.WriteString("bad-name 1\n")
	}
	var b Batch
	err := ParseText(body.String(), &Limits{}, &b)
	if got := err.Error(); strings.Count(got, "invalid metric name") != maxRejectedErrs || !strings.HasSuffix(got, "; and 3 more") {
		t.Errorf("got %q; want %d errors and \"and 3 more\"", got, maxRejectedErrs)
	}
}

func TestMetricRowsRoundTrip(t *testing.T) {
	var b Batch
	lim := Limits{}
	if err := ParseText("m{b=\"2\",a=\"1\"} 7 1700000001000\nn 8 1700000002000\n", &lim, &b); err != nil {
		t.Fatal(err)
	}
	rows, _, next := b.MetricRows(nil, nil, 0, 1<<20)
	if next != 2 {
		t.Fatalf("next %d; want 2", next)
	}
	if len(rows) != 2 {
		t.Fatalf("got %d rows; want 2", len(rows))
	}
	var mn vmstorage.MetricName
	if err := mn.UnmarshalRaw(rows[0].MetricNameRaw); err != nil {
		t.Fatal(err)
	}
	if got := mn.String(); got != `m{b="2",a="1"}` && got != `m{a="1",b="2"}` {
		t.Errorf("decoded name %s; want m with labels a=1 and b=2", got)
	}
	if rows[1].Value != 8 || rows[1].Timestamp != 1700000002000 {
		t.Errorf("row 1: %+v", rows[1])
	}
}

func TestExplicitTimestampZero(t *testing.T) {
	for _, c := range []struct {
		line  string
		hasTS bool
	}{
		{"m 1", false},
		{"m 1 0", true},
		{"m  1   0  ", true},
		{"m{a=\"b\"} 1", false},
		{"m{a=\"b\"} 1 0", true},
		{"m{a=\"} 1 2 {\"} 1", false},
		{"m{a=\"x\\\"} 1 0\"} 5", false},
		{"m 1 # comment 0", false},
		{"m{a=\"#\"} 1 0", true},
	} {
		var b Batch
		lim := Limits{DefaultTimestamp: 42, MinTimestamp: 1}
		err := ParseText(c.line+"\n", &lim, &b)
		if c.hasTS {
			if err == nil || !strings.Contains(err.Error(), "1970") {
				t.Errorf("%q: got %v; want an error naming 1970 (an explicit timestamp 0)", c.line, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.line, err)
			continue
		}
		if got := b.Samples()[0].Timestamp; got != 42 {
			t.Errorf("%q: timestamp %d; want the default 42", c.line, got)
		}
	}
}

func TestLimitsBeforeVictoriaMetrics(t *testing.T) {
	long := strings.Repeat("n", 70<<10)
	var big strings.Builder
	for i := range 20 {
		fmt.Fprintf(&big, "l%d=%q,", i, strings.Repeat("v", 4000))
	}
	for _, c := range []struct {
		body, want string
	}{
		{long + " 1 1\n", "metric name \"nnnn"},
		{"m{" + long[:300] + "=\"v\"} 1 1\n", "label name"},
		{"m{" + big.String() + "} 1 1\n", "label set is 80"},
		{"m 1 9223372036854775807\n", "does not fit"},
		{"m 1 1e17\n", "out of range"},
		{"m 1 NaN\n", "does not fit"},
	} {
		var b Batch
		err := ParseText(c.body, &Limits{}, &b)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.40q: got %v; want an error containing %q", c.body, err, c.want)
		}
		if err != nil && len(err.Error()) > 1024 {
			t.Errorf("%.40q: the error is %d bytes long; want it short", c.body, len(err.Error()))
		}
	}
}

func TestExtraLabelsKeptOnceAndRowsEncodedInChunks(t *testing.T) {
	extra := []models.Label{{Name: "x", Value: strings.Repeat("e", 4000)}}
	if err := CheckExtraLabels(extra); err != nil {
		t.Fatal(err)
	}
	if err := CheckExtraLabels(append(extra, models.Label{Name: "y", Value: strings.Repeat("y", 100)})); err == nil {
		t.Errorf("4 KB of extra labels plus more: got nil; want an error")
	}
	var body strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&body, "m_%d 1 1700000000000\n", i)
	}
	var b Batch
	if err := ParseText(body.String(), &Limits{ExtraLabels: extra}, &b); err != nil {
		t.Fatal(err)
	}
	if len(b.labels) != 0 {
		t.Errorf("the batch holds %d label copies; want the extra labels kept once", len(b.labels))
	}
	var rows []vmstorage.MetricRow
	var buf []byte
	chunks, total := 0, 0
	for next := 0; next < b.Len(); chunks++ {
		rows, buf, next = b.MetricRows(rows[:0], buf, next, 64<<10)
		total += len(rows)
		if cap(buf) > 64<<10 {
			t.Fatalf("chunk buffer %d bytes; want at most 64 KiB", cap(buf))
		}
	}
	if total != 1000 || chunks < 60 {
		t.Errorf("got %d rows in %d chunks; want 1000 rows in about 64", total, chunks)
	}
	var mn vmstorage.MetricName
	if err := mn.UnmarshalRaw(rows[0].MetricNameRaw); err != nil || len(mn.Tags) != 1 || string(mn.Tags[0].Key) != "x" {
		t.Errorf("encoded row %v, %v; want the extra label in it", mn.String(), err)
	}
}

// FuzzParseText: whatever the input, every row added passes validation,
// nothing panics, and an error is a *Rejected.
func FuzzParseText(f *testing.F) {
	for _, s := range []string{"a 1\n", "a{b=\"c\"} 1 2\n", "a{b=\"\\\"\"} NaN\n", "# x\n", "a{", "a 1 2 3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var b Batch
		lim := Limits{DefaultTimestamp: 1}
		err := ParseText(s, &lim, &b)
		var rej *Rejected
		if err != nil && !errors.As(err, &rej) {
			t.Fatalf("error %v is not a *Rejected", err)
		}
		for _, smp := range b.Samples() {
			if err := smp.Validate(); err != nil {
				t.Fatalf("accepted invalid sample %+v: %v", smp, err)
			}
		}
	})
}

// TestParseTextInPieces: a body longer than textChunkBytes, parsed in
// pieces of whole lines, gives the rows that parsing each line on its own
// gives, in order (comments, escaped values, lines without a timestamp,
// CRLF, a comment line longer than a piece, no final newline); a bad line
// in a later piece is named by its line number in the whole body and
// costs only itself.
func TestParseTextInPieces(t *testing.T) {
	lim := Limits{DefaultTimestamp: 42}
	var lines []string
	for i, size := 0, 0; size < 3*textChunkBytes; i++ {
		switch i % 7 {
		case 0:
			lines = append(lines, fmt.Sprintf("# HELP pieces_total help %d", i))
		case 1:
			lines = append(lines, fmt.Sprintf(`pieces_total{v="a\\b\"c\nd",i="%d"} %d`, i, i))
		case 2:
			lines = append(lines, fmt.Sprintf("pieces_total{i=\"%d\"} %d 1700000000000\r", i, i))
		case 3:
			lines = append(lines, fmt.Sprintf("other_%d %d.5 0", i%50, i))
		default:
			lines = append(lines, fmt.Sprintf(`pieces_total{i="%d",pad="%s"} %d 1700000000%03d`, i, strings.Repeat("x", i%40), i, i%1000))
		}
		size += len(lines[len(lines)-1]) + 1
		if i == 5000 {
			lines = append(lines, "# "+strings.Repeat("long comment ", textChunkBytes/10))
			size += len(lines[len(lines)-1]) + 1
		}
	}
	var want []models.Sample
	for _, l := range lines {
		var one Batch
		if err := ParseText(l, &lim, &one); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		want = append(want, one.Samples()...)
	}
	check := func(what string, b *Batch, want []models.Sample) {
		t.Helper()
		got := b.Samples()
		if len(got) != len(want) {
			t.Fatalf("%s: %d rows; want %d", what, len(got), len(want))
		}
		for i := range got {
			if fmt.Sprint(got[i]) != fmt.Sprint(want[i]) {
				t.Fatalf("%s: row %d is %v; want %v", what, i, got[i], want[i])
			}
		}
	}
	var b Batch
	if err := ParseText(strings.Join(lines, "\n"), &lim, &b); err != nil {
		t.Fatal(err)
	}
	check("whole body", &b, want)

	// A bad line in the last piece.
	bad := len(lines) - 2
	withBad := append(append(append([]string(nil), lines[:bad]...), "pieces_total{i=\"1\" 2"), lines[bad:]...)
	b.Reset()
	err := ParseText(strings.Join(withBad, "\n"), &lim, &b)
	var rej *Rejected
	if !errors.As(err, &rej) || rej.Count != 1 || !strings.Contains(err.Error(), fmt.Sprintf("line %d:", bad+1)) {
		t.Fatalf("err %v; want line %d rejected, alone", err, bad+1)
	}
	check("body with a bad line", &b, want)
}
