package ratelog

import (
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := New(time.Minute)
	steps := []struct {
		key        string
		at         time.Duration
		forget     bool
		ok         bool
		suppressed int
	}{
		{"a", 0, false, true, 0}, // first occurrence: at once
		{"a", 10 * time.Second, false, false, 0},
		{"b", 10 * time.Second, false, true, 0}, // keys are independent
		{"a", 59 * time.Second, false, false, 0},
		{"a", 60 * time.Second, false, true, 2}, // a window later, with the two held back
		{"a", 61 * time.Second, false, false, 0},
		{"a", 62 * time.Second, true, true, 1},  // forget: it was tracked, one held back
		{"a", 63 * time.Second, true, false, 0}, // forgetting twice is no news
		{"a", 64 * time.Second, false, true, 0}, // a new problem is logged at once
	}
	for i, s := range steps {
		var ok bool
		var n int
		if s.forget {
			ok, n = l.Forget(s.key)
		} else {
			ok, n = l.Allow(s.key, t0.Add(s.at))
		}
		if ok != s.ok || n != s.suppressed {
			t.Errorf("step %d (%s at %v, forget %v): got %v, %d; want %v, %d", i, s.key, s.at, s.forget, ok, n, s.ok, s.suppressed)
		}
	}
}
