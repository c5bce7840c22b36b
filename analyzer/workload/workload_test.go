package workload

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ballast-io/ballast/analyzer/internal/golden"
	"github.com/ballast-io/ballast/models"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const mib = 1024 * 1024

// shape builds a 5-minute window of a given kind of I/O.
type shape struct {
	readMiBs, writeMiBs float64 // MiB/s
	readReq, writeReq   float64 // bytes per request
	seq                 float64
	bw                  []float64
	periodicity         float64
}

var (
	training   = shape{readMiBs: 800, writeMiBs: 5, readReq: 256 * 1024, writeReq: 64 * 1024, seq: 0.5, bw: []float64{790, 810, 805, 795, 800}}
	checkpoint = shape{readMiBs: 10, writeMiBs: 900, readReq: 64 * 1024, writeReq: 4 * mib, seq: 0.95, bw: []float64{0, 0, 4000, 500, 0}, periodicity: 0.8}
	inference  = shape{readMiBs: 300, writeMiBs: 1, readReq: 16 * 1024, writeReq: 4096, seq: 0.05, bw: []float64{280, 320, 300, 310, 290}}
	analytics  = shape{readMiBs: 2000, writeMiBs: 20, readReq: 4 * mib, writeReq: mib, seq: 0.97, bw: []float64{1900, 2100, 2000, 2050, 1950}}
	mixed      = shape{readMiBs: 400, writeMiBs: 350, readReq: 128 * 1024, writeReq: 128 * 1024, seq: 0.5, bw: []float64{700, 800, 750, 760, 740}}
	idle       = shape{readMiBs: 0.1, writeMiBs: 0, readReq: 4096, writeReq: 4096, seq: math.NaN()}
)

func (s shape) window(subject models.Subject, i int) Window {
	start := t0.Add(time.Duration(i) * 5 * time.Minute)
	sec := 300.0
	return Window{
		Subject: subject, Start: start, End: start.Add(5 * time.Minute),
		ReadBytes: s.readMiBs * mib * sec, WriteBytes: s.writeMiBs * mib * sec,
		ReadOps: s.readMiBs * mib * sec / s.readReq, WriteOps: s.writeMiBs * mib * sec / s.writeReq,
		Sequential: s.seq, Bandwidth: s.bw, Periodicity: s.periodicity,
	}
}

type step struct {
	shape shape
	want  Class
}

// TestScenario scripts five groups over 12 windows: a training job that has
// one odd analytics-like window (no shift) and then turns to inference (one
// shift), a checkpoint writer, an analytics scan, a mixed HPC job and an idle
// group. Every window's label must match the script; findings are golden.
func TestScenario(t *testing.T) {
	groups := map[string][]step{}
	var tr []step
	for i := range 12 {
		switch {
		case i == 4:
			tr = append(tr, step{analytics, AnalyticsScan})
		case i >= 7:
			tr = append(tr, step{inference, Inference})
		default:
			tr = append(tr, step{training, TrainingRead})
		}
	}
	groups["train-a"] = tr
	for _, g := range []struct {
		name string
		s    shape
		c    Class
	}{{"ckpt-b", checkpoint, Checkpoint}, {"scan-c", analytics, AnalyticsScan}, {"hpc-d", mixed, Mixed}, {"idle-e", idle, Idle}} {
		for range 12 {
			groups[g.name] = append(groups[g.name], step{g.s, g.c})
		}
	}
	c, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]models.Finding{}
	correct, total := 0, 0
	for i := range 12 {
		now := t0.Add(time.Duration(i+1) * 5 * time.Minute)
		for _, name := range []string{"ckpt-b", "hpc-d", "idle-e", "scan-c", "train-a"} {
			st := groups[name][i]
			l, err := c.Observe(now, st.shape.window(models.Subject{Kind: models.SubjectJob, ID: name}, i))
			if err != nil {
				t.Fatal(err)
			}
			total++
			if l.Class == st.want {
				correct++
			} else {
				t.Errorf("window %d of %s: got %s (scores %v); want %s", i, name, l.Class, l.Scores, st.want)
			}
		}
		for _, f := range c.Findings(now) {
			if err := f.Validate(); err != nil {
				t.Fatal(err)
			}
			seen[f.ID] = f
		}
	}
	t.Logf("label accuracy %d/%d", correct, total)
	var shifts []models.Finding
	for _, f := range seen {
		if f.Kind == KindShift {
			shifts = append(shifts, f)
		}
	}
	if len(shifts) != 1 || shifts[0].Subject.ID != "train-a" || !shifts[0].Start.Equal(t0.Add(35*time.Minute)) {
		t.Fatalf("got shifts %+v; want one, train-a to inference from window 7 (35 min)", shifts)
	}
	if c.Class(models.Subject{Kind: models.SubjectJob, ID: "train-a"}) != Inference {
		t.Errorf("train-a class %s; want inference", c.Class(models.Subject{Kind: models.SubjectJob, ID: "train-a"}))
	}
	out := make([]models.Finding, 0, len(seen))
	for _, f := range seen {
		out = append(out, f)
	}
	sortFindings(out)
	golden.Check(t, "scenario.json", out)
}

func sortFindings(fs []models.Finding) {
	for i := 1; i < len(fs); i++ {
		for j := i; j > 0 && fs[j].ID < fs[j-1].ID; j-- {
			fs[j], fs[j-1] = fs[j-1], fs[j]
		}
	}
}

func TestEvidenceExplainsLabel(t *testing.T) {
	l := Classify(checkpoint.window(models.Subject{Kind: models.SubjectJob, ID: "x"}, 0), Options{})
	names := map[string]float64{}
	for _, e := range l.Evidence() {
		names[e.Name] = e.Value
	}
	for _, n := range []string{"read_fraction", "mean_write_bytes", "burstiness_cv", "why_writes_matter", "why_large_writes", "why_bursty"} {
		if _, ok := names[n]; !ok {
			t.Errorf("evidence lacks %s: %v", n, names)
		}
	}
	if names["why_writes_matter"] != 1 {
		t.Errorf("why_writes_matter = %v; want 1 for 99 %% writes", names["why_writes_matter"])
	}
}

func TestObserveRejectsBadWindows(t *testing.T) {
	c, _ := New(Options{})
	s := models.Subject{Kind: models.SubjectJob, ID: "j"}
	w := training.window(s, 1)
	if _, err := c.Observe(w.End, w); err != nil {
		t.Fatal(err)
	}
	bad := []Window{
		{Subject: s, Start: w.End, End: w.End},
		training.window(s, 0), // overlaps the previous window
	}
	neg := training.window(s, 2)
	neg.ReadBytes = -1
	bad = append(bad, neg)
	for _, b := range bad {
		if _, err := c.Observe(t0.Add(time.Hour), b); err == nil {
			t.Errorf("Observe(%v–%v): got nil error; want one", b.Start, b.End)
		}
	}
}

// TestAmplificationStandsInForSequentiality: with no sequential share known
// (mountstats gives none), read amplification and request sizes decide,
// as they would for the cluster twin's clients: training loaders reading
// 256 KiB through shards, inference reading 64 KiB at random behind 1 MiB or
// 128 KiB read-ahead, a scan streaming 1 MiB requests.
func TestAmplificationStandsInForSequentiality(t *testing.T) {
	s := models.Subject{Kind: models.SubjectJob, ID: "j"}
	cases := []struct {
		name      string
		rpc, amp  float64
		bw        []float64
		want      Class
		writeFrac float64
	}{
		{"training 256K sequential", 256 * 1024, 1.0, []float64{10, 11, 10, 9}, TrainingRead, 0.01},
		{"inference behind 1M read-ahead", mib, 16, []float64{10, 11, 10, 9}, Inference, 0},
		{"inference behind 128K read-ahead", 128 * 1024, 2, []float64{10, 11, 10, 9}, Inference, 0},
		{"scan 1M sequential", mib, 1.02, []float64{10, 11, 10, 9}, AnalyticsScan, 0.01},
	}
	for _, c := range cases {
		w := Window{Subject: s, Start: t0, End: t0.Add(time.Minute),
			ReadBytes: 6e10 * (1 - c.writeFrac), WriteBytes: 6e10 * c.writeFrac,
			ReadOps: 6e10 * (1 - c.writeFrac) / c.rpc, WriteOps: 100,
			Sequential: math.NaN(), ReadAmplification: c.amp, Bandwidth: c.bw}
		if l := Classify(w, Options{}); l.Class != c.want {
			t.Errorf("%s: got %s (scores %v); want %s", c.name, l.Class, l.Scores, c.want)
		}
	}
}

// TestTrainingWindowWithCheckpoint: a training job that keeps reading while
// it writes a periodic checkpoint (a third of the window's bytes, 1 MiB
// writes, in a burst) is labelled checkpoint, not mixed.
func TestTrainingWindowWithCheckpoint(t *testing.T) {
	w := Window{Subject: models.Subject{Kind: models.SubjectJob, ID: "train"}, Start: t0, End: t0.Add(5 * time.Minute),
		ReadBytes: 3e11, ReadOps: 3e11 / (256 * 1024), WriteBytes: 1.6e11, WriteOps: 1.6e11 / mib,
		Sequential: math.NaN(), ReadAmplification: 1, Bandwidth: []float64{1, 1, 1, 9, 1, 1}, Periodicity: 0.8}
	if l := Classify(w, Options{}); l.Class != Checkpoint {
		t.Errorf("got %s (scores %v); want checkpoint", l.Class, l.Scores)
	}
}

// minuteWindow is one minute of reads (and writes) of a group, as the mds
// cuts them from mountstats: no sequential share, amplification known.
func minuteWindow(s models.Subject, i int, readBps, appReq, amp, writeBps, writeReq float64) Window {
	start := t0.Add(time.Duration(i) * time.Minute)
	w := Window{Subject: s, Start: start, End: start.Add(time.Minute),
		ReadBytes: readBps * 60, ReadOps: readBps * 60 / appReq, WriteBytes: writeBps * 60,
		Sequential: math.NaN(), ReadAmplification: amp, Bandwidth: []float64{1, 1.05, 0.95, 1, 1, 1}}
	if writeBps > 0 {
		w.WriteOps = writeBps * 60 / writeReq
		w.Bandwidth = []float64{1, 1, 9, 9, 1, 1}
	}
	return w
}

// TestInferenceBySmallRequests: a model server reading 64 KiB at random
// whose read-ahead was made sensible (no amplification left) is still
// inference — its requests are small and unmerged — while loaders whose
// sequential reads leave as 128 KiB (Linux's default read-ahead) or 256 KiB
// requests stay training. The old classifier judged randomness by
// amplification alone and called the server training-read or mixed.
func TestInferenceBySmallRequests(t *testing.T) {
	s := models.Subject{Kind: models.SubjectJob, ID: "j"}
	for _, c := range []struct {
		name        string
		appReq, amp float64
		want        Class
	}{
		{"inference 64K, read-ahead 64K", 64 * 1024, 1, Inference},
		{"inference 16K, read-ahead 16K", 16 * 1024, 1, Inference},
		{"inference 64K behind 1M read-ahead", 64 * 1024, 16, Inference},
		{"training 128K through 128K read-ahead", 128 * 1024, 1, TrainingRead},
		{"training 256K", 256 * 1024, 1, TrainingRead},
		{"scan 1M", mib, 1, AnalyticsScan},
	} {
		l := Classify(minuteWindow(s, 0, 3e9, c.appReq, c.amp, 0, 0), Options{})
		if l.Class != c.want {
			t.Errorf("%s: got %s (scores %v); want %s", c.name, l.Class, l.Scores, c.want)
		}
	}
}

// TestLoweredReadAheadKeepsThePattern: a model server reads 128 KiB at
// random behind a 1 MiB read-ahead (the servers send 8 bytes per byte
// read: inference) for 8 minutes; then the read-ahead is lowered to 128 KiB
// (the read-ahead loop does this for a random reader) and nothing is
// over-read any more. Its requests, 128 KiB, are what a loader's look like
// behind a 128 KiB read-ahead, so they no longer show the pattern; the last
// seen pattern stands: inference every minute, no workload_shift. Without
// the read-ahead known (or with the requests 4× larger: another reader) the
// windows are judged on their own, training-read, as before. A loader
// reading 128 KiB through a 128 KiB read-ahead from its first window has no
// pattern to keep: training-read.
func TestLoweredReadAheadKeepsThePattern(t *testing.T) {
	s := models.Subject{Kind: models.SubjectClient, ID: "inf00"}
	run := func(ra func(i int) float64, req func(i int) float64, amp func(i int) float64) ([]Class, []models.Finding) {
		c, _ := New(Options{})
		var classes []Class
		var shifts []models.Finding
		for i := range 20 {
			w := minuteWindow(s, i, 800e6, req(i), amp(i), 0, 0)
			w.ReadAhead = ra(i)
			l, err := c.Observe(w.End, w)
			if err != nil {
				t.Fatal(err)
			}
			classes = append(classes, l.Class)
			for _, f := range c.Findings(w.End) {
				if f.Kind == KindShift {
					shifts = append(shifts, f)
				}
			}
		}
		return classes, shifts
	}
	lowered := func(i int) float64 {
		if i < 8 {
			return mib
		}
		return 128 * 1024
	}
	amp := func(i int) float64 {
		if i < 8 {
			return 8
		}
		return 1
	}
	same := func(int) float64 { return 128 * 1024 }
	classes, shifts := run(lowered, same, amp)
	for i, c := range classes {
		if c != Inference {
			t.Errorf("read-ahead lowered at minute 8: minute %d labelled %s; want inference", i, c)
		}
	}
	if len(shifts) != 0 {
		t.Errorf("read-ahead lowered at minute 8: %d workload_shift findings (%s); want none", len(shifts), shifts[0].Summary)
	}
	for name, c := range map[string]struct{ ra, req func(int) float64 }{
		"read-ahead unknown": {func(int) float64 { return 0 }, same},
		"requests 4× larger": {lowered, func(i int) float64 {
			if i < 8 {
				return 128 * 1024
			}
			return 512 * 1024
		}},
	} {
		classes, _ := run(c.ra, c.req, amp)
		if classes[0] != Inference || classes[19] != TrainingRead {
			t.Errorf("%s: minute 0 %s, minute 19 %s; want inference, then training-read judged on its own", name, classes[0], classes[19])
		}
	}
	classes, _ = run(same, same, func(int) float64 { return 1 })
	for i, c := range classes {
		if c != TrainingRead {
			t.Errorf("loader 128K through 128K read-ahead: minute %d labelled %s; want training-read", i, c)
		}
	}
}

// shiftsOf feeds windows to a new classifier and returns its shifts.
func shiftsOf(t *testing.T, ws []Window) []models.Finding {
	t.Helper()
	c, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out []models.Finding
	for _, w := range ws {
		if _, err := c.Observe(w.End, w); err != nil {
			t.Fatal(err)
		}
		for _, f := range c.Findings(w.End) {
			if f.Kind == KindShift {
				out = append(out, f)
			}
		}
	}
	return out
}

// TestBoundaryNoiseIsNotAShift: a group whose best class scores right at
// MinScore (here shard_reads at half truth) crosses it one way and the
// other with measurement noise; its phase did not change, and the old
// classifier reported a shift every few windows.
func TestBoundaryNoiseIsNotAShift(t *testing.T) {
	s := models.Subject{Kind: models.SubjectJob, ID: "j"}
	var ws []Window
	for i := range 60 {
		req := 64 * 1024 * (1 + 0.001*float64(i%5-2)) // 64 KiB ± 0.2 %
		w := minuteWindow(s, i, 3e9, req, 1, 0, 0)
		w.Sequential = 0.9 // known sequential: training-read scores ≈ 0.5
		ws = append(ws, w)
	}
	if l := Classify(ws[0], Options{}); math.Abs(l.Scores[TrainingRead]-0.5) > 0.01 {
		t.Fatalf("training-read scores %v; the test wants it at MinScore", l.Scores[TrainingRead])
	}
	if got := shiftsOf(t, ws); len(got) != 0 {
		t.Errorf("got %d shifts (first %s); want none", len(got), got[0].Summary)
	}
}

// TestCheckpointIsNotAShift: a training job that writes a checkpoint for
// four minutes (longer than the dwell of the old classifier) is still a
// training job: no shift to checkpoint and back.
func TestCheckpointIsNotAShift(t *testing.T) {
	s := models.Subject{Kind: models.SubjectJob, ID: "train"}
	var ws []Window
	for i := range 30 {
		if i >= 10 && i < 14 {
			ws = append(ws, minuteWindow(s, i, 3e9, 256*1024, 1, 3e9, mib))
		} else {
			ws = append(ws, minuteWindow(s, i, 3e9, 256*1024, 1, 0, 0))
		}
	}
	if l := Classify(ws[11], Options{}); l.Class != Checkpoint {
		t.Fatalf("checkpoint window labelled %s; want checkpoint", l.Class)
	}
	if got := shiftsOf(t, ws); len(got) != 0 {
		t.Errorf("got %d shifts (first %s); want none", len(got), got[0].Summary)
	}
}

// TestShiftNeedsMinDwell: three minutes of another class is not a new
// phase; a change that holds is reported once, starting where it began.
func TestShiftNeedsMinDwell(t *testing.T) {
	s := models.Subject{Kind: models.SubjectJob, ID: "j"}
	var ws []Window
	for i := range 40 {
		switch {
		case i >= 5 && i < 8, i >= 20:
			ws = append(ws, minuteWindow(s, i, 3e9, 64*1024, 16, 0, 0)) // inference
		default:
			ws = append(ws, minuteWindow(s, i, 3e9, 256*1024, 1, 0, 0)) // training
		}
	}
	got := shiftsOf(t, ws)
	if len(got) != 1 || !got[0].Start.Equal(t0.Add(20*time.Minute)) || got[0].Summary != "job j changed from training-read to inference" {
		t.Fatalf("got shifts %+v; want one, training-read to inference from minute 20", got)
	}
}

// TestDemandRiseIsAShift: a serving job whose traffic triples (three times
// the READs in flight at the same latency) for longer than MinDwell changed
// its workload although its class did not: one shift, from where the rise
// began. The same rise with the same READs in flight is the supply getting
// better (a larger read-ahead, a fault that ended), and a drop and its
// recovery (a lost server) is the supply too: neither is a shift.
func TestDemandRiseIsAShift(t *testing.T) {
	s := models.Subject{Kind: models.SubjectJob, ID: "serve"}
	run := func(level func(i int) (bps, inFlight float64)) []models.Finding {
		var ws []Window
		for i := range 40 {
			bps, fl := level(i)
			w := minuteWindow(s, i, bps, 64*1024, 1, 0, 0)
			w.ReadInFlight = fl
			ws = append(ws, w)
		}
		return shiftsOf(t, ws)
	}
	demand := run(func(i int) (float64, float64) {
		if i >= 15 && i < 30 {
			return 9e8, 48
		}
		return 3e8, 16
	})
	if len(demand) != 1 || !demand[0].Start.Equal(t0.Add(15*time.Minute)) {
		t.Fatalf("demand tripled: got shifts %+v; want one from minute 15", demand)
	}
	if !strings.Contains(demand[0].Summary, "still runs inference at 3.0×") {
		t.Errorf("summary %q does not say the class and the factor", demand[0].Summary)
	}
	if got := run(func(i int) (float64, float64) {
		if i >= 15 {
			return 9e8, 16
		}
		return 3e8, 16
	}); len(got) != 0 {
		t.Errorf("supply got better: got %d shifts (%s); want none", len(got), got[0].Summary)
	}
	if got := run(func(i int) (float64, float64) {
		if i >= 15 && i < 25 {
			return 5e7, 16
		}
		return 3e8, 16
	}); len(got) != 0 {
		t.Errorf("a server lost for 10 minutes: got %d shifts (%s); want none", len(got), got[0].Summary)
	}
}

// TestLoaderWithLargeReadAheadOnGPUNode: once the read-ahead loop raises a
// starved loader's read-ahead to 1 MiB its READs are scan-sized; on the GPU
// node it feeds it is still training, while the same reads from a node
// without GPUs are a scan. The old classifier called the loader a scan.
func TestLoaderWithLargeReadAheadOnGPUNode(t *testing.T) {
	s := models.Subject{Kind: models.SubjectClient, ID: "edge00"}
	w := minuteWindow(s, 0, 3e9, mib, 1, 0, 0)
	w.GPUNode = true
	if l := Classify(w, Options{}); l.Class != TrainingRead {
		t.Errorf("GPU node: got %s (scores %v); want training-read", l.Class, l.Scores)
	}
	w.GPUNode = false
	if l := Classify(w, Options{}); l.Class != AnalyticsScan {
		t.Errorf("CPU node: got %s (scores %v); want analytics-scan", l.Class, l.Scores)
	}
}

// TestStorageFaultHoldsTheClass: a training job whose reads stall on a
// lost data server for fifteen minutes reads a trickle in small requests,
// which alone scores as another class for longer than MinDwell. Windows
// the stage marks as under a storage fault keep the confirmed class and
// are no shift; once the fault has cleared, a real change still is one,
// counted from the first window after the fault.
func TestStorageFaultHoldsTheClass(t *testing.T) {
	s := models.Subject{Kind: models.SubjectJob, ID: "train"}
	stall := func(i int) Window { return minuteWindow(s, i, 2e7, 16*1024, 4, 0, 0) }
	build := func(fault bool) []Window {
		var ws []Window
		for i := range 60 {
			switch {
			case i >= 10 && i < 25:
				w := stall(i)
				w.StorageFault = fault
				ws = append(ws, w)
			case i >= 40:
				ws = append(ws, minuteWindow(s, i, 3e9, 64*1024, 16, 0, 0)) // inference
			default:
				ws = append(ws, minuteWindow(s, i, 3e9, 256*1024, 1, 0, 0)) // training
			}
		}
		return ws
	}
	if l := Classify(stall(10), Options{}); l.Class == TrainingRead || l.Class == Idle {
		t.Fatalf("stalled window labelled %s; the test wants it labelled as another class", l.Class)
	}
	if got := shiftsOf(t, build(false)); len(got) < 2 {
		t.Fatalf("without the fault mark got %d shifts; the test wants the stall to read as a shift", len(got))
	}
	c, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	var shifts []models.Finding
	for i, w := range build(true) {
		l, err := c.Observe(w.End, w)
		if err != nil {
			t.Fatal(err)
		}
		if i >= 10 && i < 25 && (l.Class != TrainingRead || !l.Held) {
			t.Errorf("window %d under the fault labelled %s (held %v); want training-read held", i, l.Class, l.Held)
		}
		for _, f := range c.Findings(w.End) {
			if f.Kind == KindShift {
				shifts = append(shifts, f)
			}
		}
	}
	if len(shifts) != 1 || !shifts[0].Start.Equal(t0.Add(40*time.Minute)) || shifts[0].Summary != "job train changed from training-read to inference" {
		t.Fatalf("got shifts %+v; want one, training-read to inference from minute 40", shifts)
	}
}
