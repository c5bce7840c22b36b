package ingest

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/prompb"
	vmstorage "github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"

	"github.com/ballast-io/ballast/models"
)

// marshalReference is what appendMetricNameRaw must equal: lib/storage's
// MarshalMetricNameRaw of {__name__=name} followed by ls, on a copy (it
// rewrites __name__ keys in place).
func marshalReference(dst []byte, name string, ls []models.Label) []byte {
	pl := []prompb.Label{{Name: "__name__", Value: name}}
	for _, l := range ls {
		pl = append(pl, prompb.Label{Name: l.Name, Value: l.Value})
	}
	return vmstorage.MarshalMetricNameRaw(dst, pl)
}

// checkMetricNameRaw compares appendMetricNameRaw with the reference for
// one label set, appended behind prefix, with and without room to spare.
func checkMetricNameRaw(t testing.TB, prefix []byte, name string, ls []models.Label) {
	t.Helper()
	want := marshalReference(bytes.Clone(prefix), name, ls)
	for _, spare := range []int{0, 1, 1000} {
		dst := append(make([]byte, 0, len(prefix)+spare), prefix...)
		got := appendMetricNameRaw(dst, name, ls)
		if !bytes.Equal(got, want) {
			t.Fatalf("%q%v (%d bytes spare):\n got %q\nwant %q", name, ls, spare, got, want)
		}
	}
}

func TestAppendMetricNameRaw(t *testing.T) {
	long := strings.Repeat("v", 65535)
	for _, c := range []struct {
		name string
		ls   []models.Label
	}{
		{"m", nil},
		{"", nil},
		{"", []models.Label{{Name: "a", Value: "1"}}},
		{"bench_ingest", []models.Label{{Name: "job", Value: "bench"}, {Name: "instance", Value: "host-00001"}, {Name: "series", Value: "0000012"}, {Name: "shard", Value: "000"}}},
		{"m", []models.Label{{Name: "a", Value: ""}, {Name: "b", Value: "2"}, {Name: "", Value: "x"}, {Name: "c", Value: ""}}},
		{"m", []models.Label{{Name: "__name__", Value: "other"}, {Name: "__name__", Value: ""}}},
		{"m\x00\x01\x02", []models.Label{{Name: "a\x00", Value: "\x01\x02\xff"}}},
		{"m", []models.Label{{Name: "a", Value: long}, {Name: long[:300], Value: "ü"}}},
		{long, []models.Label{{Name: "a", Value: long}}},
	} {
		checkMetricNameRaw(t, nil, c.name, c.ls)
		checkMetricNameRaw(t, []byte("prefix"), c.name, c.ls)
	}
}

// TestAppendMetricNameRawRandom is the property over random label sets:
// names and values of 0 to 70 bytes drawn mostly from the bytes that
// matter to the format (0, 1, 2, 0xff, ASCII), __name__ keys and empty
// values mixed in, appended behind a random prefix.
func TestAppendMetricNameRawRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 2026))
	str := func() string {
		switch r.IntN(8) {
		case 0:
			return ""
		case 1:
			return "__name__"
		}
		b := make([]byte, r.IntN(70))
		for i := range b {
			b[i] = "\x00\x01\x02\xffab_9:"[r.IntN(9)]
		}
		return string(b)
	}
	for range 20000 {
		ls := make([]models.Label, r.IntN(12))
		for i := range ls {
			ls[i] = models.Label{Name: str(), Value: str()}
		}
		checkMetricNameRaw(t, []byte(str()), str(), ls)
	}
}

// FuzzAppendMetricNameRaw: labels are the 0xff-separated fields of spec,
// name and value in turn.
func FuzzAppendMetricNameRaw(f *testing.F) {
	f.Add([]byte("p"), "bench_ingest", []byte("job\xffbench\xffinstance\xffhost-1\xffempty\xff"))
	f.Add([]byte(nil), "", []byte("__name__\xffx\xff\x00\x01\xff\x02"))
	f.Fuzz(func(t *testing.T, prefix []byte, name string, spec []byte) {
		if len(name) > 65535 {
			return
		}
		var ls []models.Label
		fields := strings.Split(string(spec), "\xff")
		for i := 0; i+1 < len(fields); i += 2 {
			if len(fields[i]) > 65535 || len(fields[i+1]) > 65535 {
				return
			}
			ls = append(ls, models.Label{Name: fields[i], Value: fields[i+1]})
		}
		checkMetricNameRaw(t, prefix, name, ls)
	})
}
