package actuator

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/ballast-io/ballast/models"
)

// Guard names, as refusals report them ("<guard>: <why>") and
// ballast_action_guard_refusals_total counts them.
const (
	GuardConcurrency = "concurrency"           // budgets.max_concurrent_moves
	GuardBytesHour   = "bytes_per_hour"        // budgets.max_bytes_per_hour
	GuardDeviceBusy  = "device_busy"           // budgets.max_moves_per_device
	GuardFileBusy    = "file_busy"             // another move of the same file is under way
	GuardCheckpoint  = "checkpoint_window"     // a predicted or ongoing checkpoint burst (not for urgent actions)
	GuardUnforecast  = "checkpoint_unforecast" // budgets.checkpoint_unforecast_hold
	GuardEvacuations = "evacuations"           // budgets.max_evacuating_devices / max_draining_ds
	GuardMinIn       = "min_in"                // never fewer devices or DSs than the widest layout needs
	GuardOffPeak     = "off_peak"              // evacuate.off_peak
	GuardCooldown    = "cooldown"              // budgets.cooldown
)

// guards is the budget state of one tick: what is running and what was
// started in the last hour, updated as moves are admitted.
type guards struct {
	e        *Engine
	now      time.Time
	running  int
	perDev   map[string]int
	perDS    map[string]int
	lastHour int64
	windows  []window
	// ahead is how far past now the next tick may be (the last gap
	// between ticks): a window opening sooner counts as open, so that no
	// copy runs into it before the engine looks again.
	ahead time.Duration
	dsOf  map[string]string // device → DS, a snapshot
	files map[string]bool   // files with a move under way
	// unforecast are the groups that have written a checkpoint burst
	// and that no forecast has named yet, within
	// checkpoint_unforecast_hold of their first burst
	unforecast []unforecast
}

// unforecast is a group whose next checkpoint may start at any time: it
// has written one and its period is not known yet.
type unforecast struct {
	subject     string
	first, till time.Time
}

// window is a checkpoint window, widened by checkpoint_margin; source says
// how the engine knows of it (a refusal and a pause name it).
type window struct {
	from, to time.Time
	subject  string
	source   string
}

// Sources of checkpoint windows.
const (
	windowForecast = "predicted by checkpoint_forecast"
	windowBurst    = "under way: checkpoint_burst"
	windowWriting  = "under way: write rate above idle now"
	windowEnded    = "ended: checkpoint_margin past its last tick"
)

func (e *Engine) newGuards(now time.Time) *guards {
	g := &guards{e: e, now: now, perDev: map[string]int{}, perDS: map[string]int{}, dsOf: map[string]string{}, files: map[string]bool{}}
	margin := time.Duration(e.cfg.Budgets.CheckpointMargin)
	var writing []models.Subject
	if e.opts.Writing != nil {
		// the checkpoint stage's live state: a group writing a burst now,
		// confirmed or in its first seconds (no finding yet)
		writing = e.opts.Writing()
	}
	e.mu.Lock()
	g.ahead = e.tickGap
	seen := map[string]bool{}
	for _, s := range writing {
		seen[s.String()] = true
		e.writing[s.String()] = now
		g.windows = append(g.windows, window{from: now, to: now.Add(margin), subject: s.String(), source: windowWriting})
	}
	defer e.mu.Unlock()
	for id, d := range e.devs {
		g.dsOf[id] = d.DS
	}
	for _, a := range e.acts {
		if a.Move == nil {
			continue
		}
		ph := a.Move.Phase
		if a.State == models.ActionRunning && (ph == models.PhaseCopying || ph == models.PhaseCopied || ph == models.PhaseVerified) || e.inflight[a.ID] && ph == models.PhasePending {
			g.take(a.Move)
		}
		if a.State == models.ActionRunning && ph != models.PhaseCleaned && ph != models.PhaseAborted || e.inflight[a.ID] {
			g.files[a.Move.File] = true
		}
		if !a.Started.IsZero() && now.Sub(a.Started) < time.Hour {
			g.lastHour += a.Move.Bytes
		}
	}
	for _, f := range e.findings {
		if f.Kind == "checkpoint_burst" {
			// a burst seen under way is a checkpoint window too, also
			// before any forecast exists (the first bursts of a job)
			seen[f.Subject.String()] = true
			e.writing[f.Subject.String()] = now
			g.windows = append(g.windows, window{from: f.Start.Add(-margin), to: now.Add(margin), subject: f.Subject.String(), source: windowBurst})
			continue
		}
		if f.Kind != "checkpoint_forecast" {
			continue
		}
		var from, to float64
		for _, ev := range f.Evidence {
			switch ev.Name {
			case "next_start":
				from = ev.Value
			case "next_end":
				to = ev.Value
			}
		}
		if from > 0 && to >= from {
			g.windows = append(g.windows, window{
				from:    time.UnixMilli(int64(from * 1000)).Add(-margin),
				to:      time.UnixMilli(int64(to * 1000)).Add(margin),
				subject: f.Subject.String(),
				source:  windowForecast,
			})
		}
	}
	// a burst seen at an earlier tick keeps its window for the margin
	// past the last tick it was seen (its finding ended, its writes
	// stopped): copies resume checkpoint_margin after it
	for s, at := range e.writing {
		switch {
		case now.Sub(at) >= margin || now.Before(at):
			delete(e.writing, s)
		case !seen[s]:
			g.windows = append(g.windows, window{from: at, to: at.Add(margin), subject: s, source: windowEnded})
		}
	}
	if hold := time.Duration(e.cfg.Budgets.CheckpointUnforecastHold); hold > 0 {
		for s, first := range e.firstBurst {
			if !e.forecasted[s] && now.Before(first.Add(hold)) {
				g.unforecast = append(g.unforecast, unforecast{subject: s, first: first, till: first.Add(hold)})
			}
		}
		sort.Slice(g.unforecast, func(i, j int) bool { return g.unforecast[i].subject < g.unforecast[j].subject })
	}
	// e.findings is a map: in its order, which of two overlapping windows
	// a refusal or a pause names (and so whether a move's hold changes and
	// is journaled again) would differ from run to run.
	sortWindows(g.windows)
	return g
}

// sortWindows orders windows by start, end, then subject.
func sortWindows(ws []window) {
	sort.Slice(ws, func(i, j int) bool {
		a, b := ws[i], ws[j]
		if !a.from.Equal(b.from) {
			return a.from.Before(b.from)
		}
		if !a.to.Equal(b.to) {
			return a.to.Before(b.to)
		}
		if a.subject != b.subject {
			return a.subject < b.subject
		}
		return a.source < b.source
	})
}

func (g *guards) take(m *models.Move) {
	g.running++
	for _, d := range moveDevices(m) {
		g.perDev[d]++
		if ds, ok := g.dsOf[d]; ok {
			g.perDS[ds]++
		}
	}
}

// admit decides whether move a of plan p may start now; on refusal it
// returns why and the guard's name. An admitted move is counted.
func (g *guards) admit(a, p *models.Action) (string, string) {
	b := &g.e.cfg.Budgets
	m := a.Move
	if g.running >= b.MaxConcurrentMoves {
		return fmt.Sprintf("%d moves are running (max_concurrent_moves %d)", g.running, b.MaxConcurrentMoves), GuardConcurrency
	}
	if g.files[m.File] {
		return fmt.Sprintf("another move of %s is under way; moves of one file go one at a time", m.File), GuardFileBusy
	}
	if g.lastHour+m.Bytes > b.MaxBytesPerHour {
		return fmt.Sprintf("%d bytes of moves started in the last hour; %d more would pass max_bytes_per_hour %d", g.lastHour, m.Bytes, b.MaxBytesPerHour), GuardBytesHour
	}
	for _, d := range moveDevices(m) {
		if g.perDev[d] >= b.MaxMovesPerDevice {
			return fmt.Sprintf("device %s already has %d copies (max_moves_per_device %d)", g.e.name(d), g.perDev[d], b.MaxMovesPerDevice), GuardDeviceBusy
		}
	}
	if !a.Urgent {
		// the move must end before a window opens, and if it may not, it
		// must not start before the next tick can pause it
		dur := g.e.expectedDuration(m)
		for _, w := range g.windows {
			if g.now.Before(w.to) && g.now.Add(max(dur, g.ahead)).After(w.from) {
				return fmt.Sprintf("%s checkpoints (%s) %s–%s (with checkpoint_margin); the move would take about %s", w.subject, w.source,
					w.from.UTC().Format(time.RFC3339), w.to.UTC().Format(time.RFC3339), dur.Round(time.Second)), GuardCheckpoint
			}
		}
	}
	if why := g.unforecastWhy(a, p); why != "" {
		return why, GuardUnforecast
	}
	g.take(m)
	g.files[m.File] = true
	g.lastHour += m.Bytes
	return "", ""
}

// unforecastWhy says why move a of plan p moves no data while a group
// that has checkpointed has no forecast yet, or "" when it may: only
// non-urgent evacuations and spare promotions wait (a rebalance answers a
// hotspot hurting jobs now; an urgent evacuation a drive about to fail).
func (g *guards) unforecastWhy(a, p *models.Action) string {
	if a.Urgent || len(g.unforecast) == 0 || p == nil || p.Kind != models.ActionEvacuateDevice && p.Kind != models.ActionPromoteSpare {
		return ""
	}
	u, till := g.unforecast[0], g.unforecast[0].till
	for _, v := range g.unforecast[1:] {
		if v.till.After(till) {
			till = v.till
		}
	}
	more := ""
	if n := len(g.unforecast) - 1; n > 0 {
		more = fmt.Sprintf(" (and %d more groups)", n)
	}
	return fmt.Sprintf("%s%s wrote a checkpoint at %s and no checkpoint_forecast predicts its next yet, which may start at any time: a non-urgent %s waits for the forecast, at most until %s (checkpoint_unforecast_hold %s)",
		u.subject, more, u.first.UTC().Format(time.RFC3339), p.Kind, till.UTC().Format(time.RFC3339), time.Duration(g.e.cfg.Budgets.CheckpointUnforecastHold))
}

// openWindow returns the checkpoint window now falls in, or that opens
// before the next tick (a forecast window reached or about to be, a burst
// under way; widened by checkpoint_margin), if any: a copy paused now
// moves nothing inside it, one paused at the next tick would have.
func (g *guards) openWindow() (window, bool) {
	for _, w := range g.windows {
		if g.now.Add(g.ahead).After(w.from) && g.now.Before(w.to) {
			return w, true
		}
	}
	return window{}, false
}

// pauseMoves pauses the copy and read-back of every running non-urgent
// move while a checkpoint window is open, and of every running non-urgent
// evacuation's move while a group that has checkpointed has no forecast
// yet (checkpoint_unforecast_hold), and resumes them when that ends (the
// admit guard keeps new moves from starting; this holds the ones already
// under way). Urgent moves (a drive about to fail) go on. A move whose
// plan an operator cancelled is paused too, urgent or not, so that its
// copy under way stops now rather than run to its end before the abort.
// Only a Pauser driver can pause; with another, a copy under way
// finishes.
func (e *Engine) pauseMoves(ctx context.Context, g *guards) {
	pz, ok := e.mover.(Pauser)
	if !ok {
		return
	}
	w, open := g.openWindow()
	type todo struct {
		a         models.Action
		why       string // "": resume
		drive     bool   // tell the driver (false: only the reason changed)
		cancelled bool
	}
	var work []todo
	e.mu.Lock()
	for id, a := range e.acts {
		if a.Move == nil {
			continue
		}
		ph := a.Move.Phase
		running := a.State == models.ActionRunning && (ph == models.PhaseCopying || ph == models.PhaseCopied)
		p := e.acts[a.Parent]
		cancelled := running && p != nil && cancelRequested(p)
		why := ""
		switch {
		case cancelled:
			// its next step aborts it (moveStep); once it ended, a later
			// tick lets the driver go
			why = "cancelled: its plan " + a.Parent + " was cancelled; the move is aborted"
		case !running || a.Urgent:
		case open:
			opens := ""
			if g.now.Before(w.from) {
				opens = "; it opens before the next tick"
			}
			why = fmt.Sprintf("%s while %s checkpoints (%s) %s–%s (with checkpoint_margin%s); resumes when the window ends",
				pausedPrefix, w.subject, w.source, w.from.UTC().Format(time.RFC3339), w.to.UTC().Format(time.RFC3339), opens)
		case p != nil:
			if u := g.unforecastWhy(a, p); u != "" {
				why = unforecastPrefix + ": " + u
			}
		}
		was := e.paused[id]
		switch {
		case why != "" && was == "":
			work = append(work, todo{*a, why, true, cancelled})
		case why == "" && was != "":
			// the window ended, or the move did (aborted, cancelled): the
			// driver lets it go, so that a retry of it is not held
			work = append(work, todo{*a, "", true, false})
		case why != "" && guardOf(why) != guardOf(was):
			// held on, for another reason now: its hold says which
			work = append(work, todo{*a, why, false, cancelled})
		}
	}
	e.mu.Unlock()
	sort.Slice(work, func(i, j int) bool { return work[i].a.ID < work[j].a.ID })
	for _, t := range work {
		if t.drive {
			if err := pz.Pause(ctx, t.a.ID, *t.a.Move, t.why != ""); err != nil {
				e.log.Warn("cannot pause or resume a move", "action", t.a.ID, "pause", t.why != "", "err", err)
				continue
			}
		}
		if t.why != "" && !t.cancelled {
			e.met.refused(guardOf(t.why))
		}
		// the move's own step journals why it is held (it holds the key)
		e.mu.Lock()
		if t.why != "" {
			e.paused[t.a.ID] = t.why
		} else {
			delete(e.paused, t.a.ID)
		}
		e.mu.Unlock()
		switch {
		case t.cancelled && t.drive:
			e.log.Info("move's data movement stopped: its plan was cancelled", "action", t.a.ID, "plan", t.a.Parent)
		case t.why != "" && t.drive:
			e.log.Info("move paused for a checkpoint window", "action", t.a.ID, "why", t.why)
		case t.why != "":
		case t.a.State.Terminal():
			e.log.Info("move's pause lifted: it ended", "action", t.a.ID, "state", string(t.a.State))
		default:
			e.log.Info("move resumed after a checkpoint window", "action", t.a.ID)
		}
	}
}

// pausedWhy says why move id's data movement is paused, or "" when it
// is not.
func (e *Engine) pausedWhy(id string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.paused[id]
}

// holdPaused is a paused move's step: it journals why the move is held
// (once), asks nothing of the mover and looks again at the next poll. A
// resumed move's hold is cleared. It reports whether the move is paused.
func (e *Engine) holdPaused(a *models.Action, now time.Time) (bool, error) {
	why := e.pausedWhy(a.ID)
	if why == "" {
		if strings.HasPrefix(a.Blocked, pausedPrefix) || strings.HasPrefix(a.Blocked, unforecastPrefix) {
			a.Blocked, a.Updated = "", now
			if err := e.save(a); err != nil {
				e.requeue(a.ID, now.Add(e.backoff(1)))
				return false, err
			}
		}
		return false, nil
	}
	e.requeue(a.ID, now.Add(e.pollEvery()))
	if a.Blocked == why {
		return true, nil
	}
	a.Blocked, a.Updated = why, now
	return true, e.save(a)
}

// pausedPrefix starts the hold of a move paused for a checkpoint window.
const pausedPrefix = GuardCheckpoint + ": paused"

// unforecastPrefix starts the hold of a move paused while a group that
// has checkpointed has no forecast yet.
const unforecastPrefix = GuardUnforecast + ": paused"

// rateFor is the pace of a copy: the device and DS shares of bandwidth
// migration may take, split over the copies on each. A restripe reads its
// old devices and writes its new ones in parallel: its pace is that of
// one device times the fewer of the two sides' devices, and of one data
// server's share times the fewer of their data servers, so that no device
// or data server passes its share.
func (e *Engine) rateFor(m *models.Move) float64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	b := &e.cfg.Budgets
	devRate, dsRate := math.Inf(1), math.Inf(1)
	for _, id := range moveDevices(m) {
		d, ok := e.devs[id]
		if !ok {
			continue
		}
		if d.BandwidthBytes > 0 {
			devRate = min(devRate, b.DeviceShare*d.BandwidthBytes/float64(b.MaxMovesPerDevice))
		}
		if d.DSBandwidthBytes > 0 {
			dsRate = min(dsRate, b.DSShare*d.DSBandwidthBytes/float64(b.MaxConcurrentMoves))
		}
	}
	rate := min(devRate, dsRate)
	if m.Restripe != nil {
		nDev, nDS := math.Inf(1), math.Inf(1)
		for _, side := range [][]string{m.Restripe.From, m.Restripe.To} {
			dss := map[string]bool{}
			for _, id := range side {
				dss[e.devs[id].DS] = true
			}
			nDev, nDS = min(nDev, float64(len(side))), min(nDS, float64(len(dss)))
		}
		rate = min(devRate*nDev, dsRate*nDS)
	}
	if math.IsInf(rate, 1) {
		return 0
	}
	return rate
}

// expectedDuration estimates how long a move keeps data moving: copy and
// read-back at its pace (unknown pace: 1 GB/s, a conservative figure for
// one copy stream).
func (e *Engine) expectedDuration(m *models.Move) time.Duration {
	r := e.rateFor(m)
	if r <= 0 {
		r = 1e9
	}
	return time.Duration(2 * float64(m.Bytes) / r * float64(time.Second))
}

// planGuard decides whether an approved plan may start: at most
// max_evacuating_devices devices (and max_draining_ds data servers) are
// emptied at once, and a pool never drops below the devices and data
// servers its widest layout needs.
func (e *Engine) planGuard(p *models.Action) (string, string) {
	if p.Kind != models.ActionEvacuateDevice && p.Kind != models.ActionPromoteSpare {
		return "", ""
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	b := &e.cfg.Budgets
	running, ds := 0, map[string]bool{}
	for _, a := range e.acts {
		if a.Parent == "" && a.ID != p.ID && a.State == models.ActionRunning && (a.Kind == models.ActionEvacuateDevice || a.Kind == models.ActionPromoteSpare) {
			running++
			if d, ok := e.devs[a.Subject.ID]; ok {
				ds[d.DS] = true
			}
		}
	}
	if running >= b.MaxEvacuatingDevices {
		return GuardEvacuations, fmt.Sprintf("%d devices are being evacuated (max_evacuating_devices %d)", running, b.MaxEvacuatingDevices)
	}
	dev, ok := e.devs[p.Subject.ID]
	if ok && !ds[dev.DS] && len(ds) >= b.MaxDrainingDS {
		return GuardEvacuations, fmt.Sprintf("%d data servers have devices being evacuated (max_draining_ds %d)", len(ds), b.MaxDrainingDS)
	}
	if !ok || p.Kind == models.ActionPromoteSpare {
		return "", "" // a spare takes the device's place: nothing shrinks
	}
	in, dss := 0, map[string]bool{}
	for _, d := range e.devs {
		if d.Pool == dev.Pool && d.State == StateOnline && d.ID != dev.ID {
			in++
			dss[d.DS] = true
		}
	}
	if w := e.width[dev.Pool]; in < w {
		return GuardMinIn, fmt.Sprintf("pool %s would keep %d devices that take data; its widest layout needs %d", dev.Pool, in, w)
	}
	if mr := e.mirrors[dev.Pool]; len(dss) < mr {
		return GuardMinIn, fmt.Sprintf("pool %s would keep %d data servers; its layouts have %d mirrors, never two on one data server", dev.Pool, len(dss), mr)
	}
	return "", ""
}

// cooling reports whether a plan for key ended less than the cooldown ago.
func (e *Engine) cooling(key string, now time.Time) (bool, time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	t, ok := e.ended[key]
	if !ok {
		return false, time.Time{}
	}
	until := t.Add(time.Duration(e.cfg.Budgets.Cooldown))
	return now.Before(until), until
}

// name returns a device's name for people.
func (e *Engine) name(id string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.nameOf(id)
}

// nameOf is name for callers holding e.mu.
func (e *Engine) nameOf(id string) string {
	if e.opts.Namer != nil {
		if n := e.opts.Namer(id); n != "" {
			return n
		}
	}
	if d, ok := e.devs[id]; ok && d.Name != "" {
		return d.Name
	}
	return id
}
