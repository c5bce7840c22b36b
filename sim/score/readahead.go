package score

import (
	"math"
	"time"

	"github.com/ballast-io/ballast/models"
)

// Read-ahead targets of issue 14 (docs/evaluation.md#read-ahead).
const (
	// RAUtilWithin is how soon a starved training job's GPUs must be back
	// at RecoverUtil.
	RAUtilWithin = 10 * time.Minute
	// RALatencyQuantile is the quantile of the inference mount's read
	// latency compared with the static default's.
	RALatencyQuantile = 0.99
)

// RAJob is one workload of the run with the client nodes it runs on.
type RAJob struct {
	Name  string
	Kind  string // the scenario's workload kind: training, inference, analytics
	Nodes []string
	// Index is the job's place in RemedySample.Jobs.
	Index int
}

// ReadAheadInput is one run to score for read-ahead.
type ReadAheadInput struct {
	Method  string
	Samples []RemedySample
	Jobs    []RAJob
	Actions []models.Action
}

// RAJobScore is one job's read-ahead outcome, from the twin's counters.
type RAJobScore struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// ReadBytesPerSecond is what the job's applications read over the run
	// (application bytes, read-ahead waste excluded); Amplification the
	// bytes the servers sent per application byte.
	ReadBytesPerSecond Num `json:"read_bytes_per_second"`
	Amplification      Num `json:"amplification"`
	// GPUUtil is the job's utilisation over the run (busy ÷ allocated,
	// checkpoint pauses excluded), UtilAfter from RAUtilWithin to the end,
	// and UtilReachedSeconds the earliest time since the start from which
	// every minute reads at least RecoverUtil (null: never; jobs with GPUs
	// only).
	GPUUtil            Num `json:"gpu_util"`
	UtilAfter          Num `json:"gpu_util_after_10m"`
	UtilReachedSeconds Num `json:"gpu_util_95_reached_seconds"`
	// ReadLatencyMean and ReadLatencyP99 are over the run's sample
	// intervals of the job's nodes' mean READ round trip in milliseconds
	// (mountstats RTT ÷ READs of the interval): the twin has no
	// per-request distribution, so the p99 is of 10-second means.
	ReadLatencyMean Num `json:"read_latency_mean_ms"`
	ReadLatencyP99  Num `json:"read_latency_p99_ms"`
}

// ReadAhead is the read-ahead score of one run.
type ReadAhead struct {
	Method string       `json:"method"`
	Jobs   []RAJobScore `json:"jobs"`
	// Changes are the set_read_ahead actions that were not pins; NotHelped
	// those whose verdict was not effective; RolledBack those that ended
	// rolled back; NotHelpedKept those that did not help and were not
	// rolled back (target 0).
	Changes    int `json:"changes"`
	NotHelped  int `json:"not_helped"`
	RolledBack int `json:"rolled_back"`
	// Unmeasured: no verdict (still verifying at the end, or no numbers).
	Unmeasured    int `json:"unmeasured"`
	NotHelpedKept int `json:"not_helped_kept"`
}

// ScoreReadAhead scores one run's read-ahead outcome on the twin's truth.
func ScoreReadAhead(in ReadAheadInput) ReadAhead {
	r := ReadAhead{Method: in.Method, Jobs: []RAJobScore{}}
	for _, a := range in.Actions {
		if a.Kind != models.ActionSetReadAhead || a.Params["pinned"] == "true" {
			continue
		}
		r.Changes++
		if a.State == models.ActionRolledBack {
			r.RolledBack++
		}
		if a.Effect == nil || a.Effect.Verdict == "" || a.Effect.Verdict == models.VerdictUnknown {
			r.Unmeasured++
			continue
		}
		if a.Effect.Verdict != models.VerdictEffective {
			r.NotHelped++
			if a.State != models.ActionRolledBack {
				r.NotHelpedKept++
			}
		}
	}
	ss := in.Samples
	if len(ss) < 2 {
		return r
	}
	first, last := &ss[0], &ss[len(ss)-1]
	span := last.At.Sub(first.At).Seconds()
	for _, j := range in.Jobs {
		js := RAJobScore{Name: j.Name, Kind: j.Kind, GPUUtil: Num(math.NaN()), UtilAfter: Num(math.NaN()), UtilReachedSeconds: Num(math.NaN()),
			ReadBytesPerSecond: Num(math.NaN()), Amplification: Num(math.NaN()), ReadLatencyMean: Num(math.NaN()), ReadLatencyP99: Num(math.NaN())}
		idx := nodeIndexes(first, j.Nodes)
		app, srv, _, _ := readSums(first, last, idx)
		if span > 0 {
			js.ReadBytesPerSecond = Num(app / span)
		}
		if app > 0 {
			js.Amplification = Num(srv / app)
		}
		var lats []float64
		var rtt, ops float64
		for i := 1; i < len(ss); i++ {
			_, _, o, ms := readSums(&ss[i-1], &ss[i], idx)
			if o > 0 {
				lats = append(lats, ms/o)
			}
			rtt += ms
			ops += o
		}
		if ops > 0 {
			js.ReadLatencyMean = Num(rtt / ops)
			js.ReadLatencyP99 = Num(quantile(lats, RALatencyQuantile))
		}
		if j.Index >= 0 && j.Index < len(first.Jobs) {
			jj := []int{j.Index}
			if u, ok := jobUtil(first, last, jj); ok {
				js.GPUUtil = Num(u)
				if k := sampleAt(ss, first.At.Add(RAUtilWithin)); k < len(ss)-1 {
					if u, ok := jobUtil(&ss[k], last, jj); ok {
						js.UtilAfter = Num(u)
					}
				}
				js.UtilReachedSeconds = Num(reachedAt(ss, jj))
			}
		}
		r.Jobs = append(r.Jobs, js)
	}
	return r
}

// reachedAt is the seconds since the first sample of the earliest sample
// from which every utilWindow until the run's end reads at least
// RecoverUtil (+Inf: never).
func reachedAt(ss []RemedySample, js []int) float64 {
	end := ss[len(ss)-1].At
	at := math.Inf(1)
	for i := len(ss) - 1; i >= 0; i-- {
		if ss[i].At.Add(utilWindow).After(end) {
			continue
		}
		k := sampleAt(ss, ss[i].At.Add(utilWindow))
		if u, ok := jobUtil(&ss[i], &ss[k], js); ok && u < RecoverUtil {
			break
		}
		at = ss[i].At.Sub(ss[0].At).Seconds()
	}
	return at
}

func nodeIndexes(s *RemedySample, nodes []string) []int {
	want := map[string]bool{}
	for _, n := range nodes {
		want[n] = true
	}
	var out []int
	for i, c := range s.Reads {
		if want[c.Name] {
			out = append(out, i)
		}
	}
	return out
}

// readSums returns the nodes' application bytes, server bytes, READs and
// RTT milliseconds between samples a and b.
func readSums(a, b *RemedySample, idx []int) (app, srv, ops, ms float64) {
	for _, i := range idx {
		if i >= len(a.Reads) || i >= len(b.Reads) {
			continue
		}
		x, y := a.Reads[i], b.Reads[i]
		app += y.AppBytes - x.AppBytes
		srv += y.ServerBytes - x.ServerBytes
		ops += y.Ops - x.Ops
		ms += y.RTTms - x.RTTms
	}
	return app, srv, ops, ms
}
