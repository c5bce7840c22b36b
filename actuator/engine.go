// Package actuator is every side effect ballast has on the cluster: the
// remediation engine (load-aware rebalancing, evacuation of at-risk drives,
// spare promotion) and the mover contract that drivers implement.
//
// The engine is a pipeline actuator made of level-based reconcilers. Each
// tick it folds the tick's findings and the LAYOUTSTATS stripe heat into
// its view, plans (findings are inputs to planning, never commands), and
// reconciles every open action by key: it re-reads what the mover reports
// (the file's layout and generation), compares it with what the action
// wants, takes the smallest idempotent step, journals it, and requeues with
// backoff. Modes (off, dry-run, approve, auto), budgets and guards decide
// whether a step may be taken; every refusal names the guard. The journal
// (bbolt, beside the findings) makes a crash resume or abort each move,
// never repeat a finished step and never lose one.
//
// The engine is generic over action kinds: plans are actions whose
// children do the work (stripe moves here; read-ahead changes later), and
// modes, budgets, the journal, verification and the reconcile loop do not
// care which.
package actuator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/ballast-io/ballast/actuator/plan"
	"github.com/ballast-io/ballast/models"
)

// Journal is where actions are kept durably (storage.Journal): one call
// is one transaction.
type Journal interface {
	PutActions(as []models.Action) error
}

// Appender receives the ballast_action_* series (storage.Appender).
type Appender interface {
	Append(ctx context.Context, samples []models.Sample) error
}

// MeasureFunc evaluates a query that yields one number at an instant (the
// store's query engine); ok is false when the query returned nothing.
type MeasureFunc func(ctx context.Context, expr string, at time.Time) (v float64, ok bool, err error)

// Rebalancer plans stripe moves for hot pools. ballast's own is
// plan.Rebalance; eval swaps in the baselines it is scored against.
type Rebalancer interface {
	Name() string
	// AllStripes asks for every device's stripes in the snapshot, not only
	// the hot devices'.
	AllStripes() bool
	Rebalance(in *plan.Input, opts plan.Options) plan.Result
}

type loadAware struct{}

func (loadAware) Name() string     { return "ballast" }
func (loadAware) AllStripes() bool { return false }
func (loadAware) Rebalance(in *plan.Input, opts plan.Options) plan.Result {
	return plan.Rebalance(in, opts)
}

// staleFinding is how long a finding stays active without being reported
// again: longer than any stage's cadence (drive health runs every minute).
const staleFinding = 15 * time.Minute

// Gate is the leadership check of an HA pair (cluster/ha.Gate).
type Gate interface {
	Leading() (epoch uint64, ok bool)
}

// confirmer is a Gate that can confirm leadership with the coordinator
// itself (cluster/ha.Confirmer).
type confirmer interface {
	Confirm(ctx context.Context, epoch uint64) error
}

type solo struct{}

func (solo) Leading() (uint64, bool) { return 0, true }

// Options configure an Engine.
type Options struct {
	Config Config
	// Mover carries moves out and lists the devices and placements the
	// planner plans from; nil means none (no device list, so no data move
	// is planned, and every kind but read-ahead runs in dry-run).
	Mover   Mover
	Journal Journal
	// Load returns the journaled actions at Start.
	Load func() ([]models.Action, error)
	// Measure reads the numbers verification compares; nil leaves effects
	// unknown.
	Measure MeasureFunc
	// RateHold is how long a stripe component's last LAYOUTSTATS rate
	// keeps counting in the device series Measure reads after the
	// component stops reporting (the ingest's layoutstats.Ingester
	// RateHold). A committed move or restripe retires components, so the
	// window after a plan starts no earlier than this past its last
	// commit; zero starts it when the moves end.
	RateHold time.Duration
	// SampleInterval is how often the series Measure reads get a sample
	// (the longer of the scrape interval and the LAYOUTSTATS emit
	// interval); zero means 15 s, both defaults. A plan's before-window is
	// at least minBeforeSamples of them.
	SampleInterval time.Duration
	Appender       Appender
	// Inline runs every step inside Reconcile, in a fixed order: a
	// simulated clock needs it (no step may race the clock). Otherwise
	// steps run on workers, one per key at a time.
	Inline bool
	// Gate says whether this mds leads (an HA pair: only the leader plans
	// or takes a step) and its epoch, the fencing token every Commit
	// carries; nil always leads at epoch 0. A gate that also has
	// Confirm(ctx, epoch) error is asked right before each commit.
	Gate Gate
	// Clock is the time steps on workers happen at; nil is the wall clock
	// (tests of the worker path give the simulated one).
	Clock func() time.Time
	// Rebalancer replaces the load-aware planner (eval's baselines only).
	Rebalancer Rebalancer
	// StepHook, when set, is called with every move state once it is
	// journaled (on workers; inline ticks journal at their end). Tests
	// only: the crash tests stop the mds at a step boundary through it.
	StepHook func(a models.Action)
	// Namer names a device id as operators do, when it knows better than
	// the mover (the mds's device table); "" falls back to the mover's name.
	Namer func(deviceID string) string
	// Writing, when set, returns the client groups the checkpoint stage
	// sees writing a checkpoint at this tick: in a burst, or with a write
	// rate clearly above their idle level before a burst is confirmed (its
	// first seconds). Each holds a checkpoint window from now to
	// checkpoint_margin past it, so non-urgent copies pause at the tick the
	// write rates show a burst, before its checkpoint_burst finding (a tick
	// later) and before any forecast exists. nil: findings only.
	Writing func() []models.Subject
	Metrics *metrics.Set
	Logger  *slog.Logger
}

// Engine plans and carries out remediation. New starts nothing; Start
// loads the journal; Reconcile is called by the pipeline every tick.
type Engine struct {
	cfg   Config
	opts  Options
	mover Mover
	caps  Capabilities
	reb   Rebalancer
	log   *slog.Logger
	heat  *heatModel
	met   *engineMetrics

	mu       sync.Mutex
	started  bool
	acts     map[string]*models.Action
	kids     map[string][]string  // plan id → move ids, in plan order
	due      map[string]time.Time // next reconcile time per open action
	inflight map[string]bool      // keys a worker is reconciling
	paused   map[string]string    // moves whose data movement is paused for a checkpoint window → why
	// writing is the last tick each group was seen writing a checkpoint
	// (burst finding or write rate), subject → time: its window lasts
	// checkpoint_margin past it
	writing  map[string]time.Time
	findings map[string]models.Finding
	ended    map[string]time.Time // subject key → end of its last action
	devs     map[string]Device    // last device table, by id
	width    map[string]int       // widest layout seen per pool (components)
	mirrors  map[string]int       // most mirrors seen per pool
	nextPlan time.Time
	now      time.Time
	// firstBurst is the start of the first checkpoint burst seen of each
	// group, subject → time; forecasted the groups a checkpoint_forecast
	// has named since: until then (or checkpoint_unforecast_hold) the
	// group's next burst may start at any time
	firstBurst map[string]time.Time
	forecasted map[string]bool
	// tickGap is the time between the last two ticks: how far ahead a
	// checkpoint window counts as open for pausing (the next look comes
	// no sooner).
	tickGap time.Duration
	// tookOver is the epoch TakeOver last succeeded for (+1; 0 = never).
	tookOver uint64
	// raReports holds each GPU node agent's last read-ahead report.
	raReports map[string]raReport
	// raBurst is each client node's last checkpoint burst seen;
	// raBlamed the last storage subject blamed for starvation.
	raBurst  map[string]time.Time
	raBlamed struct {
		at      time.Time
		subject string
	}

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// pending holds the states journaled at the end of an inline tick.
	pending []models.Action
}

// New returns an engine for opts; it starts nothing.
func New(opts Options) (*Engine, error) {
	if err := opts.Config.Validate("actuators."); err != nil {
		return nil, err
	}
	if opts.Journal == nil {
		return nil, errors.New("actuator engine needs a journal")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Metrics == nil {
		opts.Metrics = metrics.NewSet()
	}
	e := &Engine{cfg: opts.Config, opts: opts, mover: opts.Mover, log: opts.Logger, reb: opts.Rebalancer,
		heat: newHeatModel(time.Duration(opts.Config.Rebalance.HeatHalfLife)), met: newEngineMetrics(opts.Metrics)}
	if e.mover == nil {
		e.mover = noMover{}
	}
	if e.reb == nil {
		e.reb = loadAware{}
	}
	if e.opts.Gate == nil {
		e.opts.Gate = solo{}
	}
	e.caps = e.mover.Capabilities()
	return e, nil
}

// Name implements pipeline.Actuator.
func (e *Engine) Name() string { return "actions" }

// Capabilities returns the driver's capabilities.
func (e *Engine) Capabilities() Capabilities { return e.caps }

// ObserveStripes takes the LAYOUTSTATS stripe deltas (subscribe it to the
// mds's StripeHub).
func (e *Engine) ObserveStripes(ds []models.StripeDelta) { e.heat.observe(ds) }

// Start loads the journal: open actions resume where their journal says.
// Idempotent.
func (e *Engine) Start(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.started {
		return nil
	}
	e.acts, e.kids, e.due = map[string]*models.Action{}, map[string][]string{}, map[string]time.Time{}
	e.inflight, e.findings, e.ended = map[string]bool{}, map[string]models.Finding{}, map[string]time.Time{}
	e.devs, e.width, e.mirrors = map[string]Device{}, map[string]int{}, map[string]int{}
	e.raReports = map[string]raReport{}
	e.raBurst = map[string]time.Time{}
	e.paused = map[string]string{}
	e.writing = map[string]time.Time{}
	e.firstBurst, e.forecasted = map[string]time.Time{}, map[string]bool{}
	if e.opts.Load != nil {
		as, err := e.opts.Load()
		if err != nil {
			return fmt.Errorf("cannot load the actions journal: %w", err)
		}
		for i := range as {
			e.index(&as[i])
		}
		for _, a := range e.acts {
			if a.State.Terminal() {
				if a.Parent == "" {
					e.noteEnded(a)
				}
			} else {
				e.due[a.ID] = time.Time{}
			}
		}
	}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	e.started = true
	return nil
}

// Stop is a graceful stop: it cancels running steps, waits for the
// workers and then aborts every move whose data movement began but whose
// commit did not happen (abortUnderWay), all at most until ctx ends. No
// plan is made and no step started once it began. A step it could not
// end (or a crash, which runs nothing of this) is resumed or aborted at
// the next start from the journal. Idempotent.
func (e *Engine) Stop(ctx context.Context) error {
	e.mu.Lock()
	if !e.started {
		e.mu.Unlock()
		return nil
	}
	e.started = false
	e.cancel()
	e.mu.Unlock()
	done := make(chan struct{})
	go func() { e.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("cannot stop the actions engine: steps still running: %w", ctx.Err())
	}
	return e.abortUnderWay(ctx)
}

// abortUnderWay ends, at a graceful stop, every open move past pending
// and short of its commit (copying, copied, verified): the mover's Abort
// removes the new copy and its part files (and the files driver's
// in-flight record), and the move is journaled cancelled in phase
// aborted, its plan cancelled when none of its moves is left or
// succeeded. A stopped mds thus leaves no copy that no layout references
// (the old copy of a committed move waits out move.grace after the next
// start: clients may still read it). A move whose layout already points
// at its destination (committed, the journal not yet told) or that the
// mover cannot abort (its pending commit turns out applied, the HA fence
// refuses a deposed leader, ctx ends) stays as journaled, for the next
// start or the new leader. Skipped inline (a simulated clock: the twin lives in the
// process, nothing outlives it) and on a follower (the leader owns the
// moves).
func (e *Engine) abortUnderWay(ctx context.Context) error {
	if e.opts.Inline {
		return nil
	}
	if _, lead := e.opts.Gate.Leading(); !lead {
		return nil
	}
	var ids []string
	e.mu.Lock()
	for id, a := range e.acts {
		if a.Move == nil || a.State.Terminal() {
			continue
		}
		switch a.Move.Phase {
		case models.PhaseCopying, models.PhaseCopied, models.PhaseVerified:
			ids = append(ids, id)
		}
	}
	e.mu.Unlock()
	sort.Strings(ids)
	var errs []error
	plans := map[string]bool{}
	for _, id := range ids {
		a, ok := e.get(id)
		if !ok || a.State.Terminal() || a.Move == nil {
			continue
		}
		ph := a.Move.Phase
		if lay, err := e.mover.Locate(ctx, a.Move.File); err == nil {
			if done, _, _ := moveState(&lay, a.Move); done {
				// committed (the journal had not learnt it): the next
				// start sees it and cleans up after the grace
				continue
			}
		}
		if err := e.abortStep(ctx, *a.Move); err != nil && !errors.Is(err, ErrNotFound) {
			e.log.Warn("cannot abort a move at stop; the next start resumes or aborts it", "action", id, "phase", string(ph), "err", err)
			continue
		}
		now := e.clock(time.Time{})
		why := fmt.Sprintf("aborted by the mds's stop during its %s phase (its new copy removed); replanned after the next start if still needed", ph)
		if err := e.endMove(&a, now, models.ActionCancelled, models.PhaseAborted, why, true); err != nil {
			errs = append(errs, fmt.Errorf("move %s, aborted at stop: %w", id, err))
			continue
		}
		e.log.Info("move aborted at stop", "action", id, "phase", string(ph))
		plans[a.Parent] = true
	}
	pids := make([]string, 0, len(plans))
	for id := range plans {
		pids = append(pids, id)
	}
	sort.Strings(pids)
	for _, id := range pids {
		p, ok := e.get(id)
		if !ok || p.State != models.ActionRunning {
			continue
		}
		kids := e.kidsOf(id)
		left := false
		for i := range kids {
			left = left || !kids[i].State.Terminal()
		}
		if pr := progressOf(kids); left || pr.MovesDone > 0 {
			continue // its moves go on, or it is verified, after the next start
		}
		if err := e.endPlan(&p, e.clock(time.Time{}), models.ActionCancelled, "the mds stopped before any of its moves committed (their copies aborted); replanned after the next start if still needed"); err != nil {
			errs = append(errs, fmt.Errorf("plan %s, ended at stop: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// index adds a (a copy) to the table.
func (e *Engine) index(a *models.Action) {
	c := *a
	if _, ok := e.acts[c.ID]; !ok && c.Parent != "" {
		e.kids[c.Parent] = append(e.kids[c.Parent], c.ID)
	}
	e.acts[c.ID] = &c
}

// subjectKey is what cooldowns and "one open plan per subject" are keyed
// by: the plan kind family and the subject.
func subjectKey(a *models.Action) string {
	fam := string(a.Kind)
	if a.Kind == models.ActionPromoteSpare {
		fam = string(models.ActionEvacuateDevice)
	}
	if a.Kind == models.ActionSetReadAhead {
		return raKey(a.Subject.ID, a.Params[ParamMountPoint])
	}
	return fam + "|" + a.Subject.String()
}

func (e *Engine) noteEnded(a *models.Action) {
	t := a.Finished
	if t.IsZero() {
		t = a.Updated
	}
	if k := subjectKey(a); t.After(e.ended[k]) {
		e.ended[k] = t
	}
}

// save journals as and, once they are durable, puts them in the table.
// Nothing is carried out for an action whose state could not be journaled.
//
// Inline (a simulated clock, the twin driver) the states of one tick are
// journaled together when the tick ends: the twin lives in the same
// process, so no side effect outlives a crash that loses them, and a
// simulated clock ticks faster than a disk syncs. On workers every save is
// one durable transaction before the step's side effect.
func (e *Engine) save(as ...*models.Action) error {
	vs := make([]models.Action, len(as))
	for i, a := range as {
		vs[i] = *a
	}
	if e.opts.Inline {
		e.mu.Lock()
		e.pending = append(e.pending, vs...)
		for i := range vs {
			e.index(&vs[i])
		}
		e.mu.Unlock()
		return nil
	}
	if err := e.opts.Journal.PutActions(vs); err != nil {
		return fmt.Errorf("cannot journal actions: %w", err)
	}
	e.mu.Lock()
	for i := range vs {
		e.index(&vs[i])
	}
	e.mu.Unlock()
	if e.opts.StepHook != nil {
		for i := range vs {
			if vs[i].Move != nil {
				e.opts.StepHook(vs[i])
			}
		}
	}
	return nil
}

// flush journals what an inline tick saved, the latest state of each
// action once.
func (e *Engine) flush() error {
	e.mu.Lock()
	p := e.pending
	e.pending = nil
	e.mu.Unlock()
	if len(p) == 0 {
		return nil
	}
	last := map[string]int{}
	for i := range p {
		last[p[i].ID] = i
	}
	out := make([]models.Action, 0, len(last))
	for i := range p {
		if last[p[i].ID] == i {
			out = append(out, p[i])
		}
	}
	if err := e.opts.Journal.PutActions(out); err != nil {
		return fmt.Errorf("cannot journal actions: %w", err)
	}
	return nil
}

// get returns a copy of the action with id.
func (e *Engine) get(id string) (models.Action, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	a, ok := e.acts[id]
	if !ok {
		return models.Action{}, false
	}
	return *a, true
}

// Reconcile implements pipeline.Actuator: fold in the tick's findings and
// heat, plan when due, then reconcile every open action.
func (e *Engine) Reconcile(ctx context.Context, now time.Time, fs []models.Finding) error {
	e.mu.Lock()
	if !e.started {
		e.mu.Unlock()
		return errors.New("actions engine is not started")
	}
	if !e.now.IsZero() && now.After(e.now) {
		e.tickGap = now.Sub(e.now)
	}
	e.now = now
	for _, f := range fs {
		if f.Kind == findingBurst && f.Subject.Kind == models.SubjectClient {
			// the read-ahead policy leaves a node alone for a window after
			// its checkpoint (its GPUs paused for it, not for data)
			last := f.LastSeen
			if !f.End.IsZero() && f.End.After(last) {
				last = f.End
			}
			if last.After(e.raBurst[f.Subject.ID]) {
				e.raBurst[f.Subject.ID] = last
			}
		}
		if f.Kind == findingStarvation && f.Subject.Kind != models.SubjectClient && f.Subject.Kind != models.SubjectJob {
			// and raises no mount for a window after storage was blamed
			// for starvation (the GPUs catch up once it is fixed)
			last := f.LastSeen
			if !f.End.IsZero() && f.End.After(last) {
				last = f.End
			}
			if last.After(e.raBlamed.at) {
				e.raBlamed.at, e.raBlamed.subject = last, f.Subject.String()
			}
		}
		switch {
		case f.Kind == findingBurst:
			if _, ok := e.firstBurst[f.Subject.String()]; !ok {
				e.firstBurst[f.Subject.String()] = f.Start
			}
		case f.Kind == findingForecast && f.Active():
			e.forecasted[f.Subject.String()] = true
		}
		if f.Active() {
			e.findings[f.ID] = f
		} else {
			delete(e.findings, f.ID)
		}
	}
	// A finding no stage has reported for a while is over even if its end
	// never arrived (a stage restarted, a source went away).
	for id, f := range e.findings {
		if now.Sub(f.LastSeen) > staleFinding {
			delete(e.findings, id)
		}
	}
	planDue := !now.Before(e.nextPlan)
	if planDue {
		e.nextPlan = now.Add(time.Duration(e.cfg.PlanEvery))
	}
	e.mu.Unlock()
	e.heat.fold(now)
	if ctx.Err() != nil {
		// the mds is stopping (the pipeline cancelled this tick): nothing
		// is planned and no step started; Stop ends what is under way
		return e.flush()
	}
	epoch, lead := e.opts.Gate.Leading()
	if !lead {
		// a follower watches (findings, heat, series) but never acts
		return e.publish(ctx, now)
	}
	if err := e.takeOver(ctx, now, epoch); err != nil {
		// no step before the fence is raised and the moves in flight known
		return errors.Join(err, e.publish(ctx, now))
	}

	var errs []error
	if planDue {
		if err := e.plan(ctx, now); err != nil {
			errs = append(errs, err)
		}
		if err := e.planReadAhead(ctx, now); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, e.reconcileAll(ctx, now))
	errs = append(errs, e.flush())
	errs = append(errs, e.publish(ctx, now))
	return errors.Join(errs...)
}

// openIDs returns the ids of open actions due at now: plans first (in
// creation order), then moves (in their plan's order).
func (e *Engine) openIDs(now time.Time) (plans, moves []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var ps []*models.Action
	for id, t := range e.due {
		a := e.acts[id]
		if a == nil || a.State.Terminal() {
			delete(e.due, id)
			continue
		}
		if a.Parent == "" && !t.After(now) {
			ps = append(ps, a)
		}
	}
	sort.Slice(ps, func(i, j int) bool {
		if !ps[i].Created.Equal(ps[j].Created) {
			return ps[i].Created.Before(ps[j].Created)
		}
		return ps[i].ID < ps[j].ID
	})
	for _, p := range ps {
		plans = append(plans, p.ID)
	}
	// moves of every open plan, in plan order
	var all []*models.Action
	for id := range e.due {
		if a := e.acts[id]; a != nil && a.Parent == "" {
			all = append(all, a)
		}
	}
	sort.Slice(all, func(i, j int) bool {
		if !all[i].Created.Equal(all[j].Created) {
			return all[i].Created.Before(all[j].Created)
		}
		return all[i].ID < all[j].ID
	})
	for _, p := range all {
		for _, k := range e.kids[p.ID] {
			if a := e.acts[k]; a != nil && !a.State.Terminal() && !e.due[k].After(now) && !e.inflight[k] {
				moves = append(moves, k)
			}
		}
	}
	return plans, moves
}

// requeue schedules the next reconcile of id.
func (e *Engine) requeue(id string, at time.Time) {
	e.mu.Lock()
	e.due[id] = at
	e.mu.Unlock()
}

// backoff is the delay before retry n (1-based) of a failing step.
func (e *Engine) backoff(n int) time.Duration {
	d := time.Duration(e.cfg.Move.Backoff)
	for i := 1; i < n && d < time.Duration(e.cfg.Move.MaxBackoff); i++ {
		d *= 2
	}
	return min(d, time.Duration(e.cfg.Move.MaxBackoff))
}

// reconcileAll runs every due plan, then every due move: inline in order,
// or on workers (one per key).
func (e *Engine) reconcileAll(ctx context.Context, now time.Time) error {
	plans, _ := e.openIDs(now)
	var errs []error
	for _, id := range plans {
		if ctx.Err() != nil {
			break // stopping: Reconcile's ctx is done
		}
		if err := e.reconcilePlan(ctx, now, id); err != nil {
			errs = append(errs, fmt.Errorf("action %s: %w", id, err))
		}
	}
	_, moves := e.openIDs(now)
	g := e.newGuards(now)
	e.pauseMoves(ctx, g)
	for _, id := range moves {
		a, ok := e.get(id)
		if !ok {
			continue
		}
		if a.Move != nil && a.Move.Phase == models.PhasePending && a.State != models.ActionRunning {
			p, _ := e.get(a.Parent)
			if p.State != models.ActionRunning || cancelRequested(&p) {
				if cancelRequested(&p) {
					e.run(ctx, now, id) // abort what never started
				}
				continue
			}
			if why, guard := g.admit(&a, &p); guard != "" {
				e.block(&a, guard, why)
				continue
			}
		}
		e.run(ctx, now, id)
	}
	if e.opts.Inline {
		return errors.Join(errs...)
	}
	return errors.Join(errs...)
}

// run reconciles one move: inline, or on a worker with the key held;
// nothing once ctx (the tick's) is done: the mds is stopping.
func (e *Engine) run(ctx context.Context, now time.Time, id string) {
	if ctx.Err() != nil {
		return
	}
	if e.opts.Inline {
		e.reconcileMove(ctx, now, id)
		return
	}
	e.mu.Lock()
	if e.inflight[id] || !e.started {
		e.mu.Unlock()
		return
	}
	e.inflight[id] = true
	wctx := e.ctx
	e.wg.Add(1)
	e.mu.Unlock()
	go func() {
		defer e.wg.Done()
		defer func() {
			e.mu.Lock()
			delete(e.inflight, id)
			e.mu.Unlock()
		}()
		e.reconcileMove(wctx, e.clock(time.Time{}), id)
	}()
}

// block records that a guard holds a back; the journal learns of it when
// the guard changes (not every tick).
func (e *Engine) block(a *models.Action, guard, why string) {
	e.met.refused(guard)
	msg := guard + ": " + why
	if a.Blocked == msg {
		return
	}
	prev := a.Blocked
	a.Blocked = msg
	if guardOf(prev) != guard {
		a.Updated = e.now
		if err := e.save(a); err != nil {
			e.log.Warn("cannot journal a guard refusal", "action", a.ID, "err", err)
		}
		return
	}
	e.mu.Lock()
	if x := e.acts[a.ID]; x != nil {
		x.Blocked = msg
	}
	e.mu.Unlock()
}

func guardOf(blocked string) string {
	for i := 0; i < len(blocked); i++ {
		if blocked[i] == ':' {
			return blocked[:i]
		}
	}
	return blocked
}

func cancelRequested(a *models.Action) bool {
	return a.Decision != nil && a.Decision.Verb == "cancel"
}

// ErrConflict is returned by Decide when the action is not in a state the
// verb applies to.
var ErrConflict = errors.New("conflict")

// ErrUnknown is returned by Decide and Get for an unknown action.
var ErrUnknown = errors.New("no such action")

// Decide applies an operator's verb (approve, reject, cancel) to a plan.
// Approve and reject apply to a plan awaiting approval; cancel to any open
// plan (moves not yet committed are aborted; committed ones are cleaned up
// as usual, since their layout already switched).
func (e *Engine) Decide(id, verb, by, reason string, now time.Time) (models.Action, error) {
	e.mu.Lock()
	a, ok := e.acts[id]
	if !ok {
		e.mu.Unlock()
		return models.Action{}, fmt.Errorf("%w: %q", ErrUnknown, id)
	}
	c := *a
	e.mu.Unlock()
	if c.Parent != "" {
		return c, fmt.Errorf("%w: %s is a step of plan %s; %s the plan", ErrConflict, id, c.Parent, verb)
	}
	if c.State.Terminal() {
		return c, fmt.Errorf("%w: %s is already %s", ErrConflict, id, c.State)
	}
	d := &models.ActionDecision{Verb: verb, By: by, At: now, Reason: reason}
	switch verb {
	case "approve":
		if c.State != models.ActionAwaitingApproval {
			if c.DryRun {
				return c, fmt.Errorf("%w: %s is a dry-run proposal; it is never carried out (set actuators.modes.%s to approve or auto)", ErrConflict, id, c.Kind)
			}
			return c, fmt.Errorf("%w: %s is %s, not awaiting approval", ErrConflict, id, c.State)
		}
		c.State = models.ActionApproved
		c.Blocked = ""
	case "reject":
		if c.State != models.ActionAwaitingApproval && c.State != models.ActionProposed {
			return c, fmt.Errorf("%w: %s is %s; cancel it instead", ErrConflict, id, c.State)
		}
		c.State = models.ActionRejected
		c.Finished = now
	case "cancel":
		if cancelRequested(&c) {
			return c, nil
		}
		if c.State == models.ActionProposed || c.State == models.ActionAwaitingApproval || c.State == models.ActionApproved {
			c.State = models.ActionCancelled
			c.Finished = now
		}
	default:
		return c, fmt.Errorf("unknown verb %q: want approve, reject or cancel", verb)
	}
	c.Decision = d
	c.Updated = now
	as := []*models.Action{&c}
	if c.State.Terminal() {
		as = append(as, e.closeKids(&c, c.State, "plan "+string(c.State))...)
	}
	if err := e.save(as...); err != nil {
		return c, err
	}
	if err := e.flush(); err != nil {
		return c, err
	}
	if c.State.Terminal() {
		e.mu.Lock()
		e.noteEnded(&c)
		e.mu.Unlock()
	}
	e.requeue(id, time.Time{})
	return c, nil
}

// closeKids ends the children of p that never started, returning them for
// the caller to journal with p.
func (e *Engine) closeKids(p *models.Action, st models.ActionState, why string) []*models.Action {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []*models.Action
	for _, k := range e.kids[p.ID] {
		a := e.acts[k]
		if a == nil || a.State.Terminal() || (a.Move != nil && a.Move.Phase != models.PhasePending) {
			continue
		}
		c := *a
		c.State = st
		if st == models.ActionRejected {
			c.State = models.ActionCancelled
		}
		c.Reason = why
		c.Updated, c.Finished = p.Updated, p.Updated
		if c.Move != nil {
			m := *c.Move
			m.Phase = models.PhaseAborted
			c.Move = &m
		}
		out = append(out, &c)
	}
	return out
}

// List returns the actions in the engine's table that pass keep, ordered
// by creation (the journal holds older history).
func (e *Engine) List(keep func(*models.Action) bool) []models.Action {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []models.Action
	for _, a := range e.acts {
		if keep == nil || keep(a) {
			out = append(out, *a)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Created.Equal(out[j].Created) {
			return out[i].Created.Before(out[j].Created)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// takeOver runs once per epoch this mds leads, before any step, when the
// mover's state is shared by an HA pair (Successor): the driver fences the
// older epochs out, and every move it reports in flight that this mds's
// journal does not know (a previous leader started it) is adopted, with
// its plan, and resumed where the shared state says: the next look at it
// re-reads the layout, so a move already committed goes on to its
// cleanup, one whose layout changed is aborted, and one still copying
// copies on (copies resume).
func (e *Engine) takeOver(ctx context.Context, now time.Time, epoch uint64) error {
	s, ok := e.mover.(Successor)
	e.mu.Lock()
	done := e.tookOver == epoch+1
	e.mu.Unlock()
	if !ok || done {
		return nil
	}
	fl, err := s.TakeOver(ctx, epoch)
	if err != nil {
		return fmt.Errorf("cannot take over as leader at epoch %d: %w", epoch, err)
	}
	var as []*models.Action
	for _, f := range fl {
		if _, known := e.get(f.ID); known || f.Plan.ID == "" {
			continue
		}
		p, known := e.get(f.Plan.ID)
		if !known {
			p = f.Plan
			p.State, p.Started, p.Updated = models.ActionRunning, now, now
			p.Params = map[string]string{"adopted": fmt.Sprintf("epoch %d", epoch)}
			if p.Created.IsZero() {
				p.Created = now
			}
			as = append(as, &p)
		} else if p.State.Terminal() {
			// the plan ended here, the move did not: it is finished or
			// undone through a plan of its own
			p = f.Plan
			p.ID += fmt.Sprintf(":adopted:%d", epoch)
			p.State, p.Started, p.Created, p.Updated = models.ActionRunning, now, now, now
			p.Params = map[string]string{"adopted": fmt.Sprintf("epoch %d", epoch)}
			as = append(as, &p)
		}
		m := f.Move
		if m.Phase == "" || m.Phase == models.PhasePending {
			m.Phase = models.PhaseCopying
		}
		handle := ""
		if lay, err := e.mover.Locate(ctx, m.File); err == nil {
			if c, ok := lay.At(m.Mirror, m.Component); ok {
				handle = c.Handle
			}
		}
		kind := models.ActionMoveStripe
		if m.Restripe != nil {
			kind = models.ActionRestripeFile
		}
		as = append(as, &models.Action{
			ID: f.ID, Kind: kind,
			Subject:     models.Subject{Kind: models.SubjectStripe, ID: m.From + "/" + handle},
			SubjectName: fmt.Sprintf("%s#%d.%d", m.File, m.Mirror, m.Component),
			Parent:      p.ID, Mode: p.Mode, State: models.ActionRunning, Urgent: p.Urgent,
			Created: now, Updated: now, Started: now, Move: &m,
			Reason: fmt.Sprintf("taken over at epoch %d from the leader that started it", epoch),
		})
		e.log.Info("adopted a move in flight", "action", f.ID, "plan", p.ID, "epoch", epoch)
	}
	if len(as) > 0 {
		if err := e.save(as...); err != nil {
			return err
		}
		for _, a := range as {
			e.requeue(a.ID, now)
		}
	}
	e.mu.Lock()
	e.tookOver = epoch + 1
	e.mu.Unlock()
	return nil
}
