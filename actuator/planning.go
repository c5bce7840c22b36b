package actuator

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ballast-io/ballast/actuator/plan"
	"github.com/ballast-io/ballast/models"
)

// Finding kinds the planners read (the analyzers' constants; actuator
// does not import the analyzers).
const (
	findingHotspot  = "hotspot"
	findingRisk     = "drive_failure_risk"
	findingWearout  = "drive_wearout"
	findingForecast = "checkpoint_forecast"
	// evidenceNetworkPath marks a hotspot finding about a host's network
	// path (analyzer/hotspot EvidenceNetworkPath), which no stripe move
	// relieves.
	evidenceNetworkPath = "network_path"
	// evidenceUtilization is a hotspot finding's device utilization
	// (analyzer/hotspot); at saturatedUtil or above (the analyzers'
	// SaturatedUtil) the device is at its limit.
	evidenceUtilization = "utilization"
	saturatedUtil       = 0.9
	maxPlanSources      = 64
	maxLocatesPerRun    = 20000
)

// activeFindings returns the active findings sorted by id.
func (e *Engine) activeFindings() []models.Finding {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]models.Finding, 0, len(e.findings))
	for _, f := range e.findings {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// plan reads the device table and the findings and opens a plan for every
// condition that has none: rebalancing of a pool with a hot spot, and
// evacuation (or spare promotion) of a drive at risk or worn out.
func (e *Engine) plan(ctx context.Context, now time.Time) error {
	devs, err := e.mover.Devices(ctx)
	if err != nil {
		return fmt.Errorf("cannot list devices: %w", err)
	}
	e.mu.Lock()
	clear(e.devs)
	for _, d := range devs {
		e.devs[d.ID] = d
	}
	e.mu.Unlock()
	fs := e.activeFindings()
	return errors.Join(e.planRebalance(ctx, now, devs, fs), e.planEvacuations(ctx, now, devs, fs))
}

// ModeOf is the mode kind runs in: its configured one, except that
// without a driver that moves data every kind but read-ahead only
// proposes (dry-run).
func (e *Engine) ModeOf(kind models.ActionKind) models.ActionMode { return e.mode(kind) }

// mode returns the mode a new plan of kind starts in: without a driver
// nothing can move, so every plan is a proposal.
func (e *Engine) mode(kind models.ActionKind) models.ActionMode {
	m := e.cfg.ModeOf(kind)
	// read-ahead is carried out by the GPU nodes' agents, not the mover
	if e.caps.Name == "none" && m != models.ModeOff && kind != models.ActionSetReadAhead {
		return models.ModeDryRun
	}
	return m
}

// openPlanFor reports whether a plan for key is open.
func (e *Engine) openPlanFor(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, a := range e.acts {
		if a.Parent == "" && !a.State.Terminal() && subjectKey(a) == key {
			return true
		}
	}
	return false
}

// snapshot is the planner's input built from the device table, the heat
// and the layouts of the files involved, with the maps back to ids.
type snapshot struct {
	in      plan.Input
	devIdx  map[string]int32
	devIDs  []string
	refs    []StripeRef // per stripe
	clients [][]string  // per stripe: who read it
	files   map[string]int32
	seen    map[string]int32 // file#mirror.component → stripe
	pools   map[string]int32
	poolOf  []string
	gens    map[string]uint64
	locates int
}

func (e *Engine) newSnapshot(devs []Device) *snapshot {
	s := &snapshot{devIdx: map[string]int32{}, files: map[string]int32{}, seen: map[string]int32{}, pools: map[string]int32{}}
	loads := e.heat.deviceLoads()
	ds := map[string]int32{}
	for _, d := range devs {
		if _, ok := ds[d.DS]; !ok {
			ds[d.DS] = int32(len(ds))
		}
		if _, ok := s.pools[d.Pool]; !ok {
			s.pools[d.Pool] = int32(len(s.poolOf))
			s.poolOf = append(s.poolOf, d.Pool)
		}
		s.devIdx[d.ID] = int32(len(s.devIDs))
		s.devIDs = append(s.devIDs, d.ID)
		s.in.Devices = append(s.in.Devices, plan.Device{
			DS: ds[d.DS], Pool: s.pools[d.Pool], Capacity: float64(d.CapacityBytes), Used: float64(d.UsedBytes),
			Accepts: d.State == StateOnline, Load: loads[d.ID], DSCapacity: d.DSBandwidthBytes,
		})
	}
	return s
}

// addDevice adds every stripe of device id with its heat and its file's
// other components (from the file's layout).
func (e *Engine) addDevice(ctx context.Context, s *snapshot, id string) error {
	refs, err := e.mover.Stripes(ctx, id)
	if err != nil {
		return fmt.Errorf("cannot list the stripes of %s: %w", e.name(id), err)
	}
	for _, r := range refs {
		if _, ok := s.files[r.File]; ok {
			s.add(e, r)
			continue
		}
		if s.locates >= maxLocatesPerRun {
			return fmt.Errorf("more than %d files to look at in one planning round", maxLocatesPerRun)
		}
		s.locates++
		lay, err := e.mover.Locate(ctx, r.File)
		if err != nil {
			if errors.Is(err, ErrNotFound) {
				continue
			}
			return fmt.Errorf("cannot locate %s: %w", r.File, err)
		}
		s.files[r.File] = int32(len(s.files))
		width := 0
		for mi, comps := range lay.Mirrors {
			width += len(comps)
			for ci, c := range comps {
				busy := false
				if ci == r.Component && mi == r.Mirror {
					busy = r.Busy
				}
				s.add(e, StripeRef{File: r.File, Mirror: mi, Component: ci, Device: c.Device, Handle: c.Handle, Bytes: c.Bytes, Busy: busy})
			}
		}
		if d, ok := s.devIdx[r.Device]; ok {
			pool := s.poolOf[s.in.Devices[d].Pool]
			e.mu.Lock()
			e.width[pool] = max(e.width[pool], width)
			e.mirrors[pool] = max(e.mirrors[pool], len(lay.Mirrors))
			e.mu.Unlock()
		}
		s.gen(r.File, lay.Generation)
	}
	return nil
}

// gen records the layout generation of a file, for the moves'
// compare-and-swap.
func (s *snapshot) gen(file string, g uint64) {
	if s.gens == nil {
		s.gens = map[string]uint64{}
	}
	s.gens[file] = g
}

func (s *snapshot) add(e *Engine, r StripeRef) {
	key := r.File + "#" + strconv.Itoa(r.Mirror) + "." + strconv.Itoa(r.Component)
	if k, ok := s.seen[key]; ok {
		if r.Busy {
			s.in.StripeBusy[k] = true
		}
		return
	}
	d, ok := s.devIdx[r.Device]
	if !ok {
		return // a device outside the table: cannot be a source or destination
	}
	h, cl := e.heat.stripe(r.Device, r.Handle)
	s.seen[key] = int32(len(s.refs))
	s.refs = append(s.refs, r)
	s.clients = append(s.clients, cl)
	s.in.StripeDevice = append(s.in.StripeDevice, d)
	s.in.StripeFile = append(s.in.StripeFile, s.files[r.File])
	s.in.StripeMirror = append(s.in.StripeMirror, int8(min(r.Mirror, 127)))
	s.in.StripeBytes = append(s.in.StripeBytes, r.Bytes)
	s.in.StripeHeat = append(s.in.StripeHeat, float32(h))
	s.in.StripeBusy = append(s.in.StripeBusy, r.Busy)
}

// subjectDevices returns the ids of the devices a finding's subject names:
// a device (by id or by name), a stripe's device ("<device>/<file
// handle>"), or every device of a data server (by address or name).
func (e *Engine) subjectDevices(s models.Subject, devs []Device) []string {
	name := func(d *Device) string {
		if e.opts.Namer != nil {
			if n := e.opts.Namer(d.ID); n != "" {
				return n
			}
		}
		return d.Name
	}
	id := s.ID
	switch s.Kind {
	case models.SubjectStripe:
		i := strings.LastIndexByte(id, '/')
		if i < 0 {
			return nil
		}
		id = id[:i]
		fallthrough
	case models.SubjectDevice:
		for i := range devs {
			if d := &devs[i]; d.ID == id || d.Name == id || name(d) == id {
				return []string{d.ID}
			}
		}
	case models.SubjectDS:
		var out []string
		for i := range devs {
			if d := &devs[i]; d.DSAddr == id || d.DS == id {
				out = append(out, d.ID)
			}
		}
		return out
	}
	return nil
}

// hotTriggers maps the active hotspot findings to the device ids they
// name: a device itself, a stripe's device, or every device of a DS
// address. It returns the earliest start per pool. A network path's
// finding (a DS's port or NIC full of traffic) is no trigger: the load is
// even, its drives are not busy, and moving stripes off them only moves
// bytes while the path stays full.
func (e *Engine) hotTriggers(devs []Device, fs []models.Finding) (map[string][]string, map[string]models.Finding) {
	pool := map[string]string{}
	for _, d := range devs {
		pool[d.ID] = d.Pool
	}
	trig := map[string][]string{}
	first := map[string]models.Finding{}
	for _, f := range fs {
		if f.Kind != findingHotspot {
			continue
		}
		if v, ok := f.EvidenceValue(evidenceNetworkPath); ok && v > 0 {
			continue
		}
		ids := e.subjectDevices(f.Subject, devs)
		for _, id := range ids {
			p, ok := pool[id]
			if !ok {
				continue
			}
			trig[p] = append(trig[p], id)
			if g, ok := first[p]; !ok || f.Start.Before(g.Start) {
				first[p] = f
			}
		}
	}
	return trig, first
}

// planRebalance opens a rebalance plan for every pool a hotspot finding
// points into.
func (e *Engine) planRebalance(ctx context.Context, now time.Time, devs []Device, fs []models.Finding) error {
	mode := e.mode(models.ActionRebalance)
	if mode == models.ModeOff {
		return nil
	}
	trig, first := e.hotTriggers(devs, fs)
	pools := make([]string, 0, len(trig))
	for p := range trig {
		pools = append(pools, p)
	}
	sort.Strings(pools)
	var errs []error
	for _, pool := range pools {
		subj := models.Subject{Kind: models.SubjectPool, ID: pool}
		key := string(models.ActionRebalance) + "|" + subj.String()
		if e.openPlanFor(key) {
			continue
		}
		if cool, _ := e.cooling(key, now); cool {
			continue
		}
		s := e.newSnapshot(devs)
		for _, id := range e.movingDevices() {
			if i, ok := s.devIdx[id]; ok {
				s.in.Devices[i].Moving = true
			}
		}
		for _, id := range e.saturatedDevices(devs, fs) {
			if i, ok := s.devIdx[id]; ok {
				s.in.Devices[i].Saturated = true
			}
		}
		var only []int32
		for _, id := range trig[pool] {
			only = append(only, s.devIdx[id])
		}
		opts := plan.Options{TargetMaxMean: e.cfg.Rebalance.TargetMaxMean, MinGain: e.cfg.Rebalance.MinGain, Headroom: e.cfg.Rebalance.Headroom, Only: only,
			Restripe: e.cfg.Rebalance.Restripe && e.caps.Restripe, MaxWidth: e.cfg.Rebalance.MaxStripeWidth}
		var srcs []int32
		if e.reb.AllStripes() {
			for i := range s.in.Devices {
				if s.poolOf[s.in.Devices[i].Pool] == pool {
					srcs = append(srcs, int32(i))
				}
			}
		} else {
			srcs = plan.HotDevices(&s.in, opts)
			if len(srcs) > maxPlanSources {
				srcs = srcs[:maxPlanSources]
			}
		}
		var err error
		for _, d := range srcs {
			if err = e.addDevice(ctx, s, s.devIDs[d]); err != nil {
				break
			}
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		res := e.reb.Rebalance(&s.in, opts)
		f := first[pool]
		id := planID(models.ActionRebalance, subj, f.Start)
		hot := make([]string, 0, len(res.Sources))
		for _, d := range res.Sources {
			hot = append(hot, e.name(s.devIDs[d]))
		}
		reason := fmt.Sprintf("%s: %s; pool %s max/mean device load %.2f (target %.2f)", f.Kind, f.Summary, pool, res.MaxMeanBefore, res.Target)
		if e.reb.Name() != "ballast" {
			reason = e.reb.Name() + " planner: " + reason
		}
		errs = append(errs, e.openPlan(ctx, now, mode, planSpec{
			id: id, kind: models.ActionRebalance, subject: subj, finding: f.ID, onset: f.Start, reason: reason,
			params: map[string]string{"planner": e.reb.Name(), "hot_devices": strings.Join(hot, ",")},
		}, s, res))
	}
	return errors.Join(errs...)
}

// saturatedDevices lists the devices that a hotspot finding about the
// device (or one of its stripes) sees at its limit: their stripes' heat
// is what they served, not what was asked of them (plan.Device.Saturated).
func (e *Engine) saturatedDevices(devs []Device, fs []models.Finding) []string {
	var out []string
	for _, f := range fs {
		if f.Kind != findingHotspot || (f.Subject.Kind != models.SubjectDevice && f.Subject.Kind != models.SubjectStripe) {
			continue
		}
		if u, ok := f.EvidenceValue(evidenceUtilization); ok && u >= saturatedUtil {
			out = append(out, e.subjectDevices(f.Subject, devs)...)
		}
	}
	return out
}

// movingDevices lists the devices that open moves and restripes read or
// write (started or waiting to start).
func (e *Engine) movingDevices() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for _, a := range e.acts {
		if a.Move == nil || a.State.Terminal() || a.DryRun {
			continue
		}
		for _, d := range moveDevices(a.Move) {
			if !seen[d] {
				seen[d] = true
				out = append(out, d)
			}
		}
	}
	sort.Strings(out)
	return out
}

// planID names a plan from what it is about: its kind, its subject and the
// start of the condition behind it, so a restarted engine that plans the
// same thing again finds the plan it journaled.
func planID(kind models.ActionKind, s models.Subject, since time.Time) string {
	return fmt.Sprintf("%s:%s:%s:%d", kind, s.Kind, strings.ReplaceAll(s.ID, "/", "_"), since.UnixMilli())
}

// moveID names a move from its plan and what it moves where.
func moveID(parent string, r StripeRef, to string) string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s#%d.%d>%s", r.File, r.Mirror, r.Component, to)
	return fmt.Sprintf("%s:m:%016x", parent, h.Sum64())
}

type planSpec struct {
	id        string
	kind      models.ActionKind
	subject   models.Subject
	name      string
	finding   string
	onset     time.Time // the condition's start, for the before-window; zero: none
	reason    string
	urgent    bool
	notBefore time.Time
	params    map[string]string
}

// openPlan journals a plan and its moves in one transaction, in the state
// mode starts them in. A plan without a move is journaled as cancelled
// with the planner's notes, so an operator sees that ballast looked and
// why nothing would help; the cooldown keeps it from repeating. Once ctx
// is done (the mds is stopping) nothing new is planned.
func (e *Engine) openPlan(ctx context.Context, now time.Time, mode models.ActionMode, spec planSpec, s *snapshot, res plan.Result) error {
	if ctx.Err() != nil {
		return nil
	}
	st := models.ActionApproved
	switch mode {
	case models.ModeDryRun:
		st = models.ActionProposed
	case models.ModeApprove:
		st = models.ActionAwaitingApproval
	}
	p := &models.Action{
		ID: spec.id, Kind: spec.kind, Subject: spec.subject, SubjectName: spec.name, FindingID: spec.finding, Onset: spec.onset,
		Mode: mode, State: st, DryRun: mode == models.ModeDryRun, Urgent: spec.urgent, Simulated: e.caps.Simulated,
		Created: now, Updated: now, NotBefore: spec.notBefore, Reason: spec.reason, Params: spec.params,
		Plan: &models.ActionPlan{
			Moves: len(res.Moves), Restripes: len(res.Restripes), Bytes: res.Bytes, LowerBoundBytes: res.LowerBound, CostRatio: round3(res.CostRatio()),
			MaxMeanBefore: round3(res.MaxMeanBefore), MaxMeanPredicted: round3(res.MaxMeanAfter), MaxMeanTarget: res.Target, Notes: res.Notes,
		},
	}
	if p.Params == nil {
		p.Params = map[string]string{}
	}
	// The same condition planned again after its cooldown gets the next
	// number: an id is never reused.
	e.mu.Lock()
	for n := 2; e.acts[p.ID] != nil; n++ {
		p.ID = fmt.Sprintf("%s:%d", spec.id, n)
	}
	e.mu.Unlock()
	if len(res.Moves)+len(res.Restripes) == 0 {
		p.State = models.ActionCancelled
		p.Finished = now
		if len(res.Notes) > 0 {
			p.Reason += "; no move planned: " + strings.Join(res.Notes, "; ")
		} else {
			p.Reason += "; no move planned"
		}
		if err := e.save(p); err != nil {
			return err
		}
		e.mu.Lock()
		e.noteEnded(p)
		e.mu.Unlock()
		return nil
	}
	as := []*models.Action{p}
	clients := map[string]bool{}
	for _, mv := range res.Moves {
		r := s.refs[mv.Stripe]
		to := s.devIDs[mv.To]
		for _, c := range s.clients[mv.Stripe] {
			clients[c] = true
		}
		m := &models.Move{
			File: r.File, Mirror: r.Mirror, Component: r.Component, From: r.Device, To: to,
			FromName: e.name(r.Device), ToName: e.name(to), Bytes: mv.Bytes, Generation: s.gens[r.File],
			Heat: math.Round(mv.Heat), Phase: models.PhasePending,
		}
		as = append(as, &models.Action{
			ID: moveID(p.ID, r, to), Kind: models.ActionMoveStripe,
			Subject:     models.Subject{Kind: models.SubjectStripe, ID: r.Device + "/" + r.Handle},
			SubjectName: fmt.Sprintf("%s#%d.%d", r.File, r.Mirror, r.Component),
			Parent:      p.ID, Mode: mode, State: st, DryRun: p.DryRun, Urgent: p.Urgent, Simulated: p.Simulated,
			Created: now, Updated: now, Move: m,
		})
	}
	for _, rs := range res.Restripes {
		a := e.restripeAction(p, s, rs, now, clients)
		as = append(as, a)
	}
	cl := make([]string, 0, len(clients))
	for c := range clients {
		cl = append(cl, c)
	}
	sort.Strings(cl)
	p.Params["clients"] = strings.Join(cl, ",")
	p.Progress = &models.ActionProgress{MovesTotal: len(res.Moves) + len(res.Restripes)}
	if err := e.save(as...); err != nil {
		return err
	}
	e.requeue(p.ID, now)
	for _, a := range as[1:] {
		e.requeue(a.ID, now)
	}
	e.log.Info("planned", "action", p.ID, "state", p.State, "moves", len(res.Moves), "restripes", len(res.Restripes), "bytes", res.Bytes, "lower_bound", res.LowerBound)
	return nil
}

func round3(x float64) float64 {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return 0
	}
	return math.Round(x*1000) / 1000
}

// resolveDrive maps a drive as the SMART series name it (ds03/nvme2, or
// ds03/nvme2n1 once the device table names drives) to a device id.
func (e *Engine) resolveDrive(subject string, devs []Device) (Device, bool) {
	node, drive, _ := strings.Cut(subject, "/")
	for _, d := range devs {
		if d.ID == subject || d.Name == subject || (e.opts.Namer != nil && e.opts.Namer(d.ID) == subject) {
			return d, true
		}
	}
	if node == "" || drive == "" {
		return Device{}, false
	}
	for _, d := range devs {
		n := d.Name
		if e.opts.Namer != nil {
			if x := e.opts.Namer(d.ID); x != "" {
				n = x
			}
		}
		dn, dd, ok := strings.Cut(n, "/")
		if ok && (dn == node || d.DS == node) && strings.HasPrefix(dd, drive) && isNamespaceOf(dd, drive) {
			return d, true
		}
	}
	return Device{}, false
}

// isNamespaceOf reports whether kernel name ns (nvme2n1) is a namespace of
// controller ctrl (nvme2), or is ctrl itself.
func isNamespaceOf(ns, ctrl string) bool {
	rest := strings.TrimPrefix(ns, ctrl)
	if rest == "" {
		return true
	}
	if rest[0] != 'n' || len(rest) < 2 {
		return false
	}
	_, err := strconv.Atoi(rest[1:])
	return err == nil
}

// failureWindow reads the predicted failure window (days) of a risk finding.
func failureWindow(f *models.Finding) (from float64, ok bool) {
	for _, ev := range f.Evidence {
		if ev.Name == "failure_window_from" {
			return ev.Value, true
		}
	}
	return 0, false
}

// riskUrgent reports whether a drive_failure_risk finding makes its
// drive's evacuation urgent: the finding is critical or the failure is
// predicted within evacuate.urgent_within. A wear-out never is.
func (e *Engine) riskUrgent(f *models.Finding) bool {
	if f.Kind != findingRisk {
		return false
	}
	from, ok := failureWindow(f)
	return f.Severity == models.SeverityCritical || (ok && time.Duration(from*24*float64(time.Hour)) <= time.Duration(e.cfg.Evacuate.UrgentWithin))
}

// evacRank orders the findings about one drive: an urgent risk outranks
// any other risk, and a risk outranks a wear-out (a drive about to fail is
// evacuated now, whatever else is said about it).
func (e *Engine) evacRank(f *models.Finding) int {
	switch {
	case e.riskUrgent(f):
		return 2
	case f.Kind == findingRisk:
		return 1
	}
	return 0
}

// planEvacuations opens an evacuation (or a spare promotion) for every
// drive a drive_failure_risk finding names (urgent when the failure is
// predicted within evacuate.urgent_within or the finding is critical), and
// a replacement, scheduled off-peak, for every drive_wearout. Per drive
// the risk finding outranks the wear-out, and an open non-urgent plan for
// a drive an urgent risk names is escalated to urgent (escalate).
func (e *Engine) planEvacuations(ctx context.Context, now time.Time, devs []Device, fs []models.Finding) error {
	var errs []error
	type pick struct {
		f   models.Finding
		dev Device
	}
	best := map[string]*pick{}
	var order []string
	for _, f := range fs {
		if f.Kind != findingRisk && f.Kind != findingWearout {
			continue
		}
		dev, ok := e.resolveDrive(f.Subject.ID, devs)
		if !ok {
			e.log.Debug("no device for a drive finding", "finding", f.ID, "drive", f.Subject.ID)
			continue
		}
		cur := best[dev.ID]
		if cur == nil {
			order = append(order, dev.ID)
			best[dev.ID] = &pick{f: f, dev: dev}
		} else if e.evacRank(&f) > e.evacRank(&cur.f) {
			cur.f = f
		}
	}
	for _, id := range order {
		f, dev := best[id].f, best[id].dev
		subj := models.Subject{Kind: models.SubjectDevice, ID: dev.ID}
		key := string(models.ActionEvacuateDevice) + "|" + subj.String()
		if e.openPlanFor(key) {
			if e.riskUrgent(&f) {
				errs = append(errs, e.escalate(now, key, &f))
			}
			continue
		}
		if cool, _ := e.cooling(key, now); cool {
			continue
		}
		if dev.State == StateFailed || dev.State == StateOffline {
			continue // nothing left to copy from
		}
		kind := models.ActionEvacuateDevice
		spare := int32(-1)
		s := e.newSnapshot(devs)
		var spareID string
		if e.cfg.Evacuate.UseSpares && e.caps.SetState {
			for _, d := range devs {
				if d.DS == dev.DS && d.State == StateSpare && d.CapacityBytes >= dev.UsedBytes {
					spareID = d.ID
					break
				}
			}
		}
		if spareID != "" {
			kind = models.ActionPromoteSpare
			spare = s.devIdx[spareID]
			s.in.Devices[spare].Accepts = true
			s.in.Devices[spare].Pool = s.in.Devices[s.devIdx[dev.ID]].Pool
		}
		mode := e.mode(kind)
		if mode == models.ModeOff {
			continue
		}
		if err := e.addDevice(ctx, s, dev.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		opts := plan.Options{Headroom: e.cfg.Rebalance.Headroom}
		res := plan.Evacuate(&s.in, s.devIdx[dev.ID], spare, opts)
		urgent := e.riskUrgent(&f)
		var notBefore time.Time
		why := ""
		if f.Kind == findingRisk {
			why = riskWhy(&f)
		} else {
			why = "worn out: a replacement, scheduled off-peak"
			notBefore = nextOffPeak(e.cfg.Evacuate.OffPeak, now)
			if !notBefore.After(now) {
				notBefore = time.Time{}
			}
		}
		params := map[string]string{}
		if spareID != "" {
			params["spare"] = spareID
			params["spare_name"] = e.name(spareID)
		}
		name := e.name(dev.ID)
		errs = append(errs, e.openPlan(ctx, now, mode, planSpec{
			id: planID(kind, subj, f.Start), kind: kind, subject: subj, name: name, finding: f.ID, urgent: urgent, notBefore: notBefore,
			reason: fmt.Sprintf("%s: drive %s is %s: %s", f.Kind, name, why, f.Summary), params: params,
		}, s, res))
	}
	return errors.Join(errs...)
}

// riskWhy says why a risk finding's drive is evacuated.
func riskWhy(f *models.Finding) string {
	why := "at risk of failing"
	if from, ok := failureWindow(f); ok {
		why += fmt.Sprintf(" (predicted window opens in %.0f days)", from)
	}
	return why
}

// escalate makes the open evacuation (or spare promotion, or wear-out
// replacement) plan keyed by key, and its unfinished moves, urgent, now
// that urgent risk finding f names its drive: a drive about to fail is
// evacuated at once, inside checkpoint windows too, not off-peak. Level
// based: it re-reads the table and changes only what is not urgent yet,
// so running it again (or after a restart, from the journal) changes
// nothing. The plan keeps its state (one awaiting approval still waits
// for it, as urgent); its reason says when and why it became urgent, and
// f becomes the finding it serves.
func (e *Engine) escalate(now time.Time, key string, f *models.Finding) error {
	e.mu.Lock()
	var p *models.Action
	for _, a := range e.acts {
		if a.Parent == "" && !a.State.Terminal() && subjectKey(a) == key {
			p = a
			break
		}
	}
	if p == nil {
		e.mu.Unlock()
		return nil
	}
	var as []*models.Action
	if !p.Urgent {
		c := *p
		c.Urgent, c.NotBefore, c.FindingID, c.Updated = true, time.Time{}, f.ID, now
		c.Reason += fmt.Sprintf("; escalated to urgent at %s: %s: drive %s is %s: %s",
			now.UTC().Format(time.RFC3339), f.Kind, c.SubjectName, riskWhy(f), f.Summary)
		if guardOf(c.Blocked) == GuardOffPeak {
			c.Blocked = ""
		}
		as = append(as, &c)
	}
	for _, k := range e.kids[p.ID] {
		if a := e.acts[k]; a != nil && !a.State.Terminal() && !a.Urgent {
			c := *a
			c.Urgent, c.Updated = true, now
			as = append(as, &c)
		}
	}
	id := p.ID
	e.mu.Unlock()
	if len(as) == 0 {
		return nil
	}
	if err := e.save(as...); err != nil {
		return err
	}
	e.requeue(id, now)
	e.log.Info("escalated to urgent", "action", id, "finding", f.ID, "moves", len(as)-1)
	return nil
}

// stillNeeded reports whether the condition behind a proposal still holds:
// a hotspot in the plan's pool, or the drive finding it came from.
func (e *Engine) stillNeeded(p *models.Action) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p.Kind != models.ActionRebalance {
		_, ok := e.findings[p.FindingID]
		return ok || p.FindingID == ""
	}
	devs := make([]Device, 0, len(e.devs))
	for _, d := range e.devs {
		devs = append(devs, d)
	}
	for _, f := range e.findings {
		if f.Kind != findingHotspot {
			continue
		}
		for _, id := range e.subjectDevices(f.Subject, devs) {
			if e.devs[id].Pool == p.Subject.ID {
				return true
			}
		}
	}
	return false
}
