package console

import (
	"bytes"
	"context"
	"fmt"
	"html/template"
	"image/color"
	"math"
	"sort"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/ballast-io/ballast/analyzer/checkpoint"
	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/storage"
)

// Queries behind the charts; the GPU-lost series is written by the
// analysis (cluster/analysis.MetricGPULostSeconds).
const (
	gpuUtilQuery = `avg(ballast_gpu_utilization_ratio)`
	lostByKind   = `sum by (cause_kind) (increase(ballast_gpu_lost_seconds_total[%s]))`
	lostTopCause = `topk(5, sum by (cause, cause_kind) (increase(ballast_gpu_lost_seconds_total[%s])))`
)

// chartSteps is the number of points (GPU utilisation) and bars (GPU-hours
// lost) a chart spans.
const (
	utilPoints = 180
	lostBars   = 36
)

var (
	colorUtil  = color.RGBA{R: 0x1f, G: 0x4e, B: 0x9a, A: 0xff}
	colorCause = map[string]color.RGBA{
		"device":      {R: 0xc0, G: 0x1c, B: 0x28, A: 0xff},
		"stripe":      {R: 0xe0, G: 0x6c, B: 0x00, A: 0xff},
		"ds":          {R: 0x8f, G: 0x3f, B: 0x71, A: 0xff},
		"port":        {R: 0x1c, G: 0x71, B: 0xd8, A: 0xff},
		"checkpoint":  {R: 0x26, G: 0xa2, B: 0x69, A: 0xff},
		"not-storage": {R: 0x9a, G: 0x99, B: 0x96, A: 0xff},
	}
	colorOther    = color.RGBA{R: 0x5e, G: 0x5c, B: 0x64, A: 0xff}
	colorBurst    = color.RGBA{R: 0x1f, G: 0x4e, B: 0x9a, A: 0xff}
	colorForecast = color.RGBA{R: 0xf6, G: 0xc8, B: 0x9f, A: 0xff}
	colorNow      = color.RGBA{R: 0xc0, G: 0x1c, B: 0x28, A: 0xff}
)

// causeRow is one cause of lost GPU time over the window.
type causeRow struct {
	Kind, Name, Cause string
	Hours, Share      float64
	Color             template.CSS
}

func (c *Console) charts(ctx context.Context, pg *page, p params, now time.Time) {
	start := now.Add(-p.window)
	fail := func(what string, err error) { pg.ChartsErr = append(pg.ChartsErr, what+": "+err.Error()) }

	// GPU utilisation: the mean over every GPU, and the latest value.
	step := max(10*time.Second, (p.window / utilPoints).Round(time.Second))
	if ss, err := c.opts.Query.QueryRange(ctx, gpuUtilQuery, start, now, step); err != nil {
		fail("GPU utilisation", err)
	} else if len(ss) > 0 && len(ss[0].Values) > 0 {
		pg.GPUUtil = fmt.Sprintf("%.0f %%", 100*ss[0].Values[len(ss[0].Values)-1])
		if svg, err := lineChart(ss[0], "GPU utilisation, mean over all GPUs (%)", 100, colorUtil); err != nil {
			fail("GPU utilisation chart", err)
		} else {
			pg.GPUChart = svg
		}
	}

	// GPU-hours lost by cause: totals over the window, then per bar.
	win := promDuration(p.window)
	if ss, err := c.opts.Query.Query(ctx, fmt.Sprintf(lostByKind, win), now); err != nil {
		fail("GPU-hours lost", err)
	} else {
		var total float64
		for _, s := range ss {
			if v := last(s); v > 0 {
				total += v / 3600
				k := s.Label("cause_kind")
				pg.LostByCause = append(pg.LostByCause, causeRow{Kind: k, Name: CauseName(k), Hours: v / 3600, Color: hexColor(causeColor(k))})
			}
		}
		for i := range pg.LostByCause {
			pg.LostByCause[i].Share = pg.LostByCause[i].Hours / total
		}
		sort.Slice(pg.LostByCause, func(i, j int) bool { return pg.LostByCause[i].Hours > pg.LostByCause[j].Hours })
		pg.GPUHoursLost = formatHours(total)
	}
	if ss, err := c.opts.Query.Query(ctx, fmt.Sprintf(lostTopCause, win), now); err == nil {
		var top []causeRow
		for _, s := range ss {
			if v := last(s); v > 0 {
				top = append(top, causeRow{Kind: s.Label("cause_kind"), Cause: s.Label("cause"), Hours: v / 3600})
			}
		}
		sort.Slice(top, func(i, j int) bool { return top[i].Hours > top[j].Hours })
		// The top causes by subject follow the totals by kind.
		for _, t := range top {
			t.Name = CauseName(t.Kind)
			t.Color = hexColor(causeColor(t.Kind))
			pg.LostByCause = append(pg.LostByCause, t)
		}
	}
	bar := max(time.Minute, (p.window / lostBars).Round(time.Minute))
	if ss, err := c.opts.Query.QueryRange(ctx, fmt.Sprintf(lostByKind, promDuration(bar)), start.Add(bar), now, bar); err != nil {
		fail("GPU-hours lost over time", err)
	} else if len(ss) > 0 {
		if svg, err := stackedBars(ss, bar); err != nil {
			fail("GPU-hours lost chart", err)
		} else {
			pg.LostChart = svg
		}
	}
}

// forecastRow is one client group's checkpoint forecast.
type forecastRow struct {
	Group              string
	Period             time.Duration
	NextStart, NextEnd time.Time
	In                 time.Duration // until the window opens; 0 when open
	Confidence         float64
	Open               bool
	Summary            string
}

// maxForecastRows bounds the groups on the timeline.
const maxForecastRows = 12

func (c *Console) forecasts(pg *page, p params, now time.Time, active []models.Finding) {
	var rows []forecastRow
	for _, f := range active {
		w, ok := checkpoint.ForecastWindow(f)
		if !ok {
			continue
		}
		r := forecastRow{Group: f.Subject.ID, Period: w.Period, NextStart: w.NextStart, NextEnd: w.NextEnd,
			Confidence: w.Confidence, Summary: f.Summary}
		r.Open = !now.Before(r.NextStart) && now.Before(r.NextEnd)
		if now.Before(r.NextStart) {
			r.In = r.NextStart.Sub(now)
		}
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].NextStart.Before(rows[j].NextStart) })
	if len(rows) > maxForecastRows {
		rows = rows[:maxForecastRows]
	}
	pg.Forecasts = rows
	if len(rows) == 0 {
		return
	}
	// Bursts seen in the window, for the timeline.
	since := now.Add(-p.window)
	fs, err := c.opts.Findings.Findings(storage.FindingFilter{Kind: checkpoint.KindBurst, Since: since})
	if err != nil {
		pg.ForecastErr = err.Error()
	}
	svg, err := timeline(rows, fs, since, now)
	if err != nil {
		pg.ForecastErr = err.Error()
		return
	}
	pg.CkptChart = svg
}

// lineChart draws one series (scaled by scale) against time.
func lineChart(s storage.Series, title string, scale float64, col color.Color) (template.HTML, error) {
	pts := make(plotter.XYs, 0, len(s.Values))
	for i, v := range s.Values {
		if !math.IsNaN(v) {
			pts = append(pts, plotter.XY{X: float64(s.Timestamps[i]) / 1000, Y: v * scale})
		}
	}
	if len(pts) < 2 {
		return "", fmt.Errorf("not enough points to draw")
	}
	pl := newPlot(title)
	l, err := plotter.NewLine(pts)
	if err != nil {
		return "", err
	}
	l.Color, l.Width = col, vg.Points(1.5)
	pl.Add(l, plotter.NewGrid())
	pl.Y.Min, pl.Y.Max = 0, 100
	return svgOf(pl, 6, 2.6)
}

// stackedBars draws GPU-hours lost per bar, stacked by cause kind.
func stackedBars(ss []storage.Series, bar time.Duration) (template.HTML, error) {
	sort.Slice(ss, func(i, j int) bool { return ss[i].Label("cause_kind") < ss[j].Label("cause_kind") })
	base := map[int64]float64{}
	// No legend: the table under the chart names the colours.
	pl := newPlot("GPU-hours lost per " + bar.String() + ", by cause")
	width := bar.Seconds() * 0.85
	var any bool
	for _, s := range ss {
		k := s.Label("cause_kind")
		for i, v := range s.Values {
			if math.IsNaN(v) || v <= 0 {
				continue
			}
			t := s.Timestamps[i]
			x1 := float64(t) / 1000
			x0 := x1 - width
			y0 := base[t]
			y1 := y0 + v/3600
			base[t] = y1
			poly, err := plotter.NewPolygon(plotter.XYs{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}})
			if err != nil {
				return "", err
			}
			poly.Color, poly.LineStyle.Width = causeColor(k), 0
			pl.Add(poly)
			any = true
		}
	}
	if !any {
		return "", nil
	}
	pl.Y.Min = 0
	pl.Add(plotter.NewGrid())
	return svgOf(pl, 6, 2.6)
}

// timeline draws, per client group, the checkpoint bursts seen (solid) and
// the forecast windows ahead (shaded), with a line at now.
func timeline(rows []forecastRow, bursts []models.Finding, since, now time.Time) (template.HTML, error) {
	horizon := now.Add(time.Hour)
	for _, r := range rows {
		horizon = maxTime(horizon, r.NextEnd.Add(r.Period))
	}
	pl := newPlot("Checkpoint bursts seen (blue) and forecast windows (orange)")
	pl.Y.Min, pl.Y.Max = -0.5, float64(len(rows))-0.5
	names := make([]string, len(rows))
	idx := map[string]int{}
	rect := func(x0, x1 float64, y int, col color.Color) error {
		p, err := plotter.NewPolygon(plotter.XYs{{X: x0, Y: float64(y) - 0.35}, {X: x1, Y: float64(y) - 0.35}, {X: x1, Y: float64(y) + 0.35}, {X: x0, Y: float64(y) + 0.35}})
		if err != nil {
			return err
		}
		p.Color, p.LineStyle.Width = col, 0
		pl.Add(p)
		return nil
	}
	for i, r := range rows {
		names[i], idx[r.Group] = r.Group, i
		// The next window and those after it, one period apart, up to the
		// horizon.
		for k := time.Duration(0); k < 50; k++ {
			s := r.NextStart.Add(k * r.Period)
			if s.After(horizon) {
				break
			}
			if err := rect(float64(s.Unix()), float64(r.NextEnd.Add(k*r.Period).Unix()), i, colorForecast); err != nil {
				return "", err
			}
		}
	}
	for _, b := range bursts {
		i, ok := idx[b.Subject.ID]
		if !ok {
			continue
		}
		end := b.End
		if end.IsZero() {
			end = b.LastSeen
		}
		end = maxTime(end, b.Start.Add(10*time.Second))
		if err := rect(float64(b.Start.Unix()), float64(end.Unix()), i, colorBurst); err != nil {
			return "", err
		}
	}
	nl, err := plotter.NewLine(plotter.XYs{{X: float64(now.Unix()), Y: -0.5}, {X: float64(now.Unix()), Y: float64(len(rows)) - 0.5}})
	if err != nil {
		return "", err
	}
	nl.Color, nl.Width = colorNow, vg.Points(1)
	pl.Add(nl)
	pl.X.Min, pl.X.Max = float64(since.Unix()), float64(horizon.Unix())
	pl.Y.Tick.Marker = groupTicks(names)
	pl.Y.Label.Text = ""
	return svgOf(pl, 9.4, 0.6+0.35*float64(len(rows)))
}

type groupTicks []string

func (g groupTicks) Ticks(min, max float64) []plot.Tick {
	out := make([]plot.Tick, len(g))
	for i, n := range g {
		out[i] = plot.Tick{Value: float64(i), Label: n}
	}
	return out
}

func newPlot(title string) *plot.Plot {
	pl := plot.New()
	pl.Title.Text = title
	pl.Title.TextStyle.Font.Size = vg.Points(10)
	pl.X.Tick.Marker = plot.TimeTicks{Format: "15:04", Time: plot.UnixTimeIn(time.UTC)}
	pl.X.Label.Text = "time (UTC)"
	return pl
}

func svgOf(pl *plot.Plot, wIn, hIn float64) (template.HTML, error) {
	c := vgsvg.NewWith(vgsvg.UseWH(vg.Length(wIn)*vg.Inch, vg.Length(hIn)*vg.Inch), vgsvg.EmbedFonts(false))
	pl.Draw(draw.New(c))
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return "", fmt.Errorf("cannot write a chart: %w", err)
	}
	s := b.String()
	if i := strings.Index(s, "<svg"); i >= 0 {
		s = s[i:]
	}
	// The SVG is generated here from numbers and names in the store; the
	// names are escaped by the SVG writer.
	return template.HTML(s), nil
}

func causeColor(kind string) color.RGBA {
	if c, ok := colorCause[kind]; ok {
		return c
	}
	return colorOther
}

func hexColor(c color.RGBA) template.CSS {
	return template.CSS(fmt.Sprintf("background:#%02x%02x%02x", c.R, c.G, c.B))
}

func last(s storage.Series) float64 {
	if len(s.Values) == 0 {
		return math.NaN()
	}
	return s.Values[len(s.Values)-1]
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// promDuration renders d as a MetricsQL duration: whole seconds.
func promDuration(d time.Duration) string { return fmt.Sprintf("%ds", int(d.Seconds())) }
