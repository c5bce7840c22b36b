package actuator

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/ballast-io/ballast/actuator/plan"
	"github.com/ballast-io/ballast/models"
)

// A restripe_file action is a move of a whole mirror: it goes through the
// same phases, guards, journal and reconciler as a stripe move
// (moveStep), and differs only in what it asks of the driver (Restriper)
// and in how the layout shows where it stands (moveState).

// restripeAction is plan p's restripe_file child for rs: the mirror's old
// components in component order, the new devices in the order the new
// components take.
func (e *Engine) restripeAction(p *models.Action, s *snapshot, rs plan.Restripe, now time.Time, clients map[string]bool) *models.Action {
	comps := append([]int32(nil), rs.Stripes...)
	sort.Slice(comps, func(a, b int) bool { return s.refs[comps[a]].Component < s.refs[comps[b]].Component })
	from := make([]string, len(comps))
	for i, k := range comps {
		from[i] = s.refs[k].Device
		for _, c := range s.clients[k] {
			clients[c] = true
		}
	}
	to := make([]string, len(rs.To))
	names := make([]string, len(rs.To))
	for i, x := range rs.To {
		to[i] = s.devIDs[x]
		names[i] = e.name(to[i])
	}
	hot := s.refs[rs.Hot]
	m := &models.Move{
		File: hot.File, Mirror: hot.Mirror, Component: hot.Component, From: hot.Device, To: to[0],
		FromName: e.name(hot.Device), ToName: names[0], Bytes: rs.Bytes, Generation: s.gens[hot.File],
		Heat: math.Round(rs.Heat), Phase: models.PhasePending,
		Restripe: &models.Restripe{From: from, To: to, ToNames: names},
	}
	return &models.Action{
		ID: restripeID(p.ID, hot.File, hot.Mirror, to), Kind: models.ActionRestripeFile,
		Subject:     models.Subject{Kind: models.SubjectStripe, ID: hot.Device + "/" + hot.Handle},
		SubjectName: fmt.Sprintf("%s#%d (%d → %d components)", hot.File, hot.Mirror, len(from), len(to)),
		Parent:      p.ID, Mode: p.Mode, State: p.State, DryRun: p.DryRun, Urgent: p.Urgent, Simulated: p.Simulated,
		Created: now, Updated: now, Move: m,
	}
}

// restripeID names a restripe from its plan, the mirror and its new
// devices.
func restripeID(parent, file string, mirror int, to []string) string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s#%d>%s", file, mirror, strings.Join(to, ","))
	return fmt.Sprintf("%s:r:%016x", parent, h.Sum64())
}

// moveState reads where move m stands in layout lay: done when the layout
// shows its result (the component on m.To; the mirror on Restripe.To),
// intact when it still shows its start (m.From; Restripe.From); where
// says what the layout shows.
func moveState(lay *Layout, m *models.Move) (done, intact bool, where string) {
	if m.Restripe == nil {
		cur, _ := lay.At(m.Mirror, m.Component)
		return cur.Device == m.To, cur.Device == m.From, cur.Device
	}
	var devs []string
	if m.Mirror >= 0 && m.Mirror < len(lay.Mirrors) {
		for _, c := range lay.Mirrors[m.Mirror] {
			devs = append(devs, c.Device)
		}
	}
	return sameDevices(devs, m.Restripe.To), sameDevices(devs, m.Restripe.From), strings.Join(devs, ",")
}

func sameDevices(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !strings.EqualFold(a[i], b[i]) {
			return false
		}
	}
	return true
}

// moveDevices lists every device move m reads or writes.
func moveDevices(m *models.Move) []string {
	if m.Restripe == nil {
		return []string{m.From, m.To}
	}
	seen := map[string]bool{}
	var out []string
	for _, d := range append(append([]string(nil), m.Restripe.From...), m.Restripe.To...) {
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}

// what names what m moves, for reasons and errors.
func what(m *models.Move) string {
	if m.Restripe == nil {
		return fmt.Sprintf("component %s#%d.%d", m.File, m.Mirror, m.Component)
	}
	return fmt.Sprintf("mirror %s#%d", m.File, m.Mirror)
}

// restriper returns the driver as a Restriper, or a permanent error when
// it cannot restripe (a journal written under another driver).
func (e *Engine) restriper() (Restriper, error) {
	r, ok := e.mover.(Restriper)
	if !ok || !e.caps.Restripe {
		return nil, Permanent(fmt.Errorf("driver %s cannot restripe a file (restripe_file)", e.caps.Name))
	}
	return r, nil
}

// The steps of a move or a restripe, each to the driver's call for it.

func (e *Engine) copyStep(ctx context.Context, r CopyRequest) (Progress, error) {
	if r.Move.Restripe == nil {
		return e.mover.Copy(ctx, r)
	}
	rs, err := e.restriper()
	if err != nil {
		return Progress{}, err
	}
	return rs.CopyRestripe(ctx, r)
}

func (e *Engine) verifyStep(ctx context.Context, m models.Move) (VerifyResult, error) {
	if m.Restripe == nil {
		return e.mover.Verify(ctx, m)
	}
	rs, err := e.restriper()
	if err != nil {
		return VerifyResult{}, err
	}
	return rs.VerifyRestripe(ctx, m)
}

func (e *Engine) commitStep(ctx context.Context, m models.Move, fence uint64) error {
	if m.Restripe == nil {
		return e.mover.Commit(ctx, m, fence)
	}
	rs, err := e.restriper()
	if err != nil {
		return err
	}
	return rs.CommitRestripe(ctx, m, fence)
}

func (e *Engine) cleanupStep(ctx context.Context, m models.Move) error {
	if m.Restripe == nil {
		return e.mover.Cleanup(ctx, m)
	}
	rs, err := e.restriper()
	if err != nil {
		return err
	}
	return rs.CleanupRestripe(ctx, m)
}

func (e *Engine) abortStep(ctx context.Context, m models.Move) error {
	if m.Restripe == nil {
		return e.mover.Abort(ctx, m)
	}
	rs, err := e.restriper()
	if err != nil {
		return err
	}
	return rs.AbortRestripe(ctx, m)
}

// illegalRestripe says why restriping m onto Restripe.To breaks the
// placement rules of layout lay (a new device holds a component of
// another mirror, or is on a data server that does), or "". The caller
// holds e.mu.
func (e *Engine) illegalRestripe(lay *Layout, m *models.Move) string {
	for mi, comps := range lay.Mirrors {
		if mi == m.Mirror {
			continue
		}
		for _, c := range comps {
			for _, to := range m.Restripe.To {
				if strings.EqualFold(c.Device, to) {
					return fmt.Sprintf("%s now holds a component of another mirror of %s", e.nameOf(to), m.File)
				}
				if ds := e.devs[to].DS; ds != "" && e.devs[c.Device].DS == ds {
					return fmt.Sprintf("data server %s now holds another mirror of %s", ds, m.File)
				}
			}
		}
	}
	return ""
}
