// Package hotspot finds data servers, devices, switch ports and stripes whose
// load exceeds their fair share. Fair share is robust: the median of the
// subject's peers (same kind, same peer group) with the median absolute
// deviation as the spread, so one hot subject cannot hide itself by raising
// the mean. A subject must stay above the entering thresholds for EnterAfter
// before a finding opens, and below the looser exit thresholds for ExitAfter
// before it closes, so findings do not flap. Per-stripe heat comes from
// LAYOUTSTATS deltas through a Space-Saving sketch, so memory is bounded
// whatever the number of stripes; a device or DS finding names the stripes
// that make it hot and their share of its heat.
package hotspot

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/ballast-io/ballast/analyzer/heavyhitter"
	"github.com/ballast-io/ballast/analyzer/internal/episode"
	"github.com/ballast-io/ballast/analyzer/internal/robust"
	"github.com/ballast-io/ballast/models"
)

// Kind is the finding kind this analyzer emits.
const Kind = "hotspot"

// Metric indexes the load measures a subject is compared on.
type Metric int

// The load measures, in evidence order. IOPS and BytesPerSec are totals for
// callers that cannot tell directions apart; the Read and Write measures
// compare each direction with the same direction of the peers, so a
// checkpoint's writes are never weighed against another device's reads.
// Latency and Utilization open nothing by themselves (isLoad): latency
// counts only beside a load measure, and a known Utilization below its
// floor keeps the subject from being hot.
const (
	IOPS Metric = iota
	BytesPerSec
	Utilization
	Latency
	ReadIOPS
	ReadBytesPerSec
	WriteIOPS
	WriteBytesPerSec
	numMetrics
)

var metricNames = [numMetrics]string{"iops", "bytes_per_second", "utilization", "latency_seconds",
	"read_iops", "read_bytes_per_second", "write_iops", "write_bytes_per_second"}
var metricUnits = [numMetrics]string{"1/s", "B/s", "ratio", "s", "1/s", "B/s", "1/s", "B/s"}

// isWrite reports whether m measures writes.
func (m Metric) isWrite() bool { return m == WriteIOPS || m == WriteBytesPerSec }

// isLoad reports whether m measures load: not latency, a symptom, and not
// utilisation, a gate (Options.Floors). Utilisation is the share of time a
// drive has I/O in flight, bounded by 1: a device at 0.9 against peers at
// 0.6 cannot be 1.5× them, one at 0.4 against idle peers is "∞×" while it
// has room to spare, and a drive that serves requests in parallel is
// "100 % busy" long before it is full. It says whether a device is busy at
// all, not how far above its share it is.
func (m Metric) isLoad() bool { return m != Latency && m != Utilization }

// String names the metric as it appears in evidence.
func (m Metric) String() string { return metricNames[m] }

// Load is one subject's load at one tick. A negative or NaN measure is
// unknown and skipped. Subjects are compared with the others of the same
// Subject.Kind and Group (e.g. the device model or pool; "" = all of the kind).
type Load struct {
	Subject models.Subject
	Group   string
	Values  [numMetrics]float64 // indexed by Metric
}

// NewLoad returns a Load with every measure unknown, to be filled by index.
func NewLoad(s models.Subject, group string) Load {
	l := Load{Subject: s, Group: group}
	for i := range l.Values {
		l.Values[i] = math.NaN()
	}
	return l
}

// Input is everything the detector sees at one tick.
type Input struct {
	// Loads are the per-subject loads of DS nodes, devices and ports.
	Loads []Load
	// Stripes are the LAYOUTSTATS deltas that arrived since the last tick.
	Stripes []models.StripeDelta
	// Paths are the network paths of DSs and client nodes (netpath.go).
	Paths []PathLoad
}

// Options tune the detector. Every zero value means the default in brackets.
type Options struct {
	EnterScore float64 // robust z-score to open a finding [4]
	ExitScore  float64 // robust z-score below which a finding may close [2]
	EnterRatio float64 // load / peer median to open a finding [1.5]
	ExitRatio  float64 // load / peer median below which a finding may close [1.2]
	// MADFloor floors the MAD at this fraction of the median, so an even
	// cluster's tiny spread does not turn noise into high scores [0.1].
	MADFloor   float64
	EnterAfter time.Duration // how long the condition must hold [10s]; negative = at once
	ExitAfter  time.Duration // how long it must be gone to close [60s]; negative = at once
	MinPeers   int           // peers needed for a fair share [5]
	// Floors are absolute minimums below which a measure never counts as
	// hot, so an idle cluster's 3 IOPS against 1 is not a hotspot
	// [50 IOPS, 10 MB/s, 0.3 utilisation, 2 ms latency; the directional
	// measures take the floors of IOPS and BytesPerSec]. A subject whose
	// utilisation is known and below its floor is never hot.
	Floors [numMetrics]float64
	// WarningRatio is the load / median at which severity is warning, else
	// info [3]. A hotspot is never critical on its own: it puts neither
	// data nor, by itself, GPU time at risk; when it starves GPUs the
	// starvation analyzer's finding carries that urgency.
	WarningRatio float64

	SketchSize       int           // Space-Saving counters for stripe heat [4096]
	HeatHalfLife     time.Duration // half-life of stripe heat [2m]
	StripeCandidates int           // hottest stripes checked against the fair share each tick [64]
	NamedStripes     int           // stripes named in a device or DS finding [5]
	// StripeEnterRatio and StripeExitRatio replace EnterRatio and ExitRatio
	// for stripes, whose loads are naturally skewed (popular files) [3, 2].
	StripeEnterRatio, StripeExitRatio float64
	// StripeDeviceUtil is the utilisation a stripe's device must have (when
	// the device's load is known) for the stripe to be hot: a popular
	// stripe on a device with room to spare harms nobody [0.5].
	StripeDeviceUtil float64
	MinStripeShare   float64 // smallest share of a device's heat for a stripe to be named [0.02]
	// WriteEnterRatio and WriteExitRatio replace EnterRatio and ExitRatio
	// for the write measures [3, 2]. Writes come in whole layout
	// components: a checkpoint whose ranks' files put two components on
	// some devices of its pool and one on the rest writes the former at
	// 2× the median, and that is the layout, not a hotspot.
	WriteEnterRatio, WriteExitRatio float64

	// Network paths (netpath.go). PathSlowFactor and PathMinLatency are
	// the starvation analyzer's SlowFactor and MinSlowLatency: a path is
	// slow by the rule a GPU's path is judged slow [2, 0.5 ms];
	// PathExitFactor keeps a finding open [1.5]. PathDriveFactor: a DS
	// whose drives are at least this many times as busy as its peers'
	// (and above the utilisation floor) is slow for its drives, not its
	// path [1.5]: with the peers' load, a drive's busy time grows with
	// its service time, so drives that make a DS 2× slower are about 2×
	// as busy; 1.5 is halfway. SaturatedNIC is the NIC utilisation at
	// which the finding names the NIC rather than "port or NIC" [0.9,
	// the starvation analyzer's SaturatedUtil].
	PathSlowFactor, PathExitFactor float64
	PathMinLatency                 float64
	PathDriveFactor                float64
	SaturatedNIC                   float64
}

func (o Options) withDefaults() Options {
	def := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.EnterScore, 4)
	def(&o.ExitScore, 2)
	def(&o.EnterRatio, 1.5)
	def(&o.ExitRatio, 1.2)
	def(&o.MADFloor, 0.1)
	def(&o.WarningRatio, 3)
	def(&o.MinStripeShare, 0.02)
	def(&o.StripeEnterRatio, 3)
	def(&o.StripeExitRatio, 2)
	def(&o.StripeDeviceUtil, 0.5)
	def(&o.WriteEnterRatio, 3)
	def(&o.WriteExitRatio, 2)
	def(&o.PathSlowFactor, 2)
	def(&o.PathExitFactor, 1.5)
	def(&o.PathMinLatency, 0.0005)
	def(&o.PathDriveFactor, 1.5)
	def(&o.SaturatedNIC, 0.9)
	for i, d := range [numMetrics]float64{50, 10e6, 0.3, 0.002, 50, 10e6, 50, 10e6} {
		def(&o.Floors[i], d)
	}
	dur := func(v *time.Duration, d time.Duration) {
		switch {
		case *v == 0:
			*v = d
		case *v < 0:
			*v = 0
		}
	}
	dur(&o.EnterAfter, 10*time.Second)
	dur(&o.ExitAfter, 60*time.Second)
	dur(&o.HeatHalfLife, 2*time.Minute)
	defInt := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defInt(&o.MinPeers, 5)
	defInt(&o.SketchSize, 4096)
	defInt(&o.StripeCandidates, 64)
	defInt(&o.NamedStripes, 5)
	return o
}

func (o Options) validate() error {
	switch {
	case o.ExitScore > o.EnterScore:
		return fmt.Errorf("invalid hotspot options: ExitScore %v is above EnterScore %v", o.ExitScore, o.EnterScore)
	case o.ExitRatio > o.EnterRatio:
		return fmt.Errorf("invalid hotspot options: ExitRatio %v is above EnterRatio %v", o.ExitRatio, o.EnterRatio)
	case o.WriteExitRatio > o.WriteEnterRatio:
		return fmt.Errorf("invalid hotspot options: WriteExitRatio %v is above WriteEnterRatio %v", o.WriteExitRatio, o.WriteEnterRatio)
	case o.PathExitFactor > o.PathSlowFactor || o.PathExitFactor < 1:
		return fmt.Errorf("invalid hotspot options: PathExitFactor %v must be in [1, PathSlowFactor %v]", o.PathExitFactor, o.PathSlowFactor)
	case o.StripeExitRatio > o.StripeEnterRatio:
		return fmt.Errorf("invalid hotspot options: StripeExitRatio %v is above StripeEnterRatio %v", o.StripeExitRatio, o.StripeEnterRatio)
	case o.EnterRatio < 1:
		return fmt.Errorf("invalid hotspot options: EnterRatio %v is below 1", o.EnterRatio)
	case o.MinPeers < 2:
		return fmt.Errorf("invalid hotspot options: MinPeers %d is below 2", o.MinPeers)
	case o.SketchSize < 1 || o.StripeCandidates < 0 || o.NamedStripes < 0:
		return fmt.Errorf("invalid hotspot options: SketchSize %d, StripeCandidates %d, NamedStripes %d must be positive", o.SketchSize, o.StripeCandidates, o.NamedStripes)
	}
	return nil
}

// stripeLabel remembers where a monitored stripe lives.
type stripeLabel struct {
	stripe, device, ds string
}

// tickStripe is one stripe's share of the current tick: bytes, read and
// write bytes/s, and the index of a delta that names it.
type tickStripe struct {
	bytes float64
	rate  [2]float64 // read, write
	idx   int32
}

// last is what the detector remembers of a subject's most recent hot tick.
type last struct {
	subject  models.Subject
	metric   Metric
	value    float64
	median   float64
	mad      float64
	score    float64
	ratio    float64
	evidence []models.Evidence
	path     *pathInfo // a network path's finding (netpath.go)
}

// Detector carries the hotspot state between ticks. Create it with New and
// drive it with Observe(now, in) then Findings(now), with now increasing.
// It is not safe for concurrent use.
type Detector struct {
	opts    Options
	tracker *episode.Tracker
	info    map[string]*last // by episode key (subject string)
	closed  []models.Finding // ended since the last Findings call

	sketch   *heavyhitter.Sketch
	labels   map[uint64]stripeLabel // for the keys the sketch monitors
	devHeat  map[string]float64     // decayed bytes per device id
	dsHeat   map[string]float64     // decayed bytes per DS id
	tick     map[uint64]tickStripe  // the current tick per stripe key
	order    []uint64               // keys of tick in first-seen order
	devUtil  map[string]float64     // this tick's utilisation per device id
	digest   *xxhash.Digest
	lastTick time.Time

	// Scratch reused across ticks.
	groups   map[groupKey][]int
	vals     []float64
	top      []heavyhitter.Entry // sketch entries sorted, valid for this tick
	topValid bool
}

type groupKey struct {
	kind  models.SubjectKind
	group string
}

// New returns a detector with opts (zero values take the defaults).
func New(opts Options) (*Detector, error) {
	o := opts.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	sk, err := heavyhitter.New(o.SketchSize)
	if err != nil {
		return nil, err
	}
	return &Detector{
		opts:    o,
		tracker: episode.New(o.EnterAfter, o.ExitAfter),
		info:    map[string]*last{},
		sketch:  sk,
		labels:  map[uint64]stripeLabel{},
		devHeat: map[string]float64{},
		dsHeat:  map[string]float64{},
		tick:    map[uint64]tickStripe{},
		devUtil: map[string]float64{},
		digest:  xxhash.New(),
		groups:  map[groupKey][]int{},
	}, nil
}

// StripeID is the stripe subject id of a delta: its device (the pNFS
// device id, or the drive name the mds gave it, which may hold a '/') and
// the data file handle (hex), the same whichever client reported it.
func StripeID(d *models.StripeDelta) string { return d.DeviceID + "/" + d.FileHandle }

// StripeDevice returns the device part of a StripeID: everything before
// the last '/'.
func StripeDevice(id string) string {
	if i := strings.LastIndexByte(id, '/'); i >= 0 {
		return id[:i]
	}
	return id
}

// dirBytes is the bytes one direction of a delta moved, preferring the
// completed count.
func dirBytes(io *models.StripeIO) float64 {
	if io.BytesCompleted > 0 {
		return float64(io.BytesCompleted)
	}
	return float64(io.Bytes)
}

// stripeBytes is the bytes a delta moved in both directions.
func stripeBytes(d *models.StripeDelta) float64 { return dirBytes(&d.Read) + dirBytes(&d.Write) }

// Observe feeds one tick. now must not go backwards.
func (d *Detector) Observe(now time.Time, in Input) error {
	if !d.lastTick.IsZero() && now.Before(d.lastTick) {
		return fmt.Errorf("cannot observe hotspot tick at %s: before the previous tick %s", now.Format(time.RFC3339Nano), d.lastTick.Format(time.RFC3339Nano))
	}
	d.observeStripes(now, in.Stripes)
	d.observeLoads(now, in.Loads)
	d.observePaths(now, in.Paths)
	d.observeStripeCandidates(now)
	for _, e := range d.tracker.Finish(now) {
		if inf := d.info[e.Key]; inf != nil {
			f := d.finding(&e, inf)
			d.closed = append(d.closed, f)
			delete(d.info, e.Key)
		}
	}
	d.lastTick = now
	return nil
}

func (d *Detector) observeStripes(now time.Time, deltas []models.StripeDelta) {
	if !d.lastTick.IsZero() {
		f := math.Exp2(-now.Sub(d.lastTick).Seconds() / d.opts.HeatHalfLife.Seconds())
		d.sketch.Decay(f)
		for _, m := range []map[string]float64{d.devHeat, d.dsHeat} {
			for k, v := range m {
				if v *= f; v < 1 {
					delete(m, k)
				} else {
					m[k] = v
				}
			}
		}
	}
	clear(d.tick)
	d.order = d.order[:0]
	d.topValid = false
	// Aggregate the tick per stripe (several clients may report one
	// stripe), keyed by a hash of the stripe id so no id string is built.
	var prevDev, prevDS string
	var devAcc, dsAcc float64
	flush := func() {
		if devAcc > 0 {
			d.devHeat[prevDev] += devAcc
		}
		if dsAcc > 0 {
			d.dsHeat[prevDS] += dsAcc
		}
		devAcc, dsAcc = 0, 0
	}
	for i := range deltas {
		sd := &deltas[i]
		b := stripeBytes(sd)
		if b <= 0 {
			continue
		}
		d.digest.Reset()
		d.digest.WriteString(sd.DeviceID)
		d.digest.WriteString("/")
		d.digest.WriteString(sd.FileHandle)
		key := d.digest.Sum64()
		ts, seen := d.tick[key]
		if !seen {
			d.order = append(d.order, key)
		}
		ts.bytes += b
		ts.idx = int32(i)
		if sec := sd.Duration.Seconds(); sec > 0 {
			rd, wr := dirBytes(&sd.Read), dirBytes(&sd.Write)
			ts.rate[0] += rd / sec
			ts.rate[1] += wr / sec
		}
		d.tick[key] = ts
		// Deltas usually come grouped by device: sum runs before touching
		// the heat maps.
		if sd.DeviceID != prevDev || sd.DS != prevDS {
			flush()
			prevDev, prevDS = sd.DeviceID, sd.DS
		}
		devAcc += b
		dsAcc += b
	}
	flush()
	// In first-seen order: Space-Saving's replacements depend on the order,
	// and map order is random.
	for _, key := range d.order {
		d.sketch.Add(key, d.tick[key].bytes)
	}
	// Label the keys the sketch now monitors and forget the others, so the
	// labels stay O(sketch size) whatever the number of stripes.
	fresh := make(map[uint64]stripeLabel, d.sketch.Len())
	d.sketch.Each(func(e heavyhitter.Entry) {
		if l, ok := d.labels[e.Key]; ok {
			fresh[e.Key] = l
		} else if ts, ok := d.tick[e.Key]; ok {
			sd := &deltas[ts.idx]
			fresh[e.Key] = stripeLabel{stripe: StripeID(sd), device: sd.DeviceID, ds: sd.DS}
		}
	})
	d.labels = fresh
}

// observeLoads scores every load against its peer group and steps episodes.
func (d *Detector) observeLoads(now time.Time, loads []Load) {
	clear(d.devUtil)
	for i := range loads {
		if l := &loads[i]; l.Subject.Kind == models.SubjectDevice && l.Values[Utilization] >= 0 {
			d.devUtil[l.Subject.ID] = l.Values[Utilization]
		}
	}
	for k, v := range d.groups {
		d.groups[k] = v[:0]
	}
	for i := range loads {
		k := groupKey{loads[i].Subject.Kind, loads[i].Group}
		d.groups[k] = append(d.groups[k], i)
	}
	keys := make([]groupKey, 0, len(d.groups))
	for k, v := range d.groups {
		if len(v) > 0 {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].kind != keys[j].kind {
			return keys[i].kind < keys[j].kind
		}
		return keys[i].group < keys[j].group
	})
	for _, gk := range keys {
		idx := d.groups[gk]
		var med, mad [numMetrics]float64
		var ok [numMetrics]bool
		for m := range numMetrics {
			d.vals = d.vals[:0]
			for _, i := range idx {
				if v := loads[i].Values[m]; v >= 0 && !d.notWriting(Metric(m), v) {
					d.vals = append(d.vals, v)
				}
			}
			if len(d.vals) >= d.opts.MinPeers {
				med[m], mad[m] = robust.MedianMAD(d.vals)
				ok[m] = true
			}
		}
		for _, i := range idx {
			l := &loads[i]
			var best last
			var e, s [numMetrics]bool
			var z, r [numMetrics]float64
			for m := range numMetrics {
				if v := l.Values[m]; ok[m] && v >= d.opts.Floors[m] {
					enterR, exitR := d.opts.EnterRatio, d.opts.ExitRatio
					if Metric(m).isWrite() {
						enterR, exitR = d.opts.WriteEnterRatio, d.opts.WriteExitRatio
					}
					e[m], s[m], z[m], r[m] = d.judge(v, med[m], mad[m], enterR, exitR)
				}
			}
			// Latency is a symptom, not load: alone (a degrading drive) it
			// opens nothing; with a load measure in the band it counts.
			loadE, stay := false, false
			for m := range numMetrics {
				if Metric(m).isLoad() {
					loadE, stay = loadE || e[m], stay || s[m]
				}
			}
			enter := loadE || (e[Latency] && stay)
			// A subject whose utilisation is known and low is not hot,
			// however far above its peers: in a quiet cluster a little
			// activity is far above a median of nothing.
			if u := l.Values[Utilization]; u >= 0 && u < d.opts.Floors[Utilization] {
				stay = false
			}
			if !stay {
				continue
			}
			found := false
			for m := range numMetrics {
				if s[m] && (!found || z[m] > best.score) {
					best = last{subject: l.Subject, metric: Metric(m), value: l.Values[m], median: med[m], mad: mad[m], score: z[m], ratio: r[m]}
					found = true
				}
			}
			key := l.Subject.String()
			if ep := d.tracker.Step(now, key, enter, stay); ep != nil {
				d.remember(key, best, l)
			}
		}
	}
}

// notWriting reports whether v of write measure m is too little for its
// subject to count among the peers that write: a subject below the
// measure's floor (Options.Floors) is no peer for that measure. Writes go
// to the components of the files being written, not spread over a pool
// as reads of a dataset are: a checkpoint writes its ranks' files on some
// drives of a pool at hundreds of MB/s, while the others take only what
// the nodes' logs and small files trickle in (tens of KB/s) or nothing.
// Against that trickle every drive of the checkpoint is thousands of
// times its peers' median; a peer that writes nothing was already no
// peer (the caller leaves the measure unknown), and one that writes
// below the floor, where nothing counts as hot, is no more of one.
func (d *Detector) notWriting(m Metric, v float64) bool {
	return m.isWrite() && v < d.opts.Floors[m]
}

// judge says whether value v enters or stays hot against a median and MAD
// with the given ratios, with its robust score and ratio to the median.
func (d *Detector) judge(v, med, mad, enterRatio, exitRatio float64) (enter, stay bool, z, ratio float64) {
	z = robust.Score(v, med, mad, d.opts.MADFloor)
	ratio = math.Inf(1)
	if med > 0 {
		ratio = v / med
	}
	enter = z >= d.opts.EnterScore && ratio >= enterRatio
	stay = z >= d.opts.ExitScore && ratio >= exitRatio
	return
}

func (d *Detector) remember(key string, best last, l *Load) {
	ev := []models.Evidence{}
	for m := range numMetrics {
		if v := l.Values[m]; v >= 0 {
			ev = append(ev, models.Evidence{Name: metricNames[m], Value: v, Unit: metricUnits[m]})
		}
	}
	best.evidence = append(ev, d.contributors(l.Subject)...)
	d.info[key] = &best
}

// observeStripeCandidates scores the hottest stripes of the sketch against
// the median per-stripe rate of this tick.
func (d *Detector) observeStripeCandidates(now time.Time) {
	// Reads are compared with reads and writes with writes: a checkpoint
	// writes its stripes at hundreds of MB/s each while the dataset's
	// stripes are read at a few, and that is not a hotspot. A stripe
	// written below the bytes floor (a node's log file taking KB/s) is no
	// peer of the stripes a checkpoint writes, as notWriting says for
	// devices: beside such a trickle every checkpoint stripe would be
	// thousands of times the median.
	var med, mad [2]float64
	var ok [2]bool
	for dir := range 2 {
		d.vals = d.vals[:0]
		for _, ts := range d.tick {
			if r := ts.rate[dir]; r > 0 && (dir == 0 || r >= d.opts.Floors[WriteBytesPerSec]) {
				d.vals = append(d.vals, r)
			}
		}
		if len(d.vals) >= d.opts.MinPeers {
			med[dir], mad[dir] = robust.MedianMAD(d.vals)
			ok[dir] = true
		}
	}
	dirName := [2]string{"read", "write"}
	for _, e := range d.sketch.Top(nil, d.opts.StripeCandidates) {
		lb, found := d.labels[e.Key]
		if !found {
			continue
		}
		if u, known := d.devUtil[lb.device]; known && u < d.opts.StripeDeviceUtil {
			continue
		}
		ts := d.tick[e.Key]
		var best last
		enter, stay := false, false
		for dir := range 2 {
			r := ts.rate[dir]
			if !ok[dir] || !(r >= d.opts.Floors[BytesPerSec]) {
				continue
			}
			en, st, z, ratio := d.judge(r, med[dir], mad[dir], d.opts.StripeEnterRatio, d.opts.StripeExitRatio)
			if (en || st) && (!(enter || stay) || z > best.score) {
				best = last{metric: BytesPerSec, value: r, median: med[dir], mad: mad[dir], score: z, ratio: ratio}
				best.evidence = []models.Evidence{{Name: "direction", Value: float64(dir), Note: dirName[dir]}}
			}
			enter, stay = enter || en, stay || st
		}
		if !enter && !stay {
			continue
		}
		s := models.Subject{Kind: models.SubjectStripe, ID: lb.stripe}
		key := s.String()
		if ep := d.tracker.Step(now, key, enter, stay); ep != nil {
			share := 0.0
			if h := d.devHeat[lb.device]; h > 0 {
				share = math.Min(1, (e.Count-e.Err)/h)
			}
			best.subject = s
			best.evidence = append(best.evidence,
				models.Evidence{Name: "read_bytes_per_second", Value: ts.rate[0], Unit: "B/s"},
				models.Evidence{Name: "write_bytes_per_second", Value: ts.rate[1], Unit: "B/s"},
				models.Evidence{Name: "heat_bytes", Value: e.Count, Unit: "B", Note: fmt.Sprintf("decayed, half-life %s; overestimate ≤ %.0f", d.opts.HeatHalfLife, e.Err)},
				models.Evidence{Name: "device_share", Value: round(share), Unit: "ratio", Note: "device " + lb.device + ", ds " + lb.ds})
			d.info[key] = &best
		}
	}
}

// contributors names the hottest stripes of a device or DS and their share,
// as of this tick (so a closed finding keeps the shares of its last hot tick).
func (d *Detector) contributors(s models.Subject) []models.Evidence {
	var match func(stripeLabel) bool
	switch s.Kind {
	case models.SubjectDevice:
		match = func(l stripeLabel) bool { return l.device == s.ID }
	case models.SubjectDS:
		match = func(l stripeLabel) bool { return l.ds == s.ID }
	default:
		return nil
	}
	total := d.devHeat[s.ID]
	if s.Kind == models.SubjectDS {
		total = d.dsHeat[s.ID]
	}
	if total <= 0 {
		return nil
	}
	if !d.topValid {
		d.top = d.sketch.Top(d.top[:0], -1)
		d.topValid = true
	}
	// Shares use the guaranteed part of each count (Count − Err): under
	// heavy churn a newcomer's count is mostly inherited error.
	type named struct {
		stripe string
		share  float64
	}
	var picks []named
	for _, e := range d.top {
		lb, ok := d.labels[e.Key]
		if !ok || !match(lb) {
			continue
		}
		if share := (e.Count - e.Err) / total; share >= d.opts.MinStripeShare {
			picks = append(picks, named{lb.stripe, math.Min(share, 1)})
		}
	}
	sort.Slice(picks, func(i, j int) bool {
		if picks[i].share != picks[j].share {
			return picks[i].share > picks[j].share
		}
		return picks[i].stripe < picks[j].stripe
	})
	var out []models.Evidence
	for _, p := range picks[:min(len(picks), d.opts.NamedStripes)] {
		out = append(out, models.Evidence{Name: "stripe_share", Value: round(p.share), Unit: "ratio", Series: p.stripe,
			Note: fmt.Sprintf("stripe %s carries at least %.0f%% of the %s's recent bytes", p.stripe, 100*p.share, s.Kind)})
	}
	return out
}

func (d *Detector) finding(e *episode.Episode, inf *last) models.Finding {
	sev := models.SeverityInfo
	if inf.ratio >= d.opts.WarningRatio {
		sev = models.SeverityWarning
	}
	id := fmt.Sprintf("%s:%s:%d", Kind, inf.subject, e.Onset.UnixMilli())
	var summary string
	var ev []models.Evidence
	if inf.path != nil {
		// A network path's episode has an id of its own, apart from a
		// load hotspot on the same subject.
		id = fmt.Sprintf("%s:%s:network:%d", Kind, inf.subject, e.Onset.UnixMilli())
		summary, ev = d.pathSummary(inf)
	} else {
		ev = append([]models.Evidence{
			{Name: "hot_metric_" + metricNames[inf.metric], Value: inf.value, Unit: metricUnits[inf.metric]},
			{Name: "peer_median", Value: inf.median, Unit: metricUnits[inf.metric]},
			{Name: "peer_mad", Value: inf.mad, Unit: metricUnits[inf.metric]},
			{Name: "ratio_to_median", Value: round(math.Min(inf.ratio, 1e9)), Note: "capped at 1e9 when the median is 0"},
			{Name: "robust_z", Value: round(inf.score)},
		}, inf.evidence...)
		ratio := "∞"
		if !math.IsInf(inf.ratio, 1) {
			ratio = fmt.Sprintf("%.1f×", inf.ratio)
		}
		summary = fmt.Sprintf("%s %s is hot: %s %.4g is %s its peers' median %.4g", inf.subject.Kind, inf.subject.ID, metricNames[inf.metric], inf.value, ratio, inf.median)
	}
	return models.Finding{
		ID:       id,
		Kind:     Kind,
		Subject:  inf.subject,
		Severity: sev,
		Score:    round(inf.score),
		Start:    e.Onset,
		LastSeen: e.LastTrue,
		End:      e.End,
		Summary:  summary,
		Evidence: ev,
	}
}

// round keeps evidence readable and golden files stable across platforms.
func round(x float64) float64 {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return x
	}
	return math.Round(x*1000) / 1000
}

// Findings returns the active hotspot findings and those that ended since the
// previous call, sorted by id.
func (d *Detector) Findings(now time.Time) []models.Finding {
	out := d.closed
	d.closed = nil
	for _, e := range d.tracker.Active() {
		if inf := d.info[e.Key]; inf != nil {
			out = append(out, d.finding(e, inf))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
