// Package scrape pulls agents' /metrics with VictoriaMetrics' lib/promscrape
// (the scraper of vmagent) and writes what it gets through a
// storage.BatchWriter. It lives under storage because it is the one other
// place ballast uses VictoriaMetrics' packages (see docs/decisions.md).
package scrape

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/auth"
	"github.com/VictoriaMetrics/VictoriaMetrics/lib/prompb"
	"github.com/VictoriaMetrics/VictoriaMetrics/lib/promscrape"
	"github.com/VictoriaMetrics/metrics"
	"gopkg.in/yaml.v3"

	"github.com/ballast-io/ballast/storage"
	"github.com/ballast-io/ballast/storage/ingest"
)

// Options configure the pull of agents' /metrics.
type Options struct {
	// ConfigPath is where the generated Prometheus scrape config is written.
	ConfigPath  string
	Interval    time.Duration
	Timeout     time.Duration
	Targets     []string
	TargetFiles []string
	Writer      storage.BatchWriter
	Metrics     *metrics.Set
	Logger      *slog.Logger
}

// Scraper pulls agents with VictoriaMetrics' lib/promscrape (the scraper of
// vmagent): static targets plus Prometheus file_sd files re-read on change.
// Like the store, lib/promscrape keeps its state in package variables, so
// one Scraper runs per process.
type Scraper struct {
	opts    Options
	mu      sync.Mutex
	started bool
	batches sync.Pool
}

// NewScraper returns a scraper; it starts nothing.
func New(opts Options) *Scraper {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Metrics == nil {
		opts.Metrics = metrics.NewSet()
	}
	return &Scraper{opts: opts}
}

// promConfig renders the scrape config that lib/promscrape reads.
func (s *Scraper) promConfig() ([]byte, error) {
	type staticConfig struct {
		Targets []string          `yaml:"targets"`
		Labels  map[string]string `yaml:"labels,omitempty"`
	}
	type fileSD struct {
		Files []string `yaml:"files"`
	}
	type scrapeConfig struct {
		JobName       string         `yaml:"job_name"`
		StaticConfigs []staticConfig `yaml:"static_configs,omitempty"`
		FileSDConfigs []fileSD       `yaml:"file_sd_configs,omitempty"`
	}
	cfg := struct {
		Global struct {
			ScrapeInterval string `yaml:"scrape_interval"`
			ScrapeTimeout  string `yaml:"scrape_timeout"`
		} `yaml:"global"`
		ScrapeConfigs []scrapeConfig `yaml:"scrape_configs"`
	}{}
	cfg.Global.ScrapeInterval = s.opts.Interval.String()
	cfg.Global.ScrapeTimeout = s.opts.Timeout.String()
	sc := scrapeConfig{JobName: "ballast-agents"}
	if len(s.opts.Targets) > 0 {
		sc.StaticConfigs = []staticConfig{{Targets: s.opts.Targets}}
	}
	if len(s.opts.TargetFiles) > 0 {
		files := make([]string, len(s.opts.TargetFiles))
		for i, f := range s.opts.TargetFiles {
			abs, err := filepath.Abs(f)
			if err != nil {
				return nil, fmt.Errorf("cannot resolve target file %q: %w", f, err)
			}
			files[i] = abs
		}
		sc.FileSDConfigs = []fileSD{{Files: files}}
	}
	cfg.ScrapeConfigs = []scrapeConfig{sc}
	return yaml.Marshal(cfg)
}

// Start writes the scrape config and starts scraping. With no targets and
// no target files it does nothing. Idempotent.
func (s *Scraper) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || (len(s.opts.Targets) == 0 && len(s.opts.TargetFiles) == 0) {
		return nil
	}
	data, err := s.promConfig()
	if err != nil {
		return err
	}
	if err := os.WriteFile(s.opts.ConfigPath, data, 0o644); err != nil {
		return fmt.Errorf("cannot write scrape config %q: %w", s.opts.ConfigPath, err)
	}
	if err := storage.SetVMFlags(map[string]string{
		"promscrape.config":              s.opts.ConfigPath,
		"promscrape.fileSDCheckInterval": "5s",
		"promscrape.config.strictParse":  "true",
	}); err != nil {
		return err
	}
	if err := promscrape.CheckConfig(); err != nil {
		return fmt.Errorf("cannot use generated scrape config %q: %w", s.opts.ConfigPath, err)
	}
	promscrape.Init(s.push)
	s.started = true
	return nil
}

// Stop stops scraping and waits for in-flight scrapes. Idempotent.
func (s *Scraper) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		promscrape.Stop()
		s.started = false
	}
}

// push receives each scrape's samples from lib/promscrape. Bad samples from
// a target are counted and skipped: there is no client to answer with 400.
func (s *Scraper) push(_ *auth.Token, wr *prompb.WriteRequest) {
	b, _ := s.batches.Get().(*ingest.Batch)
	if b == nil {
		b = new(ingest.Batch)
	}
	defer s.batches.Put(b)
	b.Reset()
	lim := s.opts.Writer.Limits(time.Now())
	_ = b.AddTimeSeries(wr.Timeseries, &lim, func(err error) {
		s.opts.Metrics.GetOrCreateCounter(fmt.Sprintf(`ballast_scrape_rejected_rows_total{reason=%q}`, ingest.Reason(err))).Inc()
		s.opts.Logger.Debug("scraped sample rejected", "err", err)
	})
	s.trackTargets(wr)
	if err := s.opts.Writer.WriteBatch(b); err != nil {
		s.opts.Metrics.GetOrCreateCounter(`ballast_scrape_write_errors_total`).Inc()
		s.opts.Logger.Warn("cannot store scraped samples", "err", err)
		return
	}
	s.opts.Metrics.GetOrCreateCounter(`ballast_scrape_rows_total`).Add(b.Len())
}

// trackTargets mirrors the per-target up and scrape_duration_seconds series
// that lib/promscrape generates into ballast's own /metrics.
func (s *Scraper) trackTargets(wr *prompb.WriteRequest) {
	for i := range wr.Timeseries {
		ts := &wr.Timeseries[i]
		var name, instance string
		for _, l := range ts.Labels {
			switch l.Name {
			case "__name__":
				name = l.Value
			case "instance":
				instance = l.Value
			}
		}
		if len(ts.Samples) == 0 || instance == "" {
			continue
		}
		v := ts.Samples[len(ts.Samples)-1].Value
		switch name {
		case "up":
			s.opts.Metrics.GetOrCreateGauge(fmt.Sprintf(`ballast_scrape_target_up{target=%q}`, instance), nil).Set(v)
		case "scrape_duration_seconds":
			s.opts.Metrics.GetOrCreateGauge(fmt.Sprintf(`ballast_scrape_duration_seconds{target=%q}`, instance), nil).Set(v)
		}
	}
}
