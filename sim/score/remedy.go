package score

import (
	"math"
	"sort"
	"time"

	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/sim/twin"
)

// Remediation targets of issue 11 (docs/evaluation.md).
const (
	// RecoverUtil is the GPU utilisation affected jobs must get back to.
	RecoverUtil = 0.95
	// RecoverWithin is how soon after a hotspot's onset.
	RecoverWithin = 5 * time.Minute
	// utilWindow is the span one utilisation reading covers.
	utilWindow = time.Minute
	// loadWindow is the span device loads are read over at the end of a
	// hotspot (or of the run).
	loadWindow = 5 * time.Minute
)

// RemedySample is the twin's cumulative remediation counters at one time
// (sampled every scrape interval by the eval harness).
type RemedySample struct {
	At   time.Time
	Jobs []twin.JobGPU
	// DeviceBytes is each device's user I/O since the start, and Active
	// whether it is online in its pool, in the twin's device order.
	DeviceBytes []float64
	Active      []bool
	// Reads are the clients' read counters, in the twin's client order.
	Reads []twin.ClientRead
}

// RemedyInput is one run to score for remediation.
type RemedyInput struct {
	Method  string
	Truth   []twin.TruthRecord
	Samples []RemedySample
	// Devices names the twin's devices and their pools, in device order.
	Devices []twin.DeviceLoad
	Actions []models.Action
	// MigrationInCheckpoints is the bytes copies and read-backs moved
	// while a checkpoint burst was on: urgent actions and the others.
	UrgentInCheckpoints, OtherInCheckpoints float64
	// LostStripes are components on drives when they failed.
	LostStripes int
	// StripesLeft counts, per failing drive that had not failed by the
	// end of the run, the components still on it.
	StripesLeft map[string]int
	// StorageIdleSeconds is the GPU idle time with a storage cause.
	StorageIdleSeconds float64
	End                time.Time
}

// Remedy is the remediation score of one run.
type Remedy struct {
	Method string `json:"method"`
	// Hotspots are the hot_shard onsets (the records of one fault share
	// an onset); Recovered those whose affected jobs were back at
	// RecoverUtil within RecoverWithin and stayed there until the hotspot
	// ended; RecoverSeconds the time to recover of each (null: never).
	Hotspots       int   `json:"hotspots"`
	Affected       int   `json:"affected_hotspots"`
	Recovered      int   `json:"recovered_in_time"`
	RecoverSeconds []Num `json:"recover_seconds"`
	// RecoverMedian is over every affected onset, an unrecovered one
	// counting as never (+Inf, null when the median is).
	RecoverMedian Num `json:"recover_seconds_median"`
	// AffectedUtil is the utilisation (GPU-seconds busy ÷ allocated and
	// not paused for a checkpoint) of the affected jobs from onset +
	// RecoverWithin to the hotspot's end.
	AffectedUtil Num `json:"affected_util_after"`
	// MaxMean is max ÷ mean user load of the pool's active devices over
	// the last loadWindow of the hotspot (or of the run), the worst pool.
	MaxMean Num `json:"max_mean_after"`
	// BytesMoved sums the rebalance plans' committed bytes; LowerBound
	// the lower bounds of those whose moves all ended, and CostRatio is
	// their bytes ÷ LowerBound (null without such a plan).
	BytesMoved int64 `json:"rebalance_bytes_moved"`
	LowerBound int64 `json:"rebalance_lower_bound_bytes"`
	CostRatio  Num   `json:"cost_ratio"`
	// EvacuatedBytes are the bytes evacuations and spare promotions moved.
	EvacuatedBytes int64 `json:"evacuated_bytes"`
	// StripesLost on drives that failed; StripesLeft on failing drives
	// that had not failed by the end of the run.
	FailingDrives int `json:"failing_drives"`
	StripesLost   int `json:"stripes_lost"`
	StripesLeft   int `json:"stripes_left"`
	// StallSeconds is idle GPU time with a storage cause.
	StallSeconds float64 `json:"storage_stall_gpu_seconds"`
	// CheckpointBytes moved by non-urgent actions inside checkpoint
	// bursts (target 0); UrgentCheckpointBytes by urgent ones (allowed).
	CheckpointBytes       float64 `json:"checkpoint_window_bytes"`
	UrgentCheckpointBytes float64 `json:"urgent_checkpoint_window_bytes"`
	// Plans that carried out a move, and those whose effect was measured
	// (a verdict other than unknown); Verdicts counts each.
	Plans    int            `json:"plans"`
	Acted    int            `json:"plans_acted"`
	Measured int            `json:"effects_measured"`
	Verdicts map[string]int `json:"verdicts"`
	// GPUUtil is every job's utilisation outside checkpoint pauses.
	GPUUtil Num `json:"gpu_util"`
}

// jobUtil is busy ÷ (allocated − paused) between two samples for jobs js
// together; ok is false when they had (almost) no unpaused GPU time.
func jobUtil(a, b *RemedySample, js []int) (float64, bool) {
	var busy, avail float64
	for _, j := range js {
		x, y := a.Jobs[j], b.Jobs[j]
		busy += y.Busy - x.Busy
		avail += (y.Allocated - x.Allocated) - (y.Paused - x.Paused)
	}
	if avail < 1 {
		return 0, false
	}
	return busy / avail, true
}

// sampleAt returns the index of the last sample at or before t (0 if none).
func sampleAt(ss []RemedySample, t time.Time) int {
	i := sort.Search(len(ss), func(i int) bool { return ss[i].At.After(t) })
	return max(0, i-1)
}

// ScoreRemedy scores one run's remediation against the twin's truth.
func ScoreRemedy(in RemedyInput) Remedy {
	r := Remedy{Method: in.Method, Verdicts: map[string]int{}, StripesLost: in.LostStripes,
		StallSeconds: in.StorageIdleSeconds, CheckpointBytes: in.OtherInCheckpoints, UrgentCheckpointBytes: in.UrgentInCheckpoints,
		RecoverMedian: Num(math.NaN()), AffectedUtil: Num(math.NaN()), MaxMean: Num(math.NaN()), CostRatio: Num(math.NaN()), GPUUtil: Num(math.NaN()),
		RecoverSeconds: []Num{}}
	ss := in.Samples
	// hotspot onsets and their ends
	type onset struct{ start, end time.Time }
	var ons []onset
	seen := map[time.Time]int{}
	for _, t := range in.Truth {
		switch t.Kind {
		case "hot_shard":
			end := t.End
			if end.IsZero() || end.After(in.End) {
				end = in.End
			}
			if i, ok := seen[t.Start]; ok {
				ons[i].end = maxTime(ons[i].end, end)
				continue
			}
			seen[t.Start] = len(ons)
			ons = append(ons, onset{t.Start, end})
		case "failing_drive":
			r.FailingDrives++
		}
	}
	for _, n := range in.StripesLeft {
		r.StripesLeft += n
	}
	r.Hotspots = len(ons)
	if len(ss) >= 2 {
		all := make([]int, len(ss[0].Jobs))
		for j := range all {
			all[j] = j
		}
		if u, ok := jobUtil(&ss[0], &ss[len(ss)-1], all); ok {
			r.GPUUtil = Num(u)
		}
	}
	var recover []float64
	var affBusy, affAvail float64
	for _, o := range ons {
		if len(ss) < 2 {
			break
		}
		// affected: jobs whose utilisation fell below the target in some
		// window while the hotspot was on
		var aff []int
		for j := range ss[0].Jobs {
			for i := sampleAt(ss, o.start); i < len(ss) && !ss[i].At.Add(utilWindow).After(o.end); i++ {
				k := sampleAt(ss, ss[i].At.Add(utilWindow))
				if u, ok := jobUtil(&ss[i], &ss[k], []int{j}); ok && u < RecoverUtil {
					aff = append(aff, j)
					break
				}
			}
		}
		if len(aff) == 0 {
			continue
		}
		r.Affected++
		// recovered at the earliest sample from which every window until
		// the hotspot's end reads at least the target
		rec := math.Inf(1)
		for i := len(ss) - 1; i >= sampleAt(ss, o.start); i-- {
			if ss[i].At.Add(utilWindow).After(o.end) {
				continue
			}
			k := sampleAt(ss, ss[i].At.Add(utilWindow))
			if u, ok := jobUtil(&ss[i], &ss[k], aff); ok && u < RecoverUtil {
				break
			}
			rec = math.Max(0, ss[i].At.Sub(o.start).Seconds())
		}
		// a recovery in the last window before the end says nothing
		if !math.IsInf(rec, 1) && !o.start.Add(time.Duration(rec*float64(time.Second))).Add(utilWindow).Before(o.end) {
			rec = math.Inf(1)
		}
		recover = append(recover, rec)
		r.RecoverSeconds = append(r.RecoverSeconds, Num(rec))
		if rec <= RecoverWithin.Seconds() {
			r.Recovered++
		}
		a, b := sampleAt(ss, o.start.Add(RecoverWithin)), sampleAt(ss, o.end)
		if a < b {
			for _, j := range aff {
				x, y := ss[a].Jobs[j], ss[b].Jobs[j]
				affBusy += y.Busy - x.Busy
				affAvail += (y.Allocated - x.Allocated) - (y.Paused - x.Paused)
			}
		}
	}
	if len(recover) > 0 {
		sort.Float64s(recover)
		m := recover[len(recover)/2]
		if len(recover)%2 == 0 {
			m = (recover[len(recover)/2-1] + m) / 2
		}
		r.RecoverMedian = Num(m)
	}
	if affAvail >= 1 {
		r.AffectedUtil = Num(affBusy / affAvail)
	}
	// device load over the last window of the hotspot, or of the run
	if len(ss) >= 2 {
		end := in.End
		for _, o := range ons {
			end = o.end // the last hotspot's
		}
		a, b := sampleAt(ss, end.Add(-loadWindow)), sampleAt(ss, end)
		if a < b {
			r.MaxMean = Num(maxMean(in.Devices, &ss[a], &ss[b]))
		}
	}
	// actions
	var lbMoved int64
	for i := range in.Actions {
		a := &in.Actions[i]
		if a.Parent != "" || a.DryRun {
			continue
		}
		r.Plans++
		moved := int64(0)
		if a.Progress != nil {
			moved = a.Progress.BytesMoved
		}
		if moved > 0 || a.Progress != nil && a.Progress.MovesDone > 0 {
			r.Acted++
			v := "none"
			if a.Effect != nil && a.Effect.Verdict != "" {
				v = string(a.Effect.Verdict)
			}
			r.Verdicts[v]++
			if v != "none" && v != string(models.VerdictUnknown) {
				r.Measured++
			}
		}
		switch a.Kind {
		case models.ActionRebalance:
			r.BytesMoved += moved
			// the ratio is over plans whose moves all ended: one cut off
			// by the end of the run has not moved what it planned
			if pr := a.Progress; a.Plan != nil && moved > 0 && pr.MovesDone+pr.MovesFailed+pr.MovesCancelled >= pr.MovesTotal {
				r.LowerBound += a.Plan.LowerBoundBytes
				lbMoved += moved
			}
		case models.ActionEvacuateDevice, models.ActionPromoteSpare:
			r.EvacuatedBytes += moved
		}
	}
	if r.LowerBound > 0 {
		r.CostRatio = Num(float64(lbMoved) / float64(r.LowerBound))
	}
	return r
}

// maxMean is the largest max ÷ mean of user load over the active devices
// of each pool between samples a and b.
func maxMean(devs []twin.DeviceLoad, a, b *RemedySample) float64 {
	sum, mx, n := map[string]float64{}, map[string]float64{}, map[string]int{}
	for d := range devs {
		if d >= len(b.Active) || !b.Active[d] {
			continue
		}
		l := b.DeviceBytes[d] - a.DeviceBytes[d]
		p := devs[d].Pool
		sum[p] += l
		n[p]++
		mx[p] = math.Max(mx[p], l)
	}
	out := math.NaN()
	for p, s := range sum {
		if s <= 0 {
			continue
		}
		v := mx[p] / (s / float64(n[p]))
		if math.IsNaN(out) || v > out {
			out = v
		}
	}
	return out
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
