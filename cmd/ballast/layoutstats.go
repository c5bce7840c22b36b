package main

import (
	"context"
	"net/http"
	"time"

	"github.com/ballast-io/ballast/cluster"
	"github.com/ballast-io/ballast/collector/layoutstats"
	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/storage"
)

// The mds accepts RFC 8435 LAYOUTSTATS at POST /api/v1/layoutstats
// (docs/layoutstats.md), stores the per-device and per-DS rates derived
// from them, and hands per-stripe deltas to the stripe analyzers.
func init() {
	mdsExtensions = append(mdsExtensions, func(m *cluster.MDS) {
		hub := cluster.NewStripeHub(m.Metrics())
		var svc *layoutstats.Service
		if m.Extra.Handlers == nil {
			m.Extra.Handlers = map[string]func(*storage.Embedded) http.Handler{}
		}
		m.Extra.Handlers[layoutstats.Path] = func(st *storage.Embedded) http.Handler {
			in, err := layoutstats.NewIngester(layoutstats.Options{})
			if err != nil {
				panic(err) // default options are valid: a programming error
			}
			svc = layoutstats.NewService(in, st, hub)
			return layoutstats.NewHandler(svc, layoutstats.HandlerOptions{})
		}
		// Derived series are written at most once per emit interval; the
		// periodic tick flushes them and forgets idle stripes.
		m.Extra.Sources = append(m.Extra.Sources, cluster.SourceSpec{
			Source:   sourceFunc{"layoutstats", func(ctx context.Context, now time.Time) ([]models.Sample, error) { return nil, svc.Tick(ctx, now) }},
			Interval: 5 * time.Second,
		})
		m.StripeHub = hub
	})
}

// sourceFunc adapts a function to cluster.Source.
type sourceFunc struct {
	name string
	f    func(ctx context.Context, now time.Time) ([]models.Sample, error)
}

func (s sourceFunc) Name() string { return s.name }
func (s sourceFunc) Collect(ctx context.Context, now time.Time) ([]models.Sample, error) {
	return s.f(ctx, now)
}
