// Package sim is the cluster twin's side of ballast: the twin itself
// (sim/twin), the scoring of detection against its ground truth (sim/score),
// the capacity backtest (sim/capacityeval), and here the runner behind
// `ballast demo` and `ballast eval`. The runner builds the very mds
// assembly a real cluster runs (cluster.NewMDS) and swaps only the clock
// (simulated) and the sources (the twin's exposition and LAYOUTSTATS).
// Product packages never import sim.
package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ballast-io/ballast/actuator"
	"github.com/ballast-io/ballast/cluster"
	"github.com/ballast-io/ballast/cluster/pipeline"
	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/sim/twin"
	"github.com/ballast-io/ballast/storage"
	"github.com/ballast-io/ballast/storage/ingest"
)

// DemoOptions configure a run of the mds pipeline on the cluster twin.
type DemoOptions struct {
	Scenario *twin.Scenario
	Seed     uint64
	// Duration of simulated time; default the scenario's.
	Duration time.Duration
	// Start of simulated time; default now − Duration, so that the run ends
	// at the wall clock and its data sits where Grafana looks by default.
	Start time.Time
	// OutDir receives summary.json, truth.jsonl, findings.jsonl,
	// actions.jsonl; the store goes to OutDir/data (wiped first).
	OutDir string
	// Export also writes every stored sample to OutDir/telemetry.jsonl,
	// sorted, so that two runs can be compared byte for byte.
	Export bool
	// Listen is the query API address; empty means 127.0.0.1:9750.
	Listen string
	// Store selects the backend as `--store` does (cluster.ApplyStoreFlag):
	// empty or "embedded", or "remote=URL[,QUERY_URL]"; StoreFlushURLs and
	// StoreTenant complete a remote one. Point a remote demo at an empty
	// tenant: the analyzers read whatever else lies in its time range.
	Store          string
	StoreFlushURLs []string
	StoreTenant    string
	// ScrapeInterval is the simulated scrape and analysis cadence; default 10s.
	ScrapeInterval time.Duration
	// Progress is called about every ProgressEvery of wall time.
	Progress      func(DemoProgress)
	ProgressEvery time.Duration
	Logger        *slog.Logger
	Version       string
	// ActionMode is the mode of every planned action kind; default auto
	// (the demo acts on its simulated cluster). Eval's no-action run uses
	// off; a dry-run leaves the twin exactly as off does.
	ActionMode models.ActionMode
	// Rebalancer replaces ballast's rebalancer (eval's baselines).
	Rebalancer actuator.Rebalancer
	// ReadAheadPolicyOff turns the read-ahead closed loop off (eval's
	// static read-ahead baselines).
	ReadAheadPolicyOff bool
	// Observe, when set, is called after every pipeline tick with the
	// twin locked (eval samples its remediation ground truth there).
	Observe func(tw *twin.Twin, now time.Time)
}

// DemoProgress is one progress report.
type DemoProgress struct {
	SimElapsed, SimTotal time.Duration
	Wall                 time.Duration
	GPUUtil              float64 // simulated ground truth so far
	Findings, Actions    int
}

// DemoSummary is summary.json.
type DemoSummary struct {
	Scenario              string             `json:"scenario"`
	Seed                  uint64             `json:"seed"`
	SimSeconds            float64            `json:"sim_seconds"`
	WallSeconds           float64            `json:"wall_seconds,omitempty"` // wall clock: summary.json only, not eval.json
	SpeedUp               float64            `json:"speed_up,omitempty"`
	GPUUtilMean           float64            `json:"gpu_util_mean"`
	GPUIdleSecondsByCause map[string]float64 `json:"gpu_idle_seconds_by_cause"`
	Findings              int                `json:"findings"`
	FindingsByKind        map[string]int     `json:"findings_by_kind"`
	Actions               int                `json:"actions"`
	Remediation           Remediation        `json:"remediation"`
	SamplesStored         uint64             `json:"samples_stored,omitempty"` // includes the mds's own process and engine metrics, which vary with the host: summary.json only, not eval.json
	Simulated             bool               `json:"simulated"`
	Start                 time.Time          `json:"sim_start"`
	End                   time.Time          `json:"sim_end"`
}

// Remediation sums up what the actuators did on the twin (simulated).
type Remediation struct {
	Simulated  bool          `json:"simulated"`
	Mode       string        `json:"mode"`
	Plans      int           `json:"plans"`
	MovesDone  int           `json:"moves_done"`
	BytesMoved int64         `json:"bytes_moved"`
	Each       []PlanSummary `json:"each,omitempty"`
}

// PlanSummary is one plan in the demo's summary: what it was about, how it
// ended, the bytes it moved against its planner's lower bound, and the GPU
// utilisation of the clients it served before and after (NaN-free: -1
// when not measured).
type PlanSummary struct {
	ID              string  `json:"id"`
	Kind            string  `json:"kind"`
	Subject         string  `json:"subject"`
	State           string  `json:"state"`
	Verdict         string  `json:"verdict,omitempty"`
	Moves           int     `json:"moves"` // planned stripe moves and restripes
	MovesDone       int     `json:"moves_done"`
	BytesMoved      int64   `json:"bytes_moved"`
	LowerBoundBytes int64   `json:"lower_bound_bytes"`
	GPUUtilBefore   float64 `json:"gpu_util_before"`
	GPUUtilAfter    float64 `json:"gpu_util_after"`
}

func remediation(acts []models.Action, mode models.ActionMode) Remediation {
	r := Remediation{Simulated: true, Mode: string(mode)}
	for i := range acts {
		a := &acts[i]
		if a.Parent != "" {
			continue
		}
		r.Plans++
		ps := PlanSummary{ID: a.ID, Kind: string(a.Kind), Subject: a.Subject.String(), State: string(a.State), GPUUtilBefore: -1, GPUUtilAfter: -1}
		if a.SubjectName != "" {
			ps.Subject = a.SubjectName
		}
		if a.Plan != nil {
			// a restripe is one of the plan's child actions too, done and
			// counted in Progress like a move
			ps.Moves, ps.LowerBoundBytes = a.Plan.Moves+a.Plan.Restripes, a.Plan.LowerBoundBytes
		}
		if a.Progress != nil {
			ps.MovesDone, ps.BytesMoved = a.Progress.MovesDone, a.Progress.BytesMoved
			r.MovesDone += a.Progress.MovesDone
			r.BytesMoved += a.Progress.BytesMoved
		}
		if e := a.Effect; e != nil {
			ps.Verdict = string(e.Verdict)
			if v, ok := e.Before["gpu_util"]; ok {
				ps.GPUUtilBefore = v
			}
			if v, ok := e.After["gpu_util"]; ok {
				ps.GPUUtilAfter = v
			}
		}
		r.Each = append(r.Each, ps)
	}
	return r
}

// Demo is a running demo; its MDS keeps serving after Run until Stop.
type Demo struct {
	opts DemoOptions
	tw   *twin.Twin
	mds  *cluster.MDS

	twMu sync.Mutex // serialises access to tw from concurrent sources
	ra   *raAgents  // the GPU nodes' read-ahead agents
}

// NewDemo builds the twin and an mds on OutDir/data; it starts nothing.
func NewDemo(opts DemoOptions) (*Demo, error) {
	if opts.Scenario == nil {
		return nil, errors.New("demo needs a scenario")
	}
	if opts.Duration <= 0 {
		opts.Duration = opts.Scenario.Duration
	}
	if opts.ScrapeInterval <= 0 {
		opts.ScrapeInterval = 10 * time.Second
	}
	if opts.Start.IsZero() {
		opts.Start = time.Now().Add(-opts.Duration).Truncate(time.Minute)
	}
	if opts.ProgressEvery <= 0 {
		opts.ProgressEvery = 500 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	tw, err := twin.New(opts.Scenario, opts.Seed, opts.Start)
	if err != nil {
		return nil, err
	}
	cfg := demoConfig(opts)
	// The store refuses samples older than its retention or more than a
	// day ahead of the wall clock: keep an old --start in range, refuse a
	// future one.
	if end := opts.Start.Add(opts.Duration); end.After(time.Now().Add(24 * time.Hour)) {
		return nil, fmt.Errorf("cannot run a demo ending at %s: more than a day after the wall clock (the store refuses samples from the future)", end.UTC().Format(time.RFC3339))
	}
	if age := time.Since(opts.Start) + 24*time.Hour; age > time.Duration(cfg.Storage.Retention) {
		cfg.Storage.Retention = cluster.Duration(age)
	}
	if err := os.RemoveAll(cfg.DataDir); err != nil {
		return nil, fmt.Errorf("cannot clear demo data dir %q: %w", cfg.DataDir, err)
	}
	// The twin's pNFS server configuration, as an operator would copy it.
	cfg.Devices = tw.MDSDevices()
	if opts.Store != "" {
		if err := cluster.ApplyStoreFlag(&cfg.Storage, opts.Store, opts.StoreFlushURLs); err != nil {
			return nil, err
		}
		cfg.Storage.Remote.Tenant = opts.StoreTenant
		if err := cfg.Validate(); err != nil {
			return nil, err
		}
	}
	if opts.ActionMode == "" {
		opts.ActionMode = models.ModeAuto
	}
	DemoActuators(&cfg.Actuators, opts.ActionMode)
	if opts.ReadAheadPolicyOff {
		cfg.Actuators.ReadAhead.Policy.Enabled = false
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("cannot configure the demo's mds: %w", err)
	}
	d := &Demo{opts: opts, tw: tw, ra: newRAAgents()}
	d.mds = cluster.NewMDS(cfg, cluster.Runtime{
		Sources:     d.sources(),
		ManualTicks: true,
		Jitter:      -1, // the demo ticks exactly on the scrape interval
		Banner:      banner(opts.Scenario.Name, opts.Seed),
		Mover:       &twinMover{tw: tw, mu: &d.twMu},
		Rebalancer:  opts.Rebalancer,
	}, opts.Version, opts.Logger)
	return d, nil
}

// demoConfig is the mds configuration of a demo writing to opts.OutDir.
func demoConfig(opts DemoOptions) cluster.MDSConfig {
	cfg := cluster.DefaultMDSConfig()
	cfg.Listen = opts.Listen
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:9750"
	}
	cfg.DataDir = filepath.Join(opts.OutDir, "data")
	cfg.LogLevel = "warn"
	// A year keeps any simulated start in range; queries on simulated
	// history need no result cache.
	cfg.Storage.Retention = cluster.Duration(365 * 24 * time.Hour)
	cfg.Storage.QueryCache = false
	// Under the simulated clock the store is flushed before every tick
	// (Flush in the tick loop), which makes everything written so far
	// searchable; the wall-clock refresher would only cut more small parts
	// for VictoriaMetrics to merge while the run goes 40–150× real time.
	cfg.Storage.RefreshInterval = 0
	// The demo's capacity report (WriteCapacityReport) is the one the
	// mds serves and the console links to.
	cfg.Report.CapacityDir = filepath.Join(opts.OutDir, "report")
	return cfg
}

// banner labels every console page of a demo as simulated.
func banner(scenario string, seed uint64) string {
	return fmt.Sprintf("Simulated cluster: everything here comes from the cluster twin (scenario %s, seed %d), not from real hardware.", scenario, seed)
}

// ErrNoFinishedDemo is returned by OpenFinished when OutDir holds no
// finished demo run.
var ErrNoFinishedDemo = errors.New("no finished demo run")

// OpenFinished starts an mds on the store of a demo run that finished
// earlier in opts.OutDir (its summary.json and data/), without running the
// simulation: the query API, the console, the findings and the capacity
// report serve that run as it ended. Nothing is ticked, so nothing in the
// store changes; the console's clock stands at the run's end. Only
// OutDir, Listen, Logger and Version of opts are used.
func OpenFinished(ctx context.Context, opts DemoOptions) (*cluster.MDS, *DemoSummary, error) {
	sumPath := filepath.Join(opts.OutDir, "summary.json")
	b, err := os.ReadFile(sumPath)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil, fmt.Errorf("%w in %q (no summary.json)", ErrNoFinishedDemo, opts.OutDir)
		}
		return nil, nil, fmt.Errorf("cannot read %q: %w", sumPath, err)
	}
	var sum DemoSummary
	if err := json.Unmarshal(b, &sum); err != nil {
		return nil, nil, fmt.Errorf("cannot read %q: %w", sumPath, err)
	}
	cfg := demoConfig(opts)
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "journal.db")); err != nil {
		return nil, nil, fmt.Errorf("%w in %q (no store in data/): %v", ErrNoFinishedDemo, opts.OutDir, err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	end := sum.End
	m := cluster.NewMDS(cfg, cluster.Runtime{
		ManualTicks: true,
		Banner:      banner(sum.Scenario, sum.Seed) + " Served from a finished run; the simulation is not running.",
		Now:         func() time.Time { return end },
	}, opts.Version, opts.Logger)
	if err := m.Start(ctx); err != nil {
		return nil, nil, err
	}
	return m, &sum, nil
}

// DemoActuators is the actuators config of the demo and eval: the twin
// driver, every kind in mode, timings for runs of an hour or two
// (cooldown 10 m, verify window 2 m, old copies kept 2 m) and 16 copies at
// once. Everything else keeps a real mds's defaults.
func DemoActuators(c *actuator.Config, mode models.ActionMode) {
	c.Driver = actuator.DriverTwin
	c.Mode = mode
	c.PlanEvery = actuator.Duration(30 * time.Second)
	c.Budgets.Cooldown = actuator.Duration(10 * time.Minute)
	c.Verify.Window = actuator.Duration(2 * time.Minute)
	c.Move.Grace = actuator.Duration(2 * time.Minute)
	c.Move.Backoff = actuator.Duration(10 * time.Second)
	// the twin's mover runs 16 copies at once, as an MDS's mover pool would
	c.Budgets.MaxConcurrentMoves = 16
}

// Twin returns the simulated cluster (for the caller's summary only).
func (d *Demo) Twin() *twin.Twin { return d.tw }

// MDS returns the mds the demo runs.
func (d *Demo) MDS() *cluster.MDS { return d.mds }

// Run starts the mds, drives the twin and the pipeline to the end of the
// simulated duration, and writes the output files. It returns early with
// ctx's error if ctx ends, still writing what it has.
func (d *Demo) Run(ctx context.Context) (*DemoSummary, error) {
	o := &d.opts
	if err := d.mds.Start(ctx); err != nil {
		return nil, err
	}

	wallStart := time.Now()
	lastProgress := wallStart
	end := o.Start.Add(o.Duration)
	nextScrape := o.Start.Add(o.ScrapeInterval)
	var runErr error
	for d.tw.Now().Before(end) {
		if err := ctx.Err(); err != nil {
			runErr = err
			break
		}
		d.tw.Step()
		now := d.tw.Now()
		d.syncReadAhead(now)
		if now.Before(nextScrape) {
			continue
		}
		nextScrape = nextScrape.Add(o.ScrapeInterval)
		if err := d.postLayoutStats(ctx, now); err != nil {
			o.Logger.Warn("layoutstats ingest failed", "err", err)
		}
		d.mds.Tick(ctx, now)
		if o.Observe != nil {
			d.twMu.Lock()
			o.Observe(d.tw, now)
			d.twMu.Unlock()
		}
		if o.Progress != nil && time.Since(lastProgress) >= o.ProgressEvery {
			lastProgress = time.Now()
			o.Progress(d.progress(wallStart))
		}
	}
	if o.Progress != nil {
		o.Progress(d.progress(wallStart))
	}
	sum := d.summary(wallStart)
	if err := d.writeOutputs(sum); err != nil {
		return sum, err
	}
	if o.Export {
		if err := d.export(); err != nil {
			return sum, err
		}
	}
	return sum, runErr
}

// Stop stops the mds (and its query API). Idempotent.
func (d *Demo) Stop(ctx context.Context) error { return d.mds.Stop(ctx) }

// twinScrape is one simulated agent: it renders the node's exposition,
// parses it with the same parser as /api/v1/import/prometheus, adds the
// target labels a scrape would, and returns the samples for the pipeline
// to write, like every other source.
type twinScrape struct {
	d    *Demo
	node twin.Node
	pool string // the DS's pool from the scenario's topology; "" for clients
	buf  bytes.Buffer
	b    ingest.Batch
}

func (s *twinScrape) Name() string { return "twin/" + s.node.Name }

func (s *twinScrape) Collect(_ context.Context, now time.Time) ([]models.Sample, error) {
	s.buf.Reset()
	s.b.Reset()
	// The twin is single-threaded: render under its lock, then parse and
	// write in parallel with the other nodes.
	s.d.twMu.Lock()
	err := s.d.tw.RenderNode(s.node.Name, &s.buf)
	s.d.twMu.Unlock()
	up := "1"
	if err != nil {
		if !errors.Is(err, twin.ErrNodeDown) {
			return nil, err
		}
		// A scrape of a dead node fails: only up is written, as 0, the
		// way lib/promscrape records a target it cannot reach.
		s.buf.Reset()
		up = "0"
	}
	s.buf.WriteString("up " + up + "\n")
	port := "9751"
	if s.node.Role == twin.RoleClient {
		port = "9752"
	}
	lim := s.d.mds.Store().Limits(now)
	lim.DefaultTimestamp = now.UnixMilli()
	lim.ExtraLabels = []models.Label{
		{Name: "job", Value: "ballast-agents"},
		{Name: "instance", Value: s.node.Name + ":" + port},
		{Name: "node", Value: s.node.Name},
		{Name: "role", Value: s.node.Role},
	}
	if s.pool != "" {
		// A data server's pool, as an operator's file_sd labels give it
		// (docs/grafana.md): the capacity report and the dashboards'
		// pool variable read it.
		lim.ExtraLabels = append(lim.ExtraLabels, models.Label{Name: "pool", Value: s.pool})
	}
	if err := ingest.ParseText(s.buf.String(), &lim, &s.b); err != nil {
		return nil, fmt.Errorf("cannot parse exposition of %s: %w", s.node.Name, err)
	}
	return s.b.Samples(), nil
}

func (d *Demo) sources() []pipeline.SourceSpec {
	var out []pipeline.SourceSpec
	for _, n := range d.tw.Nodes() {
		src := &twinScrape{d: d, node: n}
		if n.Role == twin.RoleDS {
			src.pool = d.poolOf(n.Name)
		}
		// No wall-clock timeout: a simulated scrape cannot hang, and one
		// cut short on a loaded host would change the run's results.
		out = append(out, pipeline.SourceSpec{Source: src, Interval: d.opts.ScrapeInterval, Timeout: -1})
	}
	return out
}

// postLayoutStats hands the clients' LAYOUTSTATS of this interval to the
// mds's ingest service, the one behind POST /api/v1/layoutstats.
func (d *Demo) postLayoutStats(ctx context.Context, now time.Time) error {
	var errs []error
	for _, b := range d.tw.LayoutStats() {
		if _, err := d.mds.LayoutStats().Accept(ctx, now, &b); err != nil {
			errs = append(errs, fmt.Errorf("client %s: %w", b.ClientID, err))
		}
	}
	return errors.Join(errs...)
}

// findings returns what the mds journaled, ordered by start then id.
func (d *Demo) findings() []models.Finding {
	fs, err := d.mds.Journal().Findings(storage.FindingFilter{})
	if err != nil {
		d.opts.Logger.Warn("cannot read the findings journal", "err", err)
	}
	return fs
}

// actions returns what the mds journaled.
func (d *Demo) actions() []models.Action {
	as, err := d.mds.Journal().Actions(storage.ActionFilter{})
	if err != nil {
		d.opts.Logger.Warn("cannot read the actions journal", "err", err)
	}
	return as
}

func (d *Demo) progress(wallStart time.Time) DemoProgress {
	return DemoProgress{
		SimElapsed: d.tw.Now().Sub(d.opts.Start),
		SimTotal:   d.opts.Duration,
		Wall:       time.Since(wallStart),
		GPUUtil:    d.tw.GPUStats().UtilMean,
		Findings:   len(d.findings()),
		Actions:    len(d.actions()),
	}
}

func (d *Demo) summary(wallStart time.Time) *DemoSummary {
	fs, acts := d.findings(), d.actions()
	g := d.tw.GPUStats()
	sim := d.tw.Now().Sub(d.opts.Start).Seconds()
	wall := time.Since(wallStart).Seconds()
	s := &DemoSummary{
		Scenario:              d.opts.Scenario.Name,
		Seed:                  d.opts.Seed,
		SimSeconds:            sim,
		WallSeconds:           wall,
		GPUUtilMean:           g.UtilMean,
		GPUIdleSecondsByCause: g.IdleByCause,
		Findings:              len(fs),
		FindingsByKind:        map[string]int{},
		Actions:               len(acts),
		Remediation:           remediation(acts, d.opts.ActionMode),
		SamplesStored:         d.mds.Store().RowsAdded(),
		Simulated:             true,
		Start:                 d.opts.Start,
		End:                   d.tw.Now(),
	}
	if wall > 0 {
		s.SpeedUp = sim / wall
	}
	for _, f := range fs {
		s.FindingsByKind[f.Kind]++
	}
	return s
}

func (d *Demo) writeOutputs(sum *DemoSummary) error {
	dir := d.opts.OutDir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cannot create output dir %q: %w", dir, err)
	}
	write := func(name string, f func(*bytes.Buffer) error) error {
		var b bytes.Buffer
		if err := f(&b); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("cannot write %s: %w", name, err)
		}
		return nil
	}
	fs, acts := d.findings(), d.actions()
	return errors.Join(
		write("summary.json", func(b *bytes.Buffer) error {
			e := json.NewEncoder(b)
			e.SetIndent("", "  ")
			return e.Encode(sum)
		}),
		write("truth.jsonl", func(b *bytes.Buffer) error { return d.tw.WriteTruth(b) }),
		write("findings.jsonl", func(b *bytes.Buffer) error { return writeJSONL(b, fs) }),
		write("actions.jsonl", func(b *bytes.Buffer) error { return writeJSONL(b, acts) }),
	)
}

func writeJSONL[T any](b *bytes.Buffer, items []T) error {
	e := json.NewEncoder(b)
	for i := range items {
		if err := e.Encode(&items[i]); err != nil {
			return err
		}
	}
	return nil
}

// export dumps the store through the query API's /api/v1/export (the
// VictoriaMetrics JSON-lines format), with lines sorted. The mds's own
// metrics (job="ballast": wall-clock timings, memory) are left out: they
// differ between runs of the same seed.
func (d *Demo) export() error {
	d.mds.Store().Flush()
	end := d.tw.Now().Add(time.Minute)
	u := fmt.Sprintf("/api/v1/export?match[]=%s&start=%d&end=%d", url.QueryEscape(`{__name__!="",job!="`+cluster.SelfJob+`"}`), d.opts.Start.Add(-time.Minute).Unix(), end.Unix())
	rec := httptest.NewRecorder()
	d.mds.Store().QueryHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, u, nil))
	if rec.Code != http.StatusOK {
		return fmt.Errorf("cannot export the store: HTTP %d: %s", rec.Code, rec.Body.String())
	}
	lines := strings.Split(strings.TrimSpace(rec.Body.String()), "\n")
	sort.Strings(lines)
	path := filepath.Join(d.opts.OutDir, "telemetry.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	return nil
}
