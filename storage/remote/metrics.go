package remote

import (
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"
)

// storeMetrics are the ballast_remote_* series on the mds's /metrics.
type storeMetrics struct {
	set         *metrics.Set
	queued      *metrics.Counter
	sent        *metrics.Counter
	sendErrors  *metrics.Counter
	lastSuccess atomic.Int64
}

func (m *storeMetrics) register(set *metrics.Set, s *Store) {
	m.set = set
	m.queued = set.NewCounter(`ballast_remote_samples_queued_total`)
	m.sent = set.NewCounter(`ballast_remote_samples_sent_total`)
	m.sendErrors = set.NewCounter(`ballast_remote_send_errors_total`)
	for _, r := range []string{"queue_full", "rejected", "disk"} {
		m.dropped(r)
	}
	set.NewGauge(`ballast_remote_queue_bytes`, func() float64 { b, _, _ := s.q.stats(); return float64(b) })
	set.NewGauge(`ballast_remote_queue_samples`, func() float64 { _, n, _ := s.q.stats(); return float64(n) })
	set.NewGauge(`ballast_remote_queue_blocks`, func() float64 { _, _, n := s.q.stats(); return float64(n) })
	set.NewGauge(`ballast_remote_queue_max_bytes`, func() float64 { return float64(s.opts.QueueMaxBytes) })
	set.NewGauge(`ballast_remote_last_success_timestamp_seconds`, func() float64 { return float64(m.lastSuccess.Load()) })
}

// dropped counts samples the store gave up on, by reason: queue_full (the
// oldest blocks made room for new ones), rejected (the remote refused a
// block for good), disk (the queue could not write).
func (m *storeMetrics) dropped(reason string) *metrics.Counter {
	return m.set.GetOrCreateCounter(`ballast_remote_samples_dropped_total{reason="` + reason + `"}`)
}
