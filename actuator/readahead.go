package actuator

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ballast-io/ballast/models"
)

// Read-ahead changes (set_read_ahead) are actions without children: the
// engine publishes their value as the desired state of a node's mount, the
// node's client agent applies it (within its own bounds) and reports what
// it reads back; the engine follows that report through running →
// verifying → succeeded, or rolls the value back. The agents pull: the
// mds never reaches into GPU nodes (docs/readahead.md).

// Params of a set_read_ahead action.
const (
	ParamMountPoint  = "mountpoint"
	ParamReadAheadKB = "read_ahead_kb"
	// ParamFromKB is the value before the change ("" when it was the
	// agent's original, which a rollback restores by asking for nothing).
	ParamFromKB    = "from_kb"
	ParamPinned    = "pinned"
	ParamRollback  = "rollback"
	ParamAppliedAt = "applied_at"
)

// ReadAheadPin is an operator's fixed value for one node's mount.
type ReadAheadPin struct {
	Node       string `yaml:"node"`
	MountPoint string `yaml:"mountpoint"`
	KB         int64  `yaml:"kb"`
}

// ReadAheadConfig is actuators.readahead.
type ReadAheadConfig struct {
	// Pins are values an operator fixes; the engine carries them out as
	// set_read_ahead actions in the kind's mode, never rolled back.
	Pins []ReadAheadPin `yaml:"pins"`
	// MaxChangesPerNodePerHour and MaxChangesPerHour are the rate limits
	// (per GPU node and cluster-wide) on changes started.
	MaxChangesPerNodePerHour int `yaml:"max_changes_per_node_per_hour"`
	MaxChangesPerHour        int `yaml:"max_changes_per_hour"`
	// ApplyTimeout fails a change whose agent did not report the value
	// applied in time (the node's agent is down, or not syncing).
	ApplyTimeout Duration `yaml:"apply_timeout"`
	// Policy is the closed loop that chooses values from what the
	// cluster shows (readahead_policy.go).
	Policy ReadAheadPolicy `yaml:"policy"`
}

func defaultReadAheadConfig() ReadAheadConfig {
	return ReadAheadConfig{MaxChangesPerNodePerHour: 6, MaxChangesPerHour: 200, ApplyTimeout: Duration(5 * time.Minute), Policy: defaultReadAheadPolicy()}
}

func (c *ReadAheadConfig) validate(prefix string) []error {
	var errs []error
	for i, p := range c.Pins {
		switch {
		case p.Node == "":
			errs = append(errs, fmt.Errorf("%spins[%d].node is empty", prefix, i))
		case !filepath.IsAbs(p.MountPoint):
			errs = append(errs, fmt.Errorf("%spins[%d].mountpoint: %q is not an absolute path", prefix, i, p.MountPoint))
		case p.KB < 4:
			errs = append(errs, fmt.Errorf("%spins[%d].kb: %d is below 4", prefix, i, p.KB))
		}
	}
	if c.MaxChangesPerNodePerHour < 1 {
		errs = append(errs, fmt.Errorf("%smax_changes_per_node_per_hour: %d must be at least 1", prefix, c.MaxChangesPerNodePerHour))
	}
	if c.MaxChangesPerHour < 1 {
		errs = append(errs, fmt.Errorf("%smax_changes_per_hour: %d must be at least 1", prefix, c.MaxChangesPerHour))
	}
	if c.ApplyTimeout < Duration(time.Second) {
		errs = append(errs, fmt.Errorf("%sapply_timeout: %s is below the minimum of 1s", prefix, time.Duration(c.ApplyTimeout)))
	}
	errs = append(errs, c.Policy.validate(prefix+"policy.")...)
	return errs
}

// raReport is the last report of one node's agent.
type raReport struct {
	at  time.Time
	rep models.ReadAheadReport
}

func (r raReport) mount(mp string) (models.ReadAheadMount, bool) {
	for _, m := range r.rep.Mounts {
		if m.MountPoint == mp {
			return m, true
		}
	}
	return models.ReadAheadMount{}, false
}

// SyncReadAhead takes a node agent's report and answers the node's
// desired state. A follower of an HA pair answers an error: only the
// leader publishes desired state.
func (e *Engine) SyncReadAhead(rep models.ReadAheadReport, now time.Time) (models.ReadAheadDesired, error) {
	if rep.Node == "" {
		return models.ReadAheadDesired{}, fmt.Errorf("report names no node")
	}
	for i, m := range rep.Mounts {
		if !filepath.IsAbs(m.MountPoint) {
			return models.ReadAheadDesired{}, fmt.Errorf("mounts[%d].mountpoint %q is not an absolute path", i, m.MountPoint)
		}
	}
	if _, lead := e.opts.Gate.Leading(); !lead {
		return models.ReadAheadDesired{}, errNotLeader
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.started {
		return models.ReadAheadDesired{}, fmt.Errorf("actions engine is not started")
	}
	e.raReports[rep.Node] = raReport{at: now, rep: rep}
	return e.desiredLocked(rep.Node), nil
}

// IsNotLeader reports whether err is a follower's refusal to publish.
func IsNotLeader(err error) bool { return errors.Is(err, errNotLeader) }

// ReadAheadDesired returns the desired state of node's mounts.
func (e *Engine) ReadAheadDesired(node string) models.ReadAheadDesired {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.desiredLocked(node)
}

// desiredLocked folds the node's set_read_ahead actions: per mount, the
// one started last decides (its value while running, verifying or
// succeeded; its from value once rolled back, failed or rolling back); an
// open dry-run proposal is shown as a dry-run target where nothing else is.
func (e *Engine) desiredLocked(node string) models.ReadAheadDesired {
	type pick struct {
		t  models.ReadAheadTarget
		at time.Time
		ok bool
	}
	real, dry := map[string]pick{}, map[string]pick{}
	for _, a := range e.acts {
		if a.Kind != models.ActionSetReadAhead || a.Subject.ID != node {
			continue
		}
		mp := a.Params[ParamMountPoint]
		kb, _ := strconv.ParseInt(a.Params[ParamReadAheadKB], 10, 64)
		if a.DryRun {
			if !a.State.Terminal() && later(a.Created, a.ID, dry[mp].at, dry[mp].t.Action) {
				dry[mp] = pick{models.ReadAheadTarget{MountPoint: mp, KB: kb, Action: a.ID, DryRun: true}, a.Created, true}
			}
			continue
		}
		if a.Started.IsZero() || real[mp].ok && !later(a.Started, a.ID, real[mp].at, real[mp].t.Action) {
			continue
		}
		from, _ := strconv.ParseInt(a.Params[ParamFromKB], 10, 64)
		p := pick{models.ReadAheadTarget{MountPoint: mp, KB: kb, Action: a.ID}, a.Started, true}
		switch {
		case a.State == models.ActionRunning && a.Params[ParamRollback] == "true",
			a.State == models.ActionRolledBack, a.State == models.ActionFailed, a.State == models.ActionCancelled:
			p.t.KB = from // 0: the agent's original
		}
		real[mp] = p
	}
	out := models.ReadAheadDesired{Node: node, Targets: []models.ReadAheadTarget{}}
	for mp, p := range real {
		if p.t.KB > 0 {
			out.Targets = append(out.Targets, p.t)
		}
		delete(dry, mp)
	}
	for _, p := range dry {
		out.Targets = append(out.Targets, p.t)
	}
	sort.Slice(out.Targets, func(i, j int) bool { return out.Targets[i].MountPoint < out.Targets[j].MountPoint })
	return out
}

// later reports whether (t, id) comes after (u, uid): by time, then by
// action id. e.acts is a map: without the id, which of two actions of one
// instant counts as the last would change from run to run.
func later(t time.Time, id string, u time.Time, uid string) bool {
	if !t.Equal(u) {
		return t.After(u)
	}
	return id > uid
}

func (e *Engine) lastReport(node, mp string) (models.ReadAheadMount, time.Time, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r, ok := e.raReports[node]
	if !ok {
		return models.ReadAheadMount{}, time.Time{}, false
	}
	m, ok := r.mount(mp)
	return m, r.at, ok
}

func raKey(node, mp string) string {
	return string(models.ActionSetReadAhead) + "|client:" + node + "|" + mp
}

// planReadAhead opens a set_read_ahead action for every pin whose mount's
// agent reports another value, unless one is open for it or its last one
// failed within the cooldown.
func (e *Engine) planReadAhead(ctx context.Context, now time.Time) error {
	mode := e.mode(models.ActionSetReadAhead)
	if mode == models.ModeOff {
		return nil
	}
	var errs []error
	for _, pin := range e.cfg.ReadAhead.Pins {
		m, _, ok := e.lastReport(pin.Node, filepath.Clean(pin.MountPoint))
		if !ok {
			continue // the node's agent has not reported the mount yet
		}
		key := raKey(pin.Node, m.MountPoint)
		if e.openPlanFor(key) || e.pinHolds(pin, key) {
			continue
		}
		if cooling, _ := e.cooling(key, now); cooling && e.lastFailed(key) {
			continue
		}
		if m.CurrentKB == pin.KB {
			continue
		}
		why := fmt.Sprintf("pinned by actuators.readahead.pins: %s on %s at %d KiB (now %d KiB)", m.MountPoint, pin.Node, pin.KB, m.CurrentKB)
		errs = append(errs, e.openReadAhead(ctx, now, mode, pin.Node, m, pin.KB, true, why, nil))
	}
	errs = append(errs, e.planReadAheadPolicy(ctx, now, mode))
	return errors.Join(errs...)
}

// pinHolds reports whether the last action for key already carried out
// the pin's value (the agent may still be stepping toward it).
func (e *Engine) pinHolds(pin ReadAheadPin, key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	var last *models.Action
	for _, a := range e.acts {
		if a.Kind == models.ActionSetReadAhead && !a.DryRun && subjectKey(a) == key && (last == nil || later(a.Created, a.ID, last.Created, last.ID)) {
			last = a
		}
	}
	return last != nil && last.State == models.ActionSucceeded && last.Params[ParamReadAheadKB] == strconv.FormatInt(pin.KB, 10)
}

func (e *Engine) lastFailed(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	var last *models.Action
	for _, a := range e.acts {
		if a.Kind == models.ActionSetReadAhead && subjectKey(a) == key && (last == nil || later(a.Created, a.ID, last.Created, last.ID)) {
			last = a
		}
	}
	return last != nil && (last.State == models.ActionFailed || last.State == models.ActionRolledBack || last.State == models.ActionRejected)
}

// openReadAhead journals a new set_read_ahead action for node's mount m,
// with extra params (the policy's); nothing once ctx is done (the mds is
// stopping).
func (e *Engine) openReadAhead(ctx context.Context, now time.Time, mode models.ActionMode, node string, m models.ReadAheadMount, kb int64, pinned bool, why string, extra map[string]string) error {
	if ctx.Err() != nil {
		return nil
	}
	s := models.Subject{Kind: models.SubjectClient, ID: node}
	id := fmt.Sprintf("%s:%s:%s:%s:%d", models.ActionSetReadAhead, s.Kind, s.ID, m.MountPoint, now.UnixMilli())
	from := ""
	if m.CurrentKB != m.OriginalKB {
		from = strconv.FormatInt(m.CurrentKB, 10)
	}
	a := models.Action{
		ID: id, Kind: models.ActionSetReadAhead, Subject: s, SubjectName: node + ":" + m.MountPoint,
		Params: map[string]string{ParamMountPoint: m.MountPoint, ParamReadAheadKB: strconv.FormatInt(kb, 10), ParamFromKB: from},
		Mode:   mode, Created: now, Updated: now, Reason: why, Simulated: e.caps.Name == DriverTwin,
	}
	if pinned {
		a.Params[ParamPinned] = "true"
	}
	for k, v := range extra {
		a.Params[k] = v
	}
	switch mode {
	case models.ModeDryRun:
		a.State, a.DryRun = models.ActionProposed, true
	case models.ModeApprove:
		a.State = models.ActionAwaitingApproval
	default:
		a.State = models.ActionApproved
	}
	if err := e.save(&a); err != nil {
		return err
	}
	e.requeue(id, now)
	e.log.Info("planned a read-ahead change", "action", id, "node", node, "mountpoint", m.MountPoint, "from_kb", m.CurrentKB, "kb", kb, "mode", mode)
	return nil
}

// raStillWanted reports whether an undecided change is still wanted: a
// pin still configured with its value.
func (e *Engine) raStillWanted(p *models.Action) bool {
	if p.Params[ParamPinned] != "true" {
		return true
	}
	for _, pin := range e.cfg.ReadAhead.Pins {
		if pin.Node == p.Subject.ID && filepath.Clean(pin.MountPoint) == p.Params[ParamMountPoint] && strconv.FormatInt(pin.KB, 10) == p.Params[ParamReadAheadKB] {
			return true
		}
	}
	return false
}

// raGuard applies the read-ahead rate limits to a change about to start.
func (e *Engine) raGuard(p *models.Action, now time.Time) (string, string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	node, all := 0, 0
	for _, a := range e.acts {
		if a.Kind != models.ActionSetReadAhead || a.Started.IsZero() || now.Sub(a.Started) >= time.Hour || a.ID == p.ID {
			continue
		}
		all++
		if a.Subject.ID == p.Subject.ID {
			node++
		}
	}
	c := &e.cfg.ReadAhead
	if node >= c.MaxChangesPerNodePerHour {
		return "node_rate", fmt.Sprintf("%d read-ahead changes started on %s in the last hour (actuators.readahead.max_changes_per_node_per_hour %d)", node, p.Subject.ID, c.MaxChangesPerNodePerHour)
	}
	if all >= c.MaxChangesPerHour {
		return "cluster_rate", fmt.Sprintf("%d read-ahead changes started in the last hour (actuators.readahead.max_changes_per_hour %d)", all, c.MaxChangesPerHour)
	}
	return "", ""
}

// reconcileReadAhead takes the next step of a set_read_ahead action.
func (e *Engine) reconcileReadAhead(ctx context.Context, now time.Time, p models.Action) error {
	node, mp := p.Subject.ID, p.Params[ParamMountPoint]
	kb, _ := strconv.ParseInt(p.Params[ParamReadAheadKB], 10, 64)
	from, _ := strconv.ParseInt(p.Params[ParamFromKB], 10, 64)
	planEvery := time.Duration(e.cfg.PlanEvery)
	next := now.Add(max(e.pollEvery(), time.Second))
	if e.opts.Inline {
		next = now
	}
	switch p.State {
	case models.ActionProposed, models.ActionAwaitingApproval:
		why := ""
		switch {
		case !e.raStillWanted(&p):
			why = "no longer needed: the pin that asked for it is gone"
		case p.State == models.ActionAwaitingApproval && now.Sub(p.Created) > time.Duration(e.cfg.ApprovalTimeout):
			why = fmt.Sprintf("nobody approved it within %s (actuators.approval_timeout)", time.Duration(e.cfg.ApprovalTimeout))
		}
		if why == "" {
			e.requeue(p.ID, now.Add(planEvery))
			return nil
		}
		return e.endPlan(&p, now, models.ActionCancelled, why)
	case models.ActionApproved:
		if cancelRequested(&p) {
			return e.endPlan(&p, now, models.ActionCancelled, "cancelled before it started")
		}
		if guard, why := e.raGuard(&p, now); guard != "" {
			e.block(&p, guard, why)
			e.requeue(p.ID, now.Add(planEvery))
			return nil
		}
		p.State = models.ActionRunning
		p.Started, p.Updated = now, now
		p.Blocked, p.Error = "", ""
		p.Effect = &models.ActionEffect{Window: time.Duration(e.cfg.Verify.Window), Before: e.measureReadAhead(ctx, &p, now)}
		if err := e.save(&p); err != nil {
			return err
		}
		e.requeue(p.ID, next)
		return nil
	case models.ActionRunning:
		rollback := p.Params[ParamRollback] == "true"
		m, at, ok := e.lastReport(node, mp)
		if cancelRequested(&p) && !rollback {
			return e.endPlan(&p, now, models.ActionCancelled, "cancelled: the mount goes back to its previous value")
		}
		if ok && !at.Before(p.Started) {
			target := kb
			if rollback {
				target = from
				if target == 0 {
					target = m.OriginalKB
				}
			}
			switch {
			case m.Action == p.ID && m.Refused != "" && !rollback:
				return e.endPlan(&p, now, models.ActionFailed, "the agent on "+node+" refused it: "+m.Refused)
			case m.CurrentKB == target && rollback:
				return e.endPlan(&p, now, models.ActionRolledBack, fmt.Sprintf("%s; %s is back at %d KiB", p.Reason, mp, target))
			case m.CurrentKB == target:
				p.State = models.ActionVerifying
				p.Updated = now
				p.Params = cloneParams(p.Params)
				p.Params[ParamAppliedAt] = now.UTC().Format(time.RFC3339Nano)
				if err := e.save(&p); err != nil {
					return err
				}
				e.requeue(p.ID, now.Add(time.Duration(e.cfg.Verify.Window)))
				return nil
			}
		}
		if now.Sub(p.Started) > time.Duration(e.cfg.ReadAhead.ApplyTimeout) && !rollback {
			why := fmt.Sprintf("the agent on %s did not report %s at %d KiB within %s (actuators.readahead.apply_timeout)", node, mp, kb, time.Duration(e.cfg.ReadAhead.ApplyTimeout))
			if ok {
				why += fmt.Sprintf("; it last reported %d KiB", m.CurrentKB)
			}
			return e.endPlan(&p, now, models.ActionFailed, why)
		}
		e.requeue(p.ID, next)
		return nil
	case models.ActionVerifying:
		applied, _ := time.Parse(time.RFC3339Nano, p.Params[ParamAppliedAt])
		if end := applied.Add(time.Duration(e.cfg.Verify.Window)); now.Before(end) {
			e.requeue(p.ID, end)
			return nil
		}
		if p.Effect == nil {
			p.Effect = &models.ActionEffect{Window: time.Duration(e.cfg.Verify.Window)}
		}
		p.Effect.After = e.measureReadAhead(ctx, &p, now)
		v, why := e.readAheadVerdict(&p)
		p.Effect.Verdict, p.Effect.Reason, p.Effect.MeasuredAt = v, why, now
		e.met.effect(p.Kind, v)
		if v != models.VerdictEffective && v != models.VerdictUnknown && e.cfg.Verify.Rollback && p.Params[ParamPinned] != "true" {
			p.State = models.ActionRunning
			p.Updated = now
			p.Params = cloneParams(p.Params)
			p.Params[ParamRollback] = "true"
			p.Reason = fmt.Sprintf("rolled back: %s (%s)", v, why)
			if err := e.save(&p); err != nil {
				return err
			}
			e.requeue(p.ID, next)
			return nil
		}
		p.Finished = now
		return e.endPlan(&p, now, models.ActionSucceeded, "")
	}
	return nil
}

func cloneParams(m map[string]string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Effect numbers of a read-ahead change, per mount (the node label comes
// from the agent's build info, the mountpoint from mountstats).
const (
	EffectMountReadBytes   = "mount_read_bytes_per_second"   // what applications read through the mount
	EffectMountServerBytes = "mount_server_bytes_per_second" // what the mount fetched from the servers (read-ahead included)
	EffectMountReadLatency = "mount_read_latency_seconds"    // mean RTT of its READs
	EffectNodeGPUUtil      = EffectGPUUtil                   // mean GPU utilisation of the node
)

// measureReadAhead reads the mount's and node's numbers averaged over the
// verify window ending at at.
func (e *Engine) measureReadAhead(ctx context.Context, p *models.Action, at time.Time) map[string]float64 {
	out := map[string]float64{}
	if e.opts.Measure == nil {
		return out
	}
	w := time.Duration(e.cfg.Verify.Window)
	win := fmt.Sprintf("%ds", int(max(1, w.Seconds())))
	sel := fmt.Sprintf(`node=%q,mountpoint=%q`, p.Subject.ID, p.Params[ParamMountPoint])
	q := func(name, expr string) {
		v, ok, err := e.opts.Measure(ctx, expr, at)
		if err != nil {
			e.log.Debug("effect query failed", "action", p.ID, "query", expr, "err", err)
			return
		}
		if ok && v == v && v < 1e300 && v > -1e300 {
			out[name] = roundEffect(v)
		}
	}
	q(EffectMountReadBytes, fmt.Sprintf(`sum(rate(%s{%s}[%s]))`, models.MetricNFSClientReadBytes, sel, win))
	q(EffectMountServerBytes, fmt.Sprintf(`sum(rate(%s{%s}[%s]))`, models.MetricNFSClientServerReadBytes, sel, win))
	q(EffectMountReadLatency, fmt.Sprintf(`sum(rate(%s{%s,operation="READ"}[%s])) / sum(rate(%s{%s,operation="READ"}[%s]))`,
		models.MetricNFSClientOpRTT, sel, win, models.MetricNFSClientOps, sel, win))
	q(EffectNodeGPUUtil, fmt.Sprintf(`avg(avg_over_time(%s{node=%q}[%s]))`, models.MetricGPUUtilization, p.Subject.ID, win))
	return out
}

// readAheadVerdict judges a change by the mount's throughput and latency
// and the node's GPUs: worse when GPU utilisation fell by
// verify.worse_gpu_drop, or the mount's read latency rose by 5 % without
// its throughput rising; effective when throughput rose by 5 %, latency
// fell by 5 %, the servers were asked for 5 % fewer bytes for the same
// reads, or GPU utilisation rose by a point.
func (e *Engine) readAheadVerdict(p *models.Action) (models.Verdict, string) {
	b, a := p.Effect.Before, p.Effect.After
	get := func(k string) (float64, float64, bool) {
		vb, ok1 := b[k]
		va, ok2 := a[k]
		return vb, va, ok1 && ok2
	}
	if gb, ga, ok := get(EffectNodeGPUUtil); ok && gb-ga > e.cfg.Verify.WorseGPUDrop {
		return models.VerdictWorse, fmt.Sprintf("GPU utilisation of %s fell from %.3f to %.3f", p.Subject.ID, gb, ga)
	}
	rb, ra, okR := get(EffectMountReadBytes)
	if lb, la, ok := get(EffectMountReadLatency); ok && lb > 0 && la > 1.05*lb && !(okR && ra > 1.05*rb) {
		return models.VerdictWorse, fmt.Sprintf("read latency of the mount rose from %.4g s to %.4g s with no more throughput", lb, la)
	}
	var better []string
	if okR && rb > 0 && ra >= 1.05*rb {
		better = append(better, fmt.Sprintf("%s %.4g → %.4g", EffectMountReadBytes, rb, ra))
	}
	if lb, la, ok := get(EffectMountReadLatency); ok && lb > 0 && la <= 0.95*lb {
		better = append(better, fmt.Sprintf("%s %.4g → %.4g", EffectMountReadLatency, lb, la))
	}
	if sb, sa, ok := get(EffectMountServerBytes); ok && okR && sb > 0 && ra > 0 && rb > 0 && sa/ra <= 0.95*sb/rb {
		better = append(better, fmt.Sprintf("server bytes per read byte %.3f → %.3f", sb/rb, sa/ra))
	}
	if gb, ga, ok := get(EffectNodeGPUUtil); ok && ga >= gb+0.01 {
		better = append(better, fmt.Sprintf("%s %.3f → %.3f", EffectNodeGPUUtil, gb, ga))
	}
	if len(better) > 0 {
		return models.VerdictEffective, strings.Join(better, "; ")
	}
	if len(b) == 0 || len(a) == 0 {
		return models.VerdictUnknown, "no measurements before or after"
	}
	return models.VerdictIneffective, "no measured number improved by 5 %"
}
