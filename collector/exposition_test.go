package collector

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/ballast-io/ballast/models"
)

// expfmtText is the reference WriteText is held to: the samples gathered
// through a prometheus registry and encoded by expfmt, as the agent's
// promhttp handler serves them.
func expfmtText(w io.Writer, samples []Sample) error {
	set := &sampleSet{samples: samples, descs: descriptors()}
	reg := prometheus.NewRegistry()
	if err := reg.Register(set); err != nil {
		return fmt.Errorf("cannot register samples: %w", err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		return fmt.Errorf("cannot gather samples: %w", err)
	}
	if len(set.errs) > 0 {
		return errors.Join(set.errs...)
	}
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return fmt.Errorf("cannot encode %q: %w", mf.GetName(), err)
		}
	}
	return nil
}

// sampleSet adapts a fixed list of samples to prometheus.Collector.
type sampleSet struct {
	samples []Sample
	descs   map[string]family
	errs    []error
}

func (s *sampleSet) Describe(chan<- *prometheus.Desc) {}

func (s *sampleSet) Collect(ch chan<- prometheus.Metric) {
	for _, x := range s.samples {
		m, err := constMetric(s.descs, x)
		if err != nil {
			s.errs = append(s.errs, err)
			continue
		}
		ch <- m
	}
}

// TestWriteTextMatchesExpfmt holds ballast's one exposition encoder to
// expfmt byte for byte: over what every fixture yields, and over two
// series of every family in models.Metrics (the families the cluster twin
// renders) with label values and numbers that need escaping or special
// formatting.
func TestWriteTextMatchesExpfmt(t *testing.T) {
	same := func(t *testing.T, what string, samples []Sample) {
		t.Helper()
		var want, got bytes.Buffer
		if err := expfmtText(&want, samples); err != nil {
			t.Fatalf("%s: expfmt: %v", what, err)
		}
		if err := WriteText(&got, samples); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got.String() != want.String() {
			g, w := strings.Split(got.String(), "\n"), strings.Split(want.String(), "\n")
			for i := range min(len(g), len(w)) {
				if g[i] != w[i] {
					t.Fatalf("%s: line %d is\n%s\nwant\n%s", what, i+1, g[i], w[i])
				}
			}
			t.Fatalf("%s: %d lines; want %d", what, len(g), len(w))
		}
	}
	for _, c := range fixtureCases(t) {
		samples, _ := c.Read(t)
		same(t, c.Fixture, samples)
	}
	var every []Sample
	values := []float64{1.5e300, -1, 0, 1, 0.1, math.NaN(), math.Inf(1), math.Inf(-1), 1e-9, 123456789}
	for i, d := range models.Metrics {
		for j, v := range []string{`a "b"`, "x\\y\nz"} {
			s := Sample{Name: d.Name, Value: values[(2*i+j)%len(values)]}
			for k := range d.Labels {
				s.Values = append(s.Values, fmt.Sprintf("%s%d", v, k))
			}
			every = append(every, s)
			if len(d.Labels) == 0 {
				break
			}
		}
	}
	same(t, "every family", every)

	if err := WriteText(io.Discard, append(every, every[0])); err == nil || !strings.Contains(err.Error(), "duplicate series") {
		t.Errorf("a repeated series: got %v; want a duplicate series error", err)
	}
	if err := WriteText(io.Discard, []Sample{{Name: "ballast_no_such_metric"}}); err == nil || !strings.Contains(err.Error(), "no descriptor") {
		t.Errorf("an unknown family: got %v; want no descriptor", err)
	}
	if err := WriteText(io.Discard, []Sample{{Name: models.MetricNFSDThreads, Values: []string{"extra"}}}); err == nil || !strings.Contains(err.Error(), "label values") {
		t.Errorf("a label value too many: got %v; want an error naming the label values", err)
	}
}
