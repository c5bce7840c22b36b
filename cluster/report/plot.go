package report

import (
	"bytes"
	"fmt"
	"image/color"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Plot colours; the browser test looks for the band and history colours
// in the screenshot.
var (
	colorHistory  = color.RGBA{R: 0x1f, G: 0x4e, B: 0x9a, A: 0xff}
	colorForecast = color.RGBA{R: 0xd6, G: 0x5f, B: 0x00, A: 0xff}
	colorBand     = color.RGBA{R: 0xf6, G: 0xc8, B: 0x9f, A: 0xff}
	colorLevels   = []color.RGBA{{R: 0xc9, G: 0xa2, B: 0x00, A: 0xff}, {R: 0xe0, G: 0x6c, B: 0x00, A: 0xff}, {R: 0xc0, G: 0x1c, B: 0x28, A: 0xff}}
)

// plotSVG draws history, forecast mean, interval band and level lines of p
// (in percent of capacity against time) as an SVG document without the
// XML prologue, ready to inline into HTML.
func plotSVG(p *Plot) (string, error) {
	if len(p.History) == 0 || len(p.Forecast) == 0 {
		return "", fmt.Errorf("cannot plot %s: no history or forecast", p.Subject)
	}
	pl := plot.New()
	pl.Title.Text = fmt.Sprintf("%s %s: used capacity, history and forecast", p.Subject.Kind, p.Subject.ID)
	pl.Y.Label.Text = "used, % of capacity"
	pl.X.Label.Text = "time (UTC)"
	pl.X.Tick.Marker = plot.TimeTicks{Format: "Jan 2\n15:04"}
	pl.Legend.Top, pl.Legend.Left = false, false
	pct := func(v float64) float64 { return 100 * v / p.Capacity }

	band := make(plotter.XYs, 0, 2*len(p.Forecast))
	for _, b := range p.Forecast {
		band = append(band, plotter.XY{X: unix(b.T), Y: clampPct(pct(b.Hi))})
	}
	for i := len(p.Forecast) - 1; i >= 0; i-- {
		b := p.Forecast[i]
		band = append(band, plotter.XY{X: unix(b.T), Y: clampPct(pct(b.Lo))})
	}
	poly, err := plotter.NewPolygon(band)
	if err != nil {
		return "", err
	}
	poly.Color, poly.LineStyle.Width = colorBand, 0
	pl.Add(poly)
	pl.Legend.Add("90 % interval", poly)

	hist := make(plotter.XYs, len(p.History))
	for i, h := range p.History {
		hist[i] = plotter.XY{X: unix(h.T), Y: pct(h.V)}
	}
	hl, err := plotter.NewLine(hist)
	if err != nil {
		return "", err
	}
	hl.Color, hl.Width = colorHistory, vg.Points(1.2)
	pl.Add(hl)
	pl.Legend.Add("history", hl)

	mean := make(plotter.XYs, len(p.Forecast))
	for i, b := range p.Forecast {
		mean[i] = plotter.XY{X: unix(b.T), Y: clampPct(pct(b.Mean))}
	}
	ml, err := plotter.NewLine(mean)
	if err != nil {
		return "", err
	}
	ml.Color, ml.Width, ml.Dashes = colorForecast, vg.Points(1.5), []vg.Length{vg.Points(5), vg.Points(3)}
	pl.Add(ml)
	pl.Legend.Add("forecast", ml)

	x0, x1 := hist[0].X, mean[len(mean)-1].X
	for i, l := range p.Levels {
		ll, err := plotter.NewLine(plotter.XYs{{X: x0, Y: 100 * l.Ratio}, {X: x1, Y: 100 * l.Ratio}})
		if err != nil {
			return "", err
		}
		ll.Color, ll.Width = colorLevels[i%len(colorLevels)], vg.Points(1)
		ll.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
		pl.Add(ll)
		pl.Legend.Add(fmt.Sprintf("%s %.0f %%", l.Name, 100*l.Ratio), ll)
	}
	pl.Y.Min, pl.Y.Max = 0, 105
	pl.Add(plotter.NewGrid())

	c := vgsvg.NewWith(vgsvg.UseWH(9*vg.Inch, 4*vg.Inch), vgsvg.EmbedFonts(false))
	pl.Draw(draw.New(c))
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return "", fmt.Errorf("cannot write the SVG of %s: %w", p.Subject, err)
	}
	s := b.String()
	if i := strings.Index(s, "<svg"); i >= 0 {
		s = s[i:]
	}
	return s, nil
}

func unix(t interface{ Unix() int64 }) float64 { return float64(t.Unix()) }

// clampPct keeps the band on the plot: beyond 0–105 % it means "full" or
// "empty" anyway.
func clampPct(v float64) float64 { return min(105, max(0, v)) }
