// Package console is the mds's built-in web console, for people who run
// ballast without Grafana (the embedded default, `ballast demo --serve`):
// findings in plain words with the GPU-hours they cost, pending actions
// with approve and reject, a data server × drive heat map, GPU utilisation
// and GPU-hours lost by cause over time, checkpoint forecasts and links to
// the capacity report.
//
// Pages are rendered on the server from the same journal and store the
// HTTP API serves, and paged there (a 1,000-DS cluster sends the browser
// one page of rows, not the cluster). Everything the page needs — CSS, a
// few lines of script, the charts as inline SVG — is served by the mds
// itself: no CDN, no network beyond the mds. Approve and reject are sent
// by the browser to the actions API (POST /api/v1/actions/{id}/approve),
// so they pass that API's authentication like any other client.
package console

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/storage"
)

// Path is where the console is served; the mds redirects / to it.
const Path = "/ui/"

// FindingsReader is the findings journal (storage.Journal).
type FindingsReader interface {
	Findings(f storage.FindingFilter) ([]models.Finding, error)
}

// ActionsReader is the actions journal (storage.Journal).
type ActionsReader interface {
	Actions(f storage.ActionFilter) ([]models.Action, error)
}

// Querier is the store's MetricsQL engine (storage.Querier).
type Querier interface {
	Query(ctx context.Context, expr string, at time.Time) ([]storage.Series, error)
	QueryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]storage.Series, error)
}

// Options configure the console. Findings, Actions and Query are required.
type Options struct {
	Findings FindingsReader
	Actions  ActionsReader
	Query    Querier
	// ReportDir holds the capacity report (report.json, .html, .md);
	// ReportURL is where the mds serves that folder. Empty: no report.
	ReportDir, ReportURL string
	// ActionsURL is the actions API the approve and reject buttons post
	// to; default /api/v1/actions.
	ActionsURL string
	// Now is the console's clock: the wall clock on a real mds, the end of
	// simulated time in the demo. Default time.Now.
	Now func() time.Time
	// Banner is shown on every page, e.g. that the data is simulated.
	Banner  string
	Version string
	// PageSize is the number of heat-map rows (data servers) per page;
	// default 50. FindingsPageSize is the number of findings per page;
	// default 20.
	PageSize, FindingsPageSize int
	Logger                     *slog.Logger
}

// Console serves the pages.
type Console struct {
	opts Options
	mux  *http.ServeMux
}

//go:embed assets
var assets embed.FS

var pageTmpl = template.Must(template.New("page.html").Funcs(template.FuncMap{
	"pct":   func(v float64) string { return fmt.Sprintf("%.0f %%", 100*v) },
	"ago":   ago,
	"clock": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") },
	"hours": func(v float64) string { return formatHours(v) },
}).ParseFS(assets, "assets/page.html"))

// New checks opts and returns a console.
func New(opts Options) (*Console, error) {
	switch {
	case opts.Findings == nil:
		return nil, fmt.Errorf("console needs the findings journal")
	case opts.Actions == nil:
		return nil, fmt.Errorf("console needs the actions journal")
	case opts.Query == nil:
		return nil, fmt.Errorf("console needs the query engine")
	case opts.PageSize < 0:
		return nil, fmt.Errorf("console page size %d is negative", opts.PageSize)
	case opts.FindingsPageSize < 0:
		return nil, fmt.Errorf("console findings page size %d is negative", opts.FindingsPageSize)
	}
	if opts.PageSize == 0 {
		opts.PageSize = 50
	}
	if opts.FindingsPageSize == 0 {
		opts.FindingsPageSize = 20
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.ActionsURL == "" {
		opts.ActionsURL = "/api/v1/actions"
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	c := &Console{opts: opts, mux: http.NewServeMux()}
	c.mux.HandleFunc("GET "+Path+"{$}", c.servePage)
	c.mux.Handle("GET "+Path+"assets/", http.StripPrefix(Path, http.FileServerFS(assets)))
	return c, nil
}

// ServeHTTP serves the console under Path.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		// A bug in one page must not take the mds down (STYLE §15).
		if p := recover(); p != nil {
			c.opts.Logger.Error("console page panicked", "path", r.URL.Path, "panic", p)
			http.Error(w, "internal error rendering the console; see the mds log", http.StatusInternalServerError)
		}
	}()
	c.mux.ServeHTTP(w, r)
}

// windows are the time ranges the page offers.
var windows = []string{"15m", "1h", "2h", "6h", "24h", "7d"}

// params are the page's query parameters, validated.
type params struct {
	window time.Duration
	wname  string
	fpage  int  // findings page, from 1
	hpage  int  // heat-map page, from 1
	ended  bool // list ended findings of the window too
	kind   string
	hsort  string
}

func parseParams(q url.Values) (params, error) {
	p := params{wname: "2h", fpage: 1, hpage: 1, ended: true, hsort: "hot"}
	if w := q.Get("window"); w != "" {
		if !slices.Contains(windows, w) {
			return p, fmt.Errorf("window=%q: want one of %s", w, strings.Join(windows, ", "))
		}
		p.wname = w
	}
	d, _ := parseWindow(p.wname)
	p.window = d
	for _, kv := range []struct {
		name string
		dst  *int
	}{{"fpage", &p.fpage}, {"hpage", &p.hpage}} {
		if s := q.Get(kv.name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				return p, fmt.Errorf("%s=%q: want a page number from 1", kv.name, s)
			}
			*kv.dst = n
		}
	}
	p.kind = q.Get("kind")
	switch q.Get("findings") {
	case "", "window":
	case "active":
		p.ended = false
	default:
		return p, fmt.Errorf("findings=%q: want active or window", q.Get("findings"))
	}
	switch s := q.Get("hsort"); s {
	case "", "hot":
	case "name":
		p.hsort = s
	default:
		return p, fmt.Errorf("hsort=%q: want hot or name", s)
	}
	return p, nil
}

func parseWindow(s string) (time.Duration, error) {
	if strings.HasSuffix(s, "d") {
		n, err := strconv.Atoi(strings.TrimSuffix(s, "d"))
		return time.Duration(n) * 24 * time.Hour, err
	}
	return time.ParseDuration(s)
}

// page is what the template renders.
type page struct {
	Banner, Version string
	Now             time.Time
	Window          string
	Windows         []string
	Query           url.Values
	ActionsURL      string

	GPUUtil        string
	GPUHoursLost   string
	ActiveFindings int
	PendingCount   int

	Findings      []findingRow
	FindingsTotal int
	FindingsPager pager
	OnlyActive    bool
	FindingsErr   string
	Kind          string
	Kinds         []kindCount

	Pending    []actionRow
	Recent     []actionRow
	ActionsErr string

	Heat      heatMap
	HeatPager pager
	HeatErr   string

	GPUChart    template.HTML
	LostChart   template.HTML
	LostByCause []causeRow
	ChartsErr   []string

	Forecasts   []forecastRow
	CkptChart   template.HTML
	ForecastErr string

	Report    *reportInfo
	ReportErr string
}

func (c *Console) servePage(w http.ResponseWriter, r *http.Request) {
	p, err := parseParams(r.URL.Query())
	if err != nil {
		http.Error(w, "bad console parameter: "+err.Error(), http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 20*time.Second)
	defer cancel()
	now := c.opts.Now()
	pg := &page{Banner: c.opts.Banner, Version: c.opts.Version, Now: now, Window: p.wname, Windows: windows,
		Query: r.URL.Query(), ActionsURL: c.opts.ActionsURL, OnlyActive: !p.ended}
	// Every section fails alone: an error is shown where its data would be.
	active := c.findings(pg, p, now)
	c.actions(pg)
	c.heat(ctx, pg, p, now, active)
	c.charts(ctx, pg, p, now)
	c.forecasts(pg, p, now, active)
	c.report(pg)
	var b bytes.Buffer
	if err := pageTmpl.Execute(&b, pg); err != nil {
		c.opts.Logger.Error("cannot render the console", "err", err)
		http.Error(w, "cannot render the console: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(b.Bytes())
}

// kindCount is one finding kind in the filter row: how many findings of
// it the list holds, and the link that shows only them.
type kindCount struct {
	Kind, Title, Link string
	Count             int
	On                bool
}

// pager is one list's paging links.
type pager struct {
	Page, Pages, From, To, Total int
	Prev, Next                   string // URLs, "" when none
}

func newPager(q url.Values, param string, page, size, total int) pager {
	pages := max(1, (total+size-1)/size)
	page = min(page, pages)
	pg := pager{Page: page, Pages: pages, Total: total, From: min(total, (page-1)*size+1), To: min(total, page*size)}
	link := func(n int) string {
		v := url.Values{}
		for k, vs := range q {
			v[k] = vs
		}
		v.Set(param, strconv.Itoa(n))
		return Path + "?" + v.Encode()
	}
	if page > 1 {
		pg.Prev = link(page - 1)
	}
	if page < pages {
		pg.Next = link(page + 1)
	}
	return pg
}

// slice returns the rows of pg's page.
func slice[T any](rows []T, pg pager) []T {
	if pg.Total == 0 {
		return nil
	}
	return rows[pg.From-1 : pg.To]
}

// findingRow is one finding in plain words.
type findingRow struct {
	ID, Kind, Title, Severity, Summary string
	Subject                            string
	SubjectKind                        string
	Start, End                         time.Time
	Active                             bool
	GPUHours                           float64
	HasGPUHours                        bool
	Dashboard                          string
}

// findings fills the findings section and returns the active findings
// (other sections mark drives and forecasts from them).
func (c *Console) findings(pg *page, p params, now time.Time) []models.Finding {
	t := true
	active, err := c.opts.Findings.Findings(storage.FindingFilter{Active: &t})
	if err != nil {
		pg.FindingsErr = err.Error()
		return nil
	}
	pg.ActiveFindings = len(active)
	all := active
	if p.ended {
		f := false
		ended, err := c.opts.Findings.Findings(storage.FindingFilter{Active: &f, Since: now.Add(-p.window)})
		if err != nil {
			pg.FindingsErr = err.Error()
		}
		all = append(slices.Clip(active), ended...)
	}
	rows := make([]findingRow, 0, len(all))
	counts := map[string]int{}
	for _, f := range all {
		// Findings journaled after the console's clock (a reused demo
		// store read at its end) are not shown as the future.
		if f.Start.After(now) {
			continue
		}
		counts[f.Kind]++
		if p.kind == "" || f.Kind == p.kind {
			rows = append(rows, rowOf(f))
		}
	}
	pg.Kind = p.kind
	for k, n := range counts {
		v := cloneValues(pg.Query)
		v.Del("fpage")
		if k == p.kind {
			v.Del("kind")
		} else {
			v.Set("kind", k)
		}
		pg.Kinds = append(pg.Kinds, kindCount{Kind: k, Title: Title(k), Count: n, On: k == p.kind, Link: Path + "?" + v.Encode()})
	}
	sort.Slice(pg.Kinds, func(i, j int) bool { return kindRank(pg.Kinds[i].Kind) < kindRank(pg.Kinds[j].Kind) })
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.Active != b.Active {
			return a.Active
		}
		if ra, rb := sevRank(a.Severity), sevRank(b.Severity); ra != rb {
			return ra > rb
		}
		if ra, rb := kindRank(a.Kind), kindRank(b.Kind); ra != rb {
			return ra < rb
		}
		if a.GPUHours != b.GPUHours {
			return a.GPUHours > b.GPUHours
		}
		if !a.Start.Equal(b.Start) {
			return a.Start.After(b.Start)
		}
		return a.ID < b.ID
	})
	pg.FindingsTotal = len(rows)
	pg.FindingsPager = newPager(pg.Query, "fpage", p.fpage, c.opts.FindingsPageSize, len(rows))
	pg.Findings = slice(rows, pg.FindingsPager)
	return active
}

func rowOf(f models.Finding) findingRow {
	r := findingRow{ID: f.ID, Kind: f.Kind, Title: Title(f.Kind), Severity: string(f.Severity), Summary: f.Summary,
		Subject: f.Subject.ID, SubjectKind: string(f.Subject.Kind), Start: f.Start, End: f.End, Active: f.Active()}
	if v, ok := f.EvidenceValue("gpu_hours_lost"); ok {
		r.GPUHours, r.HasGPUHours = v, true
	}
	uid, vars := models.DashboardFor(f.Kind, f.Subject)
	r.Dashboard = models.DashboardPath(uid, vars)
	return r
}

// kindOrder lists finding kinds in the order a person should read them
// at the same severity: a risk to data first, then what costs GPU time
// now, then what will, then what only describes the workload.
var kindOrder = []string{"drive_failure_risk", "gpu_starvation", "hotspot", "capacity_threshold", "drive_wearout",
	"checkpoint_burst", "checkpoint_forecast", "workload_shift", "workload_profile"}

func kindRank(kind string) int {
	if i := slices.Index(kindOrder, kind); i >= 0 {
		return i
	}
	return len(kindOrder)
}

func sevRank(s string) int {
	switch models.Severity(s) {
	case models.SeverityCritical:
		return 2
	case models.SeverityWarning:
		return 1
	}
	return 0
}

// actionRow is one action.
type actionRow struct {
	ID, Kind, Subject, State, Reason string
	Params                           string
	DryRun                           bool
	Created, Updated                 time.Time
}

// maxRecentActions bounds the recent actions listed.
const maxRecentActions = 20

func (c *Console) actions(pg *page) {
	// plans only: their stripe moves are listed by `ballast actions show`
	as, err := c.opts.Actions.Actions(storage.ActionFilter{Plans: true})
	if err != nil {
		pg.ActionsErr = err.Error()
		return
	}
	for i := len(as) - 1; i >= 0; i-- {
		a := as[i]
		var ps []string
		for _, k := range slices.Sorted(maps.Keys(a.Params)) {
			ps = append(ps, k+"="+a.Params[k])
		}
		if p := a.Plan; p != nil {
			ps = append([]string{fmt.Sprintf("%d moves, %.3g GB (lower bound %.3g GB)", p.Moves, float64(p.Bytes)/1e9, float64(p.LowerBoundBytes)/1e9)}, ps...)
		}
		subj := a.Subject.String()
		if a.SubjectName != "" {
			subj = a.SubjectName
		}
		row := actionRow{ID: a.ID, Kind: string(a.Kind), Subject: subj, State: string(a.State), Reason: a.Reason,
			Params: strings.Join(ps, ", "), DryRun: a.DryRun, Created: a.Created, Updated: a.Updated}
		if a.State == models.ActionAwaitingApproval {
			pg.Pending = append(pg.Pending, row)
		} else if len(pg.Recent) < maxRecentActions {
			pg.Recent = append(pg.Recent, row)
		}
	}
	pg.PendingCount = len(pg.Pending)
}

// reportInfo is the capacity report's headline.
type reportInfo struct {
	GeneratedAt    time.Time
	Summary        []string
	HTML, MD, JSON string
}

func (c *Console) report(pg *page) {
	if c.opts.ReportDir == "" {
		return
	}
	b, err := os.ReadFile(filepath.Join(c.opts.ReportDir, "report.json"))
	if err != nil {
		if os.IsNotExist(err) {
			pg.ReportErr = "No capacity report has been written yet (the mds writes one an hour after start, then every report.capacity_every)."
		} else {
			pg.ReportErr = err.Error()
		}
		return
	}
	var r struct {
		GeneratedAt time.Time `json:"generated_at"`
		Summary     []string  `json:"summary"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		pg.ReportErr = fmt.Sprintf("cannot read report.json: %v", err)
		return
	}
	u := strings.TrimSuffix(c.opts.ReportURL, "/")
	pg.Report = &reportInfo{GeneratedAt: r.GeneratedAt, Summary: r.Summary, HTML: u + "/report.html", MD: u + "/report.md", JSON: u + "/report.json"}
}

// formatHours renders GPU-hours with the precision a person reads.
func formatHours(v float64) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 1:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// ago renders a duration as a person says it: "4 min", "2 h 5 min".
func ago(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h %d min", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%d days", int(d.Hours()/24))
}
