package checkpoint

import (
	"fmt"
	"math"
	"os"
	"testing"
	"time"

	"github.com/ballast-io/ballast/models"
)

// iorOp is one write operation of the IOR trace.
type iorOp struct {
	bytes, start, end float64
}

// readIORWrites returns the write operations of each flush ("phase") of the
// TMIO trace that has any.
func readIORWrites(t *testing.T) [][]iorOp {
	t.Helper()
	b, err := os.ReadFile("testdata/tmio__ior__parallel__384.msgpack")
	if err != nil {
		t.Fatal(err)
	}
	recs, err := decodeMsgpack(b)
	if err != nil {
		t.Fatal(err)
	}
	var phases [][]iorOp
	for ri, r := range recs {
		arr, ok := r.([]any)
		if !ok || len(arr) == 0 || arr[0] != "write_sync" {
			continue
		}
		ops, ok := arr[len(arr)-1].([]any)
		if !ok {
			t.Fatalf("record %d: last element is %T; want the op list", ri, arr[len(arr)-1])
		}
		var phase []iorOp
		for _, o := range ops {
			f, ok := o.([]any)
			if !ok || len(f) < 3 {
				t.Fatalf("record %d: op %v is not [bytes, start, end, …]", ri, o)
			}
			var op iorOp
			for k, dst := range []*float64{&op.bytes, &op.start, &op.end} {
				if *dst, err = num(f[k]); err != nil {
					t.Fatalf("record %d op field %d: %v", ri, k, err)
				}
			}
			phase = append(phase, op)
		}
		if len(phase) > 0 {
			phases = append(phases, phase)
		}
	}
	return phases
}

// bandwidthSeries spreads each op's bytes evenly over [start, end] and bins
// the result every step, the write-bandwidth series a monitor would sample.
func bandwidthSeries(phases [][]iorOp, step float64, origin time.Time) []Point {
	last := 0.0
	for _, p := range phases {
		for _, o := range p {
			last = math.Max(last, o.end)
		}
	}
	n := int(last/step) + 10
	bins := make([]float64, n)
	for _, p := range phases {
		for _, o := range p {
			d := o.end - o.start
			if d <= 0 {
				bins[int(o.start/step)] += o.bytes
				continue
			}
			for i := int(o.start / step); float64(i)*step < o.end; i++ {
				lo := math.Max(o.start, float64(i)*step)
				hi := math.Min(o.end, float64(i+1)*step)
				bins[i] += o.bytes * (hi - lo) / d
			}
		}
	}
	pts := make([]Point, n)
	for i, b := range bins {
		// Each point is the rate of the bin that ends at its time.
		pts[i] = Point{T: origin.Add(time.Duration(float64(i+1) * step * float64(time.Second))), BytesPerSec: b / step}
	}
	return pts
}

// TestIORTraceEightWritePhases runs the analyzer on the real IOR trace.
//
// Truth, derived from the trace itself: each flush of the trace holds one
// IOR iteration, so write phase i starts at the earliest t_start and ends at
// the latest t_end of its write operations, and carries the sum of their
// bytes (384 ranks × 20 MiB). The true period is the mean spacing of the
// phase starts, (start₈ − start₁) / 7.
func TestIORTraceEightWritePhases(t *testing.T) {
	phases := readIORWrites(t)
	if len(phases) != 8 {
		t.Fatalf("trace has %d write phases; the IOR run (-i 8) should have 8", len(phases))
	}
	type truth struct{ start, end, bytes float64 }
	var want []truth
	for _, p := range phases {
		tr := truth{start: math.Inf(1), end: math.Inf(-1)}
		for _, o := range p {
			tr.start = math.Min(tr.start, o.start)
			tr.end = math.Max(tr.end, o.end)
			tr.bytes += o.bytes
		}
		want = append(want, tr)
	}
	truePeriod := (want[7].start - want[0].start) / 7
	var derivation string
	for i, w := range want {
		derivation += fmt.Sprintf("\n  phase %d: %.3f–%.3f s, %.0f bytes", i+1, w.start, w.end, w.bytes)
	}
	t.Logf("truth from the trace:%s\n  period (start₈−start₁)/7 = %.3f s", derivation, truePeriod)

	origin := time.Date(2024, 2, 28, 20, 0, 0, 0, time.UTC)
	const step = 0.1
	pts := bandwidthSeries(phases, step, origin)
	per, bursts, ok := EstimatePeriod(pts, Params{})
	if len(bursts) != 8 {
		for _, b := range bursts {
			t.Logf("burst %.2f–%.2f s %.3g B", b.Start.Sub(origin).Seconds(), b.End.Sub(origin).Seconds(), b.Bytes)
		}
		t.Fatalf("found %d bursts; want the 8 write phases", len(bursts))
	}
	for i, b := range bursts {
		s, e := b.Start.Sub(origin).Seconds(), b.End.Sub(origin).Seconds()
		t.Logf("burst %d: %.2f–%.2f s, %.3g B, mean %.3g B/s", i+1, s, e, b.Bytes, b.MeanBandwidth)
		if math.Abs(s-want[i].start) > 2*step || e < want[i].start || s > want[i].end {
			t.Errorf("burst %d starts %.2f s; want the phase start %.3f s ± %.1f s", i+1, s, want[i].start, 2*step)
		}
		if rel := math.Abs(b.Bytes-want[i].bytes) / want[i].bytes; rel > 0.05 {
			t.Errorf("burst %d carries %.4g bytes; want %.4g ± 5%%", i+1, b.Bytes, want[i].bytes)
		}
	}
	if !ok {
		t.Fatal("no period found")
	}
	got := per.Period.Seconds()
	t.Logf("period %.3f s (DFT %.3f, ACF %.3f), confidence %.2f (harmonic share %.2f, ACF %.2f, coherence %.2f), jitter %s",
		got, per.DFTPeriod.Seconds(), per.ACFPeriod.Seconds(), per.Confidence, per.DFTShare, per.ACF, per.Coherence, per.Jitter)
	if rel := math.Abs(got-truePeriod) / truePeriod; rel > 0.05 {
		t.Errorf("period %.3f s; want %.3f s ± 5%%", got, truePeriod)
	}
	if per.Confidence < 0.5 {
		t.Errorf("confidence %.2f; want ≥ 0.5 for eight regular phases", per.Confidence)
	}
}

// TestIORTraceStreaming feeds the same series through the Detector one
// second at a time, as the pipeline would, and checks the findings: eight
// burst findings with stable ids (no duplicates when thresholds move) and a
// forecast whose period matches the trace's.
func TestIORTraceStreaming(t *testing.T) {
	phases := readIORWrites(t)
	truePeriod := 0.0
	{
		first, last := math.Inf(1), math.Inf(1)
		for _, o := range phases[0] {
			first = math.Min(first, o.start)
		}
		for _, o := range phases[7] {
			last = math.Min(last, o.start)
		}
		truePeriod = (last - first) / 7
	}
	origin := time.Date(2024, 2, 28, 20, 0, 0, 0, time.UTC)
	pts := bandwidthSeries(phases, 0.1, origin)
	d, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	ior := models.Subject{Kind: models.SubjectJob, ID: "ior-384"}
	seen := map[string]models.Finding{}
	for i := 0; i < len(pts); i += 10 {
		batch := pts[i:min(i+10, len(pts))]
		now := batch[len(batch)-1].T
		if err := d.Observe(now, ior, batch...); err != nil {
			t.Fatal(err)
		}
		for _, f := range d.Findings(now) {
			seen[f.ID] = f
		}
	}
	var bursts, forecasts []models.Finding
	for _, f := range seen {
		switch f.Kind {
		case KindBurst:
			bursts = append(bursts, f)
		case KindForecast:
			forecasts = append(forecasts, f)
		}
	}
	if len(bursts) != 8 {
		sortByStart(bursts)
		for _, b := range bursts {
			t.Logf("%s", b.Summary+" @ "+b.Start.Sub(origin).String()+"–"+b.End.Sub(origin).String())
		}
		t.Errorf("got %d checkpoint_burst findings; want 8", len(bursts))
	}
	if len(forecasts) != 1 {
		sortByStart(forecasts)
		for _, b := range forecasts {
			t.Logf("%s %s–%s", b.Summary, b.Start.Sub(origin), b.End.Sub(origin))
		}
		t.Fatalf("got %d checkpoint_forecast findings; want 1", len(forecasts))
	}
	f := forecasts[0]
	var period float64
	for _, e := range f.Evidence {
		if e.Name == "period_seconds" {
			period = e.Value
		}
	}
	if math.Abs(period-truePeriod)/truePeriod > 0.05 {
		t.Errorf("forecast period %.3f s; want %.3f s ± 5%%", period, truePeriod)
	}
	t.Logf("forecast: %s", f.Summary)
}

func sortByStart(fs []models.Finding) {
	for i := 1; i < len(fs); i++ {
		for j := i; j > 0 && fs[j].Start.Before(fs[j-1].Start); j-- {
			fs[j], fs[j-1] = fs[j-1], fs[j]
		}
	}
}
