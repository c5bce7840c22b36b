package drivehealth

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/ballast-io/ballast/models"
)

// DayScore is one drive-day's score, computed from the drive's history up
// to and including that day.
type DayScore struct {
	Serial      string        `json:"serial"`
	Date        string        `json:"date"`
	Risk        float64       `json:"risk"`
	Explanation []Explanation `json:"explanation"`
}

// ScoreDrive scores every day of d with Assess, each from the days up to it
// only, so a day's score never changes when later days are added.
func ScoreDrive(d *Drive, m *Model, opt RuleOptions) []DayScore {
	out := make([]DayScore, len(d.Days))
	for i := range d.Days {
		a := Assess(d.Days[:i+1], d.Days[i].Time, m, opt)
		ex := a.Explanation
		if ex == nil {
			ex = []Explanation{}
		}
		out[i] = DayScore{Serial: d.Serial, Date: d.Days[i].Time.Format(time.DateOnly), Risk: roundTo(a.Risk, 6), Explanation: ex}
	}
	return out
}

// Method is a per-day scorer compared in the evaluation: it returns a score
// for the last day of h (higher is worse), using nothing after it.
type Method struct {
	// Name is shown in the evaluation table.
	Name string
	// Score scores the last day of h.
	Score func(h []Observation) float64
}

// errorCount is reallocated + pending + media errors at the last reading,
// the quantity static alert rules test against zero.
func errorCount(o *Observation) float64 {
	s := 0.0
	for _, v := range []float64{o.Reallocated, o.Pending, o.MediaErrors} {
		if known(v) && v > 0 {
			s += v
		}
	}
	return s
}

// StaticRuleMethod is the smartctl_exporter-style baseline: the drive is
// bad when reallocated, pending or uncorrectable counts are above zero or
// the SMART status failed. As a score it is the sum of those counts (and
// +Inf for a failed status), so that the exporter's rule is "score > 0" and
// stricter count thresholds trace a curve.
func StaticRuleMethod() Method {
	return Method{Name: "static rules (smartctl_exporter-style)", Score: func(h []Observation) float64 {
		o := &h[len(h)-1]
		if o.SMARTPassed == 0 || len(o.FailingAttributes) > 0 {
			return math.Inf(1)
		}
		return errorCount(o)
	}}
}

// cephWindow is the number of daily readings Ceph's local predictor looks
// at (it needs 6 days of SMART history per prediction).
const cephWindow = 6

// CephDiffMethod is the Ceph-style baseline: Ceph's diskprediction_local
// classifies a drive from the day-to-day differences of its SMART
// attributes over the last 6 days. The score is the number of new bad
// sectors and errors (sum of positive day-to-day increases of reallocated,
// pending and media-error counts) over the last 6 readings; 0 means "good".
func CephDiffMethod() Method {
	return Method{Name: "day-to-day differences (Ceph-style)", Score: func(h []Observation) float64 {
		from := max(0, len(h)-cephWindow)
		s := 0.0
		for i := from + 1; i < len(h); i++ {
			for _, f := range []field{fReallocated, fPending, fMediaErrors} {
				a, b := f(&h[i-1]), f(&h[i])
				if known(a) && known(b) && b > a {
					s += b - a
				}
			}
		}
		return s
	}}
}

// ModelMethod scores with the learned model alone.
func ModelMethod(m *Model) Method {
	return Method{Name: "ballast model only", Score: func(h []Observation) float64 {
		r, _ := m.Score(h)
		return r
	}}
}

// BallastMethod is the shipped scorer: rules and model combined (Assess).
func BallastMethod(m *Model, opt RuleOptions) Method {
	return Method{Name: "ballast (rules + model)", Score: func(h []Observation) float64 {
		return Assess(h, h[len(h)-1].Time, m, opt).Risk
	}}
}

// OperatingPoint is one threshold of a method on the test split.
type OperatingPoint struct {
	// TargetFPR is the false-positive rate the threshold was chosen for.
	TargetFPR float64
	// Threshold: a drive is flagged on its first day with score >= it.
	Threshold float64
	// FPR and TPR are per drive on the test split.
	FPR, TPR float64
	// Flagged failed drives, and the median days from first flag to failure.
	TruePositives int
	MedianLead    float64
}

// MethodResult is one method's evaluation.
type MethodResult struct {
	Name string
	// AUC of the per-drive maximum score on the test split.
	AUC float64
	// TrainChosen: thresholds chosen on the train split, applied to test.
	TrainChosen []OperatingPoint
	// TestROC: the best test TPR with test FPR at or below the target, read
	// off the test ROC curve (not a deployable threshold; for comparison).
	TestROC []OperatingPoint
}

// EvalResult is the whole drive-prediction evaluation.
type EvalResult struct {
	TrainDrives, TrainFailed, TestDrives, TestFailed int
	// FirstDay and LastDay bound the data.
	FirstDay, LastDay string
	// CeilingTest and CeilingAll: failed drives with any reallocated,
	// pending or uncorrectable sector on any day up to their failure.
	CeilingTest, CeilingAll     int
	AllFailed                   int
	RisingTest                  int
	MedianHistoryDaysFailedTest float64
	Methods                     []MethodResult
	TargetFPRs                  []float64
	// ExporterRule is the static baseline exactly as smartctl_exporter's
	// alert fires: any reallocated/pending/uncorrectable count above zero
	// or a failed SMART status.
	ExporterRule OperatingPoint
}

// EvalTargetFPRs are the per-drive false-positive rates the evaluation reports.
var EvalTargetFPRs = []float64{0.001, 0.01, 0.05}

// driveSeries is one drive's daily scores for one method.
type driveSeries struct {
	failed bool
	fail   time.Time
	days   []time.Time
	scores []float64
	max    float64
}

func seriesOf(d *Drive, m Method) driveSeries {
	s := driveSeries{failed: d.Failed, fail: d.FailDate, max: math.Inf(-1)}
	for i := range d.Days {
		v := m.Score(d.Days[:i+1])
		s.days = append(s.days, d.Days[i].Time)
		s.scores = append(s.scores, v)
		s.max = math.Max(s.max, v)
	}
	return s
}

// Evaluate scores every drive with every method and reports per-drive
// detection on the held-out split. Thresholds are chosen on the train split
// only; the test ROC read-off is reported beside them.
func Evaluate(drives []Drive, methods []Method) EvalResult {
	r := EvalResult{TargetFPRs: EvalTargetFPRs}
	var train, test []*Drive
	var histLens []float64
	for i := range drives {
		d := &drives[i]
		if len(d.Days) == 0 {
			continue
		}
		first, last := d.Days[0].Time.Format(time.DateOnly), d.Days[len(d.Days)-1].Time.Format(time.DateOnly)
		if r.FirstDay == "" || first < r.FirstDay {
			r.FirstDay = first
		}
		if last > r.LastDay {
			r.LastDay = last
		}
		signal := false
		for j := range d.Days {
			if errorCount(&d.Days[j]) > 0 {
				signal = true
			}
		}
		if d.Failed {
			r.AllFailed++
			if signal {
				r.CeilingAll++
			}
		}
		if InTestSplit(d.Serial) {
			test = append(test, d)
			r.TestDrives++
			if d.Failed {
				r.TestFailed++
				histLens = append(histLens, float64(len(d.Days)))
				if signal {
					r.CeilingTest++
				}
				if CephDiffMethod().Score(d.Days) > 0 || growthOver(d.Days, fReallocated, d.FailDate, 40*day).Delta > 0 ||
					growthOver(d.Days, fPending, d.FailDate, 40*day).Delta > 0 {
					r.RisingTest++
				}
			}
		} else {
			train = append(train, d)
			r.TrainDrives++
			if d.Failed {
				r.TrainFailed++
			}
		}
	}
	sort.Float64s(histLens)
	r.MedianHistoryDaysFailedTest = quantileSorted(histLens, 0.5)
	for _, m := range methods {
		var trs, tes []driveSeries
		for _, d := range train {
			trs = append(trs, seriesOf(d, m))
		}
		for _, d := range test {
			tes = append(tes, seriesOf(d, m))
		}
		mr := MethodResult{Name: m.Name, AUC: auc(tes)}
		for _, fpr := range EvalTargetFPRs {
			mr.TrainChosen = append(mr.TrainChosen, pointAt(tes, thresholdFor(trs, fpr), fpr))
			mr.TestROC = append(mr.TestROC, bestAt(tes, fpr))
		}
		r.Methods = append(r.Methods, mr)
		if m.Name == StaticRuleMethod().Name {
			r.ExporterRule = pointAt(tes, math.SmallestNonzeroFloat64, math.NaN())
		}
	}
	return r
}

// thresholdFor picks the lowest threshold whose per-drive FPR on s is at
// most fpr: flag when score >= threshold.
func thresholdFor(s []driveSeries, fpr float64) float64 {
	var healthy []float64
	for _, d := range s {
		if !d.failed {
			healthy = append(healthy, d.max)
		}
	}
	sort.Sort(sort.Reverse(sort.Float64Slice(healthy)))
	allowed := int(math.Floor(fpr * float64(len(healthy))))
	if allowed >= len(healthy) {
		return math.Inf(-1)
	}
	// Flag only scores strictly above the (allowed+1)-th highest healthy
	// maximum: at most `allowed` healthy drives, ties included, reach it.
	return math.Nextafter(healthy[allowed], math.Inf(1))
}

// pointAt measures threshold t on s.
func pointAt(s []driveSeries, t, target float64) OperatingPoint {
	p := OperatingPoint{TargetFPR: target, Threshold: t}
	var healthy, failed, fp int
	var leads []float64
	for _, d := range s {
		if d.failed {
			failed++
		} else {
			healthy++
		}
		for i, v := range d.scores {
			if v < t {
				continue
			}
			if d.failed {
				p.TruePositives++
				leads = append(leads, d.fail.Sub(d.days[i]).Hours()/24)
			} else {
				fp++
			}
			break
		}
	}
	if healthy > 0 {
		p.FPR = float64(fp) / float64(healthy)
	}
	if failed > 0 {
		p.TPR = float64(p.TruePositives) / float64(failed)
	}
	sort.Float64s(leads)
	p.MedianLead = math.NaN()
	if len(leads) > 0 {
		p.MedianLead = quantileSorted(leads, 0.5)
	}
	return p
}

// bestAt is the test-ROC read-off: the threshold with the highest TPR whose
// FPR on s itself is at most target.
func bestAt(s []driveSeries, target float64) OperatingPoint {
	return pointAt(s, thresholdFor(s, target), target)
}

// auc is the area under the per-drive ROC (Mann–Whitney, ties count half).
func auc(s []driveSeries) float64 {
	var pos, neg []float64
	for _, d := range s {
		if d.failed {
			pos = append(pos, d.max)
		} else {
			neg = append(neg, d.max)
		}
	}
	if len(pos) == 0 || len(neg) == 0 {
		return math.NaN()
	}
	sort.Float64s(neg)
	var sum float64
	for _, p := range pos {
		lo := sort.SearchFloat64s(neg, p)
		hi := sort.Search(len(neg), func(i int) bool { return neg[i] > p })
		sum += float64(lo) + 0.5*float64(hi-lo)
	}
	return sum / float64(len(pos)*len(neg))
}

// CaptureResult is what drive health says about one drive read from
// smartctl files: its latest reading judged with its history (a lone file
// is a one-reading history).
type CaptureResult struct {
	// File names the capture (or the folder of one drive's captures);
	// Derived, for a derived reading, says what was changed and why.
	File, Protocol, Model, Derived string
	// Readings is the number of observations in the drive's history.
	Readings int
	// Flagged is true when a drive_failure_risk finding was raised.
	Flagged bool
	// Risk is the assessment's risk; Why the failure finding's summary.
	Risk float64
	Why  string
	// Kinds and Rules list the findings and the rules that fired.
	Kinds, Rules []string
	// Findings are the findings themselves, evidence included.
	Findings []models.Finding
	// Notable summarises the health fields for the table.
	Notable string
}

// CheckDrive assesses one drive's history h (sorted by time) at its last
// reading with the rules and the model, as the mds does, and summarises
// the result for the evaluation.
func CheckDrive(name, model string, h []Observation, m *Model, opt RuleOptions) CaptureResult {
	res := CaptureResult{File: name, Model: model, Readings: len(h)}
	if len(h) == 0 {
		return res
	}
	o := h[len(h)-1]
	res.Protocol = string(o.Protocol)
	a := Assess(h, o.Time, m, opt)
	for _, hit := range a.Hits {
		res.Rules = append(res.Rules, fmt.Sprintf("%s(%s)", hit.Rule, hit.Severity))
	}
	res.Findings = Findings(models.Subject{Kind: models.SubjectDevice, ID: name}, a, m, o.Time)
	for _, f := range res.Findings {
		res.Kinds = append(res.Kinds, fmt.Sprintf("%s(%s)", f.Kind, f.Severity))
		if f.Kind == KindFailureRisk {
			res.Flagged, res.Risk, res.Why = true, f.Score, f.Summary
		}
	}
	var notes []string
	add := func(name string, v float64) {
		if known(v) && v != 0 {
			notes = append(notes, fmt.Sprintf("%s=%g", name, v))
		}
	}
	if o.SMARTPassed == 0 {
		notes = append(notes, "smart_status=FAILED")
	}
	add("critical_warning", o.CriticalWarning)
	add("media_errors", o.MediaErrors)
	add("err_log_entries", o.ErrLogEntries)
	add("reallocated", o.Reallocated)
	add("pending", o.Pending)
	if known(o.PercentageUsed) && o.PercentageUsed >= 50 {
		add("percentage_used", o.PercentageUsed)
	}
	if known(o.AvailableSpare) && known(o.SpareThreshold) && o.AvailableSpare < 100 {
		notes = append(notes, fmt.Sprintf("spare=%g/%g", o.AvailableSpare, o.SpareThreshold))
	}
	if len(o.FailingAttributes) > 0 {
		notes = append(notes, fmt.Sprintf("failing_attributes=%v", o.FailingAttributes))
	}
	res.Notable = strings.Join(notes, " ")
	return res
}
