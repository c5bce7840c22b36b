package ingest

import (
	"reflect"
	"strings"
	"testing"

	"github.com/ballast-io/ballast/models"
)

// TestSamplesCopiesEveryRowOut checks Samples against copying each row
// out on its own, with and without extra and default labels, and that the
// samples own their memory: reusing the batch and its body changes none
// of them, and appending to one sample's labels leaves the next alone.
func TestSamplesCopiesEveryRowOut(t *testing.T) {
	body := "# TYPE x counter\nx{a=\"1\",b=\"\"} 1 1700000000000\nx{a=\"2\"} 2\ny 3.5\nz{node=\"own\",q=\"é\"} -1\n" +
		"x{a=\"2\"} 4 1700000002000\n"
	for _, lim := range []Limits{
		{DefaultTimestamp: 42},
		{DefaultTimestamp: 42, ExtraLabels: []models.Label{{Name: "node", Value: "ds01"}, {Name: "a", Value: "over"}}},
		{DefaultTimestamp: 42, DefaultLabels: []models.Label{{Name: "role", Value: "ds"}, {Name: "node", Value: "dflt"}}},
		{DefaultTimestamp: 42, ExtraLabels: []models.Label{{Name: "job", Value: "j"}}, DefaultLabels: []models.Label{{Name: "role", Value: "ds"}}},
	} {
		buf := []byte(body)
		var b Batch
		if err := ParseText(string(buf), &lim, &b); err != nil {
			t.Fatal(err)
		}
		var want []models.Sample
		for i := range b.rows {
			r := &b.rows[i]
			src := b.rowLabels(r)
			ls := make([]models.Label, len(src))
			for j, l := range src {
				ls[j] = models.Label{Name: strings.Clone(l.Name), Value: strings.Clone(l.Value)}
			}
			want = append(want, models.Sample{Name: strings.Clone(r.name), Labels: ls, Timestamp: r.ts, Value: r.v})
		}
		got := b.Samples()
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("limits %+v: got %v; want %v", lim, got, want)
		}
		for i := range got {
			if cap(got[i].Labels) != len(got[i].Labels) {
				t.Fatalf("sample %d: labels cap %d; want their length %d", i, cap(got[i].Labels), len(got[i].Labels))
			}
		}
		got[0].Labels = append(got[0].Labels, models.Label{Name: "extra", Value: "v"})
		b.Reset()
		if err := ParseText("other{c=\"3\"} 9\n", &Limits{}, &b); err != nil {
			t.Fatal(err)
		}
		_ = b.Samples()
		got[0].Labels = got[0].Labels[:len(want[0].Labels)]
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("limits %+v: after reuse got %v; want %v", lim, got, want)
		}
	}
}
