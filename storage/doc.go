// Package storage is ballast's time-series store and its HTTP surface.
//
// The embedded backend is VictoriaMetrics: lib/storage through
// app/vmstorage for data, and app/vmselect's MetricsQL engine for the
// Prometheus HTTP query API (see docs/decisions.md for why). VictoriaMetrics
// keeps one storage per process in package-level state, so at most one
// Embedded can be open in a process at a time; OpenEmbedded refuses a second.
//
// The rest of ballast sees storage through two small interfaces, Appender and
// Querier, so the remote backend (storage/remote: remote write to vminsert or
// any receiver, queries against vmselect or any Prometheus API) replaces the
// embedded one without touching callers.
package storage

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/ballast-io/ballast/models"
)

// Appender accepts batches of samples. A nil error means every sample was
// validated and handed to the store; a non-nil error means none was.
type Appender interface {
	Append(ctx context.Context, samples []models.Sample) error
}

// Querier evaluates MetricsQL/PromQL expressions.
type Querier interface {
	// Query evaluates expr at one instant.
	Query(ctx context.Context, expr string, at time.Time) ([]Series, error)
	// QueryRange evaluates expr at every step from start to end inclusive.
	QueryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]Series, error)
}

// Series is one result series of a query.
type Series struct {
	Name       string
	Labels     []models.Label
	Timestamps []int64 // milliseconds
	Values     []float64
}

// Label returns the value of label name, or "".
func (s *Series) Label(name string) string { return models.LabelValue(s.Labels, name) }

// Store is a backend of the mds: the embedded VictoriaMetrics store, or a
// remote one (storage/remote). The mds assembly holds it; everything else sees only
// the Appender, Querier or BatchWriter part it needs.
type Store interface {
	Appender
	Querier
	BatchWriter
	// QueryHandler serves the Prometheus HTTP query API.
	QueryHandler() http.Handler
	// Flush makes everything written so far visible to queries now
	// (simulated clocks read back what they just wrote).
	Flush()
	// IsReadOnly reports whether the store refuses writes.
	IsReadOnly() bool
	// SizeBytes is the space the store takes on disk.
	SizeBytes() int64
	// RowsAdded counts the rows this process wrote.
	RowsAdded() uint64
	// DataDir is where the store and the journals beside it live.
	DataDir() string
	// Close flushes and releases the store; idempotent, bounded by ctx.
	Close(ctx context.Context) error
}

var _ Store = (*Embedded)(nil)

// MetricsWriter is a Store whose engine keeps its own process metrics
// (VictoriaMetrics' default metrics set for the embedded store); the mds
// appends them to its /metrics.
type MetricsWriter interface {
	WriteMetrics(w io.Writer)
}
