package actuator

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/ballast-io/ballast/models"
)

// clock is the time a step happens at: the tick's (simulated) now inline,
// the wall clock on a worker (a copy may take minutes).
func (e *Engine) clock(now time.Time) time.Time {
	switch {
	case e.opts.Inline:
		return now
	case e.opts.Clock != nil:
		return e.opts.Clock()
	}
	return time.Now()
}

// leading returns this process's epoch, or an error when it does not
// lead (then no step is taken: the step waits, for the next leader).
func (e *Engine) leading() (uint64, error) {
	epoch, ok := e.opts.Gate.Leading()
	if !ok {
		return 0, errNotLeader
	}
	return epoch, nil
}

var errNotLeader = errors.New("this mds does not lead (ha): no action is taken")

// reconcileMove takes a move as far as it can go now, one idempotent step
// at a time, each journaled: it re-reads the file's layout first, so a
// move whose commit happened before a crash is recognised (the layout
// already points at the destination) and never committed twice, and a
// move whose file changed under it is aborted, never forced.
func (e *Engine) reconcileMove(ctx context.Context, now time.Time, id string) {
	for range 8 { // bounded: a step that must wait returns
		if ctx.Err() != nil {
			return
		}
		wait, err := e.moveStep(ctx, e.clock(now), id)
		if err != nil {
			e.log.Warn("move step failed", "action", id, "err", err)
		}
		if wait {
			return
		}
	}
}

// moveStep does one step. wait is true when the move must be looked at
// again later (it has been requeued) or is finished.
func (e *Engine) moveStep(ctx context.Context, now time.Time, id string) (wait bool, err error) {
	a, ok := e.get(id)
	if !ok || a.State.Terminal() || a.Move == nil {
		return true, nil
	}
	epoch, err := e.leading()
	if err != nil {
		e.requeue(id, now.Add(e.backoff(1)))
		return true, err
	}
	p, _ := e.get(a.Parent)
	m := *a.Move
	aborting := cancelRequested(&p) || p.State.Terminal()

	lay, err := e.mover.Locate(ctx, m.File)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return true, e.endMove(&a, now, models.ActionCancelled, models.PhaseAborted, fmt.Sprintf("file %s is gone", m.File), true)
		}
		return true, e.failed(ctx, &a, now, "locate", err)
	}
	done, intact, where := moveState(&lay, &m)
	switch {
	case done && m.Phase != models.PhasePending:
		// committed, by us (maybe before a crash the journal did not see)
		if m.Phase != models.PhaseCommitted {
			m.Phase = models.PhaseCommitted
			if m.CommittedAt.IsZero() {
				m.CommittedAt = now
			}
			return false, e.saveMove(&a, m, now, "")
		}
		if grace := m.CommittedAt.Add(time.Duration(e.cfg.Move.Grace)); now.Before(grace) {
			e.requeue(id, grace)
			return true, nil
		}
		if err := e.cleanupStep(ctx, m); err != nil {
			return true, e.failed(ctx, &a, now, "cleanup", err)
		}
		m.Phase = models.PhaseCleaned
		a.Move = &m
		e.met.moved(p.Kind, m.Bytes)
		return true, e.endMove(&a, now, models.ActionSucceeded, models.PhaseCleaned, "", false)
	case aborting:
		return true, e.abortMove(ctx, &a, now, models.ActionCancelled, "plan "+planEnd(&p))
	case m.Phase == models.PhasePending:
		// Not started: the plan's intent is checked against the layout as
		// it is now. Another move of the same file (ours, serialised by the
		// file_busy guard) may have bumped the generation; the move then
		// starts from the new one, if the destination is still legal.
		if !intact {
			return true, e.endMove(&a, now, models.ActionCancelled, models.PhaseAborted, fmt.Sprintf("%s is no longer where it was planned from (now on %s); the plan is stale", what(&m), where), true)
		}
		if lay.Generation != m.Generation {
			if why := e.illegal(&lay, &m); why != "" {
				return true, e.endMove(&a, now, models.ActionCancelled, models.PhaseAborted, why, true)
			}
			m.Generation = lay.Generation
		}
	case !intact || lay.Generation != m.Generation:
		why := fmt.Sprintf("layout of %s changed (generation %d → %d, %s on %s); the move is replanned", m.File, m.Generation, lay.Generation, what(&m), where)
		return true, e.abortMove(ctx, &a, now, models.ActionCancelled, why)
	}

	switch m.Phase {
	case models.PhasePending:
		m.Phase = models.PhaseCopying
		a.State = models.ActionRunning
		a.Started = now
		a.Blocked = ""
		return false, e.saveMove(&a, m, now, "")
	case models.PhaseCopying:
		if held, err := e.holdPaused(&a, now); held || err != nil {
			return true, err
		}
		pr, err := e.copyStep(ctx, CopyRequest{ID: a.ID, Move: m, RateLimit: e.rateFor(&m), Urgent: a.Urgent, Plan: planRef(&p)})
		if err != nil {
			return true, e.failed(ctx, &a, now, "copy", err)
		}
		if !pr.Done {
			e.setCopied(id, pr.Bytes)
			e.requeue(id, now.Add(e.pollEvery()))
			return true, nil
		}
		m.Phase, m.BytesCopied = models.PhaseCopied, pr.Bytes
		return false, e.saveMove(&a, m, now, "")
	case models.PhaseCopied:
		if held, err := e.holdPaused(&a, now); held || err != nil {
			return true, err
		}
		v, err := e.verifyStep(ctx, m)
		if err != nil {
			return true, e.failed(ctx, &a, now, "verify", err)
		}
		if !v.Done {
			e.requeue(id, now.Add(e.pollEvery()))
			return true, nil
		}
		if !v.Match {
			// the copy is bad: remove it and copy again
			if err := e.abortStep(ctx, m); err != nil {
				return true, e.failed(ctx, &a, now, "abort", err)
			}
			m.Phase = models.PhaseCopying
			m.Mismatches++
			a.Move = &m
			return true, e.retry(&a, now, "verify", Permanentf(m.Mismatches >= e.cfg.Move.MaxAttempts, "checksums differ: source %s, copy %s", v.Checksum, v.CopyChecksum))
		}
		m.Phase, m.Checksum = models.PhaseVerified, v.Checksum
		return false, e.saveMove(&a, m, now, "")
	case models.PhaseVerified:
		// a last check with the coordinator: a leader paused since the
		// step began must not commit (the fence in the commit refuses a
		// deposed leader's epoch as well)
		if c, ok := e.opts.Gate.(confirmer); ok {
			if err := c.Confirm(ctx, epoch); err != nil {
				e.requeue(id, now.Add(e.backoff(1)))
				return true, fmt.Errorf("cannot confirm leadership before the commit: %w", err)
			}
		}
		if err := e.commitStep(ctx, m, epoch); err != nil {
			if errors.Is(err, ErrGenerationChanged) {
				// the layout moved on, or the MDS refused the switch (the
				// files driver's hook): the copy goes, the move is replanned
				return true, e.abortMove(ctx, &a, now, models.ActionCancelled, fmt.Sprintf("commit refused: %v; the move is replanned", err))
			}
			return true, e.failed(ctx, &a, now, "commit", err)
		}
		m.Phase, m.CommittedAt = models.PhaseCommitted, now
		return false, e.saveMove(&a, m, now, "")
	}
	return true, nil
}

// illegal says why moving m to m.To breaks the placement rules of layout
// lay (another component of the file on the destination, or another mirror
// on its data server), or "".
func (e *Engine) illegal(lay *Layout, m *models.Move) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if m.Restripe != nil {
		return e.illegalRestripe(lay, m)
	}
	toDS := e.devs[m.To].DS
	for mi, comps := range lay.Mirrors {
		for ci, c := range comps {
			if mi == m.Mirror && ci == m.Component {
				continue
			}
			if c.Device == m.To {
				return fmt.Sprintf("%s now holds another component of %s", m.ToName, m.File)
			}
			if mi != m.Mirror && toDS != "" && e.devs[c.Device].DS == toDS {
				return fmt.Sprintf("data server %s now holds another mirror of %s", toDS, m.File)
			}
		}
	}
	return ""
}

// planRef is what a driver records of a move's plan (Successor): enough
// for a new leader to hold the plan's place.
func planRef(p *models.Action) models.Action {
	return models.Action{ID: p.ID, Kind: p.Kind, Subject: p.Subject, SubjectName: p.SubjectName, Mode: p.Mode, Urgent: p.Urgent, Created: p.Created, Reason: p.Reason}
}

func planEnd(p *models.Action) string {
	if cancelRequested(p) {
		return "cancelled"
	}
	return string(p.State)
}

// Permanentf returns a permanent error when perm, else a plain one.
func Permanentf(perm bool, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	if perm {
		return Permanent(err)
	}
	return err
}

func (e *Engine) pollEvery() time.Duration {
	if e.opts.Inline {
		return 0 // the next tick
	}
	return time.Second
}

// setCopied records a copy's progress in memory (not journaled: progress
// is re-read from the mover after a restart).
func (e *Engine) setCopied(id string, b int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if a := e.acts[id]; a != nil && a.Move != nil {
		m := *a.Move
		m.BytesCopied = b
		a.Move = &m
	}
}

// saveMove journals a's new phase and clears its error count.
func (e *Engine) saveMove(a *models.Action, m models.Move, now time.Time, why string) error {
	a.Move = &m
	a.Updated = now
	a.Attempts, a.Error = 0, ""
	if why != "" {
		a.Reason = why
	}
	if err := e.save(a); err != nil {
		e.requeue(a.ID, now.Add(e.backoff(1)))
		return err
	}
	e.requeue(a.ID, now)
	return nil
}

// failed records a failed step (retry), unless ctx is done: a step cut
// short by the engine's stop is no failure of the move; Stop aborts it or
// the next start repeats it.
func (e *Engine) failed(ctx context.Context, a *models.Action, now time.Time, step string, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return e.retry(a, now, step, err)
}

// retry counts a failed step; a permanent error or too many attempts
// aborts the move (removing the new copy unless the layout switched).
func (e *Engine) retry(a *models.Action, now time.Time, step string, err error) error {
	a.Attempts++
	a.Error = fmt.Sprintf("%s: %v", step, err)
	a.Updated = now
	if IsPermanent(err) || a.Attempts >= e.cfg.Move.MaxAttempts {
		if a.Move != nil && (a.Move.Phase == models.PhaseCommitted || a.Move.Phase == models.PhaseCleaned) {
			// only the cleanup is left: keep the data, report the failure
			return e.endMove(a, now, models.ActionFailed, a.Move.Phase, a.Error, false)
		}
		return e.abortMove(context.Background(), a, now, models.ActionFailed, a.Error)
	}
	e.met.retried(step)
	if jerr := e.save(a); jerr != nil {
		return errors.Join(err, jerr)
	}
	e.requeue(a.ID, now.Add(e.backoff(a.Attempts)))
	return err
}

// abortMove removes the new copy (the layout never switched to it) and
// ends the move in st.
func (e *Engine) abortMove(ctx context.Context, a *models.Action, now time.Time, st models.ActionState, why string) error {
	if a.Move != nil && a.Move.Phase != models.PhasePending && a.Move.Phase != models.PhaseAborted {
		if err := e.abortStep(ctx, *a.Move); err != nil && !errors.Is(err, ErrNotFound) {
			if ctx.Err() != nil {
				return nil // cut short by the stop, which aborts it again
			}
			a.Error = fmt.Sprintf("abort: %v", err)
			a.Attempts++
			_ = e.save(a)
			e.requeue(a.ID, now.Add(e.backoff(a.Attempts)))
			return err
		}
	}
	return e.endMove(a, now, st, models.PhaseAborted, why, true)
}

func (e *Engine) endMove(a *models.Action, now time.Time, st models.ActionState, ph models.MovePhase, why string, isErr bool) error {
	if a.Move != nil {
		m := *a.Move
		m.Phase = ph
		a.Move = &m
	}
	a.State = st
	a.Updated, a.Finished = now, now
	a.Blocked = ""
	if isErr || st == models.ActionFailed {
		a.Reason = why
	}
	e.met.moveEnded(st)
	if err := e.save(a); err != nil {
		return err
	}
	e.requeue(a.Parent, now)
	return nil
}

// kidsOf returns copies of p's moves in plan order.
func (e *Engine) kidsOf(id string) []models.Action {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]models.Action, 0, len(e.kids[id]))
	for _, k := range e.kids[id] {
		if a := e.acts[k]; a != nil {
			out = append(out, *a)
		}
	}
	return out
}

func progressOf(kids []models.Action) models.ActionProgress {
	var pr models.ActionProgress
	for i := range kids {
		k := &kids[i]
		if k.RollbackOf != "" {
			continue
		}
		pr.MovesTotal++
		switch k.State {
		case models.ActionSucceeded:
			pr.MovesDone++
		case models.ActionFailed:
			pr.MovesFailed++
		case models.ActionCancelled, models.ActionRejected:
			pr.MovesCancelled++
		}
		if k.Move != nil && (k.Move.Phase == models.PhaseCommitted || k.Move.Phase == models.PhaseCleaned) {
			pr.BytesMoved += k.Move.Bytes
		}
	}
	return pr
}

// reconcilePlan moves a plan along: wait for approval, hold it while a
// guard says so, prepare the devices (drain, promote the spare), watch its
// moves, verify its effect after they end and roll it back when it made
// things worse.
func (e *Engine) reconcilePlan(ctx context.Context, now time.Time, id string) error {
	p, ok := e.get(id)
	if !ok || p.State.Terminal() {
		return nil
	}
	if p.Kind == models.ActionSetReadAhead {
		return e.reconcileReadAhead(ctx, now, p)
	}
	kids := e.kidsOf(id)
	planEvery := time.Duration(e.cfg.PlanEvery)
	switch p.State {
	case models.ActionProposed, models.ActionAwaitingApproval:
		why := ""
		switch {
		case !e.stillNeeded(&p):
			why = "no longer needed: the finding that motivated it has ended"
		case p.State == models.ActionAwaitingApproval && now.Sub(p.Created) > time.Duration(e.cfg.ApprovalTimeout):
			why = fmt.Sprintf("nobody approved it within %s (actuators.approval_timeout)", time.Duration(e.cfg.ApprovalTimeout))
		}
		if why == "" {
			e.requeue(id, now.Add(planEvery))
			return nil
		}
		return e.endPlan(&p, now, models.ActionCancelled, why)
	case models.ActionApproved:
		if cancelRequested(&p) {
			return e.endPlan(&p, now, models.ActionCancelled, "cancelled before it started")
		}
		if p.NotBefore.After(now) {
			e.block(&p, "off_peak", fmt.Sprintf("waits for the off-peak window (actuators.evacuate.off_peak %q) at %s", e.cfg.Evacuate.OffPeak, p.NotBefore.UTC().Format(time.RFC3339)))
			e.requeue(id, p.NotBefore)
			return nil
		}
		if guard, why := e.planGuard(&p); guard != "" {
			e.block(&p, guard, why)
			e.requeue(id, now.Add(planEvery))
			return nil
		}
		if err := e.prepare(ctx, &p); err != nil {
			p.Attempts++
			p.Error = err.Error()
			p.Updated = now
			if IsPermanent(err) || p.Attempts >= e.cfg.Move.MaxAttempts {
				return e.endPlan(&p, now, models.ActionFailed, "cannot prepare: "+err.Error())
			}
			_ = e.save(&p)
			e.requeue(id, now.Add(e.backoff(p.Attempts)))
			return err
		}
		p.State = models.ActionRunning
		p.Started, p.Updated = now, now
		p.Blocked, p.Error, p.Attempts = "", "", 0
		bw, note := e.beforeWindow(&p, now)
		p.Effect = &models.ActionEffect{Window: time.Duration(e.cfg.Verify.Window), Before: e.measure(ctx, &p, kids, now, bw, false), BeforeNote: note}
		if bw != p.Effect.Window {
			p.Effect.BeforeWindow = bw
		}
		as := []*models.Action{&p}
		for i := range kids {
			k := &kids[i]
			if k.State == models.ActionAwaitingApproval || k.State == models.ActionProposed {
				k.State = models.ActionApproved
				k.Updated = now
				as = append(as, k)
			}
		}
		if err := e.save(as...); err != nil {
			return err
		}
		e.requeue(id, now)
		return nil
	case models.ActionRunning:
		pr := progressOf(kids)
		open := 0
		for i := range kids {
			if !kids[i].State.Terminal() {
				open++
			}
		}
		changed := p.Progress == nil || *p.Progress != pr
		p.Progress = &pr
		if open > 0 {
			if held := heldBy(kids); held != p.Blocked {
				p.Blocked = held
				changed = true
			}
			if changed {
				p.Updated = now
				if err := e.save(&p); err != nil {
					return err
				}
			}
			e.requeue(id, now.Add(e.pollEvery()))
			return nil
		}
		p.Blocked = ""
		switch {
		case p.Params["rollback"] == "running":
			p.Params["rollback"] = "done"
			return e.endPlan(&p, now, models.ActionRolledBack, p.Reason)
		case cancelRequested(&p):
			return e.endPlan(&p, now, models.ActionCancelled, "cancelled by an operator")
		case pr.MovesDone == 0 && pr.MovesTotal > 0:
			return e.endPlan(&p, now, models.ActionFailed, fmt.Sprintf("no move succeeded (%d failed, %d cancelled)", pr.MovesFailed, pr.MovesCancelled))
		}
		p.State = models.ActionVerifying
		p.Finished, p.Updated = now, now
		if err := e.save(&p); err != nil {
			return err
		}
		e.requeue(id, e.afterStart(&p, kids).Add(time.Duration(e.cfg.Verify.Window)))
		return nil
	case models.ActionVerifying:
		if at := e.afterStart(&p, kids).Add(time.Duration(e.cfg.Verify.Window)); now.Before(at) {
			e.requeue(id, at)
			return nil
		}
		if p.Effect == nil {
			p.Effect = &models.ActionEffect{Window: time.Duration(e.cfg.Verify.Window)}
		}
		p.Effect.After = e.measure(ctx, &p, kids, now, time.Duration(e.cfg.Verify.Window), true)
		p.Effect.MeasuredAt = now
		p.Effect.Verdict, p.Effect.Reason = e.verdict(ctx, &p)
		e.met.effect(p.Kind, p.Effect.Verdict)
		if p.Effect.Verdict == models.VerdictWorse && p.Kind == models.ActionRebalance && e.cfg.Verify.Rollback {
			back, err := e.rollbackMoves(ctx, &p, kids, now)
			if err != nil {
				e.log.Warn("cannot plan a rollback", "action", id, "err", err)
			}
			if len(back) > 0 {
				if p.Params == nil {
					p.Params = map[string]string{}
				}
				p.Params["rollback"] = "running"
				p.State = models.ActionRunning
				p.Reason = "rolled back: " + p.Effect.Reason
				p.Updated = now
				as := []*models.Action{&p}
				for i := range back {
					as = append(as, &back[i])
				}
				if err := e.save(as...); err != nil {
					return err
				}
				e.requeue(id, now)
				return nil
			}
		}
		return e.endPlan(&p, now, models.ActionSucceeded, p.Reason)
	}
	return nil
}

// afterStart is when the window after plan p starts: when its moves
// ended, and not before Options.RateHold past its last commit. A commit
// retires components (a move's old slot, a restripe's old stripes); they
// stop reporting LAYOUTSTATS, but their last rate keeps counting on their
// old devices for RateHold, so a window that starts sooner reads the old
// placement and the new one at once (hot-shard seed 1: the pool's
// max/mean 1.16 → 1.47, "worse", while the jobs were back at full GPU
// utilisation).
func (e *Engine) afterStart(p *models.Action, kids []models.Action) time.Time {
	start := p.Finished
	for i := range kids {
		m := kids[i].Move
		if m == nil || m.CommittedAt.IsZero() || (m.Phase != models.PhaseCommitted && m.Phase != models.PhaseCleaned) {
			continue
		}
		if t := m.CommittedAt.Add(e.opts.RateHold); t.After(start) {
			start = t
		}
	}
	return start
}

// heldBy summarises the guards holding a plan's moves.
func heldBy(kids []models.Action) string {
	n := map[string]int{}
	first := map[string]string{}
	for i := range kids {
		k := &kids[i]
		if k.State.Terminal() || k.Blocked == "" {
			continue
		}
		g := guardOf(k.Blocked)
		if n[g] == 0 {
			first[g] = k.Blocked
		}
		n[g]++
	}
	if len(n) == 0 {
		return ""
	}
	gs := make([]string, 0, len(n))
	for g := range n {
		gs = append(gs, g)
	}
	sort.Strings(gs)
	g := gs[0]
	return fmt.Sprintf("%d moves held; %s", n[g], first[g])
}

// endPlan ends p in st, closing children that never started.
func (e *Engine) endPlan(p *models.Action, now time.Time, st models.ActionState, why string) error {
	p.State = st
	p.Updated = now
	if p.Finished.IsZero() || st != models.ActionSucceeded {
		if st != models.ActionSucceeded && st != models.ActionRolledBack {
			p.Finished = now
		}
	}
	if why != "" {
		p.Reason = why
	}
	p.Blocked = ""
	pr := progressOf(e.kidsOf(p.ID))
	p.Progress = &pr
	as := append([]*models.Action{p}, e.closeKids(p, models.ActionCancelled, "plan "+string(st))...)
	if err := e.save(as...); err != nil {
		return err
	}
	e.mu.Lock()
	e.noteEnded(p)
	e.mu.Unlock()
	return nil
}

// prepare readies the devices before the first move: an evacuated device
// drains (takes no new data); a promoted spare comes online first.
func (e *Engine) prepare(ctx context.Context, p *models.Action) error {
	if p.Params["prepared"] == "true" || p.Kind == models.ActionRebalance {
		return nil
	}
	if !e.caps.SetState {
		return nil
	}
	if p.Kind == models.ActionPromoteSpare {
		if err := e.mover.SetState(ctx, models.Subject{Kind: models.SubjectDevice, ID: p.Params["spare"]}, StateOnline); err != nil {
			return fmt.Errorf("cannot bring spare %s online: %w", p.Params["spare"], err)
		}
	}
	if err := e.mover.SetState(ctx, p.Subject, StateDraining); err != nil {
		return fmt.Errorf("cannot drain %s: %w", p.Subject.ID, err)
	}
	if p.Params == nil {
		p.Params = map[string]string{}
	}
	p.Params["prepared"] = "true"
	return nil
}

// rollbackMoves plans the reverse of every committed move of p whose old
// device still takes data.
func (e *Engine) rollbackMoves(ctx context.Context, p *models.Action, kids []models.Action, now time.Time) ([]models.Action, error) {
	devs, err := e.mover.Devices(ctx)
	if err != nil {
		return nil, err
	}
	ok := map[string]bool{}
	for _, d := range devs {
		ok[d.ID] = d.State == StateOnline
	}
	var out []models.Action
	for i := range kids {
		k := &kids[i]
		// a restripe is not reversed: its old width is what made the
		// file's devices hot
		if k.RollbackOf != "" || k.Move == nil || k.Move.Restripe != nil || (k.Move.Phase != models.PhaseCleaned && k.Move.Phase != models.PhaseCommitted) || !ok[k.Move.From] {
			continue
		}
		lay, err := e.mover.Locate(ctx, k.Move.File)
		if err != nil {
			continue
		}
		if c, _ := lay.At(k.Move.Mirror, k.Move.Component); c.Device != k.Move.To {
			continue
		}
		m := *k.Move
		m.From, m.To = k.Move.To, k.Move.From
		m.FromName, m.ToName = k.Move.ToName, k.Move.FromName
		m.Generation, m.Phase, m.BytesCopied, m.Checksum, m.CommittedAt = lay.Generation, models.PhasePending, 0, "", time.Time{}
		out = append(out, models.Action{
			ID: k.ID + "/rollback", Kind: models.ActionMoveStripe, Subject: k.Subject, SubjectName: k.SubjectName,
			Parent: p.ID, Mode: p.Mode, State: models.ActionApproved, Urgent: p.Urgent, Simulated: p.Simulated,
			Created: now, Updated: now, Reason: "rollback of " + k.ID, Move: &m, RollbackOf: k.ID,
		})
	}
	return out, nil
}
