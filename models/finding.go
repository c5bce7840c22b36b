package models

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Severity orders findings for people and alert routing.
type Severity string

// Severities, from least to most urgent.
const (
	SeverityInfo     Severity = "info"
	SeverityWarning  Severity = "warning"
	SeverityCritical Severity = "critical"
)

// Valid reports whether s is one of the defined severities.
func (s Severity) Valid() bool {
	return s == SeverityInfo || s == SeverityWarning || s == SeverityCritical
}

// SubjectKind names what a finding or action is about.
type SubjectKind string

// Subject kinds: the things in a pNFS cluster ballast can point at.
const (
	SubjectDS      SubjectKind = "ds"
	SubjectDevice  SubjectKind = "device"
	SubjectPort    SubjectKind = "port"
	SubjectStripe  SubjectKind = "stripe"
	SubjectClient  SubjectKind = "client"
	SubjectJob     SubjectKind = "job"
	SubjectPool    SubjectKind = "pool"
	SubjectGPU     SubjectKind = "gpu"
	SubjectCluster SubjectKind = "cluster"
)

// Subject identifies one thing in the cluster, e.g. {device, "ds03/nvme2n1"}.
type Subject struct {
	Kind SubjectKind `json:"kind"`
	ID   string      `json:"id"`
}

// String renders the subject as kind:id, the form used in labels and APIs.
func (s Subject) String() string { return string(s.Kind) + ":" + s.ID }

// Evidence is one number behind a finding, with the series it came from.
type Evidence struct {
	Name   string  `json:"name"`
	Value  float64 `json:"value"`
	Unit   string  `json:"unit,omitempty"`
	Series string  `json:"series,omitempty"`
	Note   string  `json:"note,omitempty"`
}

// Finding is something an analyzer concluded about the cluster. ID is stable
// for as long as the same condition goes on, so successive ticks update one
// finding instead of creating new ones. End is zero while it is active.
type Finding struct {
	ID       string     `json:"id"`
	Kind     string     `json:"kind"`
	Subject  Subject    `json:"subject"`
	Severity Severity   `json:"severity"`
	Score    float64    `json:"score"`
	Start    time.Time  `json:"start"`
	LastSeen time.Time  `json:"last_seen"`
	End      time.Time  `json:"end,omitzero"`
	Summary  string     `json:"summary"`
	Evidence []Evidence `json:"evidence,omitempty"`
}

// Active reports whether the finding has not ended.
func (f *Finding) Active() bool { return f.End.IsZero() }

// EvidenceValue returns the value of the first evidence called name.
func (f *Finding) EvidenceValue(name string) (float64, bool) {
	for _, e := range f.Evidence {
		if e.Name == name {
			return e.Value, true
		}
	}
	return 0, false
}

// Validate checks that f is complete enough to store and show.
func (f *Finding) Validate() error {
	switch {
	case f.ID == "":
		return fmt.Errorf("finding has no id")
	case f.Kind == "":
		return fmt.Errorf("finding %q has no kind", f.ID)
	case f.Subject.Kind == "" || f.Subject.ID == "":
		return fmt.Errorf("finding %q has no subject", f.ID)
	case !f.Severity.Valid():
		return fmt.Errorf("finding %q has invalid severity %q", f.ID, f.Severity)
	case f.Start.IsZero():
		return fmt.Errorf("finding %q has no start time", f.ID)
	case f.LastSeen.Before(f.Start):
		return fmt.Errorf("finding %q was last seen (%s) before it started (%s)", f.ID, f.LastSeen, f.Start)
	case !f.End.IsZero() && f.End.Before(f.Start):
		return fmt.Errorf("finding %q ends (%s) before it starts (%s)", f.ID, f.End, f.Start)
	}
	return nil
}

// JournalDigits is how many significant digits a finding's numbers (its
// score and evidence values) keep when written out: to the findings
// journal, the API, alerts and eval's findings.jsonl. The store does not
// give a number back to the last bit (VictoriaMetrics keeps a block's
// values as integers at one decimal scale, and which rows share a block
// depends on its own flush and merge timers), so a number derived from it
// can differ in its last bits between two runs over the same samples; ten
// significant digits keep far more than any finding is judged on and
// leave a last-bit difference visible only at a rounding boundary. The
// actuator rounds the effects it measures the same way.
const JournalDigits = 10

// RoundSignificant rounds x to digits significant digits; NaN and ±Inf
// are returned as they are.
func RoundSignificant(x float64, digits int) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) || x == 0 {
		return x
	}
	v, err := strconv.ParseFloat(strconv.FormatFloat(x, 'g', digits, 64), 64)
	if err != nil {
		return x
	}
	return v
}

// UnitUnixSeconds is the unit of evidence that is a point in time (Unix
// seconds, millisecond resolution).
const UnitUnixSeconds = "unix_seconds"

// MarshalJSON writes the evidence with its value rounded to JournalDigits
// significant digits, except a point in time (UnitUnixSeconds): that comes
// from the clock at millisecond resolution, not from the store, and ten
// digits of it would be whole seconds.
func (e Evidence) MarshalJSON() ([]byte, error) {
	type plain Evidence
	p := plain(e)
	if p.Unit != UnitUnixSeconds {
		p.Value = RoundSignificant(p.Value, JournalDigits)
	}
	return json.Marshal(p)
}

// MarshalJSON writes the finding with its score, and through Evidence's
// MarshalJSON its evidence values, rounded to JournalDigits significant
// digits.
func (f Finding) MarshalJSON() ([]byte, error) {
	type plain Finding
	p := plain(f)
	p.Score = RoundSignificant(p.Score, JournalDigits)
	return json.Marshal(p)
}
