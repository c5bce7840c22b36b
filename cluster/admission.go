package cluster

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
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
// requests or MaxBytes of bodies in flight, a request waits up to
// QueueTimeout for room, then gets 429 Too Many Requests with Retry-After,
// before its body is read. Senders (Prometheus remote write among them)
// back off on 429 and send the same data again; nothing of a refused
// request is stored, so nothing acknowledged is ever dropped for load.
//
// It bounds the memory ingest can take (about MaxRequests parsed bodies)
// and the CPU it can take from queries and health checks, which never pass
// through it. VictoriaMetrics' own -maxConcurrentInserts is the same idea;
// it is hand-written here because that one lives in vminsert's app
// packages, answers 503 and covers neither LAYOUTSTATS nor bytes.
type Admission struct {
	opts       AdmissionOptions
	retryAfter string

	mu    sync.Mutex
	reqs  int
	bytes int64
	freed chan struct{} // closed and replaced whenever room is freed

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
	if opts.QueueTimeout <= 0 {
		opts.QueueTimeout = time.Second
	}
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = time.Second
	}
	if opts.Metrics == nil {
		opts.Metrics = metrics.NewSet()
	}
	a := &Admission{opts: opts, freed: make(chan struct{}), throttled: map[string]*metrics.Counter{},
		retryAfter: strconv.FormatInt(int64((opts.RetryAfter+time.Second-1)/time.Second), 10)}
	opts.Metrics.NewGauge(`ballast_ingest_inflight_requests`, func() float64 { a.mu.Lock(); defer a.mu.Unlock(); return float64(a.reqs) })
	opts.Metrics.NewGauge(`ballast_ingest_inflight_bytes`, func() float64 { a.mu.Lock(); defer a.mu.Unlock(); return float64(a.bytes) })
	for _, r := range []string{"requests", "bytes"} {
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
		limit := a.acquire(r, n)
		if limit != "" {
			a.throttled[limit].Inc()
			w.Header().Set("Retry-After", a.retryAfter)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			what := fmt.Sprintf("%d ingest requests", a.opts.MaxRequests)
			if limit == "bytes" {
				what = fmt.Sprintf("%d bytes of ingest bodies", a.opts.MaxBytes)
			}
			json.NewEncoder(w).Encode(map[string]string{"status": "error", "errorType": "unavailable",
				"error": fmt.Sprintf("too many ingest requests: %s are in flight (ingest.max_inflight_*) and none finished within %s; nothing of this request was stored, send it again after %ss",
					what, a.opts.QueueTimeout, a.retryAfter)})
			return
		}
		defer a.release(n)
		h.ServeHTTP(w, r)
	})
}

// acquire takes room for one request of n bytes, waiting up to
// QueueTimeout; it returns "" or the limit ("requests", "bytes") that
// left no room.
func (a *Admission) acquire(r *http.Request, n int64) string {
	var timer *time.Timer
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
			if timer != nil {
				timer.Stop()
			}
			return ""
		}
		freed := a.freed
		a.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(a.opts.QueueTimeout)
			defer timer.Stop()
		}
		select {
		case <-freed:
		case <-timer.C:
			return limit
		case <-r.Context().Done():
			return limit
		}
	}
}

func (a *Admission) release(n int64) {
	a.mu.Lock()
	a.reqs--
	a.bytes -= n
	close(a.freed)
	a.freed = make(chan struct{})
	a.mu.Unlock()
}
