package twin

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/ballast-io/ballast/models"
)

// maxParallelMigrations is how many stripe copies run at once; the rest
// wait in order, as an MDS's mover pool would run them.
const maxParallelMigrations = 16

// migration is one stripe copy from src to dst. The layout points at src
// until the copy completes; then the stripe switches to dst and src frees
// its bytes (copy → switch → delete).
type migration struct {
	stripe int32
	src    int32
	dst    int32
	total  float64
	moved  float64
	active bool
	done   bool
	action string
	// A held copy (StartCopy) does not switch the layout when it
	// completes: both copies are read back, then it waits for CommitCopy.
	hold   bool
	phase  int8
	rate   float64 // bytes/s cap of this copy, 0 = the scenario's
	urgent bool
	// paused holds a held copy's copy or read-back where it is
	// (PauseCopy): it moves no bytes until resumed.
	paused bool
	// bytes read back from the source and from the copy
	verSrc, verDst float64
	// rs is 1 + the index of the restripe this copy is a component of
	// (0: a stripe move)
	rs int32
}

// ErrDryRun is returned by Apply for an action marked dry-run: it must
// never reach the cluster.
var ErrDryRun = errors.New("dry-run actions are not applied")

// Apply carries out a on the simulated cluster, as a real MDS or client
// would: it validates the request, starts the physical work and returns.
// Effects appear in later ticks: a stripe move costs read bandwidth on the
// source and write bandwidth on the destination and switches the layout
// only when the copy completes.
//
// Supported kinds and their parameters:
//   - move_stripe: subject stripe "<file>#<k>"; params "to" (device name,
//     optional: the least-full eligible device of the pool).
//   - set_read_ahead: subject client node; params "read_ahead_kb".
//   - evacuate_device: subject device; moves every stripe off it and keeps
//     new files away from it.
//   - promote_spare: subject device; params "spare" (optional: the first
//     spare of the same data server). The spare joins the pool, the
//     device's stripes move to it and the device is retired.
//   - throttle_migration: any subject; params "mbps" (0 = unlimited) caps
//     all copies together.
//   - notify: no effect on the cluster.
func (t *Twin) Apply(a models.Action) error {
	if a.DryRun {
		return fmt.Errorf("cannot apply action %q: %w", a.ID, ErrDryRun)
	}
	var err error
	switch a.Kind {
	case models.ActionMoveStripe:
		err = t.applyMove(a)
	case models.ActionSetReadAhead:
		err = t.applyReadAhead(a)
	case models.ActionEvacuateDevice:
		err = t.applyEvacuate(a)
	case models.ActionPromoteSpare:
		err = t.applyPromote(a)
	case models.ActionThrottleMigration:
		err = t.applyThrottle(a)
	case models.ActionNotify:
	default:
		err = fmt.Errorf("unknown action kind %q", a.Kind)
	}
	if err != nil {
		return fmt.Errorf("cannot apply action %q: %w", a.ID, err)
	}
	return nil
}

func wantSubject(a models.Action, kind models.SubjectKind) error {
	if a.Subject.Kind != kind {
		return fmt.Errorf("%s needs a subject of kind %q, got %q", a.Kind, kind, a.Subject.Kind)
	}
	return nil
}

func (t *Twin) applyMove(a models.Action) error {
	if err := wantSubject(a, models.SubjectStripe); err != nil {
		return err
	}
	s := t.findStripe(a.Subject.ID)
	if s < 0 {
		return fmt.Errorf("no stripe %q", a.Subject.ID)
	}
	dst := int32(-1)
	if to := a.Params["to"]; to != "" {
		if dst = t.findDevice(to); dst < 0 {
			return fmt.Errorf("param to: no device %q", to)
		}
	}
	return t.queueMove(s, dst, a.ID)
}

// queueMove checks that stripe s can move to dst (or picks a destination
// when dst < 0) and queues the copy.
func (t *Twin) queueMove(s, dst int32, id string) error {
	st := &t.stripes[s]
	if st.moving {
		return fmt.Errorf("stripe %q is already moving", t.stripeID(s))
	}
	if !t.devAvailable(st.dev) {
		return fmt.Errorf("stripe %q: its device %s cannot be read", t.stripeID(s), t.dev[st.dev].name)
	}
	if t.fileBeingWritten(st.file) {
		return fmt.Errorf("stripe %q: its file is being written", t.stripeID(s))
	}
	if dst < 0 {
		if dst = t.pickDestination(s, t.dev[st.dev].pool); dst < 0 {
			return fmt.Errorf("stripe %q: no device in pool %q can take it", t.stripeID(s), t.pools[t.dev[st.dev].pool].name)
		}
	}
	dv := &t.dev[dst]
	switch {
	case dst == st.dev:
		return fmt.Errorf("stripe %q is already on %s", t.stripeID(s), dv.name)
	case !t.devAvailable(dst) || dv.draining:
		return fmt.Errorf("device %s cannot take data (failed, retired, draining or its server is down)", dv.name)
	case dv.spare:
		return fmt.Errorf("device %s is a spare; promote it first", dv.name)
	case dv.used+st.bytes > dv.capBytes:
		return fmt.Errorf("device %s has %.0f bytes free; the stripe needs %.0f", dv.name, dv.capBytes-dv.used, st.bytes)
	}
	st.moving = true
	t.migs = append(t.migs, migration{stripe: s, src: st.dev, dst: dst, total: st.bytes, action: id})
	t.migQueue = append(t.migQueue, int32(len(t.migs)-1))
	return nil
}

// fileBeingWritten reports whether a checkpoint is being written to f. A
// log file is appended a few KB/s for as long as its job runs; a mover
// copies it as it does any file (the bytes appended meanwhile go with it,
// mover.go), so it is never busy.
func (t *Twin) fileBeingWritten(f int32) bool {
	for i := range t.streams {
		st := &t.streams[i]
		if st.kind == streamWrite && !st.bg && st.active && st.file == f {
			return true
		}
	}
	return false
}

// pickDestination chooses the least-full usable device of pool p that
// holds no other component of stripe s's file.
func (t *Twin) pickDestination(s int32, p int32) int32 {
	st := &t.stripes[s]
	fl := &t.files[st.file]
	best, pick := 2.0, int32(-1)
	for _, d := range t.pools[p].devices {
		dv := &t.dev[d]
		if !t.devAvailable(d) || dv.draining || dv.spare || d == st.dev {
			continue
		}
		clash := false
		for k := fl.first; k < fl.first+fl.n; k++ {
			if t.stripes[k].dev == d {
				clash = true
			}
		}
		if clash || dv.used+st.bytes > dv.capBytes {
			continue
		}
		if f := dv.used / dv.capBytes; f < best {
			best, pick = f, d
		}
	}
	return pick
}

func (t *Twin) applyReadAhead(a models.Action) error {
	if err := wantSubject(a, models.SubjectClient); err != nil {
		return err
	}
	c := t.findClient(a.Subject.ID)
	if c < 0 {
		return fmt.Errorf("no client %q", a.Subject.ID)
	}
	v, err := strconv.ParseFloat(a.Params["read_ahead_kb"], 64)
	if err != nil || !(v >= 4) || v > 1<<20 {
		return fmt.Errorf("param read_ahead_kb: %q is not a number of KiB between 4 and 1048576", a.Params["read_ahead_kb"])
	}
	t.cli[c].ra = v * 1024
	return nil
}

func (t *Twin) applyEvacuate(a models.Action) error {
	if err := wantSubject(a, models.SubjectDevice); err != nil {
		return err
	}
	d := t.findDevice(a.Subject.ID)
	if d < 0 {
		return fmt.Errorf("no device %q", a.Subject.ID)
	}
	return t.evacuate(d, -1, a.ID)
}

// evacuate drains device d: new files avoid it and every stripe on it is
// queued to move (to dst when dst ≥ 0). Stripes that cannot move now are
// reported in the error; the others still move.
func (t *Twin) evacuate(d, dst int32, id string) error {
	if !t.devAvailable(d) {
		return fmt.Errorf("device %s cannot be read (failed, retired or its server is down)", t.dev[d].name)
	}
	t.dev[d].draining = true
	var errs []error
	queued := 0
	for s := range t.stripes {
		st := &t.stripes[s]
		if st.dev != d || st.moving || !t.live(int32(s)) || (st.bytes == 0 && t.files[st.file].dataset < 0) {
			continue
		}
		if err := t.queueMove(int32(s), dst, id); err != nil {
			errs = append(errs, err)
		} else {
			queued++
		}
	}
	if queued == 0 && len(errs) > 0 {
		t.dev[d].draining = false // nothing could move: leave the device as it was
	}
	return errors.Join(errs...)
}

func (t *Twin) applyPromote(a models.Action) error {
	if err := wantSubject(a, models.SubjectDevice); err != nil {
		return err
	}
	d := t.findDevice(a.Subject.ID)
	if d < 0 {
		return fmt.Errorf("no device %q", a.Subject.ID)
	}
	if t.dev[d].spare {
		return fmt.Errorf("device %s is itself a spare", t.dev[d].name)
	}
	sp := int32(-1)
	if name := a.Params["spare"]; name != "" {
		if sp = t.findDevice(name); sp < 0 || !t.dev[sp].spare || t.dev[sp].retired {
			return fmt.Errorf("param spare: %q is not an unused spare", name)
		}
	} else {
		n := &t.ds[t.dev[d].ds]
		for k := n.firstDev; k < n.firstDev+n.nDev; k++ {
			if t.dev[k].spare && !t.dev[k].retired && !t.dev[k].failed {
				sp = k
				break
			}
		}
		if sp < 0 {
			return fmt.Errorf("data server %s has no unused spare", n.name)
		}
	}
	if !t.devAvailable(d) {
		return fmt.Errorf("device %s cannot be read (failed, retired or its server is down); the twin models no redundancy to rebuild from", t.dev[d].name)
	}
	// the spare takes the device's place in its pool
	p := &t.pools[t.dev[d].pool]
	for i, x := range p.devices {
		if x == d {
			p.devices[i] = sp
		}
	}
	t.dev[sp].spare = false
	t.dev[sp].pool = t.dev[d].pool
	t.dev[d].retireWhenEmpty = true
	return t.evacuate(d, sp, a.ID)
}

func (t *Twin) applyThrottle(a models.Action) error {
	v, err := strconv.ParseFloat(a.Params["mbps"], 64)
	if err != nil || v < 0 {
		return fmt.Errorf("param mbps: %q is not a non-negative number of MB/s", a.Params["mbps"])
	}
	t.throttle = v * 1e6
	return nil
}

// addMigrationFlows turns the running copies into flows: read at the
// source device, across both hosts' NICs and ports when they differ, write
// at the destination device.
func (t *Twin) addMigrationFlows() {
	// start queued copies
	running := 0
	for _, m := range t.migQueue {
		if t.migs[m].active {
			running++
		}
	}
	for _, m := range t.migQueue {
		if running >= maxParallelMigrations {
			break
		}
		if !t.migs[m].active {
			t.migs[m].active = true
			running++
		}
	}
	if running == 0 {
		return
	}
	base := t.sc.Migration.MBps * 1e6
	if t.throttle > 0 {
		base = min(base, t.throttle/float64(running))
	}
	req := float64(1 << 20)
	for _, mi := range t.migQueue {
		m := &t.migs[mi]
		if !m.active {
			continue
		}
		if !t.devAvailable(m.src) || !t.devAvailable(m.dst) {
			continue // waits for the device or server to return
		}
		if m.paused {
			continue // its mover paused it
		}
		rate := base
		if m.rate > 0 {
			rate = min(rate, m.rate)
		}
		if m.phase == migVerifying {
			t.addVerifyFlows(mi, rate*t.dt, req)
			continue
		}
		// the copy keeps its pace's requests in flight until its last
		// one: its share of a busy device follows its pace, not the
		// bytes it has left (docs/scenarios.md, "Actions"); what it is
		// served beyond them is not booked (settleFlows)
		want := min(m.total-m.moved, rate*t.dt)
		sd, dd := &t.dev[m.src], &t.dev[m.dst]
		f := flow{src: srcMigration, err: -1, owner: mi, stripe: m.stripe, rec: -1, dev: m.src, want: want, demand: rate * t.dt, lim: -1, req: req, amp: 1}
		if sd.ds == dd.ds {
			f.res = [maxPath]int32{m.src, m.dst, int32(t.spaceBase) + m.dst}
			f.devAt, f.devCoef = 1<<0|1<<1, [2]float64{t.devCoef(m.src, req, false), t.devCoef(m.dst, req, true)}
			f.n = 3
		} else {
			sb, db := t.dsBase+slotsPerHost*int(sd.ds), t.dsBase+slotsPerHost*int(dd.ds)
			f.res = [maxPath]int32{m.src, int32(sb + slotNICTx), int32(sb + slotPortIn), int32(db + slotPortOut), int32(db + slotNICRx), m.dst, int32(t.spaceBase) + m.dst}
			f.devAt, f.devCoef = 1<<0|1<<5, [2]float64{t.devCoef(m.src, req, false), t.devCoef(m.dst, req, true)}
			f.n = 7
		}
		t.flows = append(t.flows, f)
	}
}

// addVerifyFlows reads both copies of migration mi back, up to max bytes
// each this tick: each read crosses its device, its server's NIC and its
// switch port towards the mds, which compares the checksums.
func (t *Twin) addVerifyFlows(mi int32, max, req float64) {
	m := &t.migs[mi]
	for side, d := range [2]int32{m.src, m.dst} {
		left := m.total - m.verSrc
		if side == 1 {
			left = m.total - m.verDst
		}
		if left <= 0 {
			continue
		}
		want := min(left, max)
		b := t.dsBase + slotsPerHost*int(t.dev[d].ds)
		f := flow{src: srcVerify, err: -1, owner: mi, stripe: m.stripe, rec: int32(side), dev: d, want: want, demand: max, lim: -1, req: req, amp: 1}
		f.res = [maxPath]int32{d, int32(b + slotNICTx), int32(b + slotPortIn)}
		f.devAt, f.devCoef[0] = 1<<0, t.devCoef(d, req, false)
		f.n = 3
		t.flows = append(t.flows, f)
	}
}

// settleMigrations switches the layout of completed copies and retires
// devices that a promotion emptied. A held copy instead goes on to its
// read-back, then leaves the mover's queue to wait for its commit.
func (t *Twin) settleMigrations(now float64) {
	if len(t.migQueue) == 0 {
		return
	}
	keep := t.migQueue[:0]
	for _, mi := range t.migQueue {
		m := &t.migs[mi]
		if m.hold {
			if m.phase == migCopying && m.moved >= m.total-1e-6 {
				m.phase = migVerifying
			}
			if m.phase == migVerifying && m.verSrc >= m.total-1e-6 && m.verDst >= m.total-1e-6 {
				m.phase, m.active = migCopied, false
				continue
			}
			keep = append(keep, mi)
			continue
		}
		if m.moved < m.total-1e-6 {
			keep = append(keep, mi)
			continue
		}
		st := &t.stripes[m.stripe]
		t.dev[m.src].used = max(0, t.dev[m.src].used-st.bytes)
		t.dev[m.dst].used += st.bytes - m.moved
		st.dev = m.dst
		st.gen++
		st.moving = false
		m.active, m.done = false, true
		t.files[st.file].gen++
		t.maybeRetire(m.src)
	}
	t.migQueue = keep
}

func (t *Twin) maybeRetire(d int32) {
	dv := &t.dev[d]
	if !dv.retireWhenEmpty {
		return
	}
	for s := range t.stripes {
		if t.stripes[s].dev == d && t.holds(int32(s)) {
			return
		}
	}
	dv.retired = true
	// empty checkpoint slots still pointing here get a new home at their
	// next write; until then they only need a valid device
	for s := range t.stripes {
		if t.stripes[s].dev == d {
			t.stripes[s].dev = t.pools[dv.pool].devices[0]
		}
	}
}
