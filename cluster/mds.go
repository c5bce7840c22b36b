package cluster

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/ballast-io/ballast/storage"
)

// MDS is the mds role: embedded store, query API, ingest endpoints, the
// scraper of agents, and the pipeline.
type MDS struct {
	cfg     MDSConfig
	version string
	logger  *slog.Logger
	set     *metrics.Set

	// StripeHub, when set, receives per-stripe LAYOUTSTATS deltas for the
	// stripe-level analyzers.
	StripeHub *StripeHub

	// Extra lets other components (LAYOUTSTATS ingest, findings API, the
	// demo's twin) add handlers, sources, stages and actuators before Start.
	Extra MDSExtensions

	mu       sync.Mutex
	started  bool
	store    *storage.Embedded
	journal  *storage.Journal
	server   *Server
	scraper  *Scraper
	pipeline *Pipeline
	shutdown func(context.Context) error
}

// MDSExtensions are the parts other packages plug into the mds.
type MDSExtensions struct {
	// Handlers are mounted on the listener by path pattern; each gets the
	// open store.
	Handlers map[string]func(*storage.Embedded) http.Handler
	Sources  []SourceSpec
	// Stages and Actuators get the open store to read from.
	Stages    func(*storage.Embedded) []Stage
	Actuators func(*storage.Embedded) []Actuator
	// ManualTicks leaves the pipeline to the caller (simulated clocks):
	// Start does not run it on the real clock.
	ManualTicks bool
	// Jitter overrides the pipeline's source jitter (negative: none), for
	// callers that tick exactly on the sources' interval.
	Jitter float64
}

// NewMDS returns an mds for cfg (validated by the caller); it starts nothing.
func NewMDS(cfg MDSConfig, version string, logger *slog.Logger) *MDS {
	if logger == nil {
		logger = slog.Default()
	}
	return &MDS{cfg: cfg, version: version, logger: logger, set: metrics.NewSet()}
}

// Metrics returns the set behind ballast's own /metrics.
func (m *MDS) Metrics() *metrics.Set { return m.set }

// Store returns the open store, or nil before Start.
func (m *MDS) Store() *storage.Embedded { return m.store }

// Journal returns the findings and actions journal, or nil before Start.
func (m *MDS) Journal() *storage.Journal { return m.journal }

// Pipeline returns the pipeline, or nil before Start.
func (m *MDS) Pipeline() *Pipeline { return m.pipeline }

// Addr returns the listener's bound address.
func (m *MDS) Addr() string {
	if m.server == nil {
		return m.cfg.Listen
	}
	return m.server.Addr()
}

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
	latency := time.Duration(c.Storage.LatencyOffset)
	if latency == 0 {
		latency = -1 // storage.Options: negative means none
	}
	m.store, err = storage.OpenEmbedded(storage.Options{
		DataDir:           c.DataDir,
		Retention:         time.Duration(c.Storage.Retention),
		FlushInterval:     time.Duration(c.Storage.FlushInterval),
		MinFreeDiskBytes:  c.Storage.MinFreeDiskBytes,
		MemoryBytes:       c.Storage.MemoryBytes,
		DisableQueryCache: !c.Storage.QueryCache,
		LatencyOffset:     latency,
		LogLevel:          vmLogLevel(c.LogLevel),
	})
	if err != nil {
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

	m.server = NewServer(c.Listen, m.set, m.logger)
	m.server.AddMetricsWriter(func(w io.Writer) { metrics.WritePrometheus(w, false) })
	ih := storage.NewIngestHandler(m.store, storage.IngestOptions{MaxBodyBytes: c.Ingest.MaxBodyBytes, Metrics: m.set})
	m.server.Handle(storage.PathImportPrometheus, ih)
	m.server.Handle(storage.PathRemoteWrite, ih)
	m.server.Handle(storage.PathFindings, storage.FindingsHandler(m.journal))
	for pattern, mk := range m.Extra.Handlers {
		m.server.Handle(pattern, mk(m.store))
	}
	m.server.Handle("/", m.store.QueryHandler())
	if err := m.server.Start(); err != nil {
		return err
	}

	m.scraper = NewScraper(ScraperOptions{
		ConfigPath:  filepath.Join(m.store.DataDir(), "scrape.yml"),
		Interval:    time.Duration(c.Scrape.Interval),
		Timeout:     time.Duration(c.Scrape.Timeout),
		Targets:     c.Scrape.Targets,
		TargetFiles: c.Scrape.TargetFiles,
		Writer:      m.store,
		Metrics:     m.set,
		Logger:      m.logger,
	})
	if err := m.scraper.Start(); err != nil {
		return err
	}

	var stages []Stage
	acts := []Actuator{&FindingsRecorder{Journal: m.journal, Appender: m.store}}
	if m.Extra.Stages != nil {
		stages = m.Extra.Stages(m.store)
	}
	if every := time.Duration(c.Report.CapacityEvery); every > 0 {
		dir := c.Report.CapacityDir
		if dir == "" {
			dir = filepath.Join(m.store.DataDir(), "reports", "capacity")
		}
		stages = append(stages, &CapacityReportStage{Store: m.store, Journal: m.journal, Dir: dir, Every: every})
	}
	if m.Extra.Actuators != nil {
		acts = append(acts, m.Extra.Actuators(m.store)...)
	}
	m.pipeline, err = NewPipeline(PipelineOptions{
		Sources:   m.Extra.Sources,
		Appender:  m.store,
		Stages:    stages,
		Actuators: acts,
		Tick:      time.Duration(c.Pipeline.Tick),
		Jitter:    m.Extra.Jitter,
		Tracer:    tracer,
		Metrics:   m.set,
		Logger:    m.logger,
	})
	if err != nil {
		return err
	}
	if !m.Extra.ManualTicks {
		m.pipeline.Start()
	}
	m.server.SetReady("")
	m.started = true
	m.logger.Info("mds started", "listen", m.server.Addr(), "data_dir", m.store.DataDir())
	return nil
}

// Stop reverses Start: pipeline, scraper, listener, traces, then the store
// (which flushes to disk). Idempotent; bounded by ctx.
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
	if m.scraper != nil {
		m.scraper.Stop()
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
