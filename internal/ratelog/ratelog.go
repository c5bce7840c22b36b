// Package ratelog bounds how often a recurring problem is logged: a scrape
// target that stays down, a sender that keeps pushing bad samples, a
// collector that fails on every scrape. The first occurrence of a problem is
// logged at once, later ones at most once per window with the number that
// were held back, and the end of the problem can be logged once.
//
// It is written by hand because the one library ballast carries that does
// this (VictoriaMetrics' lib/logger throttler) writes VictoriaMetrics' own
// log format, not log/slog records.
package ratelog

import (
	"sync"
	"time"
)

// Limiter tracks problems by key. The zero value is not usable; use New.
// It is safe for concurrent use.
type Limiter struct {
	every time.Duration
	mu    sync.Mutex
	keys  map[string]*entry
}

type entry struct {
	logged     time.Time // when the key was last allowed
	suppressed int       // occurrences held back since then
}

// New returns a limiter that allows each key at most once per every.
func New(every time.Duration) *Limiter {
	return &Limiter{every: every, keys: map[string]*entry{}}
}

// Allow records one occurrence of key at now and reports whether to log
// it, with how many occurrences were held back since key was last logged.
func (l *Limiter) Allow(key string, now time.Time) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.keys[key]
	if e == nil {
		l.keys[key] = &entry{logged: now}
		return true, 0
	}
	if now.Sub(e.logged) < l.every {
		e.suppressed++
		return false, 0
	}
	n := e.suppressed
	e.logged, e.suppressed = now, 0
	return true, n
}

// Forget ends the problem of key, so that its next occurrence is logged at
// once. It reports whether key was being tracked, i.e. whether its end is
// news, and how many occurrences were held back since it was last logged.
func (l *Limiter) Forget(key string) (tracked bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.keys[key]
	if e == nil {
		return false, 0
	}
	delete(l.keys, key)
	return true, e.suppressed
}
