// Package episode turns a per-tick boolean condition into debounced episodes
// with hysteresis: a condition must hold for EnterAfter before an episode
// becomes active, and an active episode survives until its looser "stay"
// condition has been false for ExitAfter. Analyzers use it so findings do not
// flap and keep one stable id for one ongoing condition.
package episode

import (
	"sort"
	"time"
)

// Episode is one run of a condition for one key.
type Episode struct {
	Key string
	// Onset is when the entering condition first held in this run; it is the
	// finding's start.
	Onset time.Time
	// Confirmed is when the episode became active (Onset + EnterAfter or later).
	Confirmed time.Time
	// LastTrue is the last tick at which the stay condition held.
	LastTrue time.Time
	// End is when the episode was closed; zero while it goes on.
	End time.Time
	// Active is false while the episode is only pending.
	Active bool

	stepped time.Time
}

// Tracker holds the episodes of many keys. Only keys whose condition holds,
// or whose episode is still open, take memory.
type Tracker struct {
	enterAfter, exitAfter time.Duration
	eps                   map[string]*Episode
}

// New returns a tracker: a condition must hold for enterAfter to open an
// episode and be false for exitAfter to close it.
func New(enterAfter, exitAfter time.Duration) *Tracker {
	return &Tracker{enterAfter: enterAfter, exitAfter: exitAfter, eps: map[string]*Episode{}}
}

// Step records the condition of key at now. enter is the strict condition that
// opens an episode; stay is the looser one that keeps an active episode open
// (enter implies stay). It returns the key's episode, or nil when there is
// none. Keys not stepped at a tick are handled by Finish.
func (t *Tracker) Step(now time.Time, key string, enter, stay bool) *Episode {
	e := t.eps[key]
	if e == nil {
		if !enter {
			return nil
		}
		e = &Episode{Key: key, Onset: now}
		t.eps[key] = e
	}
	e.stepped = now
	stay = stay || enter
	switch {
	case e.Active && stay:
		e.LastTrue = now
	case e.Active:
		if now.Sub(e.LastTrue) >= t.exitAfter {
			e.End = now
		}
	case enter:
		if now.Sub(e.Onset) >= t.enterAfter {
			e.Active, e.Confirmed, e.LastTrue = true, now, now
		}
	default:
		delete(t.eps, key) // a pending episode that did not last
		return nil
	}
	return e
}

// Finish treats every key not stepped at now as false, removes the episodes
// that ended at now and returns them sorted by key.
func (t *Tracker) Finish(now time.Time) []Episode {
	var ended []Episode
	for key, e := range t.eps {
		if !e.stepped.Equal(now) {
			if t.Step(now, key, false, false) == nil {
				continue
			}
		}
		if !e.End.IsZero() {
			ended = append(ended, *e)
			delete(t.eps, key)
		}
	}
	sort.Slice(ended, func(i, j int) bool { return ended[i].Key < ended[j].Key })
	return ended
}

// Get returns the open (pending or active) episode of key, or nil.
func (t *Tracker) Get(key string) *Episode { return t.eps[key] }

// Active returns the active episodes sorted by key.
func (t *Tracker) Active() []*Episode {
	var out []*Episode
	for _, e := range t.eps {
		if e.Active && e.End.IsZero() {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}
