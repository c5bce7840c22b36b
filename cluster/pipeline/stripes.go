package pipeline

import (
	"sync"

	"github.com/VictoriaMetrics/metrics"

	"github.com/ballast-io/ballast/models"
)

// StripeHub fans the per-stripe LAYOUTSTATS deltas out to the stripe-level
// analyzers subscribed to it (it is the StripeSink of the LAYOUTSTATS
// service). Subscribers are called in subscription order with the ingest
// serialised and must not keep the slice.
type StripeHub struct {
	mu     sync.RWMutex
	subs   []func([]models.StripeDelta)
	deltas *metrics.Counter
}

// NewStripeHub returns a hub counting deltas in set.
func NewStripeHub(set *metrics.Set) *StripeHub {
	if set == nil {
		set = metrics.NewSet()
	}
	return &StripeHub{deltas: set.GetOrCreateCounter(`ballast_layoutstats_stripe_deltas_total`)}
}

// Subscribe adds f to the receivers of every later batch of deltas.
func (h *StripeHub) Subscribe(f func([]models.StripeDelta)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.subs = append(h.subs, f)
}

// ObserveStripes implements layoutstats.StripeSink.
func (h *StripeHub) ObserveStripes(ds []models.StripeDelta) {
	h.deltas.Add(len(ds))
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, f := range h.subs {
		f(ds)
	}
}
