package drivehealth

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"time"

	"gonum.org/v1/gonum/mat"
)

// num is a float64 that marshals with 6 significant digits, so the model
// file is small and byte-identical across retrains even if the last bits
// of a float sum differ between platforms.
type num float64

// MarshalJSON writes n with 6 significant digits.
func (n num) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, fmt.Errorf("cannot marshal model number %v", f)
	}
	return []byte(strconv.FormatFloat(round6(f), 'g', -1, 64)), nil
}

func round6(f float64) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'g', 6, 64), 64)
	return v
}

// healthyPercentiles are the percentiles of each feature among healthy
// training drive-days stored in the model, used to say how unusual a value is.
var healthyPercentiles = []float64{0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 99, 99.5, 99.9, 100}

// Model is a logistic regression over standardised Features, with what is
// needed to explain and act on its output. It is stored as JSON.
type Model struct {
	// Version is the file format version (1).
	Version int `json:"version"`
	// Source says what data the model was trained on.
	Source string `json:"source"`
	// HorizonDays: a training day is positive when its drive failed within
	// this many days after it.
	HorizonDays int `json:"horizon_days"`
	// L2 is the ridge penalty used in training.
	L2 num `json:"l2"`
	// Intercept is the log-odds at the mean of every feature.
	Intercept num `json:"intercept"`
	// Features are the inputs with their scaling, weight and healthy
	// distribution.
	Features []ModelFeature `json:"features"`
	// Thresholds are risk levels chosen on the TRAINING split so that the
	// given share of healthy training drives is ever flagged.
	Thresholds []Threshold `json:"thresholds"`
	// Windows map risk bands to the days-to-failure seen in training.
	Windows []Window `json:"windows"`
	// Levels say how much more often training drives whose first reading
	// carried a reallocated or pending count in a band failed than drives
	// whose count was 0: the evidence behind judging a lone reading by its
	// level (the level rules put the band's odds in their findings).
	Levels []LevelOdds `json:"levels,omitempty"`
	// Train describes the training set.
	Train TrainStats `json:"train"`
}

// ModelFeature is one input of the Model.
type ModelFeature struct {
	Name string `json:"name"`
	Unit string `json:"unit"`
	// Log: the model sees log1p(max(0, value)).
	Log bool `json:"log"`
	// Mean and Std standardise the (transformed) value.
	Mean num `json:"mean"`
	Std  num `json:"std"`
	// Weight is the log-odds per standard deviation.
	Weight num `json:"weight"`
	// Healthy are the raw values at healthyPercentiles among healthy
	// training drive-days.
	Healthy []num `json:"healthy"`
}

// Threshold is a risk level and the per-drive false-positive rate it had on
// the training split.
type Threshold struct {
	FPR  num `json:"fpr"`
	Risk num `json:"risk"`
}

// Window is the spread of days-to-failure of failed training drive-days
// whose risk was at least MinRisk (and below the next band).
type Window struct {
	MinRisk    num `json:"min_risk"`
	FromDays   num `json:"from_days"`
	MedianDays num `json:"median_days"`
	ToDays     num `json:"to_days"`
	Samples    int `json:"samples"`
}

// LevelOdds compares the training drives whose first reading had Counter
// in [From, To) (To 0: no upper bound) with those whose first reading had
// it at 0: Failed and Healthy count the drives in the band, BaseFailed and
// BaseHealthy those at 0. OddsRatio is (Failed/Healthy) ÷
// (BaseFailed/BaseHealthy) with its 95 % interval [Low, High] (Woolf's
// log method; 0.5 is added to every cell when one is empty). Odds, not
// failure rates: the training subset holds every failed drive but only a
// sample of the healthy ones, which distorts rates but not odds ratios;
// where failure is rare, as in a fleet, the odds ratio is close to how
// many times more often such drives fail.
type LevelOdds struct {
	Counter     string `json:"counter"`
	From        num    `json:"from"`
	To          num    `json:"to"`
	Failed      int    `json:"failed"`
	Healthy     int    `json:"healthy"`
	BaseFailed  int    `json:"base_failed"`
	BaseHealthy int    `json:"base_healthy"`
	OddsRatio   num    `json:"odds_ratio"`
	Low         num    `json:"low"`
	High        num    `json:"high"`
}

// levelEdges are the lower bounds of the level bands.
var levelEdges = []float64{1, 10, 100, 1000}

// levelCounters are the counters whose level bands the model stores, with
// the field each is read from.
var levelCounters = []struct {
	name string
	f    field
}{{"reallocated", fReallocated}, {"pending", fPendingCount}}

// LevelOddsFor returns the band of counter that holds v, if the model has
// one.
func (m *Model) LevelOddsFor(counter string, v float64) (LevelOdds, bool) {
	for _, l := range m.Levels {
		if l.Counter == counter && v >= float64(l.From) && (l.To == 0 || v < float64(l.To)) {
			return l, true
		}
	}
	return LevelOdds{}, false
}

// levelOdds counts, per counter and band, the drives whose first known
// reading falls in it, failed or not, and their odds ratio against the
// drives at 0.
func levelOdds(drives []Drive, use []int) []LevelOdds {
	var out []LevelOdds
	for _, c := range levelCounters {
		var failed, healthy [5]int // [0] is the count 0, then one per edge
		for _, i := range use {
			d := &drives[i]
			v, _, ok := earliest(d.Days, c.f, time.Time{})
			if !ok || v < 0 {
				continue
			}
			b := 0
			for k, e := range levelEdges {
				if v >= e {
					b = k + 1
				}
			}
			if d.Failed {
				failed[b]++
			} else {
				healthy[b]++
			}
		}
		for k, from := range levelEdges {
			to := 0.0
			if k+1 < len(levelEdges) {
				to = levelEdges[k+1]
			}
			if failed[k+1]+healthy[k+1] == 0 {
				continue // no drive at this level: nothing to say
			}
			a, b, cc, dd := float64(failed[k+1]), float64(healthy[k+1]), float64(failed[0]), float64(healthy[0])
			if a == 0 || b == 0 || cc == 0 || dd == 0 {
				a, b, cc, dd = a+0.5, b+0.5, cc+0.5, dd+0.5
			}
			or := (a / b) / (cc / dd)
			se := math.Sqrt(1/a + 1/b + 1/cc + 1/dd)
			out = append(out, LevelOdds{Counter: c.name, From: num(from), To: num(to),
				Failed: failed[k+1], Healthy: healthy[k+1], BaseFailed: failed[0], BaseHealthy: healthy[0],
				OddsRatio: num(round6(or)), Low: num(round6(or * math.Exp(-1.96*se))), High: num(round6(or * math.Exp(1.96*se)))})
		}
	}
	return out
}

// TrainStats counts the training data.
type TrainStats struct {
	Drives       int `json:"drives"`
	FailedDrives int `json:"failed_drives"`
	Days         int `json:"days"`
	PositiveDays int `json:"positive_days"`
}

// Explanation is one reason behind a risk score.
type Explanation struct {
	// Feature is the model feature, or "rule:NAME" for a rule.
	Feature string `json:"feature"`
	// Value is the feature's raw value (for a rule: the risk it implies).
	Value float64 `json:"value"`
	Unit  string  `json:"unit,omitempty"`
	// HealthyPercentile is the share (percent) of healthy training
	// drive-days with a lower value: 99.9 means rarer than 1 in 1000.
	HealthyPercentile float64 `json:"healthy_percentile,omitempty"`
	// Contribution is the log-odds this feature adds relative to an
	// average drive.
	Contribution float64 `json:"contribution,omitempty"`
	// Note is a rule's summary.
	Note string `json:"note,omitempty"`
}

//go:embed model/drive-model.json
var embeddedModel []byte

// EmbeddedModelJSON returns the shipped model file, as trained by
// `ballast train drive-model` on the Backblaze 2013 train split.
func EmbeddedModelJSON() []byte { return bytes.Clone(embeddedModel) }

// DefaultModel returns the shipped model.
func DefaultModel() (*Model, error) { return ParseModel(bytes.NewReader(embeddedModel)) }

// ParseModel decodes and validates a model file.
func ParseModel(r io.Reader) (*Model, error) {
	var m Model
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("cannot decode drive model: %w", err)
	}
	if m.Version != 1 {
		return nil, fmt.Errorf("cannot use drive model version %d: want 1", m.Version)
	}
	if len(m.Features) != len(Features) {
		return nil, fmt.Errorf("cannot use drive model with %d features: want %d", len(m.Features), len(Features))
	}
	for i, f := range m.Features {
		if f.Name != Features[i].Name || f.Log != Features[i].Log {
			return nil, fmt.Errorf("cannot use drive model: feature %d is %q, want %q", i, f.Name, Features[i].Name)
		}
		if !(f.Std > 0) || len(f.Healthy) != len(healthyPercentiles) {
			return nil, fmt.Errorf("cannot use drive model: feature %q has bad scaling or percentiles", f.Name)
		}
	}
	return &m, nil
}

// Marshal writes m as indented JSON with a trailing newline.
func (m *Model) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("cannot marshal drive model: %w", err)
	}
	return append(b, '\n'), nil
}

// transform maps a raw feature value to what the model sees; NaN stays NaN.
func transform(f Feature, v float64) float64 {
	if f.Log && known(v) {
		return math.Log1p(math.Max(0, v))
	}
	return v
}

// logit returns the log-odds for a raw feature vector, and each feature's
// contribution relative to the training mean (unknown values contribute 0).
func (m *Model) logit(x []float64) (float64, []float64) {
	z := float64(m.Intercept)
	c := make([]float64, len(x))
	for i, f := range m.Features {
		t := transform(Features[i], x[i])
		if !known(t) {
			continue
		}
		c[i] = float64(f.Weight) * standardise(t, f.Mean, f.Std)
		z += c[i]
	}
	return z, c
}

// zClip bounds standardised features. Error counters are heavy-tailed
// (one healthy drive reports 65528 pending sectors, a sentinel, not a
// count); without a bound one such value saturates the logistic function,
// every extreme drive scores exactly 1 and they can no longer be ranked.
const zClip = 5

// standardise maps a transformed value to standard units, clipped to
// ±zClip.
func standardise(t float64, mean, std num) float64 {
	return math.Max(-zClip, math.Min(zClip, (t-float64(mean))/float64(std)))
}

func sigmoid(z float64) float64 { return 1 / (1 + math.Exp(-z)) }

// Applies reports whether the model can score this history: it was trained
// on ATA hard drives and needs the reallocated-sector counter.
func (m *Model) Applies(h []Observation) bool {
	if len(h) == 0 || h[len(h)-1].Protocol != ProtocolATA {
		return false
	}
	_, _, ok := latest(h, fReallocated, h[len(h)-1].Time)
	return ok
}

// Score returns the model's risk in [0,1] for the last day of h (using
// nothing after it) and the features that push it up most, largest first
// (at most three).
func (m *Model) Score(h []Observation) (float64, []Explanation) {
	x := featureVector(h)
	z, c := m.logit(x)
	order := make([]int, len(c))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return c[order[a]] > c[order[b]] })
	var ex []Explanation
	for _, i := range order {
		if len(ex) == 3 || c[i] <= 0.05 {
			break
		}
		ex = append(ex, Explanation{
			Feature: Features[i].Name, Value: roundTo(x[i], 3), Unit: Features[i].Unit,
			HealthyPercentile: m.Features[i].percentile(x[i]), Contribution: roundTo(c[i], 3),
		})
	}
	return sigmoid(z), ex
}

func roundTo(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

// percentile is the largest stored percentile whose healthy value is below v.
func (f *ModelFeature) percentile(v float64) float64 {
	p := 0.0
	for i, q := range f.Healthy {
		if float64(q) < v {
			p = healthyPercentiles[i]
		}
	}
	return p
}

// Window returns the failure window for a risk, or false when the risk is
// below every band.
func (m *Model) Window(risk float64) (Window, bool) {
	for i := len(m.Windows) - 1; i >= 0; i-- {
		if risk >= float64(m.Windows[i].MinRisk) {
			return m.Windows[i], true
		}
	}
	return Window{}, false
}

// ThresholdAt returns the training threshold for a false-positive rate.
func (m *Model) ThresholdAt(fpr float64) (float64, bool) {
	for _, t := range m.Thresholds {
		if float64(t.FPR) == fpr {
			return float64(t.Risk), true
		}
	}
	return 0, false
}

// TrainOptions are the choices of TrainModel; DefaultTrainOptions holds
// the values the shipped model uses.
type TrainOptions struct {
	// HorizonDays labels a day positive when its drive fails within it (30).
	HorizonDays int
	// L2 is the ridge penalty on the standardised weights (1e-3, with the
	// two classes weighted to half the total each).
	L2 float64
	// Iterations caps Newton steps (100).
	Iterations int
}

// DefaultTrainOptions returns the options of the shipped model.
func DefaultTrainOptions() TrainOptions {
	return TrainOptions{HorizonDays: 30, L2: 1e-3, Iterations: 100}
}

// Trained-model operating points, as per-drive false-positive rates.
var thresholdFPRs = []float64{0.001, 0.01, 0.05}

// dayRow is one drive-day as the trainer and evaluator see it.
type dayRow struct {
	x           []float64
	positive    bool
	daysToFail  float64
	driveFailed bool
}

// driveRows computes the feature vector of every day of d from the days up
// to it.
func driveRows(d *Drive, horizon int) []dayRow {
	rows := make([]dayRow, len(d.Days))
	for i := range d.Days {
		r := dayRow{x: featureVector(d.Days[:i+1]), driveFailed: d.Failed, daysToFail: math.NaN()}
		if d.Failed {
			r.daysToFail = d.FailDate.Sub(d.Days[i].Time).Hours() / 24
			r.positive = r.daysToFail <= float64(horizon)
		}
		rows[i] = r
	}
	return rows
}

// TrainModel fits the model on the drives of the train split (InTestSplit
// false); test drives are skipped, so passing every drive is safe. It is
// deterministic: the same drives give a byte-identical Marshal.
//
// The fit is L2-regularised logistic regression by Newton's method
// (iteratively reweighted least squares), written here because gonum's
// optimize package runs its methods in goroutines and has no logistic
// regression; the linear algebra is gonum/mat.
func TrainModel(drives []Drive, opt TrainOptions) (*Model, error) {
	var rows []dayRow
	var st TrainStats
	perDrive := map[int][2]int{} // drive index → rows [from,to)
	var trainDrives []int
	for i := range drives {
		d := &drives[i]
		if InTestSplit(d.Serial) || len(d.Days) == 0 {
			continue
		}
		from := len(rows)
		rows = append(rows, driveRows(d, opt.HorizonDays)...)
		perDrive[i] = [2]int{from, len(rows)}
		trainDrives = append(trainDrives, i)
		st.Drives++
		if d.Failed {
			st.FailedDrives++
		}
	}
	st.Days = len(rows)
	for _, r := range rows {
		if r.positive {
			st.PositiveDays++
		}
	}
	if st.PositiveDays == 0 || st.PositiveDays == st.Days {
		return nil, fmt.Errorf("cannot train drive model: need both failing and healthy drive-days, have %d of %d positive", st.PositiveDays, st.Days)
	}
	p := len(Features)
	m := &Model{Version: 1, Source: "Backblaze 2013 (2013-04-10..2013-05-19), train split: serials with fnv64a(serial)%100 >= 30",
		HorizonDays: opt.HorizonDays, L2: num(opt.L2), Train: st}

	// Scale: mean and std of each transformed feature over all train rows;
	// unknown values are left out and later contribute 0.
	m.Features = make([]ModelFeature, p)
	for j, f := range Features {
		var s, ss, n float64
		for _, r := range rows {
			if t := transform(f, r.x[j]); known(t) {
				s += t
				ss += t * t
				n++
			}
		}
		mean := s / math.Max(n, 1)
		std := math.Sqrt(math.Max(ss/math.Max(n, 1)-mean*mean, 0))
		if std < 1e-9 {
			std = 1
		}
		m.Features[j] = ModelFeature{Name: f.Name, Unit: f.Unit, Log: f.Log, Mean: num(round6(mean)), Std: num(round6(std))}
		var healthy []float64
		for _, r := range rows {
			if !r.driveFailed && known(r.x[j]) {
				healthy = append(healthy, r.x[j])
			}
		}
		sort.Float64s(healthy)
		for _, q := range healthyPercentiles {
			m.Features[j].Healthy = append(m.Features[j].Healthy, num(round6(quantileSorted(healthy, q/100))))
		}
	}

	// Design matrix of standardised features plus intercept.
	n := len(rows)
	X := make([][]float64, n)
	y := make([]float64, n)
	w := make([]float64, n)
	wpos, wneg := 0.5/float64(st.PositiveDays), 0.5/float64(st.Days-st.PositiveDays)
	for i, r := range rows {
		X[i] = make([]float64, p+1)
		X[i][p] = 1
		for j := range Features {
			if t := transform(Features[j], r.x[j]); known(t) {
				X[i][j] = standardise(t, m.Features[j].Mean, m.Features[j].Std)
			}
		}
		w[i] = wneg
		if r.positive {
			y[i], w[i] = 1, wpos
		}
	}
	beta, err := newtonLogistic(X, y, w, opt.L2, opt.Iterations)
	if err != nil {
		return nil, err
	}
	for j := range m.Features {
		m.Features[j].Weight = num(round6(beta[j]))
	}
	m.Intercept = num(round6(beta[p]))

	// Operating points and failure windows from the rounded model on the
	// train split only.
	var healthyMax []float64
	type failDay struct{ risk, days float64 }
	var fails []failDay
	for _, i := range trainDrives {
		span := perDrive[i]
		mx := 0.0
		for _, r := range rows[span[0]:span[1]] {
			z, _ := m.logit(r.x)
			risk := sigmoid(z)
			mx = math.Max(mx, risk)
			if r.driveFailed {
				fails = append(fails, failDay{risk, r.daysToFail})
			}
		}
		if !drives[i].Failed {
			healthyMax = append(healthyMax, mx)
		}
	}
	sort.Sort(sort.Reverse(sort.Float64Slice(healthyMax)))
	for _, fpr := range thresholdFPRs {
		k := int(math.Floor(fpr * float64(len(healthyMax))))
		m.Thresholds = append(m.Thresholds, Threshold{FPR: num(fpr), Risk: num(round6(healthyMax[min(k, len(healthyMax)-1)]))})
	}
	// Bands: [t5%, t1%), [t1%, t0.1%), [t0.1%, 1].
	for b := range m.Thresholds {
		lo := float64(m.Thresholds[len(m.Thresholds)-1-b].Risk)
		hi := math.Inf(1)
		if b+1 < len(m.Thresholds) {
			hi = float64(m.Thresholds[len(m.Thresholds)-2-b].Risk)
		}
		var days []float64
		for _, f := range fails {
			if f.risk > lo && f.risk <= hi {
				days = append(days, f.days)
			}
		}
		if len(days) == 0 {
			continue
		}
		sort.Float64s(days)
		m.Windows = append(m.Windows, Window{MinRisk: num(lo),
			FromDays: num(quantileSorted(days, 0.1)), MedianDays: num(quantileSorted(days, 0.5)),
			ToDays: num(quantileSorted(days, 0.9)), Samples: len(days)})
	}
	m.Levels = levelOdds(drives, trainDrives)
	return m, nil
}

// quantileSorted is the q-quantile of sorted s by linear interpolation.
func quantileSorted(s []float64, q float64) float64 {
	if len(s) == 0 {
		return 0
	}
	pos := q * float64(len(s)-1)
	i := int(math.Floor(pos))
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (pos-float64(i))*(s[i+1]-s[i])
}

// newtonLogistic minimises the weighted logistic loss plus l2/2·|β|² (the
// last column, the intercept, unpenalised) by Newton steps solved with a
// Cholesky factorisation.
func newtonLogistic(X [][]float64, y, w []float64, l2 float64, iters int) ([]float64, error) {
	k := len(X[0])
	beta := make([]float64, k)
	for it := 0; it < iters; it++ {
		H := mat.NewSymDense(k, nil)
		g := mat.NewVecDense(k, nil)
		for i, xi := range X {
			z := 0.0
			for j, v := range xi {
				z += beta[j] * v
			}
			p := sigmoid(z)
			r := w[i] * (p - y[i])
			s := w[i] * p * (1 - p)
			for a := 0; a < k; a++ {
				g.SetVec(a, g.AtVec(a)+r*xi[a])
				for b := a; b < k; b++ {
					H.SetSym(a, b, H.At(a, b)+s*xi[a]*xi[b])
				}
			}
		}
		for a := 0; a < k-1; a++ {
			g.SetVec(a, g.AtVec(a)+l2*beta[a])
			H.SetSym(a, a, H.At(a, a)+l2)
		}
		var ch mat.Cholesky
		if ok := ch.Factorize(H); !ok {
			return nil, fmt.Errorf("cannot train drive model: Hessian not positive definite at iteration %d", it)
		}
		var step mat.VecDense
		if err := ch.SolveVecTo(&step, g); err != nil {
			return nil, fmt.Errorf("cannot train drive model: %w", err)
		}
		maxStep := 0.0
		for j := range beta {
			beta[j] -= step.AtVec(j)
			maxStep = math.Max(maxStep, math.Abs(step.AtVec(j)))
		}
		if maxStep < 1e-10 {
			break
		}
	}
	return beta, nil
}
