package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"go.opentelemetry.io/otel/trace"

	"github.com/ballast-io/ballast/actuator"
	"github.com/ballast-io/ballast/actuator/alert"
	"github.com/ballast-io/ballast/cluster/analysis"
	"github.com/ballast-io/ballast/cluster/console"
	"github.com/ballast-io/ballast/cluster/ha"
	"github.com/ballast-io/ballast/cluster/identity"
	"github.com/ballast-io/ballast/cluster/node"
	"github.com/ballast-io/ballast/cluster/pipeline"
	"github.com/ballast-io/ballast/collector/layoutstats"
	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/storage"
	"github.com/ballast-io/ballast/storage/scrape"
)

// Runtime is what differs between a real mds, the demo and eval: the clock
// and the sources. The zero value is a real mds: the wall clock, agents
// pulled by the scraper, LAYOUTSTATS pushed to its endpoint.
type Runtime struct {
	// Sources are pipeline sources beside the scraper: the demo's simulated
	// agents. Whatever they return goes through the pipeline's appender like
	// every other source's output.
	Sources []pipeline.SourceSpec
	// ManualTicks leaves the clock to the caller: Start does not run the
	// pipeline, the caller calls Tick with its simulated now.
	ManualTicks bool
	// Jitter overrides the pipeline's source jitter (negative: none), for
	// callers that tick exactly on the sources' interval.
	Jitter float64
	// Stages are analysis stages run after the built-in ones (tests,
	// extensions); the built-in stages always run.
	Stages []pipeline.Stage
	// Banner is shown on every console page, e.g. that the cluster is
	// simulated. Empty: none.
	Banner string
	// Now is the clock the console reads "now" from. Default: the wall
	// clock, or with ManualTicks the time of the last tick.
	Now func() time.Time
	// Mover is the cluster twin's mover, used only when the config selects
	// actuators.driver: twin (the demo and eval give it; a real mds has
	// no twin, and config picks files or exec).
	Mover actuator.Mover
	// Rebalancer replaces ballast's load-aware rebalancer: eval scores the
	// baselines it is compared with this way. Nil everywhere else.
	Rebalancer actuator.Rebalancer
}

// MDS is the mds role, the one assembly that `ballast mds`, the demo and
// eval share: the store and the journals, the query API and ingest
// endpoints (Prometheus text, remote write, LAYOUTSTATS), the scraper of
// agents, and the pipeline with every analysis stage and actuator.
type MDS struct {
	cfg     MDSConfig
	rt      Runtime
	version string
	logger  *slog.Logger
	set     *metrics.Set
	hub     *pipeline.StripeHub
	ids     *identity.Table

	mu       sync.Mutex
	started  bool
	store    storage.Store
	journal  *storage.Journal
	lstats   *layoutstats.Service
	analysis *analysis.Analysis
	engine   *actuator.Engine
	server   *Server
	console  *console.Console
	scraper  *scrape.Scraper
	pipeline *pipeline.Pipeline
	alerts   *alert.Dispatcher
	shutdown func(context.Context) error
	elector  *ha.Elector // nil when the mds runs alone
	gate     ha.Gate

	lastTick atomic.Int64 // unix ns of the last manual tick
}

// NewMDS returns an mds for cfg (validated by the caller) running as rt
// says; it starts nothing.
func NewMDS(cfg MDSConfig, rt Runtime, version string, logger *slog.Logger) *MDS {
	if logger == nil {
		logger = slog.Default()
	}
	set := metrics.NewSet()
	return &MDS{cfg: cfg, rt: rt, version: version, logger: logger, set: set, hub: pipeline.NewStripeHub(set),
		ids: identity.New(cfg.Devices, cfg.DataServers)}
}

// Metrics returns the set behind ballast's own /metrics.
func (m *MDS) Metrics() *metrics.Set { return m.set }

// Store returns the open store, or nil before Start.
func (m *MDS) Store() storage.Store { return m.store }

// Journal returns the findings and actions journal, or nil before Start.
func (m *MDS) Journal() *storage.Journal { return m.journal }

// Actions returns the actions engine, or nil before Start.
func (m *MDS) Actions() *actuator.Engine { return m.engine }

// Pipeline returns the pipeline, or nil before Start.
func (m *MDS) Pipeline() *pipeline.Pipeline { return m.pipeline }

// Alerts returns the alert dispatcher, or nil before Start.
func (m *MDS) Alerts() *alert.Dispatcher { return m.alerts }

// Identity returns the device table that names devices and DSs.
func (m *MDS) Identity() *identity.Table { return m.ids }

// Analysis returns the analysis stages, or nil before Start.
func (m *MDS) Analysis() *analysis.Analysis { return m.analysis }

// LayoutStats returns the LAYOUTSTATS ingest service behind
// POST /api/v1/layoutstats, or nil before Start.
func (m *MDS) LayoutStats() *layoutstats.Service { return m.lstats }

// StripeHub returns the hub that hands per-stripe LAYOUTSTATS deltas to the
// stripe analyzers; more subscribers may be added before data arrives.
func (m *MDS) StripeHub() *pipeline.StripeHub { return m.hub }

// Addr returns the listener's bound address.
func (m *MDS) Addr() string {
	if m.server == nil {
		return m.cfg.Listen
	}
	return m.server.Addr()
}

// Tick runs one pipeline round at now, for callers with a simulated clock
// (Runtime.ManualTicks).
func (m *MDS) Tick(ctx context.Context, now time.Time) pipeline.TickResult {
	m.lastTick.Store(now.UnixNano())
	return m.pipeline.Tick(ctx, now)
}

// Now is the mds's clock as the console shows it: Runtime.Now, else the
// last manual tick (simulated time), else the wall clock.
func (m *MDS) Now() time.Time {
	if m.rt.Now != nil {
		return m.rt.Now()
	}
	if m.rt.ManualTicks {
		if ns := m.lastTick.Load(); ns != 0 {
			return time.Unix(0, ns)
		}
	}
	return time.Now()
}

// CapacityReportDir is where the scheduled capacity report is written and
// served from (PathCapacityReport).
func (m *MDS) CapacityReportDir() string {
	if d := m.cfg.Report.CapacityDir; d != "" {
		return d
	}
	return filepath.Join(m.store.DataDir(), "reports", "capacity")
}

// layoutStatsEvery is how often derived LAYOUTSTATS series are flushed and
// idle stripes forgotten.
const layoutStatsEvery = 5 * time.Second

// Start opens the store (refusing a data dir another process holds), binds
// the listener, then starts scraping and the pipeline. On error everything
// started so far is stopped again.
func (m *MDS) Start(ctx context.Context) (err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started {
		return nil
	}
	defer func() {
		if err != nil {
			m.stopLocked(context.Background())
		}
	}()
	c := &m.cfg
	if m.store, err = openStore(c, m.version, m.logger, m.set); err != nil {
		return err
	}
	if m.journal, err = storage.OpenJournal(m.store.DataDir()); err != nil {
		return err
	}
	m.set.NewGauge(`ballast_storage_size_bytes`, cachedFloat(30*time.Second, func() float64 { return float64(m.store.SizeBytes()) }))
	m.set.NewGauge(`ballast_storage_read_only`, func() float64 {
		if m.store.IsReadOnly() {
			return 1
		}
		return 0
	})
	m.set.NewGauge(`ballast_build_info{version="`+m.version+`",role="mds"}`, func() float64 { return 1 })

	tracer, shutdown, err := NewTracer(ctx, c.Telemetry, m.version)
	if err != nil {
		return err
	}
	m.shutdown = shutdown

	in, err := layoutstats.NewIngester(layoutstats.Options{})
	if err != nil {
		return fmt.Errorf("cannot set up LAYOUTSTATS ingest: %w", err)
	}
	m.lstats = layoutstats.NewService(in, m.store, m.hub)
	if m.analysis, err = analysis.New(m.store, m.hub, analysis.Options{Identity: m.ids, ScrapeInterval: time.Duration(c.Scrape.Interval), Logger: m.logger}); err != nil {
		return fmt.Errorf("cannot set up analysis: %w", err)
	}

	mover, err := newMover(&c.Actuators, &m.rt, m.logger)
	if err != nil {
		return err
	}
	j := m.journal
	m.engine, err = actuator.New(actuator.Options{
		Config:     c.Actuators,
		Mover:      mover,
		Journal:    j,
		Load:       func() ([]models.Action, error) { return j.Actions(storage.ActionFilter{}) },
		Measure:    measureFunc(m.store),
		Appender:   m.store,
		Inline:     m.rt.ManualTicks,
		Rebalancer: m.rt.Rebalancer,
		RateHold:   in.RateHold(),
		// the series verification reads: LAYOUTSTATS device sums and
		// scraped GPU utilisation
		SampleInterval: max(in.EmitInterval(), time.Duration(c.Scrape.Interval)),
		Gate:           mdsGate{m},
		StepHook:       testStepHook(m.logger),
		Namer: func(id string) string {
			if n := m.ids.DeviceName(id); n != id {
				return n
			}
			return ""
		},
		// non-urgent copies pause the tick the write rates show a burst
		Writing: m.analysis.CheckpointsWriting,
		Metrics: m.set,
		Logger:  m.logger,
	})
	if err != nil {
		return fmt.Errorf("cannot set up actions: %w", err)
	}
	if err := m.engine.Start(ctx); err != nil {
		return err
	}
	logActuators(m.logger, m.engine)
	m.hub.Subscribe(m.engine.ObserveStripes)

	if m.server, err = node.NewServer(ServerOptions{Addr: c.Listen, Role: RoleMDS, Metrics: m.set, Logger: m.logger,
		Auth: c.Auth, TLS: c.TLS, HTTP: c.HTTP}); err != nil {
		return err
	}
	if mw, ok := m.store.(storage.MetricsWriter); ok {
		m.server.AddMetricsWriter(mw.WriteMetrics)
	}
	ih := storage.NewIngestHandler(m.store, storage.IngestOptions{MaxBodyBytes: c.Ingest.MaxBodyBytes, Metrics: m.set, Logger: m.logger})
	// One admission control in front of every ingest endpoint: their
	// load, not the query API's or /readyz's, is what it bounds. The
	// query-scope routes are counted as queries (adm.Query): while one
	// runs, and shortly after, ingest leaves them the CPU it keeps free.
	adm := NewAdmission(AdmissionOptions{MaxRequests: c.Ingest.MaxInflightRequests, MaxBytes: c.Ingest.MaxInflightBytes,
		MaxBodyBytes: int64(c.Ingest.MaxBodyBytes), MaxWorkers: c.Ingest.MaxWorkers, QueueTimeout: time.Duration(c.Ingest.QueueTimeout), Metrics: m.set})
	if d, ok := m.store.(interface{ DeferRefreshWhile(func() bool) }); ok {
		d.DeferRefreshWhile(adm.Overloaded)
	}
	m.server.Handle(storage.PathImportPrometheus, adm.Wrap(ih), node.ScopeIngest)
	m.server.Handle(storage.PathRemoteWrite, adm.Wrap(ih), node.ScopeIngest)
	m.server.Handle(layoutstats.Path, adm.Wrap(layoutstats.NewHandler(m.lstats, layoutstats.HandlerOptions{})), node.ScopeIngest)
	m.server.Handle(storage.PathFindings, adm.Query(storage.FindingsHandler(m.journal)), node.ScopeQuery)
	m.server.Handle(PathPipelineStatus, adm.Query(http.HandlerFunc(m.servePipelineStatus)), node.ScopeQuery)
	m.server.Handle(PathLeaderStatus, adm.Query(http.HandlerFunc(m.serveLeaderStatus)), node.ScopeQuery)
	m.server.Handle("GET "+PathCapacityReport, adm.Query(CapacityReportHandler(m.CapacityReportDir())), node.ScopeQuery)
	if m.console, err = console.New(console.Options{
		Findings: m.journal, Actions: m.journal, Query: m.store,
		ReportDir: m.CapacityReportDir(), ReportURL: PathCapacityReport,
		Now: m.Now, Banner: m.rt.Banner, Version: m.version, Logger: m.logger,
	}); err != nil {
		return err
	}
	m.server.Handle(console.Path, adm.Query(m.console), node.ScopeQuery)
	m.server.Handle("GET /{$}", http.RedirectHandler(console.Path, http.StatusFound), node.ScopePublic)
	m.server.Handle(PathDevicesStatus, adm.Query(http.HandlerFunc(m.serveDevicesStatus)), node.ScopeQuery)
	// Only the documented query API (docs/storage.md) is mounted, not all
	// of vmselect: its cache resets and graphite deletes stay unreachable,
	// and deleting series needs the admin scope.
	qh := m.store.QueryHandler()
	for _, p := range storage.QueryPaths {
		m.server.Handle(p, adm.Query(qh), node.ScopeQuery)
	}
	for _, p := range storage.AdminPaths {
		m.server.Handle(p, qh, node.ScopeAdmin)
	}
	ah := &actionsHandler{journal: m.journal, engine: m.engine, now: m.Now}
	m.server.Handle("GET "+PathActions, adm.Query(ah), node.ScopeQuery)
	m.server.Handle("GET "+PathActions+"/{id}", adm.Query(ah), node.ScopeQuery)
	m.server.Handle("POST "+PathActions+"/{id}/{verb}", ah, node.ScopeAct)
	m.server.Handle("POST "+PathReadAheadSync, readAheadHandler{m}, node.ScopeAct)
	if err := m.server.Start(); err != nil {
		return err
	}

	m.scraper = scrape.New(scrape.Options{
		ConfigPath:  filepath.Join(m.store.DataDir(), "scrape.yml"),
		Interval:    time.Duration(c.Scrape.Interval),
		Timeout:     time.Duration(c.Scrape.Timeout),
		Targets:     c.Scrape.Targets,
		TargetFiles: c.Scrape.TargetFiles,
		Client: scrape.Client{Scheme: c.Scrape.Scheme, BearerTokenFile: c.Scrape.BearerTokenFile,
			CAFile: c.Scrape.TLS.CAFile, CertFile: c.Scrape.TLS.CertFile, KeyFile: c.Scrape.TLS.KeyFile,
			ServerName: c.Scrape.TLS.ServerName, InsecureSkipVerify: c.Scrape.TLS.InsecureSkipVerify},
		Writer:  m.store,
		Metrics: m.set,
		Logger:  m.logger,
	})
	if err := m.scraper.Start(); err != nil {
		return err
	}

	// Alert senders run in every mds; with no receivers configured (the
	// demo's default) they decide and send nothing.
	ao, err := c.Alerting.AlertOptions(m.store.DataDir(), m.server.Addr(), time.Duration(c.Pipeline.Tick), plans{m.journal}, m.rt.ManualTicks, m.set, m.logger)
	if err != nil {
		return err
	}
	if m.alerts, err = alert.New(ao); err != nil {
		return fmt.Errorf("cannot set up alerting: %w", err)
	}
	if err := m.alerts.Start(); err != nil {
		return err
	}

	if err := m.startHA(); err != nil {
		return err
	}
	if m.pipeline, err = pipeline.NewPipeline(m.pipelineOptions(tracer)); err != nil {
		return err
	}
	if !m.rt.ManualTicks {
		m.pipeline.Start()
	}
	if ro, ok := m.store.(interface{ ReadOnlyReason() string }); ok {
		m.server.SetReadyCheck(ro.ReadOnlyReason)
	} else {
		m.server.SetReadyCheck(func() string {
			if m.store.IsReadOnly() {
				return storage.ErrReadOnly.Error()
			}
			return ""
		})
	}
	m.server.SetReady("")
	m.started = true
	m.logger.Info("mds started", "listen", m.server.Addr(), "data_dir", m.store.DataDir())
	return nil
}

// pipelineOptions lists what every mds runs, in order: the LAYOUTSTATS
// tick and the runtime's sources; every analysis stage, then the scheduled
// capacity report; the findings recorder first among the actuators.
func (m *MDS) pipelineOptions(tracer trace.Tracer) pipeline.PipelineOptions {
	c := &m.cfg
	sources := []pipeline.SourceSpec{{
		// Derived series are written at most once per emit interval; the
		// periodic tick flushes them and forgets idle stripes.
		Source:   pipeline.SourceFunc("layoutstats", func(ctx context.Context, now time.Time) ([]models.Sample, error) { return nil, m.lstats.Tick(ctx, now) }),
		Interval: layoutStatsEvery,
	}}
	sources = append(sources, pipeline.SourceSpec{
		Source:   &selfSource{set: m.set, global: m.writeGlobalMetrics, limits: m.store.Limits, instance: m.server.Addr()},
		Interval: time.Duration(c.Scrape.Interval),
	})
	sources = append(sources, pipeline.SourceSpec{Source: analysis.InfoSource(m.ids), Interval: time.Duration(c.Pipeline.Tick)})
	sources = append(sources, m.rt.Sources...)
	stages, acts := m.analysis.Pipeline()
	if every := time.Duration(c.Report.CapacityEvery); every > 0 {
		stages = append(stages, &CapacityReportStage{Store: m.store, Journal: m.journal, Dir: m.CapacityReportDir(), Every: every})
	}
	stages = append(stages, m.rt.Stages...)
	acts = append([]pipeline.Actuator{&pipeline.FindingsRecorder{Journal: m.journal, Appender: m.store},
		&pipeline.SeriesRecorder{Label: "analysis-series", Series: m.analysis.Series, Appender: m.store}}, acts...)
	acts = append(acts, m.engine)
	// Alerts go last, so that they see the actions of this very tick.
	acts = append(acts, m.alerts)
	opts := pipeline.PipelineOptions{
		Sources:   sources,
		Appender:  m.store,
		Stages:    stages,
		Actuators: acts,
		Tick:      time.Duration(c.Pipeline.Tick),
		Jitter:    m.rt.Jitter,
		Tracer:    tracer,
		Metrics:   m.set,
		Logger:    m.logger,
	}
	if m.rt.ManualTicks {
		opts.Settle = m.store.Flush
		// A simulated clock: no source runs under a wall-clock timeout,
		// so what a run stores does not depend on how loaded the host is.
		for i := range opts.Sources {
			if opts.Sources[i].Timeout == 0 {
				opts.Sources[i].Timeout = -1
			}
		}
	}
	return opts
}

// plans lists the journaled plans (not their stripe moves, which an
// operator hears about through their plan).
type plans struct{ j *storage.Journal }

func (p plans) Actions() ([]models.Action, error) {
	return p.j.Actions(storage.ActionFilter{Plans: true})
}

// PathPipelineStatus serves what the pipeline runs: its sources, stages
// and actuators in order.
const PathPipelineStatus = "/api/v1/status/pipeline"

// PipelineStatus is the body of PathPipelineStatus.
type PipelineStatus struct {
	Sources   []string `json:"sources"`
	Stages    []string `json:"stages"`
	Actuators []string `json:"actuators"`
}

func (m *MDS) servePipelineStatus(w http.ResponseWriter, r *http.Request) {
	p := m.pipeline
	if p == nil {
		http.Error(w, "the pipeline is not running yet", http.StatusServiceUnavailable)
		return
	}
	var st PipelineStatus
	st.Sources, st.Stages, st.Actuators = p.Names()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(struct {
		Status string         `json:"status"`
		Data   PipelineStatus `json:"data"`
	}{"success", st})
}

// PathDevicesStatus serves the device table as the mds names it now: every
// pNFS device id, configured or learned, with its DS, drive, export, the
// name findings use and the DS addresses LAYOUTSTATS reported it under.
const PathDevicesStatus = "/api/v1/status/devices"

func (m *MDS) serveDevicesStatus(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(struct {
		Status string              `json:"status"`
		Data   []identity.Resolved `json:"data"`
	}{"success", m.ids.Rows()})
}

// Stop reverses Start: pipeline, alert delivery, actions engine (copies
// under way aborted, actuator.Engine.Stop), HA election, scraper,
// listener, traces, then the store (which flushes to disk). Idempotent;
// bounded by ctx.
func (m *MDS) Stop(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stopLocked(ctx)
}

func (m *MDS) stopLocked(ctx context.Context) error {
	var errs []error
	if m.pipeline != nil {
		errs = append(errs, m.pipeline.Stop(ctx))
	}
	if m.alerts != nil {
		errs = append(errs, m.alerts.Stop(ctx))
	}
	// the engine ends its steps (aborting copies under way) while this mds
	// still leads, before it resigns: the other then finds no move in flight
	if m.engine != nil {
		errs = append(errs, m.engine.Stop(ctx))
	}
	errs = append(errs, m.stopHA(ctx))
	if m.scraper != nil {
		errs = append(errs, m.scraper.Stop(ctx))
	}
	if m.server != nil {
		errs = append(errs, m.server.Stop(ctx))
	}
	if m.shutdown != nil {
		errs = append(errs, m.shutdown(ctx))
		m.shutdown = nil
	}
	if m.journal != nil {
		errs = append(errs, m.journal.Close())
		m.journal = nil
	}
	if m.store != nil {
		errs = append(errs, m.store.Close(ctx))
	}
	m.started = false
	return errors.Join(errs...)
}

func vmLogLevel(l string) string {
	switch l {
	case "debug":
		return "INFO"
	case "error":
		return "ERROR"
	}
	return "WARN"
}

// cachedFloat memoises an expensive gauge for ttl.
func cachedFloat(ttl time.Duration, f func() float64) func() float64 {
	var mu sync.Mutex
	var at time.Time
	var v float64
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(at) > ttl {
			v, at = f(), time.Now()
		}
		return v
	}
}

// logActuators says at start who moves data and in which mode each planned
// kind runs, so that an operator reading the log knows whether the mds only
// proposes (dry-run, the default on a real cluster) or acts.
func logActuators(log *slog.Logger, e *actuator.Engine) {
	kinds := append(append([]models.ActionKind{}, actuator.PlanKinds...), models.ActionSetReadAhead)
	modes := make([]string, 0, len(kinds))
	for _, k := range kinds {
		modes = append(modes, string(k)+"="+string(e.ModeOf(k)))
	}
	attrs := []any{"driver", e.Capabilities().Name, "modes", strings.Join(modes, " ")}
	if e.Capabilities().Name == "none" {
		// Without a driver the planner has no device list and no
		// placements, so it plans no data move at all, not even a
		// proposal; findings still name the drives and hot spots.
		attrs = append(attrs, "note", "no actuators.driver: stripe moves, evacuations and spare promotions are not planned (no device list or placements to plan from); findings only")
	}
	log.Info("actuators", attrs...)
}
