package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/grafana/grafana-plugin-sdk-go/backend"
	"github.com/grafana/grafana-plugin-sdk-go/data"

	"github.com/ballast-io/ballast/analyzer/capacity"
	"github.com/ballast-io/ballast/analyzer/checkpoint"
	"github.com/ballast-io/ballast/models"
)

// Query is the JSON of one query (the frontend's BallastQuery). QueryType
// selects what is read; the other fields apply to some types only.
type Query struct {
	QueryType string `json:"queryType"`
	// Format of findings and checkpoints: "table" (default) or
	// "annotations".
	Format string `json:"format,omitempty"`
	// Findings and actions: filters.
	Kind    string `json:"kind,omitempty"`
	Subject string `json:"subject,omitempty"`
	// State: findings "active" or "" (all that overlap the time range);
	// actions a state ("proposed", "running", …) or "".
	State string `json:"state,omitempty"`
	// Capacity: the subject ("cluster", "pool:fast", "ds:ds03",
	// "device:ds03/nvme1n1"; default the cluster) and the view: "forecast"
	// (history, forecast and interval band as series; pools and the
	// cluster) or "table" (days to 85/90/95 % for every subject).
	CapacitySubject string `json:"capacitySubject,omitempty"`
	CapacityView    string `json:"capacityView,omitempty"`
	// Heat: "drives" (DS × drive utilisation, one row per DS) or
	// "stripes" (the hottest stripes of the hotspot findings); Limit is
	// the top-N of stripes (default 20); Match adds label matchers to the
	// drive series, e.g. pool="fast".
	HeatView string `json:"heatView,omitempty"`
	Limit    int    `json:"limit,omitempty"`
	Match    string `json:"match,omitempty"`
	// GPU-hours lost: "cause_kind" (default) or "cause".
	GroupBy string `json:"groupBy,omitempty"`
}

// Query types.
const (
	TypeFindings    = "findings"
	TypeActions     = "actions"
	TypeCapacity    = "capacity"
	TypeHeat        = "heat"
	TypeGPULost     = "gpu_lost"
	TypeCheckpoints = "checkpoints"
)

type runner func(ctx context.Context, c *client, q backend.DataQuery, m Query) (data.Frames, error)

var queryTypes = map[string]runner{
	TypeFindings:    runFindings,
	TypeActions:     runActions,
	TypeCapacity:    runCapacity,
	TypeHeat:        runHeat,
	TypeGPULost:     runGPULost,
	TypeCheckpoints: runCheckpoints,
}

// QueryTypes lists the query types, sorted.
func QueryTypes() []string {
	out := make([]string, 0, len(queryTypes))
	for k := range queryTypes {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// errBadQuery marks errors in the query itself (HTTP 400 to Grafana).
var errBadQuery = errors.New("bad query")

func badQuery(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errBadQuery, fmt.Sprintf(format, args...))
}

// overlapping returns the findings of kind that overlap q's time range.
func overlapping(ctx context.Context, c *client, q backend.DataQuery, kind, subject string, onlyActive bool) ([]models.Finding, error) {
	var active *bool
	if onlyActive {
		t := true
		active = &t
	}
	fs, err := c.findings(ctx, kind, subject, active, q.TimeRange.From)
	if err != nil {
		return nil, err
	}
	out := fs[:0]
	for _, f := range fs {
		if !f.Start.After(q.TimeRange.To) {
			out = append(out, f)
		}
	}
	return out, nil
}

// runFindings: one row per finding (table), or one region per finding
// (annotations).
func runFindings(ctx context.Context, c *client, q backend.DataQuery, m Query) (data.Frames, error) {
	switch m.State {
	case "", "active":
	default:
		return nil, badQuery("state %q: want active or empty (every finding overlapping the time range)", m.State)
	}
	fs, err := overlapping(ctx, c, q, m.Kind, m.Subject, m.State == "active")
	if err != nil {
		return nil, err
	}
	sort.SliceStable(fs, func(i, j int) bool { return fs[i].Start.After(fs[j].Start) })
	switch m.Format {
	case "", "table":
	case "annotations":
		return data.Frames{findingAnnotations(fs, q.TimeRange.To)}, nil
	default:
		return nil, badQuery("format %q: want table or annotations", m.Format)
	}
	fr := data.NewFrame("findings",
		data.NewField("start", nil, []time.Time{}),
		data.NewField("end", nil, []*time.Time{}),
		data.NewField("kind", nil, []string{}),
		data.NewField("subject_kind", nil, []string{}),
		data.NewField("subject", nil, []string{}),
		data.NewField("severity", nil, []string{}),
		data.NewField("summary", nil, []string{}),
		data.NewField("gpu_hours_lost", nil, []*float64{}).SetConfig(&data.FieldConfig{Unit: "h", DisplayName: "GPU-hours lost"}),
		data.NewField("score", nil, []float64{}),
		data.NewField("active", nil, []bool{}),
		data.NewField("id", nil, []string{}),
	)
	for _, f := range fs {
		var end *time.Time
		if !f.Active() {
			e := f.End
			end = &e
		}
		var gh *float64
		if v, ok := f.EvidenceValue("gpu_hours_lost"); ok {
			gh = &v
		}
		fr.AppendRow(f.Start, end, f.Kind, string(f.Subject.Kind), f.Subject.ID, string(f.Severity), f.Summary, gh, f.Score, f.Active(), f.ID)
	}
	fr.Meta = &data.FrameMeta{PreferredVisualization: data.VisTypeTable}
	return data.Frames{fr}, nil
}

// findingAnnotations renders findings as annotation regions: Grafana maps
// the time, timeEnd, title, text and tags fields.
func findingAnnotations(fs []models.Finding, to time.Time) *data.Frame {
	fr := annotationFrame()
	for _, f := range fs {
		end := f.End
		if end.IsZero() {
			end = minTime(f.LastSeen, to)
		}
		fr.AppendRow(f.Start, end, fmt.Sprintf("%s: %s %s", f.Kind, f.Subject.Kind, f.Subject.ID), f.Summary,
			strings.Join([]string{f.Kind, string(f.Severity)}, ","))
	}
	return fr
}

// annotationFrame is an empty frame of regions as Grafana's annotation
// support reads them.
func annotationFrame() *data.Frame {
	return data.NewFrame("annotations",
		data.NewField("time", nil, []time.Time{}),
		data.NewField("timeEnd", nil, []time.Time{}),
		data.NewField("title", nil, []string{}),
		data.NewField("text", nil, []string{}),
		data.NewField("tags", nil, []string{}),
	)
}

// runActions: one row per action, with what it moved and its measured
// effect when the mds reports them.
func runActions(ctx context.Context, c *client, q backend.DataQuery, m Query) (data.Frames, error) {
	v := url.Values{}
	for k, s := range map[string]string{"state": m.State, "kind": m.Kind, "subject": m.Subject} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if m.Kind != "move_stripe" && m.Kind != "restripe_file" {
		// plans, not the stripe moves each groups (docs/actions.md)
		v.Set("plans", "true")
	}
	as, err := c.actions(ctx, v)
	if err != nil {
		var se *StatusError
		if errors.As(err, &se) && se.Status == 404 {
			return nil, fmt.Errorf("this mds has no actions API (GET /api/v1/actions answered 404): it runs no actuators yet")
		}
		return nil, err
	}
	fr := data.NewFrame("actions",
		data.NewField("created", nil, []time.Time{}),
		data.NewField("updated", nil, []time.Time{}),
		data.NewField("kind", nil, []string{}),
		data.NewField("subject", nil, []string{}),
		data.NewField("state", nil, []string{}),
		data.NewField("dry_run", nil, []bool{}),
		data.NewField("plan", nil, []string{}),
		data.NewField("bytes_moved", nil, []*float64{}).SetConfig(&data.FieldConfig{Unit: "bytes"}),
		data.NewField("effect", nil, []string{}),
		data.NewField("reason", nil, []string{}),
		data.NewField("id", nil, []string{}),
	)
	for _, a := range as {
		if a.Updated.Before(q.TimeRange.From) && a.Created.Before(q.TimeRange.From) || a.Created.After(q.TimeRange.To) {
			continue
		}
		var ps []string
		for _, k := range slices.Sorted(maps.Keys(a.Params)) {
			ps = append(ps, k+"="+a.Params[k])
		}
		fr.AppendRow(a.Created, a.Updated, string(a.Kind), a.Subject.String(), string(a.State), a.DryRun,
			strings.Join(ps, ", "), bytesMoved(a), rawText(a.Extra["effect"]), a.Reason, a.ID)
	}
	fr.Meta = &data.FrameMeta{PreferredVisualization: data.VisTypeTable}
	return data.Frames{fr}, nil
}

// bytesMoved reads a plan's progress.bytes_moved, else bytes_moved from
// the action, else its bytes parameter.
func bytesMoved(a Action) *float64 {
	if raw, ok := a.Extra["progress"]; ok {
		var p struct {
			BytesMoved *float64 `json:"bytes_moved"`
		}
		if json.Unmarshal(raw, &p) == nil && p.BytesMoved != nil {
			return p.BytesMoved
		}
	}
	if raw, ok := a.Extra["bytes_moved"]; ok {
		var v float64
		if json.Unmarshal(raw, &v) == nil {
			return &v
		}
	}
	if s, ok := a.Params["bytes"]; ok {
		if v, err := strconv.ParseFloat(s, 64); err == nil {
			return &v
		}
	}
	return nil
}

// rawText renders a JSON value for a table cell: strings as they are,
// anything else as compact JSON.
func rawText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// levelPercent names the report's levels by their percentage (85, 90, 95).
func levelPercent(l capacity.Level) string { return strconv.Itoa(int(math.Round(100 * l.Ratio))) }

// runCapacity: the capacity report's forecasts.
func runCapacity(ctx context.Context, c *client, q backend.DataQuery, m Query) (data.Frames, error) {
	r, err := c.report(ctx)
	if err != nil {
		return nil, err
	}
	switch m.CapacityView {
	case "table":
		return data.Frames{capacityTable(r)}, nil
	case "", "forecast":
	default:
		return nil, badQuery("capacityView %q: want forecast or table", m.CapacityView)
	}
	subj := m.CapacitySubject
	if subj == "" || subj == "cluster" {
		subj = "cluster:cluster"
	}
	for _, p := range r.Plots {
		if p.Subject.String() == subj || (subj == "cluster:cluster" && len(r.Plots) == 1) {
			hist := data.NewFrame("history", data.NewField("time", nil, []time.Time{}),
				data.NewField("used", data.Labels{"subject": p.Subject.String()}, []float64{}).SetConfig(&data.FieldConfig{Unit: "percentunit", DisplayName: "used"}))
			for _, h := range p.History {
				hist.AppendRow(h.T, h.V/p.Capacity)
			}
			fc := data.NewFrame("forecast", data.NewField("time", nil, []time.Time{}),
				data.NewField("forecast", data.Labels{"subject": p.Subject.String()}, []float64{}).SetConfig(&data.FieldConfig{Unit: "percentunit", DisplayName: "forecast"}),
				data.NewField("lower", data.Labels{"subject": p.Subject.String()}, []float64{}).SetConfig(&data.FieldConfig{Unit: "percentunit", DisplayName: "90 % interval, lower"}),
				data.NewField("upper", data.Labels{"subject": p.Subject.String()}, []float64{}).SetConfig(&data.FieldConfig{Unit: "percentunit", DisplayName: "90 % interval, upper"}))
			for _, b := range p.Forecast {
				fc.AppendRow(b.T, b.Mean/p.Capacity, b.Lo/p.Capacity, b.Hi/p.Capacity)
			}
			return data.Frames{hist, fc}, nil
		}
	}
	var have []string
	for _, p := range r.Plots {
		have = append(have, p.Subject.String())
	}
	return nil, badQuery("capacitySubject %q: the report forecasts pools and the cluster as series (%s); use capacityView table for data servers and drives", m.CapacitySubject, strings.Join(have, ", "))
}

// capacityTable: every subject with its days to each level (null beyond
// the forecast horizon; 0 once reached), numbers Grafana alerting can use.
func capacityTable(r *Report) *data.Frame {
	var levels []capacity.Level
	rows := []ReportRow{}
	if r.Cluster != nil {
		rows = append(rows, *r.Cluster)
	}
	rows = append(append(append(rows, r.Pools...), r.DataServers...), r.Devices...)
	for _, row := range rows {
		if len(row.Crossings) > 0 {
			for _, c := range row.Crossings {
				levels = append(levels, c.Level)
			}
			break
		}
	}
	fields := []*data.Field{
		data.NewField("subject_kind", nil, []string{}),
		data.NewField("subject", nil, []string{}),
		data.NewField("pool", nil, []string{}),
		data.NewField("used_ratio", nil, []float64{}).SetConfig(&data.FieldConfig{Unit: "percentunit"}),
		data.NewField("used_bytes", nil, []float64{}).SetConfig(&data.FieldConfig{Unit: "bytes"}),
		data.NewField("capacity_bytes", nil, []float64{}).SetConfig(&data.FieldConfig{Unit: "bytes"}),
		data.NewField("growth_bytes_per_day", nil, []float64{}).SetConfig(&data.FieldConfig{Unit: "bytes"}),
	}
	for _, l := range levels {
		p := levelPercent(l)
		for _, suffix := range []string{"", "_low", "_high"} {
			fields = append(fields, data.NewField("days_to_"+p+suffix, nil, []*float64{}).SetConfig(&data.FieldConfig{Unit: "d"}))
		}
	}
	fields = append(fields, data.NewField("error", nil, []string{}))
	fr := data.NewFrame("capacity", fields...)
	days := func(d capacity.Days, reached bool) *float64 {
		if reached {
			z := 0.0
			return &z
		}
		if v := float64(d); !math.IsInf(v, 0) && !math.IsNaN(v) {
			return &v
		}
		return nil
	}
	for _, row := range rows {
		vals := []any{string(row.Subject.Kind), row.Subject.ID, row.Pool, row.UsedRatio, row.Used, row.Capacity, row.Growth}
		for _, l := range levels {
			var cr *capacity.Crossing
			for i := range row.Crossings {
				if row.Crossings[i].Level == l {
					cr = &row.Crossings[i]
				}
			}
			if cr == nil {
				vals = append(vals, (*float64)(nil), (*float64)(nil), (*float64)(nil))
				continue
			}
			vals = append(vals, days(cr.Days, cr.Reached), days(cr.DaysLow, cr.Reached), days(cr.DaysHi, cr.Reached))
		}
		fr.AppendRow(append(vals, row.Error)...)
	}
	fr.Meta = &data.FrameMeta{PreferredVisualization: data.VisTypeTable}
	return fr
}

// heatDrivesQuery is each drive's utilisation from the data servers'
// diskstats, as the console's heat map reads it.
const heatDrivesQuery = `max by (node, device, pool) (rate(ballast_disk_io_time_seconds_total{role="ds"%s}[2m]))`

// runHeat: the DS × drive utilisation matrix at the end of the range, or
// the hottest stripes.
func runHeat(ctx context.Context, c *client, q backend.DataQuery, m Query) (data.Frames, error) {
	switch m.HeatView {
	case "", "drives":
	case "stripes":
		return hotStripes(ctx, c, q, m)
	default:
		return nil, badQuery("heatView %q: want drives or stripes", m.HeatView)
	}
	match := ""
	if s := strings.TrimSpace(m.Match); s != "" {
		match = "," + s
	}
	ss, err := c.query(ctx, fmt.Sprintf(heatDrivesQuery, match), q.TimeRange.To)
	if err != nil {
		return nil, err
	}
	type row struct {
		pool  string
		drive map[string]float64
	}
	rows := map[string]*row{}
	drives := map[string]bool{}
	for _, s := range ss {
		_, v, ok := sample(s.Value)
		node, dev := s.Metric["node"], s.Metric["device"]
		if !ok || node == "" || dev == "" {
			continue
		}
		r := rows[node]
		if r == nil {
			r = &row{pool: s.Metric["pool"], drive: map[string]float64{}}
			rows[node] = r
		}
		r.drive[dev] = v
		drives[dev] = true
	}
	cols := slices.Sorted(maps.Keys(drives))
	fields := []*data.Field{data.NewField("ds", nil, []string{}), data.NewField("pool", nil, []string{})}
	for _, d := range cols {
		fields = append(fields, data.NewField(d, nil, []*float64{}).SetConfig(&data.FieldConfig{Unit: "percentunit", Min: ptr(data.ConfFloat64(0)), Max: ptr(data.ConfFloat64(1))}))
	}
	fr := data.NewFrame("heat", fields...)
	for _, node := range slices.Sorted(maps.Keys(rows)) {
		r := rows[node]
		vals := []any{node, r.pool}
		for _, d := range cols {
			if v, ok := r.drive[d]; ok {
				vals = append(vals, ptr(v))
			} else {
				vals = append(vals, (*float64)(nil))
			}
		}
		fr.AppendRow(vals...)
	}
	fr.Meta = &data.FrameMeta{PreferredVisualization: data.VisTypeTable}
	return data.Frames{fr}, nil
}

func ptr[T any](v T) *T { return &v }

// hotStripes lists the stripes of the hotspot findings overlapping the
// range, hottest (decayed heat) first.
func hotStripes(ctx context.Context, c *client, q backend.DataQuery, m Query) (data.Frames, error) {
	limit := m.Limit
	if limit <= 0 {
		limit = 20
	}
	fs, err := overlapping(ctx, c, q, "hotspot", "", false)
	if err != nil {
		return nil, err
	}
	var st []models.Finding
	for _, f := range fs {
		if f.Subject.Kind == models.SubjectStripe {
			st = append(st, f)
		}
	}
	heat := func(f models.Finding) float64 { v, _ := f.EvidenceValue("heat_bytes"); return v }
	sort.SliceStable(st, func(i, j int) bool { return heat(st[i]) > heat(st[j]) })
	if len(st) > limit {
		st = st[:limit]
	}
	fr := data.NewFrame("stripes",
		data.NewField("stripe", nil, []string{}),
		data.NewField("heat_bytes", nil, []float64{}).SetConfig(&data.FieldConfig{Unit: "bytes", DisplayName: "heat (decayed bytes)"}),
		data.NewField("read_bytes_per_second", nil, []float64{}).SetConfig(&data.FieldConfig{Unit: "Bps"}),
		data.NewField("write_bytes_per_second", nil, []float64{}).SetConfig(&data.FieldConfig{Unit: "Bps"}),
		data.NewField("device_share", nil, []float64{}).SetConfig(&data.FieldConfig{Unit: "percentunit"}),
		data.NewField("where", nil, []string{}),
		data.NewField("start", nil, []time.Time{}),
		data.NewField("active", nil, []bool{}),
	)
	for _, f := range st {
		rd, _ := f.EvidenceValue("read_bytes_per_second")
		wr, _ := f.EvidenceValue("write_bytes_per_second")
		share, _ := f.EvidenceValue("device_share")
		where := ""
		for _, e := range f.Evidence {
			if e.Name == "device_share" {
				where = e.Note
			}
		}
		fr.AppendRow(f.Subject.ID, heat(f), rd, wr, share, where, f.Start, f.Active())
	}
	fr.Meta = &data.FrameMeta{PreferredVisualization: data.VisTypeTable}
	return data.Frames{fr}, nil
}

// gpuLostQuery is GPU-hours lost per step, by cause.
const gpuLostQuery = `sum by (%s) (increase(ballast_gpu_lost_seconds_total[%ds])) / 3600`

// runGPULost: GPU-hours lost by cause over time, one series per cause.
func runGPULost(ctx context.Context, c *client, q backend.DataQuery, m Query) (data.Frames, error) {
	by := m.GroupBy
	switch by {
	case "":
		by = "cause_kind"
	case "cause_kind", "cause":
	default:
		return nil, badQuery("groupBy %q: want cause_kind or cause", m.GroupBy)
	}
	step := max(q.Interval, time.Minute).Truncate(time.Second)
	if n := q.TimeRange.Duration() / step; q.MaxDataPoints > 0 && int64(n) > q.MaxDataPoints {
		step = (q.TimeRange.Duration() / time.Duration(q.MaxDataPoints)).Truncate(time.Second) + time.Second
	}
	ss, err := c.queryRange(ctx, fmt.Sprintf(gpuLostQuery, by, int(step.Seconds())), q.TimeRange.From, q.TimeRange.To, step)
	if err != nil {
		return nil, err
	}
	return seriesFrames("gpu_hours_lost", ss, &data.FieldConfig{Unit: "h", DisplayNameFromDS: "${__field.labels." + by + "}"}), nil
}

// seriesFrames turns Prometheus range series into one time series frame
// each, labels on the value field (what Grafana alerting reads).
func seriesFrames(name string, ss []promSeries, cfg *data.FieldConfig) data.Frames {
	sort.Slice(ss, func(i, j int) bool { return fmt.Sprint(ss[i].Metric) < fmt.Sprint(ss[j].Metric) })
	var out data.Frames
	for _, s := range ss {
		fr := data.NewFrame(name, data.NewField("time", nil, []time.Time{}),
			data.NewField("value", data.Labels(s.Metric), []float64{}).SetConfig(cfg))
		for _, p := range s.Values {
			if t, v, ok := sample(p); ok && !math.IsNaN(v) {
				fr.AppendRow(t, v)
			}
		}
		out = append(out, fr)
	}
	return out
}

// runCheckpoints: the checkpoint forecasts — the predicted burst windows
// (the next one and those after it, a period apart, within the range) and
// the bursts seen, as annotations; or one row per client group (table).
func runCheckpoints(ctx context.Context, c *client, q backend.DataQuery, m Query) (data.Frames, error) {
	t := true
	fcs, err := c.findings(ctx, "checkpoint_forecast", m.Subject, &t, time.Time{})
	if err != nil {
		return nil, err
	}
	switch m.Format {
	case "", "table":
		return data.Frames{forecastTable(fcs, q.TimeRange.To)}, nil
	case "annotations":
	default:
		return nil, badQuery("format %q: want table or annotations", m.Format)
	}
	fr := annotationFrame()
	for _, f := range fcs {
		w, ok := checkpoint.ForecastWindow(f)
		if !ok {
			continue
		}
		// The windows from the first one not over at the start of the
		// range, a period apart, to its end.
		for s, e := w.At(q.TimeRange.From); !s.After(q.TimeRange.To); s, e = s.Add(w.Period), e.Add(w.Period) {
			fr.AppendRow(s, e, "Checkpoint burst expected: "+f.Subject.ID, f.Summary, "checkpoint_forecast,"+f.Subject.ID)
		}
	}
	bursts, err := overlapping(ctx, c, q, "checkpoint_burst", m.Subject, false)
	if err != nil {
		return nil, err
	}
	for _, b := range bursts {
		end := b.End
		if end.IsZero() {
			end = b.LastSeen
		}
		fr.AppendRow(b.Start, end, "Checkpoint burst: "+b.Subject.ID, b.Summary, "checkpoint_burst,"+b.Subject.ID)
	}
	return data.Frames{fr}, nil
}

// forecastTable: one row per client group with a forecast; seconds until
// the next window opens, from the end of the range (0 inside a window).
func forecastTable(fcs []models.Finding, now time.Time) *data.Frame {
	fr := data.NewFrame("checkpoint_forecasts",
		data.NewField("group", nil, []string{}),
		data.NewField("period_seconds", nil, []float64{}).SetConfig(&data.FieldConfig{Unit: "s"}),
		data.NewField("next_start", nil, []time.Time{}),
		data.NewField("next_end", nil, []time.Time{}),
		data.NewField("seconds_until_next", nil, []float64{}).SetConfig(&data.FieldConfig{Unit: "s"}),
		data.NewField("confidence", nil, []float64{}),
		data.NewField("summary", nil, []string{}),
	)
	for _, f := range fcs {
		w, ok := checkpoint.ForecastWindow(f)
		if !ok {
			continue
		}
		s, e := w.At(now)
		fr.AppendRow(f.Subject.ID, w.Period.Seconds(), s, e, max(0, s.Sub(now).Seconds()), w.Confidence, f.Summary)
	}
	fr.Meta = &data.FrameMeta{PreferredVisualization: data.VisTypeTable}
	return fr
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
