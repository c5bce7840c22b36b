package actuator

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/ballast-io/ballast/models"
)

// Series of the actions engine, on the mds's /metrics and (each tick) in
// the store, so dashboards and alert rules see them like any metric.
const (
	// MetricActions counts actions by kind and state (gauge).
	MetricActions = "ballast_action_count"
	// MetricBytesMoved counts bytes of committed stripe moves, by plan kind.
	MetricBytesMoved = "ballast_action_bytes_moved_total"
	// MetricEffects counts measured effects by plan kind and verdict.
	MetricEffects = "ballast_action_effect_total"
	// MetricRefusals counts guard refusals by guard.
	MetricRefusals = "ballast_action_guard_refusals_total"
	// MetricMoveResults counts ended moves by state.
	MetricMoveResults = "ballast_action_moves_total"
	// MetricRetries counts retried steps by step.
	MetricRetries = "ballast_action_step_retries_total"
)

// series is one labelled value the engine keeps.
type series struct {
	name   string
	labels []models.Label
	value  float64
}

// key renders the series as /metrics writes it.
func (s *series) key() string {
	var b strings.Builder
	b.WriteString(s.name)
	if len(s.labels) > 0 {
		b.WriteByte('{')
		for i, l := range s.labels {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%s=%q", l.Name, l.Value)
		}
		b.WriteByte('}')
	}
	return b.String()
}

type engineMetrics struct {
	set *metrics.Set
	mu  sync.Mutex
	cum map[string]*series // counters, by key
	gau map[string]*series // state gauges, by key
}

func newEngineMetrics(set *metrics.Set) *engineMetrics {
	return &engineMetrics{set: set, cum: map[string]*series{}, gau: map[string]*series{}}
}

func lbl(kv ...string) []models.Label {
	out := make([]models.Label, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, models.Label{Name: kv[i], Value: kv[i+1]})
	}
	return out
}

func (m *engineMetrics) add(name string, v float64, kv ...string) {
	s := &series{name: name, labels: lbl(kv...)}
	k := s.key()
	m.set.GetOrCreateFloatCounter(k).Add(v)
	m.mu.Lock()
	defer m.mu.Unlock()
	if x := m.cum[k]; x != nil {
		x.value += v
		return
	}
	s.value = v
	m.cum[k] = s
}

func (m *engineMetrics) moved(kind models.ActionKind, b int64) {
	m.add(MetricBytesMoved, float64(b), "kind", string(kind))
}

func (m *engineMetrics) effect(kind models.ActionKind, v models.Verdict) {
	m.add(MetricEffects, 1, "kind", string(kind), "verdict", string(v))
}

func (m *engineMetrics) refused(guard string) { m.add(MetricRefusals, 1, "guard", guard) }

func (m *engineMetrics) moveEnded(st models.ActionState) {
	m.add(MetricMoveResults, 1, "state", string(st))
}

func (m *engineMetrics) retried(step string) { m.add(MetricRetries, 1, "step", step) }

// publish sets the state gauges (a kind and state seen once stays, at 0
// when empty, so dashboards' series do not vanish) and writes every
// ballast_action_* series to the store at now.
func (e *Engine) publish(ctx context.Context, now time.Time) error {
	counts := map[string]*series{}
	e.mu.Lock()
	for _, a := range e.acts {
		s := &series{name: MetricActions, labels: lbl("kind", string(a.Kind), "state", string(a.State))}
		k := s.key()
		if counts[k] == nil {
			counts[k] = s
		}
		counts[k].value++
	}
	e.mu.Unlock()
	m := e.met
	m.mu.Lock()
	for _, g := range m.gau {
		g.value = 0
	}
	for k, s := range counts {
		m.gau[k] = s
	}
	var out []*series
	for k, g := range m.gau {
		m.set.GetOrCreateGauge(k, nil).Set(g.value)
		c := *g
		out = append(out, &c)
	}
	for _, c := range m.cum {
		x := *c
		out = append(out, &x)
	}
	m.mu.Unlock()
	if e.opts.Appender == nil || len(out) == 0 {
		return nil
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key() < out[j].key() })
	samples := make([]models.Sample, len(out))
	for i, s := range out {
		samples[i] = models.Sample{Name: s.name, Labels: s.labels, Timestamp: now.UnixMilli(), Value: s.value}
	}
	return e.opts.Appender.Append(ctx, samples)
}
