package models

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

// TestFindingJSONAbsorbsLastBits: two findings whose score and evidence
// differ only in the last bits (what the store's decimal blocks can do to
// a number read back) are written out identically, and a finding written
// and read back keeps every other field.
func TestFindingJSONAbsorbsLastBits(t *testing.T) {
	mk := func(v, score float64) Finding {
		return Finding{
			ID: "f1", Kind: "hotspot", Subject: Subject{Kind: "device", ID: "ds01/nvme0n1"},
			Severity: SeverityWarning, Score: score,
			Start:    time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC),
			LastSeen: time.Date(2026, 11, 27, 0, 1, 0, 0, time.UTC),
			Summary:  "hot",
			Evidence: []Evidence{{Name: "load", Value: v, Unit: "bytes/s", Series: "x"}},
		}
	}
	a, err := json.Marshal(mk(78419353223.0535, 0.7312345678901234))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(mk(math.Nextafter(78419353223.0535, math.Inf(1)), math.Nextafter(0.7312345678901234, 0)))
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != string(b) {
		t.Errorf("last-bit differences show:\n%s\n%s", a, b)
	}
	if !strings.Contains(string(a), `"value":78419353220`) || !strings.Contains(string(a), `"score":0.7312345679`) {
		t.Errorf("not rounded to %d significant digits: %s", JournalDigits, a)
	}
	var back Finding
	if err := json.Unmarshal(a, &back); err != nil {
		t.Fatal(err)
	}
	want := mk(78419353220, 0.7312345679)
	if back.ID != want.ID || back.Subject != want.Subject || !back.Start.Equal(want.Start) || back.Evidence[0] != want.Evidence[0] || back.Score != want.Score || !back.End.IsZero() {
		t.Errorf("round trip: got %+v, want %+v", back, want)
	}
	// A point in time keeps its milliseconds.
	if c, _ := json.Marshal(Evidence{Name: "next_start", Value: 1767231899.918, Unit: UnitUnixSeconds}); !strings.Contains(string(c), `"value":1767231899.918`) {
		t.Errorf("unix seconds rounded: %s", c)
	}
	// A pointer marshals the same way (the method has a value receiver).
	if c, _ := json.Marshal(&Finding{Score: 1.00000000001}); !strings.Contains(string(c), `"score":1,`) {
		t.Errorf("pointer: %s", c)
	}
}
