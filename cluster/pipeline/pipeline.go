// Package pipeline is the runtime of the mds: sources run on their
// intervals, what they produce is written, then every analysis stage and
// every actuator runs, on a clock that may be real or simulated. It also
// holds the stripe hub (LAYOUTSTATS deltas to the stripe analyzers) and the
// findings recorder.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/ballast-io/ballast/models"
)

// Source produces samples: a collector run locally, a twin node rendered
// and parsed, a pull from somewhere. Collect must honour ctx.
type Source interface {
	Name() string
	Collect(ctx context.Context, now time.Time) ([]models.Sample, error)
}

// SourceFunc adapts a function to Source.
func SourceFunc(name string, f func(ctx context.Context, now time.Time) ([]models.Sample, error)) Source {
	return sourceFunc{name, f}
}

type sourceFunc struct {
	name string
	f    func(ctx context.Context, now time.Time) ([]models.Sample, error)
}

func (s sourceFunc) Name() string { return s.name }
func (s sourceFunc) Collect(ctx context.Context, now time.Time) ([]models.Sample, error) {
	return s.f(ctx, now)
}

// Appender is where the pipeline writes samples (storage.Appender).
type Appender interface {
	Append(ctx context.Context, samples []models.Sample) error
}

// Stage runs one analyzer on a tick: it reads what the analyzer needs (from
// storage or its own state), calls the pure analyzer with now, and returns
// the findings of this tick.
type Stage interface {
	Name() string
	Run(ctx context.Context, now time.Time) ([]models.Finding, error)
}

// Actuator receives the findings of every tick. Actuators are level-based:
// they reconcile toward what the findings ask for, so being handed the same
// finding twice is harmless.
type Actuator interface {
	Name() string
	Reconcile(ctx context.Context, now time.Time, findings []models.Finding) error
}

// SourceSpec schedules one source.
type SourceSpec struct {
	Source   Source
	Interval time.Duration
	// Timeout bounds one run on the wall clock; default min(Interval, 30s).
	// Negative: no timeout, for sources on a simulated clock (the twin's
	// agents), whose output must not depend on how loaded the host is.
	Timeout time.Duration
}

// PipelineOptions configure a Pipeline.
type PipelineOptions struct {
	Sources   []SourceSpec
	Appender  Appender
	Stages    []Stage
	Actuators []Actuator
	// Tick is the cadence of Run on the real clock. Default 15 s.
	Tick time.Duration
	// Jitter spreads source runs by up to this share of their interval
	// (default 0.1; negative for none) so that many agents do not fire in
	// lockstep. Drawn from Seed, so simulated runs stay deterministic.
	Jitter float64
	Seed   uint64
	// Tracer wraps every stage in a span; default no-op.
	Tracer trace.Tracer
	// Metrics receives ballast_pipeline_* metrics; default a private set.
	Metrics *metrics.Set
	Logger  *slog.Logger
	// Settle, when set, runs after the sources and before the stages of a
	// tick. A simulated clock sets it to the store's Flush: simulated time
	// cannot wait for the store's wall-clock visibility delay.
	Settle func()
}

// Pipeline runs sources on their intervals, writes what they produce, then
// runs every stage and hands the findings to every actuator. Tick does one
// round at a given instant, so a simulated clock drives it by calling Tick;
// Start drives it from the real clock.
type Pipeline struct {
	opts PipelineOptions
	rng  *rand.Rand
	next []time.Time // next due time per source

	tickMu sync.Mutex // one tick at a time

	lifeMu  sync.Mutex
	cancel  context.CancelFunc
	done    chan struct{}
	started bool

	tickDur *metrics.Summary
}

// Names returns the names of the sources, the stages and the actuators, each
// in the order they run.
func (p *Pipeline) Names() (sources, stages, actuators []string) {
	for _, s := range p.opts.Sources {
		sources = append(sources, s.Source.Name())
	}
	for _, s := range p.opts.Stages {
		stages = append(stages, s.Name())
	}
	for _, a := range p.opts.Actuators {
		actuators = append(actuators, a.Name())
	}
	return sources, stages, actuators
}

// NewPipeline checks opts and returns a pipeline; it starts nothing.
func NewPipeline(opts PipelineOptions) (*Pipeline, error) {
	if opts.Appender == nil && len(opts.Sources) > 0 {
		return nil, errors.New("pipeline has sources but no appender")
	}
	for i, s := range opts.Sources {
		if s.Source == nil || s.Interval <= 0 {
			return nil, fmt.Errorf("pipeline source %d: needs a source and a positive interval", i)
		}
		if s.Timeout == 0 {
			opts.Sources[i].Timeout = min(s.Interval, 30*time.Second)
		}
	}
	if opts.Tick <= 0 {
		opts.Tick = 15 * time.Second
	}
	switch {
	case opts.Jitter == 0:
		opts.Jitter = 0.1
	case opts.Jitter < 0:
		opts.Jitter = 0
	}
	if opts.Tracer == nil {
		opts.Tracer = noop.NewTracerProvider().Tracer("ballast")
	}
	if opts.Metrics == nil {
		opts.Metrics = metrics.NewSet()
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Pipeline{
		opts:    opts,
		rng:     rand.New(rand.NewPCG(opts.Seed, 0x62616c6c617374)),
		next:    make([]time.Time, len(opts.Sources)),
		tickDur: opts.Metrics.GetOrCreateSummary(`ballast_pipeline_tick_duration_seconds`),
	}, nil
}

// TickResult reports what one tick did.
type TickResult struct {
	Samples  int
	Findings []models.Finding
	Errors   []error
}

// Tick runs one round at now: due sources (in parallel, each under its
// timeout), then every stage, then every actuator. A failing source, stage
// or actuator is logged and counted; the others still run.
func (p *Pipeline) Tick(ctx context.Context, now time.Time) TickResult {
	p.tickMu.Lock()
	defer p.tickMu.Unlock()
	start := time.Now()
	defer p.tickDur.UpdateDuration(start)
	ctx, span := p.opts.Tracer.Start(ctx, "pipeline.tick", trace.WithAttributes(attribute.String("now", now.UTC().Format(time.RFC3339))))
	defer span.End()

	var res TickResult
	res.Samples, res.Errors = p.collect(ctx, now)
	if p.opts.Settle != nil {
		p.opts.Settle()
	}
	for _, st := range p.opts.Stages {
		sctx, sp := p.opts.Tracer.Start(ctx, "analyze."+st.Name())
		fs, err := st.Run(sctx, now)
		p.count("stage", st.Name(), err)
		if err != nil {
			sp.RecordError(err)
			sp.SetStatus(codes.Error, err.Error())
			res.Errors = append(res.Errors, fmt.Errorf("stage %s: %w", st.Name(), err))
		}
		sp.SetAttributes(attribute.Int("findings", len(fs)))
		sp.End()
		res.Findings = append(res.Findings, fs...)
	}
	for _, a := range p.opts.Actuators {
		actx, sp := p.opts.Tracer.Start(ctx, "act."+a.Name())
		err := a.Reconcile(actx, now, res.Findings)
		p.count("actuator", a.Name(), err)
		if err != nil {
			sp.RecordError(err)
			sp.SetStatus(codes.Error, err.Error())
			res.Errors = append(res.Errors, fmt.Errorf("actuator %s: %w", a.Name(), err))
		}
		sp.End()
	}
	for _, err := range res.Errors {
		p.opts.Logger.Warn("pipeline step failed", "err", err)
	}
	span.SetAttributes(attribute.Int("samples", res.Samples), attribute.Int("findings", len(res.Findings)))
	return res
}

func (p *Pipeline) count(kind, name string, err error) {
	ok := "true"
	if err != nil {
		ok = "false"
	}
	p.opts.Metrics.GetOrCreateCounter(fmt.Sprintf(`ballast_pipeline_runs_total{kind=%q,name=%q,success=%q}`, kind, name, ok)).Inc()
}

// collect runs the sources due at now concurrently, each appending its
// own output as soon as it has it (sources write disjoint series, so the
// stored result does not depend on their order), and reports errors in
// source order.
func (p *Pipeline) collect(ctx context.Context, now time.Time) (int, []error) {
	type out struct {
		ran bool
		n   int
		err error
	}
	results := make([]out, len(p.opts.Sources))
	var wg sync.WaitGroup
	for i, spec := range p.opts.Sources {
		if now.Before(p.next[i]) {
			continue
		}
		jitter := time.Duration(p.rng.Float64() * p.opts.Jitter * float64(spec.Interval))
		if p.next[i].IsZero() {
			p.next[i] = now.Add(jitter)
			if jitter > 0 {
				continue // first run after the initial spread
			}
		}
		p.next[i] = now.Add(spec.Interval).Add(jitter - time.Duration(p.opts.Jitter*float64(spec.Interval))/2)
		wg.Go(func() {
			cctx, cancel := context.WithCancel(ctx)
			if spec.Timeout > 0 {
				cctx, cancel = context.WithTimeout(ctx, spec.Timeout)
			}
			defer cancel()
			cctx, sp := p.opts.Tracer.Start(cctx, "collect."+spec.Source.Name())
			defer sp.End()
			s, err := spec.Source.Collect(cctx, now)
			if err == nil && cctx.Err() != nil {
				err = fmt.Errorf("timed out after %s", spec.Timeout)
			}
			r := out{ran: s != nil || err != nil, err: err}
			if err == nil && len(s) > 0 && p.opts.Appender != nil {
				if r.err = p.opts.Appender.Append(ctx, s); r.err == nil {
					r.n = len(s)
				}
			}
			if r.err != nil {
				sp.RecordError(r.err)
				sp.SetStatus(codes.Error, r.err.Error())
			}
			results[i] = r
		})
	}
	wg.Wait()
	var errs []error
	n := 0
	for i, r := range results {
		n += r.n
		if r.ran {
			p.count("source", p.opts.Sources[i].Source.Name(), r.err)
		}
		if r.err != nil {
			errs = append(errs, fmt.Errorf("source %s: %w", p.opts.Sources[i].Source.Name(), r.err))
		}
	}
	return n, errs
}

// Start runs Tick on the real clock every opts.Tick until Stop. It is
// idempotent.
func (p *Pipeline) Start() {
	p.lifeMu.Lock()
	defer p.lifeMu.Unlock()
	if p.started {
		return
	}
	p.started = true
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.done = make(chan struct{})
	go func() {
		defer close(p.done)
		t := time.NewTicker(p.opts.Tick)
		defer t.Stop()
		p.Tick(ctx, time.Now())
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				p.Tick(ctx, now)
			}
		}
	}()
}

// Stop cancels the running tick and waits for it, at most until ctx ends.
// It is idempotent.
func (p *Pipeline) Stop(ctx context.Context) error {
	p.lifeMu.Lock()
	defer p.lifeMu.Unlock()
	if !p.started || p.cancel == nil {
		return nil
	}
	p.cancel()
	p.cancel = nil
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("cannot stop pipeline: tick still running: %w", ctx.Err())
	}
}
