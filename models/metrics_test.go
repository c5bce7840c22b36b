package models

import (
	"strings"
	"testing"
)

// TestMetricsTable checks the conventions every descriptor must follow, so
// that a new entry with a bad name, a counter without _total or a duplicate
// fails here and not in a dashboard.
func TestMetricsTable(t *testing.T) {
	seen := map[string]bool{}
	for _, d := range Metrics {
		if !ValidMetricName(d.Name) || !strings.HasPrefix(d.Name, "ballast_") {
			t.Errorf("metric %q: name must be valid and start with ballast_", d.Name)
		}
		if seen[d.Name] {
			t.Errorf("metric %q listed twice", d.Name)
		}
		seen[d.Name] = true
		switch d.Type {
		case MetricCounter:
			if !strings.HasSuffix(d.Name, "_total") {
				t.Errorf("counter %q: name must end in _total", d.Name)
			}
		case MetricGauge:
			if strings.HasSuffix(d.Name, "_total") {
				t.Errorf("gauge %q: name must not end in _total", d.Name)
			}
		default:
			t.Errorf("metric %q: type %q; want counter or gauge", d.Name, d.Type)
		}
		if d.Help == "" || d.Collector == "" {
			t.Errorf("metric %q: help and collector must be set", d.Name)
		}
		base := strings.TrimSuffix(d.Name, "_total")
		if u := strings.ReplaceAll(d.Unit, "/", "_per_"); u != "" && !strings.HasSuffix(base, "_"+u) {
			t.Errorf("metric %q: unit %q must be the name's suffix", d.Name, d.Unit)
		}
		ls := map[string]bool{}
		for _, l := range d.Labels {
			if !ValidLabelName(l) || ls[l] {
				t.Errorf("metric %q: label %q invalid or repeated", d.Name, l)
			}
			ls[l] = true
		}
	}
	if _, ok := LookupMetric(MetricNVMeMediaErrors); !ok {
		t.Errorf("LookupMetric(%q) not found", MetricNVMeMediaErrors)
	}
	if _, ok := LookupMetric("ballast_no_such_metric"); ok {
		t.Errorf("LookupMetric found a metric that does not exist")
	}
}
