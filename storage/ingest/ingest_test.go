package ingest

import (
	"errors"
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
	rows, _ := b.MetricRows(nil, nil)
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
