package models

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"unicode/utf8"
)

// Label is one name=value pair of a time series.
type Label struct {
	Name  string
	Value string
}

// Sample is one value of one time series at one instant. Timestamp is in
// milliseconds since the Unix epoch, the unit of Prometheus and
// VictoriaMetrics.
type Sample struct {
	Name      string
	Labels    []Label
	Timestamp int64
	Value     float64
}

// Label returns the value of the label called name, or "" when absent.
func (s *Sample) Label(name string) string { return LabelValue(s.Labels, name) }

// LabelValue returns the value of the label called name in ls, or "".
func LabelValue(ls []Label, name string) string {
	for _, l := range ls {
		if l.Name == name {
			return l.Value
		}
	}
	return ""
}

// SeriesKey returns a canonical string for the series of s: the metric name
// followed by its labels sorted by name, in exposition syntax. Two samples of
// the same series give the same key whatever the order of their labels.
func (s *Sample) SeriesKey() string {
	ls := append([]Label(nil), s.Labels...)
	sort.Slice(ls, func(i, j int) bool { return ls[i].Name < ls[j].Name })
	var b strings.Builder
	b.WriteString(s.Name)
	b.WriteByte('{')
	for i, l := range ls {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", l.Name, l.Value)
	}
	b.WriteByte('}')
	return b.String()
}

// Limits of series identity that every ingest path enforces. They match the
// defaults of VictoriaMetrics, which otherwise truncates silently (label
// values, the metric name being the value of __name__) or panics (names
// over 64 KiB).
const (
	MaxLabelsPerSeries = 40
	MaxLabelValueBytes = 4096
	MaxLabelNameBytes  = 256
	MaxMetricNameBytes = MaxLabelValueBytes
)

// Abbrev quotes s for an error message, cutting it to 64 bytes so that an
// error about a huge name or value never echoes it whole.
func Abbrev(s string) string {
	const max = 64
	if len(s) <= max {
		return fmt.Sprintf("%q", s)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%q… (%d bytes)", s[:cut], len(s))
}

// CheckMetricName returns why name is not a metric name ballast stores, or
// nil: [a-zA-Z_:][a-zA-Z0-9_:]*, at most MaxMetricNameBytes.
func CheckMetricName(name string) error {
	if len(name) > MaxMetricNameBytes {
		return fmt.Errorf("metric name %s is longer than the limit of %d bytes", Abbrev(name), MaxMetricNameBytes)
	}
	if !ValidMetricName(name) {
		return fmt.Errorf("invalid metric name %s: must match [a-zA-Z_:][a-zA-Z0-9_:]*", Abbrev(name))
	}
	return nil
}

// ValidMetricName reports whether name is a classic Prometheus metric name:
// [a-zA-Z_:][a-zA-Z0-9_:]*.
func ValidMetricName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (i > 0 && c >= '0' && c <= '9') {
			continue
		}
		return false
	}
	return true
}

// ValidLabelName reports whether name is a Prometheus label name:
// [a-zA-Z_][a-zA-Z0-9_]*.
func ValidLabelName(name string) bool {
	if name == "" || len(name) > MaxLabelNameBytes {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (i > 0 && c >= '0' && c <= '9') {
			continue
		}
		return false
	}
	return true
}

// Validate checks the identity and value of s: a valid metric name, valid
// and unique label names, label values within limits and valid UTF-8, and a
// value that the store can keep (NaN is dropped by VictoriaMetrics, so it is
// refused here rather than lost silently).
func (s *Sample) Validate() error {
	if err := CheckMetricName(s.Name); err != nil {
		return err
	}
	if err := ValidateLabels(s.Labels); err != nil {
		return err
	}
	if math.IsNaN(s.Value) {
		return fmt.Errorf("value of %s is NaN, which the store cannot keep", s.Name)
	}
	return nil
}

// ValidateLabelValue checks the value of l: its length and UTF-8. It is
// the part of ValidateLabels that looks at values.
func ValidateLabelValue(l Label) error {
	if len(l.Value) > MaxLabelValueBytes {
		return fmt.Errorf("value of label %q is %d bytes long; the limit is %d", l.Name, len(l.Value), MaxLabelValueBytes)
	}
	if !utf8.ValidString(l.Value) {
		return fmt.Errorf("value of label %q is not valid UTF-8", l.Name)
	}
	return nil
}

// ValidateLabels checks label names, uniqueness, count and value limits.
func ValidateLabels(ls []Label) error {
	if len(ls) > MaxLabelsPerSeries {
		return fmt.Errorf("too many labels: %d; the limit is %d", len(ls), MaxLabelsPerSeries)
	}
	for i, l := range ls {
		if len(l.Name) > MaxLabelNameBytes {
			return fmt.Errorf("label name %s is longer than the limit of %d bytes", Abbrev(l.Name), MaxLabelNameBytes)
		}
		if !ValidLabelName(l.Name) {
			return fmt.Errorf("invalid label name %s: must match [a-zA-Z_][a-zA-Z0-9_]*", Abbrev(l.Name))
		}
		if l.Name == "__name__" {
			return fmt.Errorf("label __name__ is not allowed next to a metric name")
		}
		if err := ValidateLabelValue(l); err != nil {
			return err
		}
		for _, p := range ls[:i] {
			if p.Name == l.Name {
				return fmt.Errorf("duplicate label %q", l.Name)
			}
		}
	}
	return nil
}
