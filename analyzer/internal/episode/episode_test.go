package episode

import (
	"testing"
	"time"
)

func TestHysteresis(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tr := New(20*time.Second, 30*time.Second)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	// Scripted condition per 10 s tick: enter, stay.
	script := []struct {
		enter, stay bool
		active      bool
		ended       bool
	}{
		{true, true, false, false},   // 0: pending
		{false, false, false, false}, // 10: blip dropped
		{true, true, false, false},   // 20: pending again, onset 20
		{true, true, false, false},   // 30
		{true, true, true, false},    // 40: 20 s held → active
		{false, true, true, false},   // 50: below enter, above exit: stays
		{false, false, true, false},  // 60: false 10 s
		{false, false, true, false},  // 70: false 20 s
		{true, true, true, false},    // 80: back: LastTrue 80
		{false, false, true, false},  // 90
		{false, false, true, false},  // 100
		{false, false, false, true},  // 110: 30 s false → ended
	}
	for i, s := range script {
		now := at(10 * i)
		if s.enter || s.stay {
			tr.Step(now, "k", s.enter, s.stay)
		}
		ended := tr.Finish(now)
		act := len(tr.Active()) == 1
		if act != s.active || (len(ended) == 1) != s.ended {
			t.Fatalf("tick %d: active %v ended %v; want %v %v", 10*i, act, ended, s.active, s.ended)
		}
		if s.ended {
			e := ended[0]
			if !e.Onset.Equal(at(20)) || !e.Confirmed.Equal(at(40)) || !e.End.Equal(at(110)) || !e.LastTrue.Equal(at(80)) {
				t.Fatalf("ended episode %+v; want onset 20 confirmed 40 last 80 end 110", e)
			}
		}
	}
	if tr.Get("k") != nil {
		t.Fatalf("episode still open after it ended")
	}
}

func TestZeroEnterAfterActivatesAtOnce(t *testing.T) {
	tr := New(0, 0)
	now := time.Unix(5, 0)
	if e := tr.Step(now, "a", true, true); e == nil || !e.Active {
		t.Fatalf("Step with enterAfter 0: got %+v; want an active episode", e)
	}
	if ended := tr.Finish(now.Add(time.Second)); len(ended) != 1 {
		t.Fatalf("Finish with exitAfter 0: got %d ended; want 1", len(ended))
	}
}
