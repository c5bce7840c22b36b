package twin

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"time"

	"github.com/ballast-io/ballast/models"
)

// TruthRecord is one injected fault or workload phase as the twin knows it
// happened: what, where, from when to when, with its parameters. End is zero
// while it goes on. Truth is for scoring only; it never reaches analyzers.
type TruthRecord struct {
	Kind    string         `json:"kind"`
	Subject models.Subject `json:"subject"`
	Start   time.Time      `json:"start"`
	End     time.Time      `json:"end,omitzero"`
	Params  map[string]any `json:"params,omitempty"`
}

func subjectJob(name string) models.Subject {
	return models.Subject{Kind: models.SubjectJob, ID: name}
}

func (t *Twin) at(sec float64) time.Time {
	return t.start.Add(time.Duration(math.Round(sec * 1e9)))
}

func (t *Twin) openTruth(kind string, subj models.Subject, start float64, params map[string]any) int {
	t.truth = append(t.truth, TruthRecord{Kind: kind, Subject: subj, Start: t.at(start), Params: params})
	return len(t.truth) - 1
}

func (t *Twin) closeTruth(i int, end float64) {
	if i >= 0 && t.truth[i].End.IsZero() {
		t.truth[i].End = t.at(end)
	}
}

// Truth returns a copy of the ground-truth records so far, in the order
// they started (records that start in the same tick keep scenario order).
// GPU idle time of the minute in progress is included as gpu_idle records
// ending now.
func (t *Twin) Truth() []TruthRecord {
	out := make([]TruthRecord, len(t.truth), len(t.truth)+8)
	copy(out, t.truth)
	return t.appendPendingIdle(out)
}

// appendPendingIdle adds the gpu_idle records of the minute in progress
// without closing it.
func (t *Twin) appendPendingIdle(out []TruthRecord) []TruthRecord {
	start, end := float64(t.minuteOf*60), float64(t.tick)*t.dt
	if end <= start {
		return out
	}
	for c := 0; c < numCauses; c++ {
		for s, v := range t.idleMinute[c] {
			if v > 0 {
				out = append(out, TruthRecord{Kind: "gpu_idle", Subject: t.subjectOf(c, s), Start: t.at(start), End: t.at(end),
					Params: t.idleParams(c, s, v)})
			}
		}
	}
	return out
}

// WriteTruth writes the ground truth so far (as Truth returns it) as JSON
// Lines, one record per line, with parameters in sorted key order.
func (t *Twin) WriteTruth(w io.Writer) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	all := t.Truth()
	for i := range all {
		if err := enc.Encode(&all[i]); err != nil {
			return fmt.Errorf("cannot write truth record %d: %w", i, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("cannot write truth: %w", err)
	}
	return nil
}

func (t *Twin) addIdle(cause, subj int, sec float64) {
	t.idleTotal[cause][subj] += sec
	t.idleMinute[cause][subj] += sec
}

// addStallIdle charges a GPU's idle seconds to its stall: at most the
// seconds of work its shortfalls withheld (gp.stall), split over them in
// proportion and taken off what they still explain; it returns the seconds
// charged (the rest of the idle is the loader's). The charged seconds are
// also booked as co-limited idle on each cause whose part is at least half
// the largest: those limit the GPU alike (docs/scenarios.md), and the
// GPU-minute a scorer asks of a target is the GPU's, not one of its
// causes' share.
func (t *Twin) addStallIdle(gp *gpu, idle float64) float64 {
	tot, top := 0.0, 0.0
	for _, l := range gp.stall {
		tot += l.amt
		top = max(top, l.amt)
	}
	if tot <= 0 {
		return 0
	}
	charged := min(idle, tot)
	f := charged / tot
	for i := range gp.stall {
		l := &gp.stall[i]
		t.addIdle(int(l.cause), int(l.subj), l.amt*f)
		if l.amt >= top/2 {
			t.idleCoMinute[l.cause][l.subj] += charged
		}
		l.amt -= l.amt * f
	}
	return charged
}

// capStall keeps of a GPU's withheld work at most what the queue's free
// room (bytes) holds at rate bytes/s: a repair could have added no more to
// the queue, so work withheld beyond it was made up by later reads, and a
// refilled queue owes nothing to earlier stalls. Spent parts are dropped.
func capStall(gp *gpu, room, rate float64) {
	limit := 0.0
	if rate > 0 {
		limit = max(0, room) / rate
	}
	if tot := stallTotal(gp.stall); tot > limit {
		f := limit / tot
		for i := range gp.stall {
			gp.stall[i].amt *= f
		}
	}
	kept := gp.stall[:0]
	for _, l := range gp.stall {
		if l.amt > 1e-9 {
			kept = append(kept, l)
		}
	}
	gp.stall = kept
}

// flushIdleMinute turns a minute of GPU idle time into gpu_idle truth
// records, one per cause and subject, in index order.
func (t *Twin) flushIdleMinute(start, end float64) {
	for c := 0; c < numCauses; c++ {
		row := t.idleMinute[c]
		for s, v := range row {
			if v <= 0 {
				continue
			}
			i := t.openTruth("gpu_idle", t.subjectOf(c, s), start, t.idleParams(c, s, v))
			t.closeTruth(i, end)
			row[s] = 0
			t.idleCoMinute[c][s] = 0
		}
	}
}

// idleParams are a gpu_idle record's parameters: its cause, its GPU-seconds
// and, where it was one of equally limiting causes of a stall, the
// GPU-seconds of the stalls it took part in (gpu_seconds_colimited).
func (t *Twin) idleParams(c, s int, v float64) map[string]any {
	p := map[string]any{"cause": causeNames[c], "gpu_seconds": math.Round(v*1000) / 1000}
	if co := t.idleCoMinute[c][s]; co > v*(1+1e-9) {
		p["gpu_seconds_colimited"] = math.Round(co*1000) / 1000
	}
	return p
}

// subjectOf names the subject of an idle-time cause: a resource index, or
// past the resources a workload index.
func (t *Twin) subjectOf(cause, s int) models.Subject {
	switch {
	case s >= len(t.resCap):
		return subjectJob(t.sc.Workloads[s-len(t.resCap)].Name)
	case s < t.dsBase:
		return models.Subject{Kind: models.SubjectDevice, ID: t.dev[s].name}
	case s >= t.spaceBase:
		return models.Subject{Kind: models.SubjectDevice, ID: t.dev[s-t.spaceBase].name}
	case s < t.cliBase:
		h := (s - t.dsBase) / slotsPerHost
		if (s-t.dsBase)%slotsPerHost >= slotPortIn {
			return models.Subject{Kind: models.SubjectPort, ID: portName(t.ds[h].name)}
		}
		return models.Subject{Kind: models.SubjectDS, ID: t.ds[h].name}
	default:
		h := (s - t.cliBase) / slotsPerHost
		if (s-t.cliBase)%slotsPerHost >= slotPortIn {
			return models.Subject{Kind: models.SubjectPort, ID: portName(t.cli[h].name)}
		}
		return models.Subject{Kind: models.SubjectClient, ID: t.cli[h].name}
	}
}

// IdleShare is the GPU idle time blamed on one subject for one cause.
type IdleShare struct {
	Cause   string         `json:"cause"`
	Subject models.Subject `json:"subject"`
	Seconds float64        `json:"gpu_seconds"`
}

// GPUStats summarises the GPUs of training jobs so far: utilisation is
// busy GPU-seconds over allocated GPU-seconds (a GPU is allocated while its
// job runs), and every idle allocated GPU-second is attributed to a cause
// and a subject.
type GPUStats struct {
	AllocatedSeconds float64            `json:"allocated_gpu_seconds"`
	BusySeconds      float64            `json:"busy_gpu_seconds"`
	UtilMean         float64            `json:"gpu_util_mean"`
	IdleByCause      map[string]float64 `json:"gpu_idle_seconds_by_cause"`
	IdleBySubject    []IdleShare        `json:"gpu_idle_by_subject"`
	IOErrors         float64            `json:"io_errors"`
}

// GPUStats returns the GPU summary so far.
func (t *Twin) GPUStats() GPUStats {
	g := GPUStats{AllocatedSeconds: t.allocSec, BusySeconds: t.busySec, IdleByCause: map[string]float64{}, IOErrors: t.ioErrors}
	if t.allocSec > 0 {
		g.UtilMean = t.busySec / t.allocSec
	}
	for c := 0; c < numCauses; c++ {
		sum := 0.0
		for s, v := range t.idleTotal[c] {
			if v > 0 {
				sum += v
				g.IdleBySubject = append(g.IdleBySubject, IdleShare{Cause: causeNames[c], Subject: t.subjectOf(c, s), Seconds: v})
			}
		}
		if sum > 0 {
			g.IdleByCause[causeNames[c]] = sum
		}
	}
	sort.SliceStable(g.IdleBySubject, func(a, b int) bool { return g.IdleBySubject[a].Seconds > g.IdleBySubject[b].Seconds })
	return g
}

// GPUUtil returns the busy fraction of the last tick of every GPU of
// client node, in GPU index order, or nil for an unknown node.
func (t *Twin) GPUUtil(node string) []float64 {
	c := t.findClient(node)
	if c < 0 {
		return nil
	}
	cl := &t.cli[c]
	out := make([]float64, cl.nGPU)
	for k := range out {
		out[k] = t.gpus[cl.firstGPU+int32(k)].busy
	}
	return out
}
