// Package workload labels each client group's I/O in each time window as
// training-read, checkpoint, inference, analytics-scan or mixed/HPC, from
// features a storage service can see without application hooks: the
// read/write byte mix, mean request sizes, the sequential share of the
// bytes, burstiness (coefficient of variation of the bandwidth within the
// window) and periodicity (the checkpoint analyzer's confidence).
//
// Each class is a fuzzy AND (product) of ramps over those features, so every
// label comes with the degree to which each feature supports it; the label is
// the best class when its score reaches MinScore, mixed/HPC otherwise.
//
// A class change becomes a workload_shift finding only when it is a change
// of the job's phase, not of one window's I/O: the new class must hold for
// ConfirmWindows windows spanning at least MinDwell, in each of which the
// old class has lost its support (scores below MinScore − Hysteresis), and
// checkpoint windows never count towards a shift (a checkpoint is a burst
// inside a training job, not a new workload). A window in which the group
// saw a storage fault (Window.StorageFault) keeps the confirmed class and
// restarts the count: a stall on a lost server is not a phase.
package workload

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/ballast-io/ballast/models"
)

// Finding kinds this analyzer emits.
const (
	KindShift   = "workload_shift"
	KindProfile = "workload_profile"
)

// Class is a workload label.
type Class string

// The workload classes. Idle windows (too little I/O to judge) get no class
// change.
const (
	TrainingRead  Class = "training-read"
	Checkpoint    Class = "checkpoint"
	Inference     Class = "inference"
	AnalyticsScan Class = "analytics-scan"
	Mixed         Class = "mixed-hpc"
	Idle          Class = "idle"
)

// Window is one client group's I/O over [Start, End).
type Window struct {
	Subject               models.Subject
	Start, End            time.Time
	ReadBytes, WriteBytes float64
	ReadOps, WriteOps     float64
	// Sequential is the share (0..1) of bytes whose request began where the
	// stream's previous request ended. Set it to NaN when unknown: its zero
	// value means "entirely random".
	Sequential float64
	// ReadAmplification is bytes read from the servers ÷ bytes the
	// application read (mountstats serverreadbytes ÷ normalreadbytes);
	// 0 or NaN when unknown. Read-ahead wasted on random reads pushes it above 1;
	// sequential streams stay near 1. It stands in for Sequential when that
	// is unknown.
	ReadAmplification float64
	// Bandwidth holds the group's total bandwidth sampled across the window,
	// for burstiness; fewer than 2 samples = unknown.
	Bandwidth []float64
	// Periodicity is the confidence (0..1) of a periodic write rhythm from
	// the checkpoint analyzer; 0 when none.
	Periodicity float64
	// GPUNode says the group's nodes carry GPUs (their agents export
	// DCGM series); false when they carry none or it is unknown.
	GPUNode bool
	// ReadInFlight is the mean number of READ requests outstanding over
	// the window (mountstats READ execute time ÷ window length, Little's
	// law); 0 or NaN when unknown.
	ReadInFlight float64
	// ReadAhead is the read-ahead window of the group's NFS mounts in
	// bytes (the largest, as the agents export it); 0 or NaN when unknown.
	ReadAhead float64
	// StorageFault says the group saw a storage fault at some point in
	// the window (a data server it reads from down, I/O errors in its
	// LAYOUTSTATS): its I/O then shows what the fault left of its demand,
	// not its workload, and the window holds the confirmed class.
	StorageFault bool
}

// Features are the numbers a label is computed from.
type Features struct {
	ReadFraction  float64 // of bytes
	MeanReadBytes float64 // application bytes per read request
	// ReadRequestBytes is the bytes one READ request brought from the
	// servers (mean read bytes × amplification): what read-ahead made of
	// the application's reads
	ReadRequestBytes float64
	MeanWriteBytes   float64 // per write request
	Sequential       float64 // NaN unknown
	Amplification    float64 // server ÷ application read bytes; NaN unknown
	Burstiness       float64 // coefficient of variation of the bandwidth; NaN unknown
	Periodicity      float64
	BytesPerSecond   float64
	ReadInFlight     float64 // NaN unknown
	ReadAhead        float64 // bytes; NaN unknown
	// PatternHidden: the mounts' read-ahead is no larger than the READ
	// requests and nothing was over-read, so the requests cannot tell a
	// random reader from a sequential one (patternHidden)
	PatternHidden   bool
	GPUNode         bool
	WindowSeconds   float64
	TotalBytes      float64
	supportingRamps map[string]float64
}

// Label is the classification of one window.
type Label struct {
	Subject    models.Subject
	Start, End time.Time
	Class      Class
	Score      float64
	Scores     map[Class]float64
	Features   Features
	// Held is set when the window saw a storage fault and Class is the
	// group's confirmed class, not what the window's I/O scored.
	Held bool
	// PatternKept is set when the window's requests could not show its
	// access pattern (Features.PatternHidden) and the group's last seen
	// pattern stood in for it (Classifier.Observe).
	PatternKept bool
}

// Options tune the classifier. Zero values take the defaults in brackets.
type Options struct {
	MinScore       float64 // best class score needed, else mixed [0.5]
	MinBytesPerSec float64 // below this a window is idle [1 MB/s]
	ConfirmWindows int     // windows a new class must hold before a shift [2]
	// IntensityFactor is how many times its phase's demand a job must
	// move, in the same class, for MinDwell before that is a shift [2].
	IntensityFactor float64
	// MinDwell is the least time a new class must hold before a shift [5m]:
	// a job's phase (a training run, a serving deployment, a scan) lasts
	// tens of minutes to days, a checkpoint or a stall seconds to minutes.
	MinDwell time.Duration
	// Hysteresis is how far below MinScore the confirmed class's own score
	// must fall in a window before that window counts towards a shift
	// [0.15]: a window scoring near MinScore moves across it with
	// measurement noise alone, and must not flip the job's class.
	Hysteresis float64
}

func (o Options) withDefaults() Options {
	if o.MinScore == 0 {
		o.MinScore = 0.5
	}
	if o.MinBytesPerSec == 0 {
		o.MinBytesPerSec = 1e6
	}
	if o.ConfirmWindows == 0 {
		o.ConfirmWindows = 2
	}
	if o.IntensityFactor == 0 {
		o.IntensityFactor = 2
	}
	if o.MinDwell == 0 {
		o.MinDwell = 5 * time.Minute
	}
	if o.Hysteresis == 0 {
		o.Hysteresis = 0.15
	}
	return o
}

// ramp is 0 below lo, 1 above hi, linear between.
func ramp(x, lo, hi float64) float64 {
	switch {
	case math.IsNaN(x):
		return 0.5 // unknown feature: neither for nor against
	case x <= lo:
		return 0
	case x >= hi:
		return 1
	}
	return (x - lo) / (hi - lo)
}

func log2(x float64) float64 {
	if x <= 0 {
		return math.NaN()
	}
	return math.Log2(x)
}

const kib = 1024

// Extract computes the features of w.
func Extract(w Window) Features {
	f := Features{Sequential: w.Sequential, Amplification: w.ReadAmplification, Periodicity: w.Periodicity, Burstiness: math.NaN(), GPUNode: w.GPUNode}
	f.ReadInFlight, f.ReadAhead = math.NaN(), math.NaN()
	if w.ReadInFlight > 0 {
		f.ReadInFlight = w.ReadInFlight
	}
	if w.ReadAhead > 0 {
		f.ReadAhead = w.ReadAhead
	}
	f.TotalBytes = w.ReadBytes + w.WriteBytes
	f.WindowSeconds = w.End.Sub(w.Start).Seconds()
	if f.WindowSeconds > 0 {
		f.BytesPerSecond = f.TotalBytes / f.WindowSeconds
	}
	f.ReadFraction = math.NaN()
	if f.TotalBytes > 0 {
		f.ReadFraction = w.ReadBytes / f.TotalBytes
	}
	f.MeanReadBytes, f.MeanWriteBytes, f.ReadRequestBytes = math.NaN(), math.NaN(), math.NaN()
	if w.ReadOps > 0 {
		f.MeanReadBytes = w.ReadBytes / w.ReadOps
		f.ReadRequestBytes = f.MeanReadBytes
		if w.ReadAmplification > 0 {
			f.ReadRequestBytes *= w.ReadAmplification
		}
	}
	if w.WriteOps > 0 {
		f.MeanWriteBytes = w.WriteBytes / w.WriteOps
	}
	f.PatternHidden = patternHidden(f)
	if n := len(w.Bandwidth); n >= 2 {
		mean, sq := 0.0, 0.0
		for _, b := range w.Bandwidth {
			mean += b
		}
		mean /= float64(n)
		for _, b := range w.Bandwidth {
			sq += (b - mean) * (b - mean)
		}
		if mean > 0 {
			f.Burstiness = math.Sqrt(sq/float64(n-1)) / mean
		}
	}
	return f
}

// memberships are the fuzzy truths of the feature statements the classes
// are built from, by name so evidence can show them.
func memberships(f Features) map[string]float64 {
	// Access pattern: the sequential share when known, else what the
	// requests on the wire show (random reads either waste read-ahead or,
	// where read-ahead is no larger than they are, go out as small
	// requests), else unknown (0.5).
	random, sequential := 0.5, 0.5
	switch {
	case !math.IsNaN(f.Sequential):
		random = 1 - ramp(f.Sequential, 0.2, 0.5)
		sequential = ramp(f.Sequential, 0.6, 0.85)
	case f.Amplification > 0:
		small := smallRequests(f.ReadRequestBytes)
		random = math.Max(ramp(f.Amplification, 1.2, 1.8), small)
		sequential = math.Min(1-ramp(f.Amplification, 1.1, 1.5), 1-small)
	}
	veryLarge := ramp(log2(f.MeanReadBytes), log2(512*kib), log2(1024*kib))
	gpu := 0.0
	if f.GPUNode {
		gpu = 1
	}
	return map[string]float64{
		// a loader whose read-ahead was raised sends scan-sized requests;
		// on a GPU node it is still feeding the GPUs
		"loader_reads":  math.Max(ramp(log2(f.MeanReadBytes), log2(32*kib), log2(128*kib))*(1-veryLarge), veryLarge*gpu),
		"cpu_node":      1 - gpu,
		"read_heavy":    ramp(f.ReadFraction, 0.6, 0.85),
		"writes_matter": ramp(1-f.ReadFraction, 0.2, 0.4),
		"large_writes":  ramp(log2(f.MeanWriteBytes), log2(256*kib), log2(1024*kib)),
		"scan_reads":    veryLarge,
		"shard_reads":   ramp(log2(f.MeanReadBytes), log2(32*kib), log2(128*kib)) * (1 - veryLarge),
		"sequential":    sequential,
		"not_random":    1 - random,
		"random":        random,
		"steady":        1 - ramp(f.Burstiness, 0.8, 1.5),
		"bursty":        math.Max(ramp(f.Burstiness, 0.3, 0.6), ramp(f.Periodicity, 0.3, 0.6)),
	}
}

// patternHidden reports whether f's READs cannot show its access pattern:
// the servers sent no more than the application read (amplification under
// 1.1) in requests at least as large as the mounts' read-ahead (95 %). A
// random reader shows itself by what read-ahead adds to its reads; once
// the read-ahead is no larger than its reads (an operator's setting, or
// the read-ahead loop lowering it for this very reader), it reads exactly
// what it asks for, as a sequential reader does — on a real Linux client
// too, whose readahead reads a random request as it is. With read-ahead
// larger than the requests and no over-read the reads are sequential, and
// that is seen.
func patternHidden(f Features) bool {
	return f.ReadAhead > 0 && f.Amplification > 0 && f.Amplification < 1.1 && f.MeanReadBytes >= 0.95*f.ReadAhead
}

// patternTerms are the memberships that state the access pattern.
var patternTerms = []string{"random", "not_random", "sequential"}

// smallRequests is the truth of "the READ requests on the wire are small",
// 1 at 64 KiB or less, 0 at 128 KiB or more (log scale between). A
// sequential reader's requests are merged by read-ahead up to the mount's
// rsize: with Linux's smallest default read-ahead (128 KiB) and any
// rsize ≥ 128 KiB they leave as 128 KiB or larger. Random small reads
// (embedding and KV lookups, a model server paging weights: 4–64 KiB) are
// not merged: each is a request of its own size, bound by the round trip
// rather than by bandwidth. So once read-ahead is sensible for a random
// reader (no amplification left), its request size still tells it apart
// from a loader streaming shards.
func smallRequests(b float64) float64 {
	return 1 - ramp(log2(b), log2(64*kib), log2(128*kib))
}

// rules defines each class as the product of its statements. Training
// loaders read shards (sequential within a file, 64 KiB–512 KiB requests,
// larger once read-ahead grows them) at the steady pace of the GPUs, on the
// GPU nodes they feed; scans stream large requests from CPU nodes; inference
// reads weights at random; checkpoints write large requests in bursts. A
// checkpoint needs only a third of the window's bytes to be its writes: a
// training job keeps reading while it checkpoints, and the window is about
// the checkpoint.
var rules = []struct {
	class Class
	terms []string
}{
	{Checkpoint, []string{"writes_matter", "large_writes", "bursty"}},
	{AnalyticsScan, []string{"read_heavy", "sequential", "scan_reads", "cpu_node"}},
	{TrainingRead, []string{"read_heavy", "not_random", "loader_reads", "steady"}},
	{Inference, []string{"read_heavy", "random"}},
}

// Classify labels one window.
func Classify(w Window, o Options) Label {
	return classify(w, o.withDefaults(), nil)
}

// classify labels w; pattern, when not nil, replaces the access-pattern
// memberships (patternTerms) of a window whose own cannot show them.
func classify(w Window, o Options, pattern map[string]float64) Label {
	f := Extract(w)
	l := Label{Subject: w.Subject, Start: w.Start, End: w.End, Features: f, Scores: map[Class]float64{}}
	if !(f.BytesPerSecond >= o.MinBytesPerSec) {
		l.Class = Idle
		return l
	}
	m := memberships(f)
	if pattern != nil {
		for _, t := range patternTerms {
			m[t] = pattern[t]
		}
		l.PatternKept = true
	}
	f.supportingRamps = m
	l.Features = f
	best := 0.0
	for _, r := range rules {
		s := 1.0
		for _, t := range r.terms {
			s *= m[t]
		}
		l.Scores[r.class] = s
		if s > best {
			best, l.Class = s, r.class
		}
	}
	l.Scores[Mixed] = 1 - best
	if best < o.MinScore {
		l.Class, l.Score = Mixed, 1-best
	} else {
		l.Score = best
	}
	return l
}

// Evidence explains a label: the features, then the statements of the
// chosen class (or of the runner-up for mixed) with their truth.
func (l Label) Evidence() []models.Evidence {
	r3 := func(x float64) float64 { return math.Round(x*1000) / 1000 }
	f := l.Features
	var ev []models.Evidence
	add := func(name string, v float64, unit, note string) {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			ev = append(ev, models.Evidence{Name: name, Value: r3(v), Unit: unit, Note: note})
		}
	}
	add("read_fraction", f.ReadFraction, "ratio", "of bytes")
	add("mean_read_bytes", f.MeanReadBytes, "B", "per request")
	add("mean_write_bytes", f.MeanWriteBytes, "B", "per request")
	add("sequential_fraction", f.Sequential, "ratio", "")
	add("read_amplification", f.Amplification, "", "server ÷ application read bytes")
	add("read_request_bytes", f.ReadRequestBytes, "B", "server bytes per READ request")
	add("burstiness_cv", f.Burstiness, "", "coefficient of variation of bandwidth")
	add("periodicity", f.Periodicity, "", "checkpoint analyzer confidence")
	add("bytes_per_second", f.BytesPerSecond, "B/s", "")
	add("read_in_flight", f.ReadInFlight, "", "mean READ requests outstanding")
	add("read_ahead_bytes", f.ReadAhead, "B", "the mounts' read-ahead window")
	if l.Held {
		ev = append(ev, models.Evidence{Name: "storage_fault", Value: 1, Note: "a storage fault in the window: class held from the confirmed phase"})
	}
	if l.PatternKept {
		ev = append(ev, models.Evidence{Name: "access_pattern_kept", Value: 1, Note: "read-ahead no larger than the reads hides the access pattern: the group's last seen pattern stands"})
	}
	explain := l.Class
	if explain == Mixed {
		best := 0.0
		for _, r := range rules {
			if s := l.Scores[r.class]; s > best {
				best, explain = s, r.class
			}
		}
		if best > 0 {
			add("runner_up_"+string(explain), best, "", "best single class, below the minimum score")
		}
	}
	for _, r := range rules {
		if r.class != explain {
			continue
		}
		for _, t := range r.terms {
			add("why_"+t, f.supportingRamps[t], "", "fuzzy truth of the statement for class "+string(r.class))
		}
	}
	for _, r := range rules {
		add("score_"+string(r.class), l.Scores[r.class], "", "")
	}
	return ev
}

// group is the per-subject state of the classifier.
type group struct {
	stable      Class
	stableSince time.Time
	stableScore float64
	cand        Class
	candSince   time.Time
	candCount   int
	last        Label
	// demand of the confirmed phase: bytes/s of its recent windows (the
	// reference) and of the windows at least IntensityFactor above it
	level     []levelSample
	rise      []levelSample
	riseSince time.Time
	// pattern holds the access-pattern memberships of the group's last
	// window that showed them, and patternReq its bytes per READ: a
	// window whose read-ahead hides its pattern takes them while it
	// reads in requests of about the same size (within 2×) — the
	// mount changed, not the job
	pattern    map[string]float64
	patternReq float64
}

// levelSample is one window's demand and READs in flight (NaN unknown).
type levelSample struct{ bps, inFlight float64 }

func sampleOf(l Label) levelSample {
	return levelSample{l.Features.BytesPerSecond, l.Features.ReadInFlight}
}

// medians returns the median demand and the median READs in flight of xs
// (NaN when a sample lacks it).
func medians(xs []levelSample) (bps, inFlight float64) {
	b, f := make([]float64, len(xs)), make([]float64, len(xs))
	for i, x := range xs {
		b[i], f[i] = x.bps, x.inFlight
	}
	inFlight = median(f)
	for _, x := range f {
		if math.IsNaN(x) {
			inFlight = math.NaN()
		}
	}
	return median(b), inFlight
}

// levelKeep is how many recent windows of a phase its reference demand is
// the median of.
const levelKeep = 10

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Classifier labels windows and tracks each group's class over time. Feed
// windows in time order per group with Observe; read findings with Findings.
// It is not safe for concurrent use.
type Classifier struct {
	opts    Options
	groups  map[models.Subject]*group
	pending []models.Finding
}

// New returns a classifier with opts (zero values take the defaults).
func New(opts Options) (*Classifier, error) {
	o := opts.withDefaults()
	if o.MinScore <= 0 || o.MinScore > 1 || o.ConfirmWindows < 1 || o.MinDwell < 0 || o.Hysteresis < 0 || o.Hysteresis >= o.MinScore || !(o.IntensityFactor > 1) {
		return nil, fmt.Errorf("invalid workload options: MinScore %v must be in (0, 1], ConfirmWindows %d at least 1, MinDwell %s not negative, Hysteresis %v in [0, MinScore) and IntensityFactor %v above 1", o.MinScore, o.ConfirmWindows, o.MinDwell, o.Hysteresis, o.IntensityFactor)
	}
	return &Classifier{opts: o, groups: map[models.Subject]*group{}}, nil
}

// Observe labels w and updates its group's class; it returns the label.
func (c *Classifier) Observe(now time.Time, w Window) (Label, error) {
	switch {
	case !w.End.After(w.Start):
		return Label{}, fmt.Errorf("cannot classify window of %q: end %s is not after start %s", w.Subject, w.End.Format(time.RFC3339), w.Start.Format(time.RFC3339))
	case w.End.After(now):
		return Label{}, fmt.Errorf("cannot classify window of %q: it ends at %s, after now %s", w.Subject, w.End.Format(time.RFC3339), now.Format(time.RFC3339))
	case w.ReadBytes < 0 || w.WriteBytes < 0 || w.ReadOps < 0 || w.WriteOps < 0:
		return Label{}, fmt.Errorf("cannot classify window of %q: negative byte or op count", w.Subject)
	}
	g := c.groups[w.Subject]
	if g == nil {
		g = &group{}
		c.groups[w.Subject] = g
	}
	if !g.last.End.IsZero() && w.Start.Before(g.last.End) {
		return Label{}, fmt.Errorf("cannot classify window of %q: it starts at %s, before the previous window ended at %s", w.Subject, w.Start.Format(time.RFC3339), g.last.End.Format(time.RFC3339))
	}
	l := classify(w, c.opts, nil)
	if f := l.Features; l.Class != Idle && !math.IsNaN(f.Amplification) && f.Amplification > 0 {
		switch r := f.MeanReadBytes / g.patternReq; {
		case !f.PatternHidden:
			m := f.supportingRamps
			if g.pattern == nil {
				g.pattern = make(map[string]float64, len(patternTerms))
			}
			g.patternReq = f.MeanReadBytes
			for _, t := range patternTerms {
				g.pattern[t] = m[t]
			}
		case g.pattern != nil && r >= 0.5 && r <= 2:
			l = classify(w, c.opts, g.pattern)
		}
	}
	if w.StorageFault {
		// A client whose reads fail or hang on a lost server stalls (and
		// with it every rank that waits on it): its counters show the
		// fault, not a new phase. The window keeps the confirmed class and
		// breaks any candidate, so a shift needs ConfirmWindows windows
		// wholly after the fault.
		g.cand, g.candCount, g.rise = "", 0, nil
		if g.stable != "" {
			l.Class, l.Score, l.Held = g.stable, l.Scores[g.stable], true
		}
		g.last = l
		return l, nil
	}
	g.last = l
	if l.Class == Idle {
		return l, nil
	}
	switch {
	case g.stable == "":
		g.stable, g.stableSince, g.stableScore = l.Class, l.Start, l.Score
		g.cand = ""
		g.level, g.rise = []levelSample{sampleOf(l)}, nil
	case l.Class == g.stable:
		g.cand, g.candCount = "", 0
		g.stableScore = l.Score
		c.observeLevel(w.Subject, g, l)
	case l.Class == Checkpoint:
		// a checkpoint is a burst inside the job's phase: it neither
		// confirms nor breaks a candidate
	case l.Scores[g.stable] >= c.opts.MinScore-c.opts.Hysteresis:
		// the confirmed class is still supported, only less than
		// another: the window is not evidence of a new phase
		g.cand, g.candCount = "", 0
	default:
		if l.Class != g.cand {
			g.cand, g.candSince, g.candCount = l.Class, l.Start, 0
		}
		g.candCount++
		if g.candCount >= c.opts.ConfirmWindows && l.End.Sub(g.candSince) >= c.opts.MinDwell {
			c.pending = append(c.pending, c.closedProfile(w.Subject, g, g.candSince), c.shift(w.Subject, g, l))
			g.stable, g.stableSince, g.stableScore = g.cand, g.candSince, l.Score
			g.cand, g.candCount = "", 0
			g.level, g.rise = []levelSample{sampleOf(l)}, nil
		}
	}
	return l, nil
}

// observeLevel follows the demand of a group's confirmed phase: a rise to
// IntensityFactor times the phase's reference (the median of its recent
// windows) held for ConfirmWindows windows spanning MinDwell is a shift of
// the same class (a serving deployment whose traffic tripled), when at
// least half of the rise (in log terms) comes from more READs in flight.
// By Little's law throughput = requests in flight × request size ÷
// latency: more demand at the same supply puts more requests in flight,
// while a supply that got better (larger read-ahead, a fault that ended,
// a rebalance) moves the same window of requests faster or in larger
// pieces. Only rises count: from a client's counters a drop in demand
// looks like a supply limit (a lost or saturated server throttles every
// reader), which the starvation analyzer reports; and a window far below
// the reference is kept out of it, so the recovery after such a limit is
// no rise.
func (c *Classifier) observeLevel(s models.Subject, g *group, l Label) {
	x := sampleOf(l)
	bps := x.bps
	if len(g.level) >= c.opts.ConfirmWindows+1 {
		ref, refFlight := medians(g.level)
		moreInFlight := math.IsNaN(refFlight) || math.IsNaN(x.inFlight) || x.inFlight*x.inFlight >= refFlight*refFlight*bps/ref
		switch {
		case bps >= c.opts.IntensityFactor*ref && moreInFlight:
			if len(g.rise) == 0 {
				g.riseSince = l.Start
			}
			g.rise = append(g.rise, x)
			if len(g.rise) >= c.opts.ConfirmWindows && l.End.Sub(g.riseSince) >= c.opts.MinDwell {
				c.pending = append(c.pending, c.intensityShift(s, g, l, ref))
				g.level, g.rise = g.rise, nil
				if n := len(g.level); n > levelKeep {
					g.level = g.level[n-levelKeep:]
				}
			}
			return
		case bps*c.opts.IntensityFactor <= ref:
			g.rise = nil
			return
		}
	}
	g.rise = nil
	g.level = append(g.level, x)
	if n := len(g.level); n > levelKeep {
		g.level = g.level[n-levelKeep:]
	}
}

func (c *Classifier) intensityShift(s models.Subject, g *group, l Label, ref float64) models.Finding {
	to, _ := medians(g.rise)
	ev := append([]models.Evidence{
		{Name: "from_bytes_per_second", Value: math.Round(ref), Unit: "B/s", Note: "median of the phase's recent windows"},
		{Name: "to_bytes_per_second", Value: math.Round(to), Unit: "B/s", Note: "median since " + g.riseSince.UTC().Format(time.RFC3339)},
	}, l.Evidence()...)
	return shiftFinding(s, g.riseSince, l, fmt.Sprintf("%s %s still runs %s at %.1f× its demand (%.0f MB/s, was %.0f MB/s)", s.Kind, s.ID, g.stable, to/ref, to/1e6, ref/1e6), ev)
}

func (c *Classifier) shift(s models.Subject, g *group, l Label) models.Finding {
	ev := append([]models.Evidence{
		{Name: "from_" + string(g.stable), Value: 1, Note: "class since " + g.stableSince.UTC().Format(time.RFC3339)},
		{Name: "to_" + string(g.cand), Value: 1},
	}, l.Evidence()...)
	return shiftFinding(s, g.candSince, l, fmt.Sprintf("%s %s changed from %s to %s", s.Kind, s.ID, g.stable, g.cand), ev)
}

// shiftFinding is a workload_shift of s that began at since, as of label l.
func shiftFinding(s models.Subject, since time.Time, l Label, summary string, ev []models.Evidence) models.Finding {
	return models.Finding{
		ID:       fmt.Sprintf("%s:%s:%d", KindShift, s, since.UnixMilli()),
		Kind:     KindShift,
		Subject:  s,
		Severity: models.SeverityInfo,
		Score:    math.Round(l.Score*1000) / 1000,
		Start:    since,
		LastSeen: l.End,
		End:      l.End,
		Summary:  summary,
		Evidence: ev,
	}
}

func (c *Classifier) profile(s models.Subject, g *group) models.Finding {
	return models.Finding{
		ID:       fmt.Sprintf("%s:%s:%d", KindProfile, s, g.stableSince.UnixMilli()),
		Kind:     KindProfile,
		Subject:  s,
		Severity: models.SeverityInfo,
		Score:    math.Round(g.stableScore*1000) / 1000,
		Start:    g.stableSince,
		LastSeen: g.last.End,
		Summary:  fmt.Sprintf("%s %s runs workload class %s", s.Kind, s.ID, g.stable),
		Evidence: g.last.Evidence(),
	}
}

func (c *Classifier) closedProfile(s models.Subject, g *group, end time.Time) models.Finding {
	f := c.profile(s, g)
	if end.Before(f.Start) {
		end = f.Start
	}
	f.End, f.LastSeen = end, end
	return f
}

// Class returns subject's confirmed class, or "" when it has none yet.
func (c *Classifier) Class(subject models.Subject) Class {
	if g := c.groups[subject]; g != nil {
		return g.stable
	}
	return ""
}

// Findings returns the shifts and closed profiles since the last call and
// every group's current workload_profile, sorted by id.
func (c *Classifier) Findings(now time.Time) []models.Finding {
	out := c.pending
	c.pending = nil
	for s, g := range c.groups {
		if g.stable != "" {
			out = append(out, c.profile(s, g))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
