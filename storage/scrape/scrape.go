// Package scrape pulls agents' /metrics with VictoriaMetrics' lib/promscrape
// (the scraper of vmagent) and writes what it gets through a
// storage.BatchWriter. It lives under storage because it is the one other
// place ballast uses VictoriaMetrics' packages (see docs/decisions.md).
package scrape

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/auth"
	"github.com/VictoriaMetrics/VictoriaMetrics/lib/prompb"
	"github.com/VictoriaMetrics/VictoriaMetrics/lib/promscrape"
	"github.com/VictoriaMetrics/VictoriaMetrics/lib/protoparser/protoparserutil"
	"github.com/VictoriaMetrics/metrics"
	"gopkg.in/yaml.v3"

	"github.com/ballast-io/ballast/internal/ratelog"
	"github.com/ballast-io/ballast/models"
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
	// Client holds the scheme and credentials used for every target.
	Client  Client
	Writer  storage.BatchWriter
	Metrics *metrics.Set
	Logger  *slog.Logger
	// ErrorLogEvery bounds how often one failing target is logged: its
	// first failure at once, then at most once per ErrorLogEvery while it
	// keeps failing (with the number of failed scrapes), and once when it
	// is back. Default 5m.
	ErrorLogEvery time.Duration
}

// Client is how the scraper connects to targets: the scheme, a bearer
// token file and TLS files (lib/promscrape re-reads the files itself).
type Client struct {
	// Scheme is http or https; default http.
	Scheme             string
	BearerTokenFile    string
	CAFile             string
	CertFile           string
	KeyFile            string
	ServerName         string
	InsecureSkipVerify bool
}

// Scraper pulls agents with VictoriaMetrics' lib/promscrape (the scraper of
// vmagent): static targets plus Prometheus file_sd files re-read on change.
// lib/promscrape keeps its state in package variables and registers its
// metrics once, so one Scraper runs once per process.
type Scraper struct {
	opts    Options
	mu      sync.Mutex
	started bool
	stop    chan struct{}
	done    chan struct{}
	batches sync.Pool

	tmu     sync.Mutex
	targets map[string]*targetState // by instance
	nodes   map[string]nodeInfo     // by instance, from ballast_build_info
	logs    *ratelog.Limiter
}

// targetState is what push learned about one target since it was last
// logged.
type targetState struct {
	failures int // failed scrapes since the target was last logged or up
	down     bool
	since    time.Time // when it went down
}

// New returns a scraper; it starts nothing.
func New(opts Options) *Scraper {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Metrics == nil {
		opts.Metrics = metrics.NewSet()
	}
	if opts.ErrorLogEvery <= 0 {
		opts.ErrorLogEvery = 5 * time.Minute
	}
	return &Scraper{opts: opts, targets: map[string]*targetState{}, nodes: map[string]nodeInfo{}, logs: ratelog.New(opts.ErrorLogEvery)}
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
	type authorization struct {
		Type            string `yaml:"type"`
		CredentialsFile string `yaml:"credentials_file"`
	}
	type tlsConfig struct {
		CAFile             string `yaml:"ca_file,omitempty"`
		CertFile           string `yaml:"cert_file,omitempty"`
		KeyFile            string `yaml:"key_file,omitempty"`
		ServerName         string `yaml:"server_name,omitempty"`
		InsecureSkipVerify bool   `yaml:"insecure_skip_verify,omitempty"`
	}
	type scrapeConfig struct {
		JobName       string         `yaml:"job_name"`
		Scheme        string         `yaml:"scheme,omitempty"`
		Authorization *authorization `yaml:"authorization,omitempty"`
		TLSConfig     *tlsConfig     `yaml:"tls_config,omitempty"`
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
	c := &s.opts.Client
	sc := scrapeConfig{JobName: "ballast-agents", Scheme: c.Scheme}
	if c.BearerTokenFile != "" {
		abs, err := filepath.Abs(c.BearerTokenFile)
		if err != nil {
			return nil, fmt.Errorf("cannot resolve bearer token file %q: %w", c.BearerTokenFile, err)
		}
		sc.Authorization = &authorization{Type: "Bearer", CredentialsFile: abs}
	}
	// lib/promscrape reads relative paths from the generated file's folder.
	tc := tlsConfig{ServerName: c.ServerName, InsecureSkipVerify: c.InsecureSkipVerify}
	for _, f := range []struct {
		dst *string
		src string
	}{{&tc.CAFile, c.CAFile}, {&tc.CertFile, c.CertFile}, {&tc.KeyFile, c.KeyFile}} {
		if f.src == "" {
			continue
		}
		abs, err := filepath.Abs(f.src)
		if err != nil {
			return nil, fmt.Errorf("cannot resolve TLS file %q: %w", f.src, err)
		}
		*f.dst = abs
	}
	if tc != (tlsConfig{}) {
		sc.TLSConfig = &tc
	}
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

// processStarted records that lib/promscrape was initialised in this
// process: a second promscrape.Init panics on its duplicate metrics.
var (
	processMu      sync.Mutex
	processStarted bool
)

// Start writes the scrape config and starts scraping. With no targets and
// no target files it does nothing. Idempotent; a second Scraper in the same
// process is refused.
func (s *Scraper) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || (len(s.opts.Targets) == 0 && len(s.opts.TargetFiles) == 0) {
		return nil
	}
	processMu.Lock()
	defer processMu.Unlock()
	if processStarted {
		return fmt.Errorf("cannot start scraping: lib/promscrape already ran in this process, and it runs once per process")
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
		// Failed scrapes are logged by report, through slog and once per
		// target per window, instead of by lib/logger on every failure.
		"promscrape.suppressScrapeErrors": "true",
		// One push per scrape (never stream parsing): push sees a target's
		// ballast_build_info with the rest of its series.
		"promscrape.minResponseSizeForStreamParse": "0",
	}); err != nil {
		return err
	}
	if err := promscrape.CheckConfig(); err != nil {
		return fmt.Errorf("cannot use generated scrape config %q: %w", s.opts.ConfigPath, err)
	}
	// Staleness markers (for a target that went down or a series that went
	// away) are parsed by lib/protoparser's worker pool; without it
	// lib/promscrape blocks for good on the first one (vmagent starts the
	// pool before promscrape.Init, as here).
	protoparserutil.StartUnmarshalWorkers()
	promscrape.Init(s.push)
	processStarted = true
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	go s.report(s.stop, s.done)
	s.started = true
	return nil
}

// Stop stops scraping and waits for in-flight scrapes, which it cancels;
// it gives up waiting when ctx ends. Idempotent.
func (s *Scraper) Stop(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		return nil
	}
	s.started = false
	// A last look at the targets, so that the log is complete when the
	// process exits: a target that came back since the last report
	// interval gets its "up again" line (the reporter polls once per
	// interval).
	if ts, err := activeTargets(); err == nil {
		s.logTargets(time.Now(), ts)
	}
	close(s.stop)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		promscrape.Stop()
		protoparserutil.StopUnmarshalWorkers()
	}()
	select {
	case <-stopped:
		<-s.done
		return nil
	case <-ctx.Done():
		return fmt.Errorf("cannot stop scraping: in-flight scrapes did not end: %w", ctx.Err())
	}
}

// pushState is push's reusable memory.
type pushState struct {
	batch      ingest.Batch
	auto, rest []prompb.TimeSeries
}

// push receives each scrape's samples from lib/promscrape: one call per
// scrape of one target (stream parsing is off), or the staleness markers of
// its series. Bad samples from a target are counted and skipped: there is
// no client to answer with 400.
func (s *Scraper) push(_ *auth.Token, wr *prompb.WriteRequest) {
	// A target's page must never take the mds down: a panic while storing
	// its samples marks that target down with the reason and is counted.
	defer func() {
		if v := recover(); v != nil {
			target := targetOf(wr)
			s.opts.Metrics.GetOrCreateCounter(`ballast_scrape_panics_total`).Inc()
			if target != "" {
				s.opts.Metrics.GetOrCreateGauge(fmt.Sprintf(`ballast_scrape_target_up{target=%q}`, target), nil).Set(0)
			}
			s.opts.Logger.Error("storing a scrape panicked; the target is marked down", "target", target, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		}
	}()
	ps, _ := s.batches.Get().(*pushState)
	if ps == nil {
		ps = new(pushState)
	}
	defer s.batches.Put(ps)
	b := &ps.batch
	b.Reset()
	// The series lib/promscrape generates (up, scrape_*) keep the target's
	// labels only, so that up{instance} stays one series whatever the
	// agent says; the agent's own series get its node and role.
	ps.auto, ps.rest = ps.auto[:0], ps.rest[:0]
	for _, ts := range wr.Timeseries {
		if isAutoMetric(seriesName(ts.Labels)) {
			ps.auto = append(ps.auto, ts)
		} else {
			ps.rest = append(ps.rest, ts)
		}
	}
	var rejected int
	var firstErr error
	onReject := func(err error, n int) {
		s.opts.Metrics.GetOrCreateCounter(fmt.Sprintf(`ballast_scrape_rejected_rows_total{reason=%q}`, ingest.Reason(err))).Add(n)
		rejected += n
		if firstErr == nil {
			firstErr = err
		}
	}
	lim := s.opts.Writer.Limits(time.Now())
	b.AddTimeSeries(ps.auto, &lim, onReject)
	lim.DefaultLabels = s.nodeLabels(ps.rest)
	b.AddTimeSeries(ps.rest, &lim, onReject)
	clear(ps.auto)
	clear(ps.rest)
	s.trackTargets(wr)
	if rejected > 0 && len(wr.Timeseries) > 0 {
		inst := label(wr.Timeseries[0].Labels, "instance")
		if ok, held := s.logs.Allow("rejected/"+inst, time.Now()); ok {
			s.opts.Logger.Warn("scraped samples rejected", "target", inst, "rejected", rejected, "err", firstErr, "scrapes_not_logged", held)
		}
	}
	if n := b.NaNs(); n > 0 {
		s.opts.Metrics.GetOrCreateCounter(`ballast_scrape_nan_samples_total`).Add(n)
	}
	if err := s.opts.Writer.WriteBatch(b); err != nil {
		s.opts.Metrics.GetOrCreateCounter(`ballast_scrape_write_errors_total`).Inc()
		if ok, held := s.logs.Allow("write", time.Now()); ok {
			s.opts.Logger.Warn("cannot store scraped samples", "err", err, "failures_not_logged", held)
		}
		return
	}
	if failing, _ := s.logs.Forget("write"); failing {
		s.opts.Logger.Info("storing scraped samples again")
	}
	s.opts.Metrics.GetOrCreateCounter(`ballast_scrape_rows_total`).Add(b.Len())
}

// nodeInfo is what an agent says about itself in ballast_build_info.
type nodeInfo struct{ node, role string }

// buildInfo is the series in which agents name their node and role.
const buildInfo = "ballast_build_info"

// nodeLabels returns the node and role labels for the series of one
// target's scrape: those of its latest ballast_build_info (remembered, so
// that staleness markers sent after it went down name the same series),
// else the host of its instance as node. Labels the target itself carries
// (file_sd labels) win, as ingest.Limits.DefaultLabels only fills gaps.
func (s *Scraper) nodeLabels(tss []prompb.TimeSeries) []models.Label {
	if len(tss) == 0 {
		return nil
	}
	instance := label(tss[0].Labels, "instance")
	s.tmu.Lock()
	defer s.tmu.Unlock()
	for _, ts := range tss {
		if seriesName(ts.Labels) == buildInfo {
			if n := label(ts.Labels, "node"); n != "" {
				s.nodes[instance] = nodeInfo{node: n, role: label(ts.Labels, "role")}
			}
			break
		}
	}
	info, ok := s.nodes[instance]
	if !ok {
		info.node = instance
		if h, _, err := net.SplitHostPort(instance); err == nil {
			info.node = h
		}
	}
	ls := []models.Label{{Name: "node", Value: info.node}}
	if info.role != "" {
		ls = append(ls, models.Label{Name: "role", Value: info.role})
	}
	return ls
}

func label(ls []prompb.Label, name string) string {
	for _, l := range ls {
		if l.Name == name {
			return l.Value
		}
	}
	return ""
}

func seriesName(ls []prompb.Label) string { return label(ls, "__name__") }

// isAutoMetric reports whether name is one of the series lib/promscrape
// generates per scrape (its own list is unexported).
func isAutoMetric(name string) bool {
	switch name {
	case "up", "scrape_duration_seconds", "scrape_response_size_bytes", "scrape_samples_limit",
		"scrape_samples_post_metric_relabeling", "scrape_samples_scraped", "scrape_series_added",
		"scrape_series_current", "scrape_series_limit_samples_dropped", "scrape_series_limit",
		"scrape_labels_limit", "scrape_timeout_seconds":
		return true
	}
	return false
}

// trackTargets mirrors the per-target up and scrape_duration_seconds series
// that lib/promscrape generates into ballast's own /metrics, and counts
// each target's failed scrapes for report.
func (s *Scraper) trackTargets(wr *prompb.WriteRequest) {
	for i := range wr.Timeseries {
		ts := &wr.Timeseries[i]
		name, instance := seriesName(ts.Labels), label(ts.Labels, "instance")
		if len(ts.Samples) == 0 || instance == "" {
			continue
		}
		v := ts.Samples[len(ts.Samples)-1].Value
		switch name {
		case "up":
			if v != 0 && v != 1 {
				continue // the staleness marker sent when a target is removed
			}
			s.opts.Metrics.GetOrCreateGauge(fmt.Sprintf(`ballast_scrape_target_up{target=%q}`, instance), nil).Set(v)
			s.tmu.Lock()
			st := s.targets[instance]
			if st == nil {
				st = &targetState{}
				s.targets[instance] = st
			}
			if v == 0 {
				st.failures++
			}
			s.tmu.Unlock()
		case "scrape_duration_seconds":
			s.opts.Metrics.GetOrCreateGauge(fmt.Sprintf(`ballast_scrape_duration_seconds{target=%q}`, instance), nil).Set(v)
		}
	}
}

// report logs failing targets every interval until stop is closed.
func (s *Scraper) report(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(s.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			ts, err := activeTargets()
			if err != nil {
				s.opts.Logger.Error("cannot read scrape target status", "err", err)
				continue
			}
			s.logTargets(now, ts)
		}
	}
}

// target is one entry of lib/promscrape's /api/v1/targets.
type target struct {
	Labels    map[string]string `json:"labels"`
	ScrapeURL string            `json:"scrapeUrl"`
	LastError string            `json:"lastError"`
	Health    string            `json:"health"`
}

// activeTargets reads lib/promscrape's target status, the only place that
// holds the reason of a target's last failed scrape.
func activeTargets() ([]target, error) {
	var buf bytes.Buffer
	promscrape.WriteAPIV1Targets(&buf, "active", "")
	var resp struct {
		Data struct {
			ActiveTargets []target `json:"activeTargets"`
		} `json:"data"`
	}
	if err := json.Unmarshal(buf.Bytes(), &resp); err != nil {
		return nil, fmt.Errorf("cannot decode lib/promscrape target status: %w", err)
	}
	return resp.Data.ActiveTargets, nil
}

// logTargets logs a target's first failure at once, then at most once per
// ErrorLogEvery while it keeps failing, and its recovery once.
func (s *Scraper) logTargets(now time.Time, ts []target) {
	s.tmu.Lock()
	defer s.tmu.Unlock()
	for _, t := range ts {
		inst := t.Labels["instance"]
		st := s.targets[inst]
		if st == nil {
			st = &targetState{}
			s.targets[inst] = st
		}
		switch {
		case t.Health == "down" && t.LastError != "":
			// A target not scraped yet is also "down", without an error.
			if !st.down {
				st.down, st.since = true, now
			}
			if ok, _ := s.logs.Allow(inst, now); ok {
				s.opts.Logger.Warn("cannot scrape target", "target", inst, "url", t.ScrapeURL, "err", errors.New(t.LastError),
					"failed_scrapes", st.failures, "down_for", now.Sub(st.since).Round(time.Second))
				st.failures = 0
			}
		case t.Health == "up":
			if st.down {
				s.logs.Forget(inst)
				s.opts.Logger.Info("scrape target is up again", "target", inst, "down_for", now.Sub(st.since).Round(time.Second))
				st.down = false
			}
			st.failures = 0
		}
	}
}

// targetOf returns the instance label of the first series of wr.
func targetOf(wr *prompb.WriteRequest) string {
	for _, ts := range wr.Timeseries {
		for _, l := range ts.Labels {
			if l.Name == "instance" {
				return l.Value
			}
		}
	}
	return ""
}
