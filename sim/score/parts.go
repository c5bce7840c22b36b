package score

import (
	"math"
	"sort"
	"strings"
	"time"

	"github.com/ballast-io/ballast/cluster/analysis"
	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/sim/twin"
)

// jobsOf returns the jobs a group subject stands for.
func (m *matcher) jobsOf(s models.Subject) []string {
	if s.Kind == models.SubjectJob {
		return []string{s.ID}
	}
	if s.Kind == models.SubjectClient {
		return m.nodeJobs[s.ID]
	}
	return nil
}

// burstStarts returns each job's truth checkpoint burst starts, sorted.
func burstStarts(ts []twin.TruthRecord) map[string][]time.Time {
	out := map[string][]time.Time{}
	for _, t := range ts {
		if t.Kind == "checkpoint_burst" && t.Subject.Kind == models.SubjectJob {
			out[t.Subject.ID] = append(out[t.Subject.ID], t.Start)
		}
	}
	for _, s := range out {
		sort.Slice(s, func(i, j int) bool { return s[i].Before(s[j]) })
	}
	return out
}

// truePeriod is the median gap between successive burst starts.
func truePeriod(starts []time.Time) float64 {
	if len(starts) < 2 {
		return math.NaN()
	}
	gaps := make([]float64, 0, len(starts)-1)
	for i := 1; i < len(starts); i++ {
		gaps = append(gaps, starts[i].Sub(starts[i-1]).Seconds())
	}
	return quantile(gaps, 0.5)
}

// scoreForecasts compares every recorded prediction made once three truth
// bursts of its job had started with the job's true period and with the
// first truth burst that started at or after the prediction.
func scoreForecasts(in *Input, m *matcher) ForecastScore {
	starts := burstStarts(in.Truth)
	var fs ForecastScore
	fs.Jobs = len(starts)
	forecast := map[string]bool{}
	var perErr, nextErr []float64
	for _, r := range in.Forecasts {
		for _, j := range m.jobsOf(r.Subject) {
			st := starts[j]
			p := truePeriod(st)
			if math.IsNaN(p) || p <= 0 {
				continue
			}
			forecast[j] = true
			seen := 0
			var next time.Time
			for _, s := range st {
				if s.Before(r.At) {
					seen++
				} else if next.IsZero() {
					next = s
				}
			}
			if seen < 3 || next.IsZero() {
				continue
			}
			fs.Predictions++
			perErr = append(perErr, math.Abs(r.Period.Seconds()-p)/p)
			nextErr = append(nextErr, math.Abs(r.NextStart.Sub(next).Seconds())/p)
		}
	}
	fs.JobsForecast = len(forecast)
	fs.PeriodErrorMedian, fs.PeriodErrorP95 = Num(quantile(perErr, 0.5)), Num(quantile(perErr, 0.95))
	fs.NextStartErrorMedian, fs.NextStartErrorP95 = Num(quantile(nextErr, 0.5)), Num(quantile(nextErr, 0.95))
	return fs
}

// classOf maps a workload_phase class to the workload analyzer's label.
var classOf = map[string]string{"training": "training-read", "inference": "inference", "analytics": "analytics-scan"}

func overlap(a0, a1, b0, b1 time.Time) time.Duration {
	lo, hi := a0, a1
	if b0.After(lo) {
		lo = b0
	}
	if b1.Before(hi) {
		hi = b1
	}
	if hi.Before(lo) {
		return 0
	}
	return hi.Sub(lo)
}

// scoreLabels checks each window label against what the group's jobs were
// doing: the class of every job phase covering at least half the window;
// checkpoint too when a truth burst of the job overlaps the window;
// mixed-hpc too when more than one class is expected; idle when none.
func scoreLabels(in *Input, m *matcher) WorkloadScore {
	ws := WorkloadScore{Confused: map[string]int{}}
	for _, l := range in.Labels {
		want := map[string]bool{}
		win := l.End.Sub(l.Start)
		for _, j := range m.jobsOf(l.Subject) {
			for i := range in.Truth {
				t := &in.Truth[i]
				if t.Subject.Kind != models.SubjectJob || t.Subject.ID != j {
					continue
				}
				ov := overlap(l.Start, l.End, t.Start, m.end(t.End))
				switch t.Kind {
				case "workload_phase":
					if c, _ := t.Params["class"].(string); 2*ov >= win && classOf[c] != "" {
						want[classOf[c]] = true
					}
				case "checkpoint_burst":
					if ov > 0 {
						want["checkpoint"] = true
					}
				}
			}
		}
		if len(want) > 1 {
			want["mixed-hpc"] = true
		}
		if len(want) == 0 {
			want["idle"] = true
		}
		ws.Windows++
		if want[l.Class] {
			ws.Correct++
			continue
		}
		keys := make([]string, 0, len(want))
		for k := range want {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		exp := keys[0]
		for _, k := range keys[1:] {
			exp += "|" + k
		}
		ws.Confused[exp+"→"+l.Class]++
	}
	ws.Accuracy = Num(ratio(float64(ws.Correct), float64(ws.Windows)))
	if len(ws.Confused) == 0 {
		ws.Confused = nil
	}
	return ws
}

// blameSubject parses a BlameRecord cause: a storage subject, or ok false
// for checkpoint pauses and healthy-path idle.
func blameSubject(cause string) (models.Subject, bool) {
	if cause == "not-storage" || strings.HasPrefix(cause, "checkpoint:") {
		return models.Subject{}, false
	}
	k, id, ok := strings.Cut(cause, ":")
	if !ok || id == "" {
		return models.Subject{}, false
	}
	return models.Subject{Kind: models.SubjectKind(k), ID: id}, true
}

// faultPeers returns, for a gpu_idle record on subject S, the truth fault
// records overlapping its minute on other subjects of S's kind when S is
// itself in such a fault then: the resources in the same condition.
func (m *matcher) faultPeers(idle *twin.TruthRecord) []*twin.TruthRecord {
	var own bool
	var peers []*twin.TruthRecord
	for i := range m.in.Truth {
		t := &m.in.Truth[i]
		if !contains(faultKinds, t.Kind) || t.Start.After(m.end(idle.End)) || m.end(t.End).Before(idle.Start) {
			continue
		}
		for _, n := range truthNames(t) {
			if n == idle.Subject {
				own = true
			} else if n.Kind == idle.Subject.Kind {
				peers = append(peers, &twin.TruthRecord{Kind: t.Kind, Subject: n, Start: t.Start, End: t.End})
			}
		}
	}
	if !own {
		return nil
	}
	return peers
}

func (m *matcher) anyMatch(names []models.Subject, ts []*twin.TruthRecord) bool {
	for _, t := range ts {
		if m.subjectsMatch(names, t) {
			return true
		}
	}
	return false
}

// attribution compares, minute by minute, the idle GPU-seconds the
// starvation analyzer charged to storage subjects with the truth's gpu_idle
// records. A truth record (subject, storage cause, g GPU-seconds) earns up
// to g of the analyzer's charges in the same minute to subjects that match
// it (the matching rules of findings); each charged second is credited
// once. Storage charges beyond the minute's truth storage idle count as
// healthy idle (checkpoint pauses, loader limits) blamed on storage, up to
// that minute's healthy idle.
func (m *matcher) attribution(blame []analysis.BlameRecord) AttributionScore {
	as := AttributionScore{ByCause: map[string][2]float64{}}
	type charge struct {
		names []models.Subject
		left  float64
	}
	charges := map[time.Time][]*charge{}
	storageBlame := map[time.Time]float64{}
	for _, b := range blame {
		s, ok := blameSubject(b.Cause)
		if !ok || b.Seconds <= 0 {
			continue
		}
		charges[b.Minute] = append(charges[b.Minute], &charge{names: m.names(s), left: b.Seconds})
		storageBlame[b.Minute] += b.Seconds
	}
	type rec struct {
		t     *twin.TruthRecord
		cause string
		secs  float64
	}
	var recs []rec
	storageTruth := map[time.Time]float64{}
	healthy := map[time.Time]float64{}
	for i := range m.in.Truth {
		t := &m.in.Truth[i]
		if t.Kind != "gpu_idle" {
			continue
		}
		cause, _ := t.Params["cause"].(string)
		secs, _ := t.Params["gpu_seconds"].(float64)
		if secs <= 0 {
			continue
		}
		min := t.Start.Truncate(time.Minute)
		if storageCauses[cause] {
			recs = append(recs, rec{t, cause, secs})
			storageTruth[min] += secs
		} else {
			healthy[min] += secs
		}
	}
	// Largest first, so that the credit does not depend on record order.
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].secs > recs[j].secs })
	for _, r := range recs {
		got := 0.0
		peers := m.faultPeers(r.t)
		for _, c := range charges[r.t.Start.Truncate(time.Minute)] {
			if got >= r.secs {
				break
			}
			if c.left > 0 && (m.subjectsMatch(c.names, r.t) || m.anyMatch(c.names, peers)) {
				take := math.Min(c.left, r.secs-got)
				c.left -= take
				got += take
			}
		}
		as.StorageIdleSeconds += Num(r.secs)
		as.Attributed += Num(got)
		bc := as.ByCause[r.cause]
		as.ByCause[r.cause] = [2]float64{bc[0] + r.secs, bc[1] + got}
	}
	for min, h := range healthy {
		as.HealthyIdleSeconds += Num(h)
		as.BlamedOnStorage += Num(math.Min(h, math.Max(0, storageBlame[min]-storageTruth[min])))
	}
	as.Share = Num(ratio(float64(as.Attributed), float64(as.StorageIdleSeconds)))
	as.HealthyBlamedShare = Num(ratio(float64(as.BlamedOnStorage), float64(as.HealthyIdleSeconds)))
	for k, v := range as.ByCause {
		as.ByCause[k] = [2]float64{math.Round(v[0]), math.Round(v[1])}
	}
	return as
}
