package report

import (
	"bytes"
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/ballast-io/ballast/analyzer/capacity"
)

// table is a rendered table, shared by the markdown and HTML writers.
type table struct {
	Head []string
	Rows [][]string
}

func forecastTable(rows []Row, coverage float64) table {
	t := table{Head: []string{"subject", "used", "capacity", "used %", "growth/day"}}
	if len(rows) > 0 {
		for _, c := range firstCrossings(rows) {
			t.Head = append(t.Head, fmt.Sprintf("days to %.0f %% (%.0f %% interval)", 100*c.Level.Ratio, 100*coverage))
		}
	}
	for _, r := range rows {
		cells := []string{r.Subject.ID, capacity.FormatBytes(r.Used), capacity.FormatBytes(r.Capacity),
			fmt.Sprintf("%.1f %%", 100*r.UsedRatio), capacity.FormatBytes(r.Growth)}
		if r.Error != "" {
			cells[4] = "no forecast: " + r.Error
		}
		for _, c := range r.Crossings {
			cells = append(cells, crossingCell(c))
		}
		for len(cells) < len(t.Head) {
			cells = append(cells, "—")
		}
		t.Rows = append(t.Rows, cells)
	}
	return t
}

func firstCrossings(rows []Row) []capacity.Crossing {
	for _, r := range rows {
		if len(r.Crossings) > 0 {
			return r.Crossings
		}
	}
	return nil
}

func crossingCell(c capacity.Crossing) string {
	switch {
	case c.Reached:
		return "reached"
	case !c.Days.Finite() && !c.DaysLow.Finite():
		return "beyond horizon"
	}
	return fmt.Sprintf("%s (%s)", capacity.FormatDays(c.Days), interval(c))
}

func atRiskTable(rows []AtRiskRow) table {
	t := table{Head: []string{"drive", "pool", "finding", "severity", "risk", "used (to move)", "capacity lost", "why"}}
	for _, a := range rows {
		t.Rows = append(t.Rows, []string{a.Device, orDash(a.Pool), a.Kind, string(a.Severity), fmt.Sprintf("%.2f", a.Risk),
			capacity.FormatBytes(a.Used), capacity.FormatBytes(a.Capacity), a.Summary})
	}
	return t
}

func evacuationTable(es []capacity.Evacuation) table {
	t := table{Head: []string{"pool", "evacuate", "drives", "data to move", "capacity removed", "fill afterwards", "headroom", "possible"}}
	for _, e := range es {
		ok := "yes"
		if !e.OK {
			ok = "NO"
		}
		t.Rows = append(t.Rows, []string{e.Pool, e.What, fmt.Sprint(len(e.Members)), capacity.FormatBytes(e.Moved),
			capacity.FormatBytes(e.Removed), fmt.Sprintf("%.1f %%", 100*e.RatioAfter), capacity.FormatBytes(e.Headroom), ok})
	}
	return t
}

func (t table) markdown(b *bytes.Buffer) {
	esc := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	b.WriteString("| " + strings.Join(mapS(t.Head, esc), " | ") + " |\n|")
	for range t.Head {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range t.Rows {
		b.WriteString("| " + strings.Join(mapS(r, esc), " | ") + " |\n")
	}
	b.WriteString("\n")
}

func mapS(xs []string, f func(string) string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

func (r *Report) title() string {
	return "Capacity forecasts — " + r.GeneratedAt.Format("2006-01-02 15:04 MST")
}

func (r *Report) writeMarkdown(b *bytes.Buffer) error {
	fmt.Fprintf(b, "# %s\n\n## Summary\n\n", r.title())
	for _, s := range r.Summary {
		fmt.Fprintf(b, "- %s\n", s)
	}
	b.WriteString("\n## Pools\n\n")
	forecastTable(r.Pools, r.Coverage).markdown(b)
	b.WriteString("## Data servers\n\n")
	forecastTable(r.DataServers, r.Coverage).markdown(b)
	if r.Cluster != nil {
		b.WriteString("## Cluster\n\n")
		forecastTable([]Row{*r.Cluster}, r.Coverage).markdown(b)
	}
	b.WriteString("## Plots\n\nThe plots are in report.html (history, forecast, interval band and level lines per pool).\n\n")
	b.WriteString("## Drives at risk and evacuation\n\n")
	if len(r.AtRisk) == 0 {
		b.WriteString("No drive is at risk.\n\n")
	} else {
		atRiskTable(r.AtRisk).markdown(b)
	}
	evacuationTable(r.Evacuations).markdown(b)
	b.WriteString("## Assumptions and data range\n\n")
	for _, s := range r.Assumptions {
		fmt.Fprintf(b, "- %s\n", s)
	}
	return nil
}

var htmlTmpl = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>{{.Title}}</title>
<style>
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em auto;max-width:1100px;color:#1b1b1b;background:#fff}
h1{font-size:1.6em}h2{margin-top:1.6em;border-bottom:1px solid #ddd;padding-bottom:.2em}
table{border-collapse:collapse;margin:.6em 0 1.2em;font-size:.9em}
th,td{border:1px solid #ccc;padding:.3em .6em;text-align:right}th{background:#f3f3f3}
td:first-child,th:first-child{text-align:left}
figure{margin:1em 0}figure svg{width:100%;height:auto;border:1px solid #eee}
ul.summary li{margin:.3em 0}
/* A #plot-… link shows that plot alone (to embed or screenshot one). */
body:has(figure.plot:target) > :not(#plots),body:has(figure.plot:target) #plots > :not(figure:target){display:none}
</style></head><body>
<h1>{{.Title}}</h1>
<section id="summary"><h2>Summary</h2><ul class="summary">{{range .Summary}}<li>{{.}}</li>{{end}}</ul></section>
<section id="tables"><h2>Pools</h2>{{template "table" .Pools}}
<h2>Data servers</h2>{{template "table" .DS}}
{{if .Cluster}}<h2>Cluster</h2>{{template "table" .Cluster}}{{end}}</section>
<section id="plots"><h2>History and forecast</h2>
{{range .Plots}}<figure class="plot" id="plot-{{.ID}}">{{.SVG}}<figcaption>{{.Caption}}</figcaption></figure>{{end}}</section>
<section id="at-risk"><h2>Drives at risk and evacuation</h2>
{{if .AtRisk}}{{template "table" .AtRisk}}{{else}}<p>No drive is at risk.</p>{{end}}
{{template "table" .Evac}}</section>
<section id="assumptions"><h2>Assumptions and data range</h2><ul>{{range .Assumptions}}<li>{{.}}</li>{{end}}</ul></section>
</body></html>
{{define "table"}}<table><thead><tr>{{range .Head}}<th>{{.}}</th>{{end}}</tr></thead><tbody>{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>{{end}}</tbody></table>{{end}}
`))

type htmlPlot struct {
	ID      string
	SVG     template.HTML
	Caption string
}

func (r *Report) writeHTML(b *bytes.Buffer) error {
	data := struct {
		Title                   string
		Summary, Assumptions    []string
		Pools, DS, AtRisk, Evac table
		Cluster                 *table
		Plots                   []htmlPlot
	}{Title: r.title(), Summary: r.Summary, Assumptions: r.Assumptions,
		Pools: forecastTable(r.Pools, r.Coverage), DS: forecastTable(r.DataServers, r.Coverage),
		Evac: evacuationTable(r.Evacuations)}
	if len(r.AtRisk) > 0 {
		data.AtRisk = atRiskTable(r.AtRisk)
	}
	if r.Cluster != nil {
		t := forecastTable([]Row{*r.Cluster}, r.Coverage)
		data.Cluster = &t
	}
	for _, p := range r.Plots {
		last := p.Forecast[len(p.Forecast)-1].T
		data.Plots = append(data.Plots, htmlPlot{
			ID: strings.NewReplacer(":", "-", "/", "-").Replace(p.Subject.String()),
			// The SVG comes from gonum/plot's own writer, not from input
			// text (labels are escaped by it), so it is inlined as is.
			SVG: template.HTML(p.SVG),
			Caption: fmt.Sprintf("%s %s: history since %s, forecast to %s; shaded: %.0f %% interval.", p.Subject.Kind, p.Subject.ID,
				p.History[0].T.Format(time.DateTime), last.Format(time.DateTime), 100*r.Coverage),
		})
	}
	return htmlTmpl.Execute(b, data)
}
