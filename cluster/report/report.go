// Package report builds the capacity forecasts report — report.json,
// report.md and a self-contained report.html with inline SVG plots — from
// per-drive used-bytes histories, at-risk drives and a report time. It
// runs the forecasts (analyzer/capacity) and renders; it does no network
// I/O, so `ballast report capacity` (which fetches the history from the
// query API) and the demo (which has it in process) share it.
// The capacity backtest on the cluster twin is in sim/capacityeval.
package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/ballast-io/ballast/analyzer/capacity"
	"github.com/ballast-io/ballast/models"
)

// DriveRisk is one drive at risk, as drive-health analysis found it.
type DriveRisk struct {
	Device   string          `json:"device"` // "ds03/nvme2n1"
	Kind     string          `json:"kind"`   // drive_failure_risk or drive_wearout
	Severity models.Severity `json:"severity"`
	Risk     float64         `json:"risk"`
	Summary  string          `json:"summary"`
}

// Input is everything a report is made from.
type Input struct {
	// At is the report time: forecasts use readings up to it.
	At time.Time
	// Source says where the history came from (a URL, "twin …").
	Source string
	// UsedMetric and CapacityMetric name the series read, for the
	// assumptions section.
	UsedMetric, CapacityMetric string
	// Devices are the per-drive used-bytes histories.
	Devices []capacity.DeviceSeries
	// AtRisk are the drives drive-health analysis flags.
	AtRisk []DriveRisk
	// Options tune the forecasts; zero fields take their defaults.
	Options capacity.Options
	// EvacuationLimit is the fill share a pool may reach after an
	// evacuation; 0 means 0.90 (backfillfull).
	EvacuationLimit float64
	// Notes are extra assumptions to list.
	Notes []string
}

// Row is one table row: a subject's forecast in report units.
type Row struct {
	Subject   models.Subject      `json:"subject"`
	Pool      string              `json:"pool,omitempty"`
	Used      float64             `json:"used_bytes"`
	Capacity  float64             `json:"capacity_bytes"`
	UsedRatio float64             `json:"used_ratio"`
	Growth    float64             `json:"growth_bytes_per_day"`
	Crossings []capacity.Crossing `json:"crossings"`
	Error     string              `json:"error,omitempty"`
}

// Plot is the data behind one plot: the history shown and the forecast
// band.
type Plot struct {
	Subject  models.Subject       `json:"subject"`
	Capacity float64              `json:"capacity_bytes"`
	History  []capacity.Point     `json:"history"`
	Forecast []capacity.BandPoint `json:"forecast"`
	Levels   []capacity.Level     `json:"levels"`
	SVG      string               `json:"-"`
}

// AtRiskRow is an at-risk drive with what evacuating it moves.
type AtRiskRow struct {
	DriveRisk
	Used     float64 `json:"used_bytes"`
	Capacity float64 `json:"capacity_bytes"`
	Pool     string  `json:"pool"`
}

// Report is a built capacity report.
type Report struct {
	GeneratedAt time.Time             `json:"generated_at"`
	Source      string                `json:"source"`
	DataFrom    time.Time             `json:"data_from"`
	DataTo      time.Time             `json:"data_to"`
	Readings    int                   `json:"readings"`
	Step        time.Duration         `json:"step_ns"`
	Coverage    float64               `json:"coverage"`
	Summary     []string              `json:"summary"`
	Pools       []Row                 `json:"pools"`
	DataServers []Row                 `json:"data_servers"`
	Cluster     *Row                  `json:"cluster,omitempty"`
	Devices     []Row                 `json:"devices"`
	Plots       []Plot                `json:"plots"`
	AtRisk      []AtRiskRow           `json:"at_risk"`
	Evacuations []capacity.Evacuation `json:"evacuations"`
	Findings    []models.Finding      `json:"findings"`
	Assumptions []string              `json:"assumptions"`
}

// Build forecasts every device, DS, pool and the cluster at in.At and
// assembles the report. A subject whose history is too short is listed
// with its error rather than failing the report; no devices at all is an
// error.
func Build(in Input) (*Report, error) {
	if len(in.Devices) == 0 {
		return nil, fmt.Errorf("cannot build the capacity report: no used-bytes series")
	}
	if in.At.IsZero() {
		return nil, fmt.Errorf("cannot build the capacity report: no report time")
	}
	opt := in.Options.WithDefaults()
	r := &Report{GeneratedAt: in.At.UTC(), Source: in.Source, Coverage: opt.Coverage}
	var fcs []*capacity.Forecast
	byID := map[string]*capacity.Forecast{}
	series := capacity.Aggregate(in.Devices)
	for _, s := range series {
		row := Row{Subject: s.Subject, Pool: s.Pool, Capacity: s.Capacity}
		used := upTo(s.Used, in.At)
		if len(used) > 0 {
			row.Used = used[len(used)-1].V
			row.UsedRatio = row.Used / s.Capacity
			r.Readings += len(used)
			if r.DataFrom.IsZero() || used[0].T.Before(r.DataFrom) {
				r.DataFrom = used[0].T
			}
			if used[len(used)-1].T.After(r.DataTo) {
				r.DataTo = used[len(used)-1].T
			}
		}
		fc, err := capacity.Fit(s, in.At, opt)
		if err != nil {
			row.Error = err.Error()
		} else {
			row.Growth, row.Crossings = fc.Growth, fc.Crossings
			fcs = append(fcs, fc)
			byID[s.Subject.String()] = fc
		}
		switch s.Subject.Kind {
		case models.SubjectDevice:
			r.Devices = append(r.Devices, row)
		case models.SubjectDS:
			r.DataServers = append(r.DataServers, row)
		case models.SubjectPool:
			r.Pools = append(r.Pools, row)
		case models.SubjectCluster:
			rc := row
			r.Cluster = &rc
		}
	}
	r.Step = typicalStep(in.Devices)
	for _, s := range series {
		if s.Subject.Kind != models.SubjectPool && s.Subject.Kind != models.SubjectCluster {
			continue
		}
		if s.Subject.Kind == models.SubjectCluster && len(r.Pools) == 1 {
			continue // the same curve as the one pool
		}
		if fc := byID[s.Subject.String()]; fc != nil {
			r.Plots = append(r.Plots, makePlot(s, fc, opt))
		}
	}
	r.Findings = capacity.Findings(fcs, opt)
	r.AtRisk = atRiskRows(in)
	var risky []string
	for _, a := range r.AtRisk {
		risky = append(risky, a.Device)
	}
	now := make([]capacity.DeviceSeries, len(in.Devices))
	for i, d := range in.Devices {
		now[i] = d
		now[i].Used = upTo(d.Used, in.At)
	}
	r.Evacuations = capacity.EvacuationCheck(now, risky, in.EvacuationLimit)
	r.Summary = summarize(r)
	if note := shortHistory(r); note != "" {
		r.Summary = append([]string{note}, r.Summary...)
	}
	r.Assumptions = assumptions(in, r, opt)
	return r, nil
}

// shortHistory warns, as the report's first sentence, when the history
// spans less than two days: no daily cycle is fitted (a cycle needs two of
// itself), the trend extrapolates hours of readings, and the intervals,
// calibrated on errors within those hours, say little about days ahead.
// "" when the history is long enough.
func shortHistory(r *Report) string {
	span := r.DataTo.Sub(r.DataFrom)
	if r.Readings == 0 || span >= 48*time.Hour {
		return ""
	}
	return fmt.Sprintf("Short history: only %s of readings (%s to %s). No daily or weekly cycle can be fitted and the trend extrapolates these %s, so treat the dates below as rough: their intervals come from the model's errors within that short history and understate the uncertainty days ahead. A dependable forecast wants two weeks of history.",
		span.Round(time.Minute), r.DataFrom.Format(time.RFC3339), r.DataTo.Format(time.RFC3339), span.Round(time.Minute))
}

func upTo(pts []capacity.Point, at time.Time) []capacity.Point {
	k := sort.Search(len(pts), func(i int) bool { return pts[i].T.After(at) })
	return pts[:k]
}

func typicalStep(devs []capacity.DeviceSeries) time.Duration {
	for _, d := range devs {
		if len(d.Used) > 2 {
			var gaps []time.Duration
			for i := 1; i < len(d.Used); i++ {
				gaps = append(gaps, d.Used[i].T.Sub(d.Used[i-1].T))
			}
			sort.Slice(gaps, func(i, j int) bool { return gaps[i] < gaps[j] })
			return gaps[len(gaps)/2]
		}
	}
	return 0
}

// plotHorizon is how far a plot's forecast reaches: past the latest
// finite crossing of the last level, between 3 and 60 days; 14 days when
// no level is in sight.
func plotHorizon(fc *capacity.Forecast) time.Duration {
	far := 0.0
	for _, c := range fc.Crossings {
		for _, d := range []capacity.Days{c.Days, c.DaysHi} {
			if d.Finite() {
				far = math.Max(far, float64(d))
			}
		}
	}
	if far == 0 {
		far = 14
	}
	far = math.Min(60, math.Max(3, far*1.15))
	return time.Duration(far * float64(24*time.Hour))
}

func makePlot(s capacity.Series, fc *capacity.Forecast, opt capacity.Options) Plot {
	hist := upTo(s.Used, fc.Now)
	from := fc.Now.Add(-opt.Window)
	k := sort.Search(len(hist), func(i int) bool { return hist[i].T.After(from) })
	hist = downsample(hist[k:], 1500)
	return Plot{Subject: s.Subject, Capacity: s.Capacity, History: hist,
		Forecast: fc.Path(fc.Now.Add(plotHorizon(fc)), 300), Levels: opt.Levels}
}

// downsample keeps at most n points, taking the maximum of each bucket so
// that peaks (which are what fills a pool) stay visible.
func downsample(pts []capacity.Point, n int) []capacity.Point {
	if len(pts) <= n {
		return append([]capacity.Point(nil), pts...)
	}
	out := make([]capacity.Point, 0, n)
	per := float64(len(pts)) / float64(n)
	for b := 0; b < n; b++ {
		lo, hi := int(float64(b)*per), int(float64(b+1)*per)
		best := pts[lo]
		for _, p := range pts[lo:hi] {
			if p.V > best.V {
				best = p
			}
		}
		out = append(out, capacity.Point{T: pts[hi-1].T, V: best.V})
	}
	return out
}

func atRiskRows(in Input) []AtRiskRow {
	devs := map[string]capacity.DeviceSeries{}
	for _, d := range in.Devices {
		devs[d.Device] = d
	}
	var out []AtRiskRow
	for _, a := range in.AtRisk {
		row := AtRiskRow{DriveRisk: a}
		if d, ok := devs[a.Device]; ok {
			row.Capacity, row.Pool = d.Capacity, d.Pool
			if u := upTo(d.Used, in.At); len(u) > 0 {
				row.Used = u[len(u)-1].V
			}
		}
		out = append(out, row)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Risk != out[j].Risk {
			return out[i].Risk > out[j].Risk
		}
		return out[i].Device < out[j].Device
	})
	return out
}

// summarize writes the opening sentences: the pools (and cluster) by how
// soon they fill, the evacuation checks that fail, and the drives at risk.
func summarize(r *Report) []string {
	rows := append([]Row(nil), r.Pools...)
	if r.Cluster != nil && len(r.Pools) > 1 {
		rows = append(rows, *r.Cluster)
	}
	soonest := func(row Row) float64 {
		for _, c := range row.Crossings {
			if c.Days.Finite() {
				return float64(c.Days)
			}
		}
		return math.Inf(1)
	}
	sort.SliceStable(rows, func(i, j int) bool { return soonest(rows[i]) < soonest(rows[j]) })
	var out []string
	for _, row := range rows {
		name := string(row.Subject.Kind) + " " + row.Subject.ID
		if row.Subject.Kind == models.SubjectCluster {
			name = "The cluster"
		}
		if row.Error != "" {
			out = append(out, fmt.Sprintf("%s: no forecast (%s).", cap1(name), row.Error))
			continue
		}
		var parts []string
		for _, c := range row.Crossings {
			switch {
			case c.Reached:
				parts = append(parts, fmt.Sprintf("is past %s (%.0f %%)", c.Level.Name, 100*c.Level.Ratio))
			case c.Days.Finite():
				parts = append(parts, fmt.Sprintf("reaches %s (%.0f %%) in %s (%.0f %% interval %s)",
					c.Level.Name, 100*c.Level.Ratio, capacity.FormatDays(c.Days), 100*r.Coverage, interval(c)))
			}
		}
		s := fmt.Sprintf("%s is %.1f %% full (%s of %s), growing %s/day", cap1(name), 100*row.UsedRatio,
			capacity.FormatBytes(row.Used), capacity.FormatBytes(row.Capacity), capacity.FormatBytes(row.Growth))
		if len(parts) == 0 {
			s += "; no fill level is in sight within the forecast horizon."
		} else {
			s += "; it " + strings.Join(parts, ", ") + "."
		}
		out = append(out, s)
	}
	for _, e := range r.Evacuations {
		if !e.OK {
			out = append(out, fmt.Sprintf("Pool %s cannot absorb evacuating its %s: %.1f %% full afterwards, over the %.0f %% limit by %s.",
				e.Pool, e.What, 100*e.RatioAfter, 100*e.Limit, capacity.FormatBytes(-e.Headroom)))
		}
	}
	if n := len(r.AtRisk); n > 0 {
		moved := 0.0
		for _, a := range r.AtRisk {
			moved += a.Used
		}
		out = append(out, fmt.Sprintf("%d drive(s) at risk; evacuating them moves %s.", n, capacity.FormatBytes(moved)))
	} else {
		out = append(out, "No drive is at risk.")
	}
	return out
}

func interval(c capacity.Crossing) string {
	lo, hi := capacity.FormatDays(c.DaysLow), capacity.FormatDays(c.DaysHi)
	if !c.DaysHi.Finite() {
		hi = "beyond the horizon"
	}
	return lo + " – " + hi
}

func cap1(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func assumptions(in Input, r *Report, opt capacity.Options) []string {
	var periods []string
	for _, p := range opt.Periods {
		periods = append(periods, FormatDuration(p))
	}
	out := []string{
		fmt.Sprintf("Data: %d readings from %s to %s (typical step %s), source %s.", r.Readings,
			r.DataFrom.Format(time.RFC3339), r.DataTo.Format(time.RFC3339), r.Step, orDash(in.Source)),
		fmt.Sprintf("Series: used bytes %s, capacity %s, per drive; data servers, pools and the cluster are sums over their drives.",
			orDash(in.UsedMetric), orDash(in.CapacityMetric)),
		fmt.Sprintf("Model: local-linear trend fitted over the last %s with a %s half-life, level shifts at persistent steps, seasonal cycles %s (%d harmonics, each fitted only when the history spans two of it), Huber-weighted least squares.",
			FormatDuration(opt.Window), FormatDuration(opt.HalfLife), strings.Join(periods, ", "), opt.Harmonics),
		fmt.Sprintf("Intervals: %.0f %% prediction intervals from the model's own errors at earlier origins in the history (see docs/capacity.md); the days-to-level interval runs from the upper band's crossing to the lower band's.", 100*opt.Coverage),
		"Levels: nearfull 85 %, backfillfull 90 %, full 95 % of capacity (Ceph's defaults). A level counts as reached when the latest reading is at or above it.",
		fmt.Sprintf("Evacuation: data moves within its pool; a pool can absorb it when used ÷ remaining capacity stays at or below %.0f %%.", 100*orDefault(in.EvacuationLimit, 0.9)),
		"Growth assumes the recent pattern continues: new tenants, deletions and quota changes after the report time are not foreseen.",
	}
	return append(out, in.Notes...)
}

// fmtDur writes whole days as "15 d", else Go's duration form.
// FormatDuration renders d in whole days when it is a whole number of them ("14 d"), else as Go does.
func FormatDuration(d time.Duration) string {
	if d >= 24*time.Hour && d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%d d", d/(24*time.Hour))
	}
	return d.String()
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func orDefault(v, d float64) float64 {
	if v > 0 {
		return v
	}
	return d
}

// Render builds the report from in and writes report.json, report.md and
// report.html into dir (created if missing).
func Render(dir string, in Input) error {
	r, err := Build(in)
	if err != nil {
		return err
	}
	return r.WriteFiles(dir)
}

// WriteFiles writes report.json, report.md and report.html into dir.
func (r *Report) WriteFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cannot create report folder %q: %w", dir, err)
	}
	for i := range r.Plots {
		svg, err := plotSVG(&r.Plots[i])
		if err != nil {
			return err
		}
		r.Plots[i].SVG = svg
	}
	files := []struct {
		name  string
		write func(*bytes.Buffer) error
	}{
		{"report.json", func(b *bytes.Buffer) error {
			enc := json.NewEncoder(b)
			enc.SetIndent("", "  ")
			return enc.Encode(r)
		}},
		{"report.md", r.writeMarkdown},
		{"report.html", r.writeHTML},
	}
	for _, f := range files {
		var b bytes.Buffer
		if err := f.write(&b); err != nil {
			return fmt.Errorf("cannot render %s: %w", f.name, err)
		}
		p := filepath.Join(dir, f.name)
		if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("cannot write %q: %w", p, err)
		}
	}
	return nil
}
