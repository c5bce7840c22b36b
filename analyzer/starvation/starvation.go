// Package starvation attributes idle GPU time to the storage subject that
// caused it. Each tick, every GPU whose utilisation fell below its own
// recent level (seeded, when the analyzer first sees a GPU, from its
// earlier utilisation where the caller knows it) loses
// (level − utilisation) × dt GPU-seconds; a GPU whose path has been
// unhealthy at every tick since it was first seen, with no busier history,
// has shown no level of its own and loses against a whole GPU (1) until
// its path is healthy once. Those seconds
// are blamed on storage only when the node's storage path (the devices,
// stripes, data servers and ports its LAYOUTSTATS and mountstats show it
// reading from) is unhealthy: a subject that is down, saturated, flagged hot
// by the hotspot analyzer, or slower than its own healthy latency. Idle GPUs
// on a healthy path are counted as not storage-caused and never blamed.
//
// Which subject is responsible is decided on the topology tree (port → DS →
// device → stripe), walking down the node's path:
//   - an unhealthy subject most of whose children are unhealthy too is the
//     common cause (a lost DS takes all its devices with it);
//   - otherwise the walk descends into children that are bad in their own
//     right (down, saturated, hot) or have such descendants, so a device
//     saturated by one hot stripe blames the stripe, and a slow DS with one
//     saturated drive blames the drive;
//   - a subject that is only slow under a parent that is down or saturated
//     is explained by the parent (DSs behind a saturated port blame the
//     port); under a merely slow or hot parent it is the cause (a degraded
//     drive slows its DS's aggregate latency, and blames the drive; a DS
//     hot because one drive serves a hot shard blames the drive).
//
// A GPU whose job is in a checkpoint burst is blamed on the checkpoint pause
// (the job subject) before storage is considered, and so is one whose job
// was in a pause at the previous tick, or whose job's writes rose clearly
// above idle at this tick (a burst starting), while the job's GPUs are
// stopped together (pausing).
//
// Findings are for people. An episode of blame on one cause (idle GPUs
// blamed on it, closed after ExitAfter without) gets its own finding once
// the GPUs it starved have lost MinEpisodeGPUSeconds in it (their whole
// loss, also the part shared with other causes blamed beside it: a read
// striped over eight saturated DSs waits for all of them), or at once
// when its cause is hot (a hotspot finding of its own names it and holds
// at this tick: the fault is confirmed, and the finding says what it
// costs the GPUs); it is critical while the cause has cost
// at least CriticalShare of the GPU time of all GPUs seen (a moving average
// over CriticalAfter) and has lasted CriticalAfter, else a warning. Shorter
// episodes, and checkpoint pauses (the job's own synchronous checkpoint,
// not a fault), are folded into one "recurring" finding per cause with
// their count and GPU-hours, severity info, for as long as they recur
// within RecurWindow; it is published once their GPUs together lost
// MinEpisodeGPUSeconds. Episodes returns every episode on its own, for
// scoring.
package starvation

import (
	"fmt"
	"iter"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/ballast-io/ballast/analyzer/internal/episode"
	"github.com/ballast-io/ballast/models"
)

// Kind is the finding kind this analyzer emits.
const Kind = "gpu_starvation"

// NotStorage is the LostByCause key of idle GPU-seconds on a healthy path.
const NotStorage = "not-storage"

// GPU is one GPU's utilisation at a tick.
type GPU struct {
	ID   string  // gpu subject id, e.g. "gpu07/3"
	Node string  // the GPU node it sits in
	Job  string  // job it runs, "" when none
	Util float64 // 0..1
	// Before is the GPU's utilisation level from before the analyzer
	// first saw it — over the LevelTau before, the median of its
	// readings within MinDrop/2 of its highest, read from stored history
	// — or 0 (or NaN) when unknown. It is read
	// only at that first sight, where it seeds the level (the larger of
	// it and Util): an analyzer started while GPUs already starve (an
	// mds restart, a failover) would otherwise take the starved
	// utilisation for their level and never count the loss.
	Before float64
}

// Path says that Node reads Share (0..1) of its bytes through Subject
// (usually a device or a stripe).
type Path struct {
	Node    string
	Subject models.Subject
	Share   float64
}

// Health is one storage subject's state at a tick, and its place in the
// topology: Parent is the stripe's device, the device's DS, the DS's port.
type Health struct {
	Subject models.Subject
	Parent  models.Subject // zero for a root
	Util    float64        // 0..1; NaN unknown
	Latency float64        // seconds; NaN unknown
	// ExpectedLatency is the subject's healthy latency when known; 0 lets the
	// analyzer learn it from the ticks where the subject was healthy.
	ExpectedLatency float64
	Down            bool // unreachable or failed
	Hot             bool // a hotspot finding names it and its condition holds now
}

// Input is everything the analyzer sees at one tick.
type Input struct {
	GPUs   []GPU
	Paths  []Path
	Health []Health
	// Checkpointing lists the jobs writing a checkpoint burst now.
	Checkpointing []string
	// Starting lists jobs whose write rate rose clearly above its idle
	// level at this tick with no burst seen yet: a checkpoint that began
	// late in the tick's interval shows only a part of its rate in the
	// tick's sample (checkpoint.Detector.Raised). Such a job is in a
	// checkpoint pause at this tick only when its GPUs stopped together
	// (PauseShare of them at or below PauseUtil).
	Starting []string
}

// Options tune the analyzer. Zero values take the defaults in brackets.
type Options struct {
	MinDrop        float64       // utilisation drop below the GPU's level that counts [0.1]
	LevelTau       time.Duration // how fast a GPU's level follows a lower utilisation [30m]
	SaturatedUtil  float64       // utilisation at which a subject is saturated [0.9]
	SlowFactor     float64       // latency / expected latency at which a subject is slow [2]
	MinSlowLatency float64       // latency below which nothing is slow, seconds [0.0005]
	// LatencyTau is the time constant with which the expected latency
	// follows a lower healthy latency; it follows a higher one six times
	// slower, so a creeping fault is not learned as normal [10m].
	LatencyTau  time.Duration
	CommonCause float64 // share of unhealthy children that makes the parent the cause [0.5]
	// DominantLatency: among merely slow siblings on a node's path (none
	// down, saturated or hot), those whose latency is below this share of
	// the slowest one's are not blamed: the read waits for the slowest
	// piece [0.5].
	DominantLatency float64
	ExitAfter       time.Duration // blame-free time after which an episode closes [60s]
	// CriticalShare is the share of the GPU time of all GPUs seen that one
	// cause must cost (GPU-seconds lost per second ÷ GPUs, a moving average
	// with time constant CriticalAfter), in an episode that has lasted
	// CriticalAfter, for severity critical [0.1, 2m].
	CriticalShare float64
	CriticalAfter time.Duration
	// MinEpisodeGPUSeconds is what the GPUs an episode starved must lose
	// in it (their whole loss, shared with other causes or not) for a
	// finding of its own, unless its cause is hot; shorter ones are
	// folded into their cause's recurring finding [60].
	MinEpisodeGPUSeconds float64
	// PauseUtil and PauseShare: a job whose checkpoint burst the detector
	// no longer sees is still in its pause while PauseShare of its GPUs
	// are at or below PauseUtil (stopped together) [0.05, 0.9].
	PauseUtil  float64
	PauseShare float64
	// RecurWindow is how close short episodes of one cause must follow
	// each other to share a recurring finding [1h].
	RecurWindow time.Duration
	// PathMemory is how long a node's read path and the topology above it
	// are remembered: a DS that went down serves no bytes, so the current
	// tick alone would drop it from the path of the nodes waiting on it [5m].
	PathMemory time.Duration
}

func (o Options) withDefaults() Options {
	f := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	f(&o.MinDrop, 0.1)
	f(&o.SaturatedUtil, 0.9)
	f(&o.SlowFactor, 2)
	f(&o.MinSlowLatency, 0.0005)
	f(&o.CommonCause, 0.5)
	f(&o.DominantLatency, 0.5)
	f(&o.PauseUtil, 0.05)
	f(&o.PauseShare, 0.9)
	d := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	d(&o.LevelTau, 30*time.Minute)
	d(&o.LatencyTau, 10*time.Minute)
	d(&o.ExitAfter, time.Minute)
	d(&o.PathMemory, 5*time.Minute)
	f(&o.CriticalShare, 0.1)
	f(&o.MinEpisodeGPUSeconds, 60)
	d(&o.CriticalAfter, 2*time.Minute)
	d(&o.RecurWindow, time.Hour)
	return o
}

// state is why a subject is unhealthy.
type state uint8

const (
	healthy   state = 0
	slow      state = 1 << iota // latency above expectation
	saturated                   // utilisation at the limit
	hot                         // hotspot finding
	down                        // unreachable
)

func (s state) intrinsic() bool { return s&(saturated|hot|down) != 0 }

func (s state) String() string {
	var parts []string
	for _, p := range []struct {
		b state
		n string
	}{{down, "down"}, {saturated, "saturated"}, {hot, "hot"}, {slow, "slow"}} {
		if s&p.b != 0 {
			parts = append(parts, p.n)
		}
	}
	if len(parts) == 0 {
		return "healthy"
	}
	return strings.Join(parts, "+")
}

// blame accumulates one responsible subject's episode.
type blame struct {
	subject models.Subject
	cause   string
	seconds float64 // GPU-seconds lost in this episode, its share
	// whole is what the GPUs it starved lost in this episode, shared or
	// not: a read striped over eight saturated DSs costs its GPUs a
	// GPU-minute however the loss is split between them.
	whole  float64
	stamp  time.Time       // tick of gpus and nodes
	gpus   map[string]bool // starved at the last tick blamed
	nodes  map[string]bool
	total  int              // GPUs seen at that tick
	within []models.Subject // the blamed subject's ancestors, nearest first
	pause  bool             // a checkpoint pause
	hot    bool             // the subject was hot at the last tick blamed
	shown  time.Time        // when it first got a finding of its own; zero: not yet
	// reopened is when an episode without a finding of its own made its
	// cause's published recurring finding active again (zero: it did not);
	// the operator sees it there from then on.
	reopened time.Time
	tick     float64 // GPU-seconds charged at the current tick
	rate     float64 // GPU-seconds lost per second, moving average over CriticalAfter
	peak     float64 // highest rate once the episode lasted CriticalAfter
}

// reported is when an operator first saw the episode: in its cause's
// recurring finding (which it reopened before it had a finding of its
// own) or in its own finding; zero while in neither.
func (b *blame) reported() time.Time {
	if !b.reopened.IsZero() {
		return b.reopened
	}
	return b.shown
}

// recurring is the finding that folds a cause's short episodes (and
// checkpoint pauses) together.
type recurring struct {
	subject     models.Subject
	cause       string
	pause       bool
	onset, last time.Time // first episode's onset, last episode's last blamed tick
	end         time.Time // last episode's end
	episodes    int
	seconds     float64
	whole       float64 // the starved GPUs' whole loss, as blame.whole
	gpus, nodes int     // most at once in one episode's last tick
	within      []models.Subject
	changed     bool
	published   bool
	pending     []Episode // folded before it was published
}

// Episode is one episode of blame on one cause as it would be reported on
// its own, and when an operator first saw it (in its own finding or in its
// cause's recurring finding; zero while neither).
type Episode struct {
	Finding  models.Finding
	Reported time.Time
}

// Analyzer carries GPU levels, learned latencies and open episodes between
// ticks. Drive it with Observe(now, in) then Findings(now). It is not safe
// for concurrent use.
type Analyzer struct {
	opts     Options
	level    map[string]float64 // per GPU
	expected map[models.Subject]float64
	tracker  *episode.Tracker
	blames   map[string]*blame
	closed   []models.Finding
	recur    map[string]*recurring // by cause key
	episodes []Episode             // closed since the last Episodes call
	gpus     int                   // GPUs seen at the last tick
	lost     map[string]float64    // cumulative GPU-seconds by cause key
	last     time.Time
	paused   map[string]bool                       // jobs in a checkpoint pause at the last tick
	held     map[string]bool                       // jobs in a burst whose GPUs stopped together in it
	resumed  map[string]bool                       // of those, the ones whose GPUs have all run again since
	paths    map[string]map[models.Subject]float64 // remembered read shares per node
	parents  map[models.Subject]*remembered        // remembered topology
	// unproven are the GPUs whose level is only what they did on a path
	// that has been unhealthy at every tick since the analyzer first saw
	// them (and whose history, Before, showed nothing higher): their loss
	// is counted against a whole GPU (1) while the path stays unhealthy,
	// and their own level holds from the first tick it is healthy.
	unproven map[string]bool
}

// less orders subjects by kind, then id, without building strings.
func less(a, b models.Subject) bool {
	if a.Kind != b.Kind {
		return a.Kind < b.Kind
	}
	return a.ID < b.ID
}

// remembered is a parent link and when it was last seen.
type remembered struct {
	parent models.Subject
	seen   time.Time
}

// New returns an analyzer with opts (zero values take the defaults).
func New(opts Options) (*Analyzer, error) {
	o := opts.withDefaults()
	if o.CommonCause <= 0 || o.CommonCause > 1 || o.DominantLatency <= 0 || o.DominantLatency > 1 || o.PauseUtil < 0 || o.PauseUtil >= 1 || o.PauseShare <= 0 || o.PauseShare > 1 || o.SlowFactor <= 1 || o.MinDrop <= 0 || o.MinDrop >= 1 || o.CriticalShare <= 0 || o.CriticalShare > 1 || o.MinEpisodeGPUSeconds < 0 {
		return nil, fmt.Errorf("invalid starvation options: CommonCause %v, DominantLatency %v and PauseShare %v must be in (0, 1], PauseUtil %v in [0, 1), SlowFactor %v above 1, MinDrop %v in (0, 1), CriticalShare %v in (0, 1], MinEpisodeGPUSeconds %v not negative",
			o.CommonCause, o.DominantLatency, o.PauseShare, o.PauseUtil, o.SlowFactor, o.MinDrop, o.CriticalShare, o.MinEpisodeGPUSeconds)
	}
	return &Analyzer{
		opts: o, level: map[string]float64{}, unproven: map[string]bool{}, expected: map[models.Subject]float64{},
		tracker: episode.New(0, o.ExitAfter), blames: map[string]*blame{}, lost: map[string]float64{}, recur: map[string]*recurring{},
		paths: map[string]map[models.Subject]float64{}, parents: map[models.Subject]*remembered{},
		held: map[string]bool{}, resumed: map[string]bool{},
	}, nil
}

// Options returns the analyzer's options, defaults filled in.
func (a *Analyzer) Options() Options { return a.opts }

// LostByCause returns the cumulative idle GPU-seconds by responsible subject
// (its String form), "checkpoint:…" entries for checkpoint pauses, and
// NotStorage for idle time on a healthy storage path.
func (a *Analyzer) LostByCause() map[string]float64 {
	out := make(map[string]float64, len(a.lost))
	for k, v := range a.lost {
		out[k] = v
	}
	return out
}

// topo is the tick's view of the storage tree.
type topo struct {
	health      map[models.Subject]*Health
	state       map[models.Subject]state
	children    map[models.Subject][]models.Subject
	bad         map[models.Subject]bool // badBelow cache
	commonCause float64
	dominant    float64 // Options.DominantLatency
}

func (a *Analyzer) buildTopo(now time.Time, dt float64, hs []Health, seenNow map[models.Subject]bool) (*topo, error) {
	n := len(hs) + len(a.parents)
	t := &topo{health: make(map[models.Subject]*Health, n), state: make(map[models.Subject]state, n),
		children: make(map[models.Subject][]models.Subject, n/4), bad: map[models.Subject]bool{}, commonCause: a.opts.CommonCause, dominant: a.opts.DominantLatency}
	// Subjects missing now but seen within PathMemory keep their place in
	// the tree, with unknown (so healthy) state.
	for s, r := range a.parents {
		if now.Sub(r.seen) > a.opts.PathMemory {
			delete(a.parents, s)
		}
	}
	for i := range hs {
		if hs[i].Parent.ID != "" {
			if r := a.parents[hs[i].Subject]; r != nil {
				r.parent, r.seen = hs[i].Parent, now
			} else {
				a.parents[hs[i].Subject] = &remembered{parent: hs[i].Parent, seen: now}
			}
		}
	}
	var stale []models.Subject
	for s := range a.parents {
		if !seenNow[s] {
			stale = append(stale, s)
		}
	}
	sort.Slice(stale, func(i, j int) bool { return less(stale[i], stale[j]) })
	for _, s := range stale {
		hs = append(hs, Health{Subject: s, Parent: a.parents[s].parent, Util: math.NaN(), Latency: math.NaN()})
	}
	for i := range hs {
		h := &hs[i]
		if h.Subject.Kind == "" || h.Subject.ID == "" {
			return nil, fmt.Errorf("cannot use storage health entry %d: empty subject", i)
		}
		if _, dup := t.health[h.Subject]; dup {
			return nil, fmt.Errorf("cannot use storage health of %q: listed twice", h.Subject)
		}
		t.health[h.Subject] = h
		if h.Parent.ID != "" {
			t.children[h.Parent] = append(t.children[h.Parent], h.Subject)
		}
		var st state
		if h.Down {
			st |= down
		}
		if h.Hot {
			st |= hot
		}
		if h.Util >= a.opts.SaturatedUtil {
			st |= saturated
		}
		exp := h.ExpectedLatency
		learned, known := a.expected[h.Subject]
		if exp <= 0 {
			exp = learned
		}
		if lat := h.Latency; lat >= 0 {
			if (exp > 0 || known) && lat >= a.opts.MinSlowLatency && lat >= a.opts.SlowFactor*exp {
				st |= slow
			}
			// Learn the healthy latency only from healthy ticks.
			if st == healthy {
				switch {
				case !known:
					a.expected[h.Subject] = lat
				case dt > 0:
					tau := a.opts.LatencyTau.Seconds()
					if lat > learned {
						tau *= 6
					}
					w := 1 - math.Exp(-dt/tau)
					a.expected[h.Subject] = learned + w*(lat-learned)
				}
			}
		}
		t.state[h.Subject] = st
	}
	for _, c := range t.children {
		sort.Slice(c, func(i, j int) bool { return less(c[i], c[j]) })
	}
	return t, nil
}

// badBelow reports whether s or something below it is unhealthy in its own
// right (down, saturated or hot).
// Results are cached for the tick: every starving node asks about the same
// devices.
func (t *topo) badBelow(s models.Subject, depth int) bool {
	if depth > maxDepth {
		return false
	}
	if v, ok := t.bad[s]; ok {
		return v
	}
	v := t.state[s].intrinsic()
	for _, c := range t.children[s] {
		if v {
			break
		}
		v = t.badBelow(c, depth+1)
	}
	t.bad[s] = v
	return v
}

// maxDepth bounds walks of the tree, so a parent loop in bad input cannot
// recurse forever.
const maxDepth = 8

// responsible adds to out the subjects to blame at or below s, for a node
// whose path is onPath, with the reason for each.
func (t *topo) responsible(s models.Subject, onPath map[models.Subject]bool, depth int, out map[models.Subject]string) {
	if depth > maxDepth {
		return
	}
	st := t.state[s]
	kids := t.children[s]
	if st != healthy && len(kids) > 0 {
		bad := 0
		for _, c := range kids {
			if t.state[c] != healthy {
				bad++
			}
		}
		if float64(bad)/float64(len(kids)) >= t.commonCause {
			out[s] = fmt.Sprintf("%s, common cause of %d/%d unhealthy children", st, bad, len(kids))
			return
		}
	}
	var culprits []models.Subject
	for c := range t.branches(s, onPath) {
		// A merely slow child of a parent that is down or saturated is
		// explained by it; under a healthy, merely slow or hot parent the
		// slow child is the cause: a hot parent (busier than its peers,
		// not at its limit) slows nothing by itself, and when only a few
		// of its children are slow (most would make it the common cause,
		// above) its heat is theirs — a DS hot because one of its drives
		// serves a hot shard, whose hotspot finding can come a tick
		// before the drive's.
		if t.badBelow(c, depth+1) || (st&(saturated|down) == 0 && t.state[c] != healthy) {
			culprits = append(culprits, c)
		}
	}
	culprits = t.dropMerelySlow(culprits, onPath, depth+1)
	if len(culprits) == 0 {
		if st != healthy {
			out[s] = st.String()
		}
		return
	}
	for _, c := range culprits {
		t.responsible(c, onPath, depth+1, out)
	}
}

// dropMerelySlow keeps, of a node's culprit siblings, those bad in their
// own right (down, saturated or hot, or with such a subject below) when
// there is one; otherwise it keeps them all. A node reads across its
// siblings in parallel (a file striped over DSs or devices) and waits for
// the last piece: a saturated sibling's queue grows for as long as it is
// offered more than it serves, and a down one does not answer, so they
// finish last, while a merely slow sibling adds a bounded delay that
// overlaps with that wait (and is often its echo: the same clients'
// requests queue behind the bottleneck). Blaming the slow ones too would
// spread the bottleneck's loss over subjects whose repair would not
// return it. With no sibling bad in its own right, latency is the only
// evidence: the read waits for its slowest piece, so the slow siblings
// whose latency (the slowest on the node's branches below them) is within
// DominantLatency of the slowest sibling's stay culprits, and those well
// below it are dropped — their pieces arrive while the node still waits
// for the slowest one. (A data server behind an oversubscribed switch port
// answers in about 2 ms while its peers, slowed past twice their usual
// 0.2 ms by a checkpoint's drain, answer in under half that: the wait is
// the port's.)
// A sibling whose latency is unknown cannot be compared and stays.
func (t *topo) dropMerelySlow(sibs []models.Subject, onPath map[models.Subject]bool, depth int) []models.Subject {
	var bad []models.Subject
	for _, c := range sibs {
		if t.badOnPath(c, onPath, depth) {
			bad = append(bad, c)
		}
	}
	if len(bad) > 0 {
		return bad
	}
	if len(sibs) < 2 {
		return sibs
	}
	lat := make([]float64, len(sibs))
	slowest := 0.0
	for i, c := range sibs {
		lat[i] = t.pathLatency(c, onPath, depth)
		if lat[i] > slowest { // false for NaN
			slowest = lat[i]
		}
	}
	if slowest == 0 {
		return sibs
	}
	out := sibs[:0:0]
	for i, c := range sibs {
		if math.IsNaN(lat[i]) || lat[i] >= t.dominant*slowest {
			out = append(out, c)
		}
	}
	return out
}

// pathLatency is the slowest known read latency at or below s on the
// node's branches (all of s's children when none of them is on the path);
// NaN when none is known.
func (t *topo) pathLatency(s models.Subject, onPath map[models.Subject]bool, depth int) float64 {
	v := math.NaN()
	if h := t.health[s]; h != nil && h.Latency >= 0 {
		v = h.Latency
	}
	if depth > maxDepth {
		return v
	}
	for c := range t.branches(s, onPath) {
		if l := t.pathLatency(c, onPath, depth+1); l > v || (math.IsNaN(v) && !math.IsNaN(l)) {
			v = l
		}
	}
	return v
}

// branches yields the children of s on the node's own branches; below the
// end of its path (a device's stripes) every child, since any of them can
// load the device.
func (t *topo) branches(s models.Subject, onPath map[models.Subject]bool) iter.Seq[models.Subject] {
	kids := t.children[s]
	pathKids := false
	for _, c := range kids {
		if onPath[c] {
			pathKids = true
			break
		}
	}
	return func(yield func(models.Subject) bool) {
		for _, c := range kids {
			if pathKids && !onPath[c] {
				continue
			}
			if !yield(c) {
				return
			}
		}
	}
}

// badOnPath is badBelow restricted to the node's branches, as responsible
// walks them: a hot device elsewhere on a DS does not make that DS a
// bottleneck of a node reading other devices of it.
func (t *topo) badOnPath(s models.Subject, onPath map[models.Subject]bool, depth int) bool {
	if depth > maxDepth {
		return false
	}
	if t.state[s].intrinsic() {
		return true
	}
	for c := range t.branches(s, onPath) {
		if t.badOnPath(c, onPath, depth+1) {
			return true
		}
	}
	return false
}

// share is a blamed subject's weight for a node: its path share, or that of
// its nearest ancestor on the path.
func (t *topo) share(s models.Subject, shares map[models.Subject]float64) float64 {
	for range maxDepth {
		if v, ok := shares[s]; ok {
			return v
		}
		h := t.health[s]
		if h == nil || h.Parent.ID == "" {
			return 0
		}
		s = h.Parent
	}
	return 0
}

// culprit is one subject blamed for a node's idle GPUs, with its weight.
type culprit struct {
	subject models.Subject
	reason  string
	weight  float64
	within  []models.Subject
	hot     bool // the subject itself is hot (Health.Hot)
}

// ancestors lists s's parents, nearest first.
func (t *topo) ancestors(s models.Subject) []models.Subject {
	var out []models.Subject
	for range maxDepth {
		h := t.health[s]
		if h == nil || h.Parent.ID == "" {
			break
		}
		s = h.Parent
		out = append(out, s)
	}
	return out
}

// nodeCulprits walks the node's path from its roots.
func (t *topo) nodeCulprits(paths []Path) []culprit {
	shares := map[models.Subject]float64{}
	onPath := map[models.Subject]bool{}
	roots := map[models.Subject]bool{}
	for _, p := range paths {
		s := p.Subject
		for range maxDepth {
			shares[s] += p.Share
			onPath[s] = true
			h := t.health[s]
			if h == nil || h.Parent.ID == "" {
				roots[s] = true
				break
			}
			s = h.Parent
		}
	}
	// Roots and culprits in a fixed order, so sums and reasons do not
	// depend on map iteration.
	rootList := make([]models.Subject, 0, len(roots))
	for r := range roots {
		rootList = append(rootList, r)
	}
	sort.Slice(rootList, func(i, j int) bool { return less(rootList[i], rootList[j]) })
	// Roots are the siblings under the cluster itself: a node's path
	// over several DSs without a port above them.
	rootList = t.dropMerelySlow(rootList, onPath, 0)
	blamed := map[models.Subject]string{}
	for _, r := range rootList {
		t.responsible(r, onPath, 0, blamed)
	}
	out := make([]culprit, 0, len(blamed))
	for s, why := range blamed {
		out = append(out, culprit{subject: s, reason: why, weight: t.share(s, shares), within: t.ancestors(s), hot: t.state[s]&hot != 0})
	}
	sort.Slice(out, func(i, j int) bool { return less(out[i].subject, out[j].subject) })
	total := 0.0
	for _, c := range out {
		total += c.weight
	}
	for i := range out {
		if total > 0 {
			out[i].weight /= total
		} else {
			out[i].weight = 1 / float64(len(out))
		}
	}
	return out
}

// Observe feeds one tick. now must not go backwards. The first tick only
// learns GPU levels (seeded from GPU.Before where given) and latencies;
// losses are counted from the second, and a GPU's from the tick after it
// is first seen.
// fedLevel is the utilisation a GPU that waits for nothing shows on this
// cluster: the median level of the proven GPUs within MinDrop/2 of the
// highest proven level, when that is within MinDrop/2 of a whole GPU; 1
// otherwise (no GPU proven, or every proven one held by its own loader). A
// fed GPU reads a little under 1 (the host's gaps between steps), so
// counting an unproven GPU's loss against a whole GPU would charge those
// gaps to the fault; its own ceiling is unknown, its fed peers' is the best
// estimate.
func (a *Analyzer) fedLevel() float64 {
	var lv []float64
	top := math.Inf(-1)
	for id, l := range a.level {
		if !a.unproven[id] {
			lv = append(lv, l)
			top = max(top, l)
		}
	}
	if len(lv) == 0 {
		return 1
	}
	sort.Float64s(lv)
	k := sort.SearchFloat64s(lv, top-a.opts.MinDrop/2)
	if m := lv[k+(len(lv)-k)/2]; m >= 1-a.opts.MinDrop/2 {
		return min(1, m)
	}
	return 1
}

func (a *Analyzer) Observe(now time.Time, in Input) error {
	if !a.last.IsZero() && now.Before(a.last) {
		return fmt.Errorf("cannot observe starvation tick at %s: before the previous tick %s", now.Format(time.RFC3339Nano), a.last.Format(time.RFC3339Nano))
	}
	dt := 0.0
	if !a.last.IsZero() {
		dt = now.Sub(a.last).Seconds()
	}
	for _, p := range in.Paths {
		if !(p.Share >= 0 && p.Share <= 1) {
			return fmt.Errorf("cannot use storage path of node %q through %q: share %v is outside [0, 1]", p.Node, p.Subject, p.Share)
		}
	}
	seen := make(map[models.Subject]bool, len(in.Health))
	for i, h := range in.Health {
		if seen[h.Subject] {
			return fmt.Errorf("cannot use storage health of %q: listed twice", h.Subject)
		}
		if h.Subject.Kind == "" || h.Subject.ID == "" {
			return fmt.Errorf("cannot use storage health entry %d: empty subject", i)
		}
		seen[h.Subject] = true
	}
	t, err := a.buildTopo(now, dt, append([]Health(nil), in.Health...), seen)
	if err != nil {
		return err
	}
	byNode := a.rememberPaths(dt, in.Paths, t)
	gpus := append([]GPU(nil), in.GPUs...)
	sort.Slice(gpus, func(i, j int) bool { return gpus[i].ID < gpus[j].ID })
	ckpt := a.pausing(in.Checkpointing, in.Starting, gpus)
	a.gpus = len(gpus)
	for _, b := range a.blames {
		b.tick = 0
	}
	culprits := map[string][]culprit{}
	fed := 1.0 // only unproven GPUs, known before this tick, use it
	if len(a.unproven) > 0 {
		fed = a.fedLevel()
	}
	for i, g := range gpus {
		if !(g.Util >= 0 && g.Util <= 1.5) {
			return fmt.Errorf("cannot use utilisation of GPU %q: %v is not a ratio", g.ID, g.Util)
		}
		if !(g.Before >= 0 && g.Before <= 1.5) && !math.IsNaN(g.Before) {
			return fmt.Errorf("cannot use earlier utilisation of GPU %q: %v is not a ratio", g.ID, g.Before)
		}
		if i > 0 && gpus[i-1].ID == g.ID {
			return fmt.Errorf("cannot use utilisation of GPU %q: listed twice", g.ID)
		}
		paused := ckpt[g.Job] && g.Job != ""
		nodeCulprits := func() []culprit {
			cs, done := culprits[g.Node]
			if !done {
				cs = t.nodeCulprits(byNode[g.Node])
				culprits[g.Node] = cs
			}
			return cs
		}
		// A GPU starved since the analyzer first saw it, on a path that
		// has been unhealthy all along (a node behind a saturated NIC from
		// its job's first step, an mds started during a fault with no
		// history), never showed its level: what it does is the fault's
		// doing, so its loss is counted against what a fed GPU shows here
		// (fedLevel; a whole GPU when none is known) until its path is
		// healthy once; from then on its level is its own.
		lvl, ok := a.level[g.ID]
		if !ok {
			// First sight: nothing to compare with yet; the level is what
			// the GPU reached before (its history), if higher, and it is
			// unproven when that history shows it no busier than now and
			// its path is unhealthy.
			a.level[g.ID] = g.Util
			if g.Before > g.Util { // false for NaN
				a.level[g.ID] = g.Before
			}
			if !(g.Before-g.Util >= a.opts.MinDrop) && (paused || len(nodeCulprits()) > 0) {
				a.unproven[g.ID] = true
			}
			continue
		}
		ref := lvl
		if a.unproven[g.ID] && !paused {
			if len(nodeCulprits()) == 0 {
				delete(a.unproven, g.ID)
			} else {
				ref = max(lvl, fed)
			}
		}
		// The level is the GPU's typical utilisation when nothing holds it
		// back. It follows a rise of half MinDrop or more at once (a job
		// ramping up, a fault's end); within that band it follows the
		// readings both ways with LevelTau, so it settles on their mean:
		// a GPU that never waits for data still reads a little under 1,
		// by a different amount each sample (the host's gaps between
		// steps), and a level that took every high reading would count
		// that gap as loss for as long as a fault lasts. It sinks only
		// while the loss is not blamed on storage or a checkpoint: an
		// hour-long storage fault must not teach the GPU that starving is
		// normal.
		follow := func() {
			if dt > 0 {
				a.level[g.ID] = lvl + (g.Util-lvl)*(1-math.Exp(-dt/a.opts.LevelTau.Seconds()))
			}
		}
		sink := func() {
			if g.Util < lvl {
				follow()
			}
		}
		if g.Util-lvl >= a.opts.MinDrop/2 {
			a.level[g.ID] = g.Util
		} else if g.Util > lvl {
			follow()
		}
		drop := ref - g.Util
		if dt == 0 || drop < a.opts.MinDrop {
			sink()
			continue
		}
		lost := drop * dt
		if paused {
			a.charge(now, culprit{subject: models.Subject{Kind: models.SubjectJob, ID: g.Job}, reason: "checkpoint pause", weight: 1}, g, lost, lost)
			continue
		}
		cs := nodeCulprits()
		if len(cs) == 0 {
			a.lost[NotStorage] += lost
			sink()
			continue
		}
		for _, c := range cs {
			a.charge(now, c, g, lost*c.weight, lost)
		}
	}
	w := 0.0
	if dt > 0 {
		w = 1 - math.Exp(-dt/a.opts.CriticalAfter.Seconds())
	}
	for key, b := range a.blames {
		if dt > 0 {
			b.rate += w * (b.tick/dt - b.rate)
		}
		if e := a.tracker.Get(key); e != nil && now.Sub(e.Onset) >= a.opts.CriticalAfter {
			b.peak = max(b.peak, b.rate)
		}
		// A hot cause is already a confirmed fault (the hotspot
		// analyzer's own entry gate keeps one-tick flaps out): its GPUs'
		// loss need not add up to a minute before the operator sees it.
		if b.shown.IsZero() && !b.pause && b.stamp.Equal(now) && (b.whole >= a.opts.MinEpisodeGPUSeconds || b.hot) {
			b.shown = now
		}
		if b.shown.IsZero() && b.reopened.IsZero() && b.stamp.Equal(now) {
			// A cause whose short episodes already have a published
			// recurring finding is shown there as soon as it recurs, not
			// when this episode is over.
			if r := a.recur[key]; r != nil && r.published {
				if e := a.tracker.Get(key); e != nil && e.Onset.Sub(r.end) <= a.opts.RecurWindow {
					b.reopened = now
				}
			}
		}
	}
	for _, e := range a.tracker.Finish(now) {
		b := a.blames[e.Key]
		if b == nil {
			continue
		}
		delete(a.blames, e.Key)
		ep := Episode{Finding: a.finding(&e, b), Reported: b.reported()}
		if b.shown.IsZero() {
			a.fold(now, &e, b, ep)
			continue
		}
		a.closed = append(a.closed, ep.Finding)
		a.episodes = append(a.episodes, ep)
	}
	a.last = now
	return nil
}

// pausing returns the jobs whose GPUs wait for a checkpoint at this tick:
// those in a burst now, and those whose GPUs are stopped together
// (PauseShare of them at or below PauseUtil) that were in a pause at the
// previous tick or are starting a burst now. A synchronous checkpoint
// stops every rank until every rank has written, and they resume together
// when it is done; its write rate can fall long before that — a write hung
// on a lost data server, or slowed by another job's burst — and the burst
// detector, which sees only the rate, ends the burst while the GPUs still
// wait. Their idle time is the checkpoint's until they resume. At its
// start the rate is late instead: a checkpoint that began a second before
// the tick has a second of its writes in the tick's sample, under the
// burst threshold, while its GPUs already stopped. GPUs stopping together
// alone are no pause (a lost data server stops a job's GPUs together
// too), so a starting job needs both; and a pause seen only so is not
// carried to the next tick unless the detector then sees the burst or the
// job is starting still.
// At its end the rate is late too: the burst detector's rate window still
// holds the last writes a tick after the GPUs resumed. A job in a burst
// whose GPUs stopped together in it and have all been back at their
// level since (none MinDrop below it) has ended its synchronous pause,
// whatever the rate still shows; what its GPUs lose from then on is
// analysed like any other loss (checkpoint-storm, seed 5: train-a's GPUs, back from their
// pause, starved at 0.72 on data servers filled by train-b's checkpoint
// and the loss of the tick after was the pause's). A sample part-way
// back (the pause ended within its second) is still the pause's. A
// checkpoint staged
// through host memory, whose GPUs resume while its writes go on, is load
// on the data servers like any other writer's. GPUs that never stopped
// together in the burst (an asynchronous checkpoint competing with the
// job's reads) keep their loss on the checkpoint while it is seen.
func (a *Analyzer) pausing(bursts, starting []string, gpus []GPU) map[string]bool {
	now := make(map[string]bool, len(bursts))
	listed := make(map[string]bool, len(bursts))
	for _, j := range bursts {
		if j != "" {
			listed[j] = true
		}
	}
	if len(listed) > 0 {
		stopped, working, all := map[string]int{}, map[string]int{}, map[string]int{}
		for _, g := range gpus {
			if listed[g.Job] {
				all[g.Job]++
				if g.Util <= a.opts.PauseUtil {
					stopped[g.Job]++
				}
				if lvl, ok := a.level[g.ID]; ok && g.Util > lvl-a.opts.MinDrop {
					working[g.Job]++
				}
			}
		}
		for j := range listed {
			switch {
			case all[j] > 0 && float64(stopped[j]) >= a.opts.PauseShare*float64(all[j]):
				a.held[j], a.resumed[j] = true, false
			case a.held[j] && all[j] > 0 && working[j] == all[j]:
				a.resumed[j] = true
			}
			if !a.resumed[j] {
				now[j] = true
			}
		}
	}
	for j := range a.held {
		if !listed[j] {
			delete(a.held, j)
			delete(a.resumed, j)
		}
	}
	// Jobs that are paused if their GPUs are stopped together.
	maybe := make(map[string]bool, len(a.paused)+len(starting))
	for j := range a.paused {
		maybe[j] = true
	}
	for _, j := range starting {
		if j != "" {
			maybe[j] = true
		}
	}
	carried := make(map[string]bool, len(now))
	for j := range now {
		carried[j] = true
	}
	if len(maybe) > 0 {
		stopped, all := map[string]int{}, map[string]int{}
		for _, g := range gpus {
			if maybe[g.Job] && !now[g.Job] {
				all[g.Job]++
				if g.Util <= a.opts.PauseUtil {
					stopped[g.Job]++
				}
			}
		}
		for j, n := range all {
			if float64(stopped[j]) >= a.opts.PauseShare*float64(n) {
				now[j] = true
				if a.paused[j] {
					carried[j] = true
				}
			}
		}
	}
	a.paused = carried
	return now
}

// fold adds an ended episode that had no finding of its own to its cause's
// recurring finding, starting a new one when the last ended more than
// RecurWindow before this one began. The episode counts as reported once
// the recurring finding is published, or from when it reopened it.
func (a *Analyzer) fold(now time.Time, e *episode.Episode, b *blame, ep Episode) {
	key := e.Key
	r := a.recur[key]
	if r == nil || e.Onset.Sub(r.end) > a.opts.RecurWindow {
		if r != nil {
			a.episodes = append(a.episodes, r.pending...) // never reported
		}
		r = &recurring{subject: b.subject, pause: b.pause, onset: e.Onset}
		a.recur[key] = r
	}
	r.cause, r.within = b.cause, b.within
	r.last, r.end = e.LastTrue, e.End
	r.episodes++
	r.seconds += b.seconds
	r.whole += b.whole
	r.gpus, r.nodes = max(r.gpus, len(b.gpus)), max(r.nodes, len(b.nodes))
	r.pending = append(r.pending, ep)
	if r.whole >= a.opts.MinEpisodeGPUSeconds {
		r.changed, r.published = true, true
		for _, p := range r.pending {
			if p.Reported.IsZero() {
				p.Reported = now
			}
			a.episodes = append(a.episodes, p)
		}
		r.pending = r.pending[:0]
	}
}

// rememberPaths blends this tick's paths into each node's remembered shares
// (an exponential moving average with time constant PathMemory) and returns
// them per node, sorted by subject. A stripe is remembered as its device:
// memory then grows with devices, not stripes, and the blame walk reaches
// a device's stripes through the topology anyway.
func (a *Analyzer) rememberPaths(dt float64, paths []Path, t *topo) map[string][]Path {
	keep := 0.0
	if dt > 0 {
		keep = math.Exp(-dt / a.opts.PathMemory.Seconds())
	}
	for _, m := range a.paths {
		for s, w := range m {
			m[s] = w * keep
		}
	}
	for _, p := range paths {
		m := a.paths[p.Node]
		if m == nil {
			m = map[models.Subject]float64{}
			a.paths[p.Node] = m
		}
		s := p.Subject
		if h := t.health[s]; h != nil && s.Kind == models.SubjectStripe && h.Parent.ID != "" {
			s = h.Parent
		}
		m[s] += (1 - keep) * p.Share
	}
	out := make(map[string][]Path, len(a.paths))
	for node, m := range a.paths {
		for s, w := range m {
			if w < 1e-6 {
				delete(m, s)
				continue
			}
			out[node] = append(out[node], Path{Node: node, Subject: s, Share: w})
		}
		if len(m) == 0 {
			delete(a.paths, node)
		}
		ps := out[node]
		sort.Slice(ps, func(i, j int) bool { return less(ps[i].Subject, ps[j].Subject) })
	}
	return out
}

// charge books lost GPU-seconds of g on culprit c: lost is c's share of
// whole, what g lost at this tick.
func (a *Analyzer) charge(now time.Time, c culprit, g GPU, lost, whole float64) {
	key := c.subject.String()
	if c.reason == "checkpoint pause" {
		a.lost["checkpoint:"+c.subject.ID] += lost
	} else {
		a.lost[key] += lost
	}
	a.tracker.Step(now, key, true, true)
	b := a.blames[key]
	if b == nil {
		b = &blame{subject: c.subject}
		a.blames[key] = b
	}
	if !b.stamp.Equal(now) {
		b.stamp, b.gpus, b.nodes, b.hot = now, map[string]bool{}, map[string]bool{}, false
	}
	b.hot = b.hot || c.hot
	b.total = a.gpus
	b.pause = c.reason == "checkpoint pause"
	b.cause = c.reason
	b.within = c.within
	b.seconds += lost
	b.whole += whole
	b.tick += lost
	b.gpus[g.ID] = true
	b.nodes[g.Node] = true
}

// severity is an episode's urgency: a checkpoint pause is the job's own
// doing (info); a cause that has cost CriticalShare of the cluster's GPU
// time (averaged over CriticalAfter, once the episode lasted that long)
// puts a large share of GPU time at risk (critical, and it stays so in
// the record once over); anything else is a warning.
func (a *Analyzer) severity(b *blame) models.Severity {
	switch {
	case b.pause:
		return models.SeverityInfo
	case b.total > 0 && b.peak >= a.opts.CriticalShare*float64(b.total):
		return models.SeverityCritical
	}
	return models.SeverityWarning
}

func (a *Analyzer) finding(e *episode.Episode, b *blame) models.Finding {
	hours := b.seconds / 3600
	f := models.Finding{
		ID:       fmt.Sprintf("%s:%s:%d", Kind, b.subject, e.Onset.UnixMilli()),
		Kind:     Kind,
		Subject:  b.subject,
		Severity: a.severity(b),
		Score:    math.Round(hours*1e4) / 1e4,
		Start:    e.Onset,
		LastSeen: e.LastTrue,
		End:      e.End,
		Summary: fmt.Sprintf("%s starved by %s %s (%s): %.3f GPU-hours lost", gpusOnNodes(len(b.gpus), len(b.nodes)),
			b.subject.Kind, b.subject.ID, b.cause, hours),
		Evidence: []models.Evidence{
			{Name: "gpu_hours_lost", Value: math.Round(hours*1e4) / 1e4, Unit: "h", Note: "since the finding started"},
			{Name: "gpus_starved", Value: float64(len(b.gpus)), Note: "at the last tick blamed"},
			{Name: "nodes_starved", Value: float64(len(b.nodes)), Note: "at the last tick blamed"},
			{Name: "gpus_seen", Value: float64(b.total), Note: "GPUs reporting at the last tick blamed"},
			{Name: "gpu_time_share", Value: math.Round(b.peak/float64(max(b.total, 1))*1e4) / 1e4, Unit: "ratio",
				Note: fmt.Sprintf("most of all GPUs' time lost to it, averaged over %s", a.opts.CriticalAfter)},
			{Name: "cause", Value: 1, Note: b.cause},
		},
	}
	f.Evidence = append(f.Evidence, withinEvidence(b.within)...)
	return f
}

// withinEvidence lists a blamed subject's ancestors, so a stripe's finding
// can also be matched to its device.
func withinEvidence(within []models.Subject) []models.Evidence {
	var out []models.Evidence
	for i, p := range within {
		out = append(out, models.Evidence{Name: "within", Value: float64(i + 1), Series: p.String(), Note: "ancestor " + fmt.Sprint(i+1) + " in the storage topology"})
	}
	return out
}

func gpusOnNodes(gpus, nodes int) string {
	g, n := "GPUs", "nodes"
	if gpus == 1 {
		g = "GPU"
	}
	if nodes == 1 {
		n = "node"
	}
	return fmt.Sprintf("%d %s on %d %s", gpus, g, nodes, n)
}

func (a *Analyzer) recurringFinding(r *recurring) models.Finding {
	hours := r.seconds / 3600
	what := fmt.Sprintf("%d short starvation episodes blamed on %s %s (%s)", r.episodes, r.subject.Kind, r.subject.ID, r.cause)
	if r.episodes == 1 {
		what = fmt.Sprintf("1 short starvation episode blamed on %s %s (%s)", r.subject.Kind, r.subject.ID, r.cause)
	}
	if r.pause {
		what = fmt.Sprintf("%d checkpoint pauses of %s %s", r.episodes, r.subject.Kind, r.subject.ID)
		if r.episodes == 1 {
			what = fmt.Sprintf("1 checkpoint pause of %s %s", r.subject.Kind, r.subject.ID)
		}
	}
	f := models.Finding{
		ID:       fmt.Sprintf("%s:%s:%d:recurring", Kind, r.subject, r.onset.UnixMilli()),
		Kind:     Kind,
		Subject:  r.subject,
		Severity: models.SeverityInfo,
		Score:    math.Round(hours*1e4) / 1e4,
		Start:    r.onset,
		LastSeen: r.last,
		End:      r.end,
		Summary:  fmt.Sprintf("%s: %.3f GPU-hours lost, up to %s at once", what, hours, gpusOnNodes(r.gpus, r.nodes)),
		Evidence: []models.Evidence{
			{Name: "gpu_hours_lost", Value: math.Round(hours*1e4) / 1e4, Unit: "h", Note: "over all its episodes"},
			{Name: "episodes", Value: float64(r.episodes), Note: "episodes folded into this finding"},
			{Name: "gpus_starved", Value: float64(r.gpus), Note: "most at once, at the last tick of an episode"},
			{Name: "nodes_starved", Value: float64(r.nodes), Note: "most at once, at the last tick of an episode"},
			{Name: "cause", Value: 1, Note: r.cause},
		},
	}
	f.Evidence = append(f.Evidence, withinEvidence(r.within)...)
	return f
}

// Findings returns, sorted by id, the findings of open episodes that have
// cost MinEpisodeGPUSeconds, those closed since the previous call, and the
// recurring findings that changed since then (always ended: they gather
// episodes that are over).
func (a *Analyzer) Findings(now time.Time) []models.Finding {
	out := a.closed
	a.closed = nil
	for _, e := range a.tracker.Active() {
		if b := a.blames[e.Key]; b != nil && !b.shown.IsZero() {
			out = append(out, a.finding(e, b))
		}
	}
	for key, r := range a.recur {
		if b := a.blames[key]; b != nil && r.published && b.shown.IsZero() && !b.reopened.IsZero() {
			// Active again while an episode of its cause runs.
			f := a.recurringFinding(r)
			f.LastSeen, f.End = b.stamp, time.Time{}
			out = append(out, f)
			r.changed = true // its end is published once the episode is over
		} else if r.changed && r.published {
			out = append(out, a.recurringFinding(r))
			r.changed = false
		} else if now.Sub(r.end) > a.opts.RecurWindow {
			a.episodes = append(a.episodes, r.pending...) // never reported
			delete(a.recur, key)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Episodes returns every episode closed (or newly reported in a recurring
// finding) since the previous call and every open one, each as the finding
// it would be on its own (the form scoring counts), sorted by id. An
// episode folded into a recurring finding not yet published is returned
// once that is published or given up.
func (a *Analyzer) Episodes() []Episode {
	out := a.episodes
	a.episodes = nil
	for _, e := range a.tracker.Active() {
		if b := a.blames[e.Key]; b != nil {
			out = append(out, Episode{Finding: a.finding(e, b), Reported: b.reported()})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Finding.ID < out[j].Finding.ID })
	return out
}
