package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// AdmissionOptions bound the ingest requests one mds serves at once.
type AdmissionOptions struct {
	// MaxRequests is how many ingest requests are read, parsed and stored
	// at once. Default 8.
	MaxRequests int
	// MaxBytes bounds the request bodies being served at once, counted as
	// sent (Content-Length; a body of unknown length counts as MaxBodyBytes).
	// One body larger than MaxBytes is served alone. Default 64 MiB.
	MaxBytes int64
	// MaxBodyBytes is what a body of unknown length is counted as. Default
	// 32 MiB.
	MaxBodyBytes int64
	// MaxWorkers is how many admitted requests decode, parse and store at
	// once: the CPU ingest may take. A request does not count while it
	// waits for its body from the network. Default GOMAXPROCS − 1, at
	// least 1, so that queries and health checks keep a CPU's worth.
	MaxWorkers int
	// SpareWorkers are worker slots beyond MaxWorkers that ingest takes
	// only while no query runs and none ended within QueryHold: the CPU
	// kept for queries is lent to ingest while nobody queries, and new
	// ingest work stops taking it as soon as a query comes (the request
	// holding it finishes; nothing is preempted). 0 with MaxWorkers 0 (the
	// default): GOMAXPROCS − MaxWorkers, so an mds fed by a bulk import on
	// a 2-CPU host uses both CPUs; 0 with MaxWorkers set: none, the
	// operator's bound is a hard one. Negative: none.
	SpareWorkers int
	// QueryHold is how long after a query ended the spare workers stay
	// kept for queries. Default 2s.
	QueryHold time.Duration
	// QueueTimeout is how long a request waits for room before it is
	// answered 429. Default 1s.
	QueueTimeout time.Duration
	// RetryAfter is the Retry-After a refused request gets, rounded up to
	// whole seconds. Default 1s.
	RetryAfter time.Duration
	// Metrics receives ballast_ingest_inflight_* and
	// ballast_ingest_throttled_requests_total. Default: a private set.
	Metrics *metrics.Set
}

// Admission is the ingest endpoints' backpressure: past MaxRequests
// requests or MaxBytes of bodies in flight, or with all MaxWorkers busy, a
// request waits up to QueueTimeout (for all of them together), then gets
// 429 Too Many Requests with Retry-After, before its body is read. Senders
// (Prometheus remote write among them) back off on 429 and send the same
// data again; nothing of a refused request is stored, so nothing
// acknowledged is ever dropped for load.
//
// It bounds the memory ingest can take (about MaxRequests parsed bodies)
// and the CPU (MaxWorkers requests decoding, parsing and storing), which
// queries and health checks never wait for. Counting requests and bytes
// alone let a faster ingest path take every CPU: on 2 cores, 8 admitted
// requests starved queries for 10 s (TestOverload). The CPU kept for
// queries is lent to ingest (SpareWorkers) while no query runs: with the
// one worker GOMAXPROCS − 1 gives on 2 CPUs, a bulk import ran at 0.52×
// VictoriaMetrics single-node's samples/s on a quiet machine, with the
// spare at about 1.0× (BENCHMARKS.md, foundation).
//
// The worker slots are VictoriaMetrics' -maxConcurrentInserts
// (lib/writeconcurrencylimiter): a slot is held while the request runs and
// given up while its body is read from the network, so slow senders do not
// hold CPU they do not use. It is hand-written because that limiter is one
// process-wide set of flags, answers 503 rather than 429 with Retry-After,
// and fails an admitted request halfway through its body when a slot is
// not free again within its queue duration; here a request that was
// admitted waits for its slot (bounded by the other requests' work and
// its own context).
type Admission struct {
	opts       AdmissionOptions
	retryAfter string

	mu    sync.Mutex
	reqs  int
	bytes int64
	freed chan struct{} // closed and replaced whenever room is freed

	workers chan struct{} // a slot per request doing ingest work
	spare   chan struct{} // slots lent while no query runs (SpareWorkers)

	queries   atomic.Int64 // queries running now (Query)
	lastQuery atomic.Int64 // unix nanoseconds the last query ended; 0 before any

	lastRefused atomic.Int64 // unix nanoseconds of the last 429; 0 before any

	throttled map[string]*metrics.Counter
}

// NewAdmission returns admission control with opts' limits.
func NewAdmission(opts AdmissionOptions) *Admission {
	if opts.MaxRequests <= 0 {
		opts.MaxRequests = 8
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = 64 << 20
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 32 << 20
	}
	if opts.MaxWorkers <= 0 {
		opts.MaxWorkers = DefaultIngestWorkers()
		if opts.SpareWorkers == 0 {
			opts.SpareWorkers = runtime.GOMAXPROCS(0) - opts.MaxWorkers
		}
	}
	opts.SpareWorkers = max(opts.SpareWorkers, 0)
	if opts.QueryHold <= 0 {
		opts.QueryHold = 2 * time.Second
	}
	if opts.QueueTimeout <= 0 {
		opts.QueueTimeout = time.Second
	}
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = time.Second
	}
	if opts.Metrics == nil {
		opts.Metrics = metrics.NewSet()
	}
	a := &Admission{opts: opts, freed: make(chan struct{}), workers: make(chan struct{}, opts.MaxWorkers), spare: make(chan struct{}, opts.SpareWorkers), throttled: map[string]*metrics.Counter{},
		retryAfter: strconv.FormatInt(int64((opts.RetryAfter+time.Second-1)/time.Second), 10)}
	opts.Metrics.NewGauge(`ballast_ingest_inflight_requests`, func() float64 { a.mu.Lock(); defer a.mu.Unlock(); return float64(a.reqs) })
	opts.Metrics.NewGauge(`ballast_ingest_inflight_bytes`, func() float64 { a.mu.Lock(); defer a.mu.Unlock(); return float64(a.bytes) })
	opts.Metrics.NewGauge(`ballast_ingest_busy_workers`, func() float64 { return float64(len(a.workers) + len(a.spare)) })
	for _, r := range []string{"requests", "bytes", "workers"} {
		a.throttled[r] = opts.Metrics.NewCounter(fmt.Sprintf(`ballast_ingest_throttled_requests_total{limit=%q}`, r))
	}
	return a
}

// Wrap returns h behind the admission control.
func (a *Admission) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := r.ContentLength
		if n < 0 {
			n = a.opts.MaxBodyBytes
		}
		n = min(n, a.opts.MaxBytes)
		timer := time.NewTimer(a.opts.QueueTimeout)
		defer timer.Stop()
		limit := a.acquire(r, n, timer)
		var slot chan struct{}
		if limit == "" {
			if slot = a.acquireWorker(r.Context(), timer.C); slot == nil {
				limit = "workers"
				a.release(n)
			}
		}
		if limit != "" {
			a.throttled[limit].Inc()
			a.lastRefused.Store(time.Now().UnixNano())
			w.Header().Set("Retry-After", a.retryAfter)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			what := fmt.Sprintf("%d ingest requests are in flight", a.opts.MaxRequests)
			switch limit {
			case "bytes":
				what = fmt.Sprintf("%d bytes of ingest bodies are in flight", a.opts.MaxBytes)
			case "workers":
				what = fmt.Sprintf("all %d ingest workers are busy", a.opts.MaxWorkers)
			}
			json.NewEncoder(w).Encode(map[string]string{"status": "error", "errorType": "unavailable",
				"error": fmt.Sprintf("too many ingest requests: %s (ingest.max_inflight_*, ingest.max_workers) and none finished within %s; nothing of this request was stored, send it again after %ss",
					what, a.opts.QueueTimeout, a.retryAfter)})
			return
		}
		defer a.release(n)
		body := &workerBody{ReadCloser: r.Body, a: a, ctx: r.Context(), slot: slot}
		r.Body = body
		defer body.done()
		h.ServeHTTP(w, r)
	})
}

// OverloadHold is how long after a refused request Overloaded still
// reports true: a sender told to come back after Retry-After (1 s) is
// expected back within it.
const OverloadHold = 2 * time.Second

// Overloaded reports whether an ingest request was refused within the
// last OverloadHold: the store then defers its refresh on read, so that
// queries do not pay for the rows of an overload (docs/storage.md).
func (a *Admission) Overloaded() bool {
	t := a.lastRefused.Load()
	return t != 0 && time.Since(time.Unix(0, t)) < OverloadHold
}

// acquire takes room for one request of n bytes, waiting until timer
// fires; it returns "" or the limit ("requests", "bytes") that left no
// room.
func (a *Admission) acquire(r *http.Request, n int64, timer *time.Timer) string {
	for {
		a.mu.Lock()
		limit := ""
		switch {
		case a.reqs >= a.opts.MaxRequests:
			limit = "requests"
		case a.bytes+n > a.opts.MaxBytes:
			limit = "bytes"
		default:
			a.reqs++
			a.bytes += n
			a.mu.Unlock()
			return ""
		}
		freed := a.freed
		a.mu.Unlock()
		select {
		case <-freed:
		case <-timer.C:
			return limit
		case <-r.Context().Done():
			return limit
		}
	}
}

// acquireWorker takes a worker slot, or a spare one while queries leave
// it free, waiting for a worker slot until timeout fires (nil: as long as
// ctx lives); it returns the channel it took a slot of, or nil.
func (a *Admission) acquireWorker(ctx context.Context, timeout <-chan time.Time) chan struct{} {
	select {
	case a.workers <- struct{}{}:
		return a.workers
	default:
	}
	if a.spareFree() {
		select {
		case a.spare <- struct{}{}:
			return a.spare
		default:
		}
	}
	select {
	case a.workers <- struct{}{}:
		return a.workers
	case <-timeout:
	case <-ctx.Done():
	}
	return nil
}

// spareFree reports whether ingest may take a spare slot: no query runs
// and none ended within QueryHold.
func (a *Admission) spareFree() bool {
	if a.queries.Load() > 0 {
		return false
	}
	t := a.lastQuery.Load()
	return t == 0 || time.Since(time.Unix(0, t)) >= a.opts.QueryHold
}

// Query returns h counted as a query: while it runs, and for QueryHold
// after, new ingest work takes no spare slot, so that queries keep the
// CPU MaxWorkers leaves them.
func (a *Admission) Query(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.queries.Add(1)
		defer func() {
			a.lastQuery.Store(time.Now().UnixNano())
			a.queries.Add(-1)
		}()
		h.ServeHTTP(w, r)
	})
}

// workerBody is an admitted request's body: it gives up the request's
// worker slot while it waits for the network and takes one again before
// the handler goes on, as VictoriaMetrics' writeconcurrencylimiter.Reader
// does, but waits for the slot as long as the request lives instead of
// failing the body halfway.
type workerBody struct {
	io.ReadCloser
	a    *Admission
	ctx  context.Context
	slot chan struct{} // the channel whose slot is held; nil while none
}

func (b *workerBody) Read(p []byte) (int, error) {
	if b.slot != nil {
		<-b.slot
		b.slot = nil
	}
	n, err := b.ReadCloser.Read(p)
	if b.slot = b.a.acquireWorker(b.ctx, nil); b.slot == nil && err == nil {
		err = fmt.Errorf("cannot resume after reading the request body: %w", b.ctx.Err())
	}
	return n, err
}

// done gives the slot back once the handler returned.
func (b *workerBody) done() {
	if b.slot != nil {
		<-b.slot
		b.slot = nil
	}
}

// DefaultIngestWorkers is AdmissionOptions.MaxWorkers' default:
// GOMAXPROCS − 1, at least 1.
func DefaultIngestWorkers() int { return max(1, runtime.GOMAXPROCS(0)-1) }

func (a *Admission) release(n int64) {
	a.mu.Lock()
	a.reqs--
	a.bytes -= n
	close(a.freed)
	a.freed = make(chan struct{})
	a.mu.Unlock()
}
