package sim

import (
	"fmt"
	"time"

	"github.com/ballast-io/ballast/cluster/agent/readahead"
	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/sim/twin"
)

// raAgents stands in for the client agents of the twin's GPU nodes
// (cluster/agent/readahead): every poll each one reports its mount's
// read-ahead to the mds's engine (the call behind POST
// /api/v1/readahead/sync) and applies the answer as the real agent does,
// within the real agent's default bounds: a target outside them is
// refused, one inside is stepped toward by at most max_step_kb, a mount
// without a target goes back to its original value, a dry-run target is
// not applied. The real agent writes sysfs; this one writes the twin's
// read-ahead, so only the last step differs.
type raAgents struct {
	cfg      readahead.Config
	next     time.Time
	original map[string]int64
	last     map[string]models.ReadAheadMount // per node: the action applied or refused
}

func newRAAgents() *raAgents {
	return &raAgents{cfg: readahead.DefaultConfig(), original: map[string]int64{}, last: map[string]models.ReadAheadMount{}}
}

// sync runs one poll of every client node's agent when one is due.
func (d *Demo) syncReadAhead(now time.Time) {
	a := d.ra
	eng := d.mds.Actions()
	if eng == nil || now.Before(a.next) {
		return
	}
	a.next = now.Add(time.Duration(a.cfg.Poll))
	b := models.ReadAheadBounds{MinKB: a.cfg.MinKB, MaxKB: a.cfg.MaxKB, MaxStepKB: a.cfg.MaxStepKB}
	for _, n := range d.tw.Nodes() {
		if n.Role != twin.RoleClient {
			continue
		}
		d.twMu.Lock()
		cur, bdi, err := d.tw.ReadAheadKB(n.Name)
		d.twMu.Unlock()
		if err != nil {
			continue
		}
		orig, ok := a.original[n.Name]
		if !ok {
			orig = cur
			a.original[n.Name] = cur
		}
		m := a.last[n.Name]
		m.MountPoint, m.BDI, m.FSType, m.Source, m.CurrentKB, m.OriginalKB = twin.MountPoint, bdi, "nfs4", d.tw.Export(), cur, orig
		want, err := eng.SyncReadAhead(models.ReadAheadReport{Node: n.Name, Bounds: b, Mounts: []models.ReadAheadMount{m}}, now)
		if err != nil {
			d.opts.Logger.Debug("read-ahead sync failed", "node", n.Name, "err", err)
			continue
		}
		target, action, has := orig, "", false
		for _, t := range want.Targets {
			if t.MountPoint == twin.MountPoint && !t.DryRun {
				target, action, has = t.KB, t.Action, true
			}
		}
		m.Action, m.Refused = action, ""
		if has && (target < a.cfg.MinKB || target > a.cfg.MaxKB) {
			m.Refused = fmt.Sprintf("%d KiB is outside the agent's bounds [%d, %d] KiB", target, a.cfg.MinKB, a.cfg.MaxKB)
			a.last[n.Name] = m
			continue
		}
		a.last[n.Name] = m
		if target == cur {
			continue
		}
		next := cur + max(-a.cfg.MaxStepKB, min(a.cfg.MaxStepKB, target-cur))
		d.twMu.Lock()
		err = d.tw.SetReadAhead(n.Name, next)
		d.twMu.Unlock()
		if err != nil {
			d.opts.Logger.Warn("cannot set the twin's read-ahead", "node", n.Name, "err", err)
		}
	}
}
