package collector

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ballast-io/ballast/internal/ratelog"
	"github.com/ballast-io/ballast/models"
)

// Handler serves the enabled collectors on /metrics. Build it with
// NewHandler; it starts nothing until the first scrape.
type Handler struct {
	opts  Options
	runs  []*run
	descs map[string]family
	http  http.Handler
}

// run is one enabled collector with its cached last result.
type run struct {
	name  string
	c     Collector
	log   *onceLogger
	fails *ratelog.Limiter // shared by the handler's runs, keyed by name

	mu      sync.Mutex // held while collecting or reading the cache
	at      time.Time  // when the cached result was taken
	samples []Sample
	err     error
	dur     time.Duration
	busy    chan struct{} // non-nil while a timed-out run is still going
}

// NewHandler builds the collectors named in enabled (see Names) with opts
// and returns the /metrics handler. An unknown name or a collector that
// cannot be built is an error; a collector that does not apply to the host
// is not (it reports ErrNotApplicable when scraped).
func NewHandler(opts Options, enabled []string) (*Handler, error) {
	opts = opts.withDefaults()
	for _, n := range enabled {
		if n == "nvme" {
			opts.nvmeEnabled = true
		}
	}
	h := &Handler{opts: opts, descs: descriptors()}
	fails := ratelog.New(failureLogEvery)
	seen := map[string]bool{}
	for _, name := range enabled {
		if seen[name] {
			continue
		}
		seen[name] = true
		r, err := lookup(name)
		if err != nil {
			return nil, err
		}
		log := newOnceLogger(opts.Logger.With("collector", name))
		c, err := r.new(opts, log)
		if err != nil {
			h.Close()
			return nil, fmt.Errorf("cannot build collector %q: %w", name, err)
		}
		h.runs = append(h.runs, &run{name: name, c: c, log: log, fails: fails})
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(h); err != nil {
		return nil, fmt.Errorf("cannot register collectors: %w", err)
	}
	h.http = promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	return h, nil
}

// ServeHTTP serves the exposition of all enabled collectors; promhttp
// negotiates the format and gzip from the request headers.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.http.ServeHTTP(w, r) }

// Close releases what the collectors hold (device handles, libdcgm). It
// is safe to call more than once.
func (h *Handler) Close() error {
	var errs []error
	for _, r := range h.runs {
		if c, ok := r.c.(io.Closer); ok {
			if err := c.Close(); err != nil {
				errs = append(errs, fmt.Errorf("cannot close collector %q: %w", r.name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Describe sends nothing: the set of series depends on the host, so the
// handler is an unchecked collector for the Prometheus registry.
func (h *Handler) Describe(chan<- *prometheus.Desc) {}

// Collect runs every enabled collector concurrently (or reuses its cached
// result) and sends their samples, then the self-metrics. A series that two
// collectors both produce (nvme and smartctl reading the same drive) is
// sent once, from the collector listed first.
func (h *Handler) Collect(ch chan<- prometheus.Metric) {
	results := make([]result, len(h.runs))
	var wg sync.WaitGroup
	for i, r := range h.runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = r.collect(h.opts)
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for i, r := range h.runs {
		res := results[i]
		for _, s := range res.samples {
			if h.descs[s.Name].shared {
				key := s.Name + "\xff" + strings.Join(s.Values, "\xff")
				if seen[key] {
					continue
				}
				seen[key] = true
			}
			if m, err := h.metric(s); err != nil {
				r.log.Error("dropped a malformed sample", "err", err)
			} else {
				ch <- m
			}
		}
		ok := 1.0
		if res.err != nil {
			ok = 0
		}
		ch <- prometheus.MustNewConstMetric(h.descs[models.MetricCollectorSuccess].desc, prometheus.GaugeValue, ok, r.name)
		ch <- prometheus.MustNewConstMetric(h.descs[models.MetricCollectorDuration].desc, prometheus.GaugeValue, res.dur.Seconds(), r.name)
	}
}

// result is one collector run's outcome.
type result struct {
	samples []Sample
	err     error
	dur     time.Duration
}

// collect refreshes r's result unless the cached one is younger than the
// cache TTL, and returns it. The lock makes concurrent scrapes share one
// run.
func (r *run) collect(opts Options) result {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refresh(opts)
	return result{r.samples, r.err, r.dur}
}

func (r *run) refresh(opts Options) {
	now := opts.Now()
	if opts.CacheTTL > 0 && !r.at.IsZero() && now.Sub(r.at) < opts.CacheTTL {
		return
	}
	if r.busy != nil {
		select {
		case <-r.busy:
			r.busy = nil
		default:
			// A previous run overran its timeout and is still blocked (a
			// hung ioctl or command); do not pile another one on top.
			r.at, r.samples, r.dur = now, nil, 0
			r.err = fmt.Errorf("cannot run collector %q: its previous run is still in progress", r.name)
			r.logOutcome(now)
			return
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.Timeout)
	defer cancel()
	done := make(chan result, 1)
	finished := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(finished)
		// A collector fails alone, a panic included: the agent answers
		// with the others and reports this one failed.
		defer func() {
			if v := recover(); v != nil {
				done <- result{err: fmt.Errorf("cannot run collector %q: it panicked: %v", r.name, v)}
			}
		}()
		s, err := r.c.Collect(ctx)
		done <- result{samples: s, err: err}
	}()
	select {
	case res := <-done:
		r.samples, r.err = res.samples, res.err
	case <-ctx.Done():
		r.samples, r.err = nil, fmt.Errorf("cannot run collector %q: timed out after %v", r.name, opts.Timeout)
		r.busy = finished
	}
	r.dur = time.Since(start)
	r.at = now
	r.logOutcome(now)
}

// failureLogEvery bounds how often one failing collector is logged.
const failureLogEvery = 5 * time.Minute

// logOutcome logs a failure at warn the first time, then at most once per
// failureLogEvery while it lasts (with the number of failed runs not
// logged), and the recovery once; "not applicable on this host" at debug.
func (r *run) logOutcome(now time.Time) {
	switch {
	case r.err == nil:
		if failing, held := r.fails.Forget(r.name); failing {
			r.log.Info("collector recovered", "failures_not_logged", held)
		}
	case errors.Is(r.err, ErrNotApplicable):
		r.log.Debug("collector not applicable", "err", r.err)
	default:
		if ok, held := r.fails.Allow(r.name, now); ok {
			r.log.Warn("collector failed", "err", r.err, "failures_not_logged", held)
		}
	}
}

// family is the Prometheus descriptor and value type of one family;
// shared marks families that several collectors emit (nvme and smartctl),
// the only ones that need de-duplication.
type family struct {
	desc   *prometheus.Desc
	typ    prometheus.ValueType
	shared bool
}

// descriptors builds a Prometheus descriptor for every family of
// models.Metrics.
func descriptors() map[string]family {
	m := make(map[string]family, len(models.Metrics))
	for _, d := range models.Metrics {
		f := family{prometheus.NewDesc(d.Name, d.Help, d.Labels, nil), prometheus.GaugeValue, strings.Contains(d.Collector, ",")}
		if d.Type == models.MetricCounter {
			f.typ = prometheus.CounterValue
		}
		m[d.Name] = f
	}
	return m
}

func (h *Handler) metric(s Sample) (prometheus.Metric, error) {
	return constMetric(h.descs, s)
}

func constMetric(descs map[string]family, s Sample) (prometheus.Metric, error) {
	f, ok := descs[s.Name]
	if !ok {
		return nil, fmt.Errorf("cannot expose sample %q: no descriptor in models.Metrics", s.Name)
	}
	return prometheus.NewConstMetric(f.desc, f.typ, s.Value, s.Values...)
}
