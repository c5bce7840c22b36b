// Package score matches analyzer findings to the cluster twin's ground
// truth and computes detection quality: per finding kind precision, recall
// and detection delay; checkpoint forecast errors; workload label accuracy
// per window; and the share of storage-caused idle GPU-seconds attributed
// to the right subject. It is the only place truth is read. The rules are
// documented in docs/evaluation.md; everything here is pure.
package score

import (
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ballast-io/ballast/analyzer/hotspot"
	"github.com/ballast-io/ballast/cluster/analysis"
	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/sim/twin"
)

// Names maps the ids the mds may use (pNFS device ids and DS addresses
// its device table did not name, file handles) to the twin's names. The
// scoring harness fills it from the twin (which issued the ids) and from
// the stripe deltas it saw. Names the device table resolved (ds03/nvme2n1,
// ds03) are the twin's already.
type Names struct {
	// Device maps what the mds calls a device before its device table
	// resolves it (a pNFS device id, "<ds>:<id>", "<ds>:<export>") to a
	// drive name (ds03/nvme2n1); "" for anything else.
	Device func(id string) string
	// Stripe maps a component file handle (hex) to a stripe (file#k).
	Stripe func(fh string) string
	// DS maps a DS address (ip:port) to a DS name (ds03).
	DS map[string]string
}

// Input is one run to score.
type Input struct {
	Truth    []twin.TruthRecord
	Findings []models.Finding
	// FirstReported is when each finding (by id) was first reported; a
	// finding missing here counts as reported at its LastSeen.
	FirstReported map[string]time.Time
	// Episodes, when set, are the gpu_starvation episodes each on its own
	// (analysis.StarvationEpisodes); gpu_starvation is then scored on them
	// instead of its findings, which fold short episodes and checkpoint
	// pauses of one cause into one recurring finding. Their first report
	// times belong in FirstReported.
	Episodes  []models.Finding
	Forecasts []analysis.ForecastRecord
	Labels    []analysis.WindowLabel
	// Blame is the starvation analyzer's idle GPU-seconds per cause and
	// minute.
	Blame []analysis.BlameRecord
	// JobNodes lists the client nodes of each job (from the scenario).
	JobNodes map[string][]string
	Names    Names
	// End is the end of the run: ongoing truth records and findings are
	// taken to last until then.
	End time.Time
	// Start is the start of the run; with it each scored kind reports its
	// false findings per simulated hour. Zero: not reported.
	Start time.Time
	// Tolerance widens every truth interval on both sides; default 60 s.
	Tolerance time.Duration
}

// KindScore is the detection quality of one finding kind.
type KindScore struct {
	// Findings is what was scored: the findings of the kind, or for
	// gpu_starvation with Input.Episodes its episodes.
	Findings int `json:"findings"`
	// Reported is the findings an operator saw, when that differs from
	// Findings (gpu_starvation scored on episodes).
	Reported      int `json:"reported_findings,omitempty"`
	TruePositives int `json:"true_positives"`
	Targets       int `json:"targets"`
	Detected      int `json:"detected"`
	// Precision is TruePositives / Findings, Recall Detected / Targets;
	// NaN (null in JSON) when the denominator is 0.
	Precision Num `json:"precision"`
	Recall    Num `json:"recall"`
	// Delays are first report − truth onset of each detected target,
	// seconds, floored at 0.
	MedianDelay Num `json:"median_delay_seconds"`
	P95Delay    Num `json:"p95_delay_seconds"`
	// MedianEvidenceDelay is the median over detected targets of first
	// report − the time the target first became observable in what the
	// agents export (the twin's evidence_after_onset_s: a failing drive's
	// first SMART change), seconds, floored at 0; absent when no detected
	// target carries that time.
	MedianEvidenceDelay *Num `json:"median_delay_after_evidence_seconds,omitempty"`
	// MedianErrorDelay is the same from the target's first logged error
	// (the twin's error_after_onset_s: a failing drive's first media error
	// or error-log entry); absent likewise.
	MedianErrorDelay *Num `json:"median_delay_after_first_error_seconds,omitempty"`
	// TargetKinds and ExplainKinds are the truth kinds used.
	TargetKinds  []string `json:"target_kinds"`
	ExplainKinds []string `json:"explain_kinds"`
	// Missed lists targets no finding matched, for reading.
	Missed []string `json:"missed,omitempty"`
	// FalsePerHour is (Findings − TruePositives) per simulated hour of
	// the run: findings no truth record explains. NaN (null) without
	// Input.Start.
	FalsePerHour Num `json:"false_per_hour"`
}

// ForecastScore is the quality of checkpoint forecasts.
type ForecastScore struct {
	// Predictions scored: those made after at least three observed bursts
	// whose next truth burst of the job came before the end of the run.
	Predictions int `json:"predictions"`
	// PeriodError is |predicted − true| / true period, median and p95;
	// the true period is the median gap between the job's truth bursts.
	PeriodErrorMedian Num `json:"period_error_median"`
	PeriodErrorP95    Num `json:"period_error_p95"`
	// NextStartError is |predicted next start − the job's next truth burst
	// start after the prediction| / true period.
	NextStartErrorMedian Num `json:"next_start_error_median"`
	NextStartErrorP95    Num `json:"next_start_error_p95"`
	Jobs                 int `json:"jobs_with_bursts"`
	JobsForecast         int `json:"jobs_forecast"`
}

// WorkloadScore is per-window label accuracy.
type WorkloadScore struct {
	Windows  int            `json:"windows"`
	Correct  int            `json:"correct"`
	Accuracy Num            `json:"accuracy"`
	Confused map[string]int `json:"confused,omitempty"` // "expected→got" counts
}

// AttributionScore is how starved GPU-seconds were attributed, minute by
// minute (docs/evaluation.md).
type AttributionScore struct {
	// StorageIdleSeconds is the truth's idle GPU-seconds with a storage
	// cause; Attributed the part of it the analyzer charged, in the same
	// minute, to the right subject; Share their ratio.
	StorageIdleSeconds Num `json:"storage_idle_gpu_seconds"`
	Attributed         Num `json:"attributed_gpu_seconds"`
	Share              Num `json:"share"`
	// HealthyIdleSeconds is idle time with a non-storage cause (checkpoint
	// pauses, the loaders' own limit); BlamedOnStorage the part of it the
	// analyzer charged to storage beyond the minute's true storage idle;
	// HealthyBlamedShare their ratio.
	HealthyIdleSeconds Num `json:"healthy_idle_gpu_seconds"`
	BlamedOnStorage    Num `json:"healthy_blamed_gpu_seconds"`
	HealthyBlamedShare Num `json:"healthy_blamed_share"`
	// ByCause is the storage idle GPU-seconds and the attributed part per
	// truth cause.
	ByCause map[string][2]float64 `json:"by_cause"`
}

// Result is eval.json's scores.
type Result struct {
	Kinds       map[string]*KindScore `json:"kinds"`
	Forecast    ForecastScore         `json:"checkpoint_forecast"`
	Workload    WorkloadScore         `json:"workload_labels"`
	Attribution AttributionScore      `json:"gpu_starvation_attribution"`
	TruthCounts map[string]int        `json:"truth_counts"`
}

// Num is a float64 that encodes NaN and infinities as JSON null (an
// undefined precision, say, when nothing was found).
type Num float64

// MarshalJSON implements json.Marshaler.
func (n Num) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, math.Round(f*1e4)/1e4, 'g', -1, 64), nil
}

// starvationKind is the finding kind of analyzer/starvation.
const starvationKind = "gpu_starvation"

// StorageCause reports whether a gpu_idle cause is a storage one.
func StorageCause(cause string) bool { return storageCauses[cause] }

// storageCauses are the gpu_idle causes a storage subject is responsible for.
var storageCauses = map[string]bool{"device": true, "ds_nic": true, "port": true, "client_nic": true,
	"io_error": true, "node_down": true, "read_ahead": true}

// rule says which truth kinds a finding kind is scored against: targets
// are what it should find (recall), explains what makes a finding right
// (precision; targets included).
type rule struct {
	targets, explains []string
	// ownLevel: a finding matches only at its own level of the hierarchy
	// and below — a device or stripe finding through its device (or
	// stripe), never through the DS or port that contains it; a DS finding
	// through its DS and port. So a hotspot on another drive of the hot
	// shard's DS is not a hit.
	ownLevel bool
	// edgeExplains: an explaining record explains a finding only when the
	// finding starts within the tolerance of the record's start or end (a
	// change), not anywhere inside it: a workload_shift is explained by
	// the job's phase starting or ending, not by the job running.
	edgeExplains bool
}

var rules = map[string]rule{
	"hotspot": {targets: []string{"hot_shard", "port_saturation"},
		explains: []string{"device_saturated", "ds_nic_saturated", "port_saturated", "slow_drive"}, ownLevel: true},
	"checkpoint_burst":   {targets: []string{"checkpoint_burst"}},
	"checkpoint_failed":  {targets: []string{"checkpoint_failed"}},
	"drive_failure_risk": {targets: []string{"failing_drive"}, explains: []string{"drive_failed", "slow_drive"}},
	"gpu_starvation":     {targets: []string{"gpu_idle_storage"}, explains: append([]string{"gpu_idle", "gpu_idle_storage_minor"}, faultKinds...)},
	"workload_shift":     {targets: []string{"workload_shift"}, explains: []string{"workload_phase"}, edgeExplains: true},
}

// faultKinds are the truth kinds of a storage fault or saturation: a
// gpu_starvation finding naming such a subject while it lasts is right,
// and idle GPU-seconds charged to it count for idle the twin blamed on
// another subject of the same kind in the same condition (the twin breaks
// ties between equally slow stripes of a stream by taking the first).
var faultKinds = []string{"hot_shard", "device_saturated", "ds_nic_saturated", "port_saturated", "client_nic_saturated",
	"port_saturation", "node_loss", "failing_drive", "drive_failed", "slow_drive"}

// Score scores one run.
func Score(in Input) Result {
	if in.Tolerance <= 0 {
		in.Tolerance = time.Minute
	}
	m := matcher{in: &in, nodeJobs: map[string][]string{}}
	for j, ns := range in.JobNodes {
		for _, n := range ns {
			m.nodeJobs[n] = append(m.nodeJobs[n], j)
		}
	}
	truth := episodes(in.Truth, in.Tolerance)
	res := Result{Kinds: map[string]*KindScore{}, TruthCounts: map[string]int{}}
	for _, t := range truth {
		res.TruthCounts[t.Kind]++
	}
	byKind := map[string][]models.Finding{}
	for _, f := range in.Findings {
		byKind[f.Kind] = append(byKind[f.Kind], f)
	}
	reported := -1
	if in.Episodes != nil {
		reported = len(byKind[starvationKind])
		byKind[starvationKind] = in.Episodes
	}
	kinds := make([]string, 0, len(rules))
	for k := range rules {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		res.Kinds[k] = m.scoreKind(rules[k], byKind[k], truth)
	}
	if reported >= 0 {
		res.Kinds[starvationKind].Reported = reported
	}
	hours := in.End.Sub(in.Start).Hours()
	for _, k := range kinds {
		ks := res.Kinds[k]
		ks.FalsePerHour = Num(math.NaN())
		if !in.Start.IsZero() && hours > 0 {
			ks.FalsePerHour = Num(float64(ks.Findings-ks.TruePositives) / hours)
		}
	}
	for k, fs := range byKind {
		if _, ok := rules[k]; !ok {
			nan := Num(math.NaN())
			res.Kinds[k] = &KindScore{Findings: len(fs), Precision: nan, Recall: nan, MedianDelay: nan, P95Delay: nan, FalsePerHour: nan}
		}
	}
	res.Forecast = scoreForecasts(&in, &m)
	res.Workload = scoreLabels(&in, &m)
	res.Attribution = m.attribution(in.Blame)
	return res
}

// episodes merges gpu_idle minute records of one subject and cause into
// episodes (records closer than tol), and renames those with a storage
// cause gpu_idle_storage; other records pass unchanged, and a
// checkpoint_burst that failed (param failed) is repeated as a
// checkpoint_failed record.
func episodes(ts []twin.TruthRecord, tol time.Duration) []twin.TruthRecord {
	var out []twin.TruthRecord
	open := map[string]int{}
	idle := make([]twin.TruthRecord, 0)
	for _, t := range ts {
		if t.Kind == "gpu_idle" {
			idle = append(idle, t)
			continue
		}
		out = append(out, t)
		if f, _ := t.Params["failed"].(string); t.Kind == "checkpoint_burst" && f != "" {
			// a failed checkpoint is also a checkpoint_failed target
			t.Kind = "checkpoint_failed"
			out = append(out, t)
		}
	}
	sort.SliceStable(idle, func(i, j int) bool { return idle[i].Start.Before(idle[j].Start) })
	for _, t := range idle {
		cause, _ := t.Params["cause"].(string)
		kind := "gpu_idle"
		if storageCauses[cause] {
			kind = "gpu_idle_storage"
		}
		key := kind + "|" + cause + "|" + t.Subject.String()
		secs, _ := t.Params["gpu_seconds"].(float64)
		// what the GPUs it starved lost, with the part shared with
		// causes that limited them alike (a stall over eight equally
		// saturated DSs costs its GPUs the whole of it)
		whole := secs
		if co, ok := t.Params["gpu_seconds_colimited"].(float64); ok && co > whole {
			whole = co
		}
		if i, ok := open[key]; ok && !t.Start.After(out[i].End.Add(tol)) {
			if t.End.After(out[i].End) {
				out[i].End = t.End
			}
			out[i].Params["gpu_seconds"] = out[i].Params["gpu_seconds"].(float64) + secs
			out[i].Params["gpu_seconds_whole"] = out[i].Params["gpu_seconds_whole"].(float64) + whole
			continue
		}
		t.Kind = kind
		t.Params = map[string]any{"cause": cause, "gpu_seconds": secs, "gpu_seconds_whole": whole}
		out = append(out, t)
		open[key] = len(out) - 1
	}
	// Episodes of storage-caused idle whose GPUs lost less than
	// MinEpisodeGPUSeconds in them are not targets: a few GPU-seconds lost
	// to a briefly busy NIC are below what any detector can or should
	// report. The GPUs' loss counts whole where the cause shared it with
	// causes that limited them alike (gpu_seconds_colimited).
	kept := out[:0]
	for _, t := range out {
		if t.Kind == "gpu_idle_storage" && t.Params["gpu_seconds_whole"].(float64) < MinEpisodeGPUSeconds {
			t.Kind = "gpu_idle_storage_minor"
		}
		kept = append(kept, t)
	}
	return kept
}

// MinEpisodeGPUSeconds is the idle GPU-seconds a storage-caused gpu_idle
// episode needs to be a gpu_starvation target: one GPU-minute.
const MinEpisodeGPUSeconds = 60

type matcher struct {
	in       *Input
	nodeJobs map[string][]string
}

var controller = regexp.MustCompile(`^(.*/nvme\d+)$`)

// names returns the subjects a finding's subject stands for, in the
// twin's names: itself and what contains it (a stripe's device, DS and
// port; a device's DS and port; a DS's port; a client node's jobs).
func (m *matcher) names(s models.Subject) []models.Subject {
	n := m.in.Names
	dsOf := func(dev string) []models.Subject {
		ds, _, ok := strings.Cut(dev, "/")
		if !ok {
			return nil
		}
		return []models.Subject{{Kind: models.SubjectDS, ID: ds}, {Kind: models.SubjectPort, ID: "sw/" + ds}}
	}
	switch s.Kind {
	case models.SubjectDevice:
		dev := s.ID
		if controller.MatchString(dev) {
			dev += "n1" // SMART names the controller; the twin the namespace
		} else if n.Device != nil {
			if d := n.Device(dev); d != "" {
				dev = d
			}
		}
		return append([]models.Subject{{Kind: models.SubjectDevice, ID: dev}}, dsOf(dev)...)
	case models.SubjectStripe:
		devID, fh := hotspot.StripeDevice(s.ID), ""
		if len(devID) < len(s.ID) {
			fh = s.ID[len(devID)+1:]
		}
		var out []models.Subject
		if n.Stripe != nil {
			if st := n.Stripe(fh); st != "" {
				out = append(out, models.Subject{Kind: models.SubjectStripe, ID: st})
			}
		}
		return append(out, m.names(models.Subject{Kind: models.SubjectDevice, ID: devID})...)
	case models.SubjectDS:
		ds := s.ID
		if d, ok := n.DS[ds]; ok {
			ds = d
		}
		return []models.Subject{{Kind: models.SubjectDS, ID: ds}, {Kind: models.SubjectPort, ID: "sw/" + ds}}
	case models.SubjectClient:
		out := []models.Subject{s, {Kind: models.SubjectPort, ID: "sw/" + s.ID}}
		for _, j := range m.nodeJobs[s.ID] {
			out = append(out, models.Subject{Kind: models.SubjectJob, ID: j})
		}
		return out
	case models.SubjectJob:
		// Without a job_group label the mds's groups are client nodes, so
		// a "job" (a checkpoint pause) may be named by its node.
		out := []models.Subject{s}
		for _, j := range m.nodeJobs[s.ID] {
			out = append(out, models.Subject{Kind: models.SubjectJob, ID: j})
		}
		return out
	}
	return []models.Subject{s}
}

// truthNames returns a truth record's subject and what it contains that a
// finding may name instead: a hot stripe's device and DS; a lost DS's
// devices are matched by prefix in subjectsMatch.
func truthNames(t *twin.TruthRecord) []models.Subject {
	out := []models.Subject{t.Subject}
	if dev, ok := t.Params["device"].(string); ok && dev != "" {
		out = append(out, models.Subject{Kind: models.SubjectDevice, ID: dev})
	}
	if ds, ok := t.Params["ds"].(string); ok && ds != "" && t.Kind == "hot_shard" {
		out = append(out, models.Subject{Kind: models.SubjectDS, ID: ds})
	}
	return out
}

// ownLevel keeps, of a finding's names, those at its own level or below:
// a device or stripe finding loses the DS and port that contain it.
func ownLevel(k models.SubjectKind, names []models.Subject) []models.Subject {
	if k != models.SubjectDevice && k != models.SubjectStripe {
		return names
	}
	out := names[:0:0]
	for _, n := range names {
		if n.Kind == models.SubjectDevice || n.Kind == models.SubjectStripe {
			out = append(out, n)
		}
	}
	return out
}

// subjectsMatch reports whether a finding naming fn is about truth t.
func (m *matcher) subjectsMatch(fn []models.Subject, t *twin.TruthRecord) bool {
	tn := truthNames(t)
	for _, a := range fn {
		for _, b := range tn {
			if a == b {
				return true
			}
		}
		// A DS-wide truth (node loss) is found by a finding on any of its
		// devices: the device names start with the DS.
		if t.Subject.Kind == models.SubjectDS && a.Kind == models.SubjectDevice && strings.HasPrefix(a.ID, t.Subject.ID+"/") {
			return true
		}
	}
	return false
}

func (m *matcher) end(t time.Time) time.Time {
	if t.IsZero() {
		return m.in.End
	}
	return t
}

func (m *matcher) timesMatch(f *models.Finding, t *twin.TruthRecord) bool {
	tol := m.in.Tolerance
	return !f.Start.After(m.end(t.End).Add(tol)) && !m.end(f.End).Before(t.Start.Add(-tol))
}

// atEdge reports whether f starts within the tolerance of t's start or
// (when t ended) its end.
func (m *matcher) atEdge(f *models.Finding, t *twin.TruthRecord) bool {
	near := func(x time.Time) bool { d := f.Start.Sub(x); return d <= m.in.Tolerance && d >= -m.in.Tolerance }
	return near(t.Start) || (!t.End.IsZero() && near(t.End))
}

func (m *matcher) firstReported(f *models.Finding) time.Time {
	if t, ok := m.in.FirstReported[f.ID]; ok {
		return t
	}
	return f.LastSeen
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (m *matcher) scoreKind(r rule, fs []models.Finding, truth []twin.TruthRecord) *KindScore {
	ks := &KindScore{Findings: len(fs), TargetKinds: r.targets, ExplainKinds: append(append([]string(nil), r.targets...), r.explains...)}
	names := make([][]models.Subject, len(fs))
	for i := range fs {
		names[i] = m.names(fs[i].Subject)
		if r.ownLevel {
			names[i] = ownLevel(fs[i].Subject.Kind, names[i])
		}
	}
	matched := make([]bool, len(fs))
	var delays, evDelays, errDelays []float64
	for ti := range truth {
		t := &truth[ti]
		isTarget := contains(r.targets, t.Kind)
		if !isTarget && !contains(r.explains, t.Kind) {
			continue
		}
		first := time.Time{}
		for i := range fs {
			if !m.timesMatch(&fs[i], t) || !m.subjectsMatch(names[i], t) {
				continue
			}
			if !isTarget && r.edgeExplains && !m.atEdge(&fs[i], t) {
				continue
			}
			matched[i] = true
			if rep := m.firstReported(&fs[i]); first.IsZero() || rep.Before(first) {
				first = rep
			}
		}
		if !isTarget {
			continue
		}
		ks.Targets++
		if first.IsZero() {
			ks.Missed = append(ks.Missed, t.Kind+" "+t.Subject.String()+" at "+t.Start.UTC().Format(time.RFC3339))
			continue
		}
		ks.Detected++
		delays = append(delays, math.Max(0, first.Sub(t.Start).Seconds()))
		if ev, ok := AfterOnset(t, "evidence_after_onset_s"); ok {
			evDelays = append(evDelays, math.Max(0, first.Sub(ev).Seconds()))
		}
		if ev, ok := AfterOnset(t, "error_after_onset_s"); ok {
			errDelays = append(errDelays, math.Max(0, first.Sub(ev).Seconds()))
		}
	}
	for _, ok := range matched {
		if ok {
			ks.TruePositives++
		}
	}
	ks.Precision = Num(ratio(float64(ks.TruePositives), float64(ks.Findings)))
	ks.Recall = Num(ratio(float64(ks.Detected), float64(ks.Targets)))
	ks.MedianDelay, ks.P95Delay = Num(quantile(delays, 0.5)), Num(quantile(delays, 0.95))
	ks.MedianEvidenceDelay, ks.MedianErrorDelay = medianOrNil(evDelays), medianOrNil(errDelays)
	if len(ks.Missed) > 20 {
		ks.Missed = append(ks.Missed[:20], "…")
	}
	return ks
}

// medianOrNil is the median of xs, nil when xs is empty.
func medianOrNil(xs []float64) *Num {
	if len(xs) == 0 {
		return nil
	}
	v := Num(quantile(xs, 0.5))
	return &v
}

// AfterOnset returns a truth record's onset plus its parameter param
// (seconds after the onset: the twin's evidence_after_onset_s, when the
// subject first became observable in the exported telemetry, or
// error_after_onset_s), and false when the record does not carry it.
func AfterOnset(t *twin.TruthRecord, param string) (time.Time, bool) {
	s, ok := t.Params[param].(float64)
	if !ok {
		return time.Time{}, false
	}
	return t.Start.Add(time.Duration(math.Round(s * 1e9))), true
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

// quantile is the q-quantile of xs by linear interpolation; NaN when empty.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(s)-1)
	return s[lo] + (pos-float64(lo))*(s[hi]-s[lo])
}
