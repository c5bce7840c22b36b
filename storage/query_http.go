package storage

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/VictoriaMetrics/VictoriaMetrics/app/vmselect"
	"github.com/VictoriaMetrics/metrics"
)

// QueryPaths are the read endpoints of the query API that the mds mounts
// (docs/storage.md); everything else vmselect could serve stays unmounted.
var QueryPaths = []string{
	"/api/v1/query", "/api/v1/query_range", "/api/v1/series", "/api/v1/labels",
	"/api/v1/label/{name}/values", "/api/v1/metadata", "/api/v1/query_exemplars",
	"/api/v1/status/buildinfo", "/api/v1/status/tsdb", "/api/v1/export", "/federate",
	"/vmui", "/vmui/",
}

// AdminPaths are the destructive endpoints of the query API, mounted only
// behind the admin scope.
var AdminPaths = []string{"/api/v1/admin/tsdb/delete_series"}

// QueryHandler returns the Prometheus HTTP API v1 served by VictoriaMetrics'
// vmselect (MetricsQL engine): /api/v1/query, /api/v1/query_range,
// /api/v1/series, /api/v1/labels, /api/v1/label/NAME/values and the rest of
// what vmselect serves (export, federate, status, vmui). Paths it does not
// know get 404.
//
// vmselect reports errors as {"status":"error","errorType":"422",…}; the
// handler rewrites errorType to Prometheus' own names (bad_data, execution,
// timeout, unavailable, internal) and bad queries to 400, as Prometheus does,
// so clients that switch on the type (client_golang, Grafana) work unchanged.
//
// An instant query without a time is evaluated at the current millisecond,
// as Prometheus does; vmselect would round "now" down to the second and so
// hide a sample written in the current second (docs/storage.md#freshness).
func (e *Embedded) QueryHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.RLock()
		defer e.mu.RUnlock()
		if e.closed {
			writeAPIError(w, http.StatusServiceUnavailable, ErrClosed)
			return
		}
		e.fresh()
		if r.URL.Path == "/api/v1/query" {
			setQueryTime(r, time.Now())
		}
		ew := &errorRewriter{ResponseWriter: w, set: e.opts.Metrics}
		if !vmselect.RequestHandler(ew, r) {
			writeAPIError(w, http.StatusNotFound, errNotFound(r.URL.Path))
			return
		}
		ew.finish()
	})
}

// setQueryTime sets the form's time to now, with milliseconds, when the
// request has none. A form that cannot be parsed is left for vmselect to
// report.
func setQueryTime(r *http.Request, now time.Time) {
	if err := r.ParseForm(); err != nil || r.Form.Get("time") != "" {
		return
	}
	ms := now.UnixMilli()
	r.Form.Set("time", fmt.Sprintf("%d.%03d", ms/1000, ms%1000))
}

// PrometheusErrors wraps a Prometheus-API handler (a proxy to a remote
// engine) so that its error answers take Prometheus' shape and types, as the
// embedded QueryHandler's do: VictoriaMetrics' errorType "422" becomes
// "bad_data" with 400, and a non-JSON error body becomes the error message.
// Successful answers pass through untouched.
func PrometheusErrors(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ew := &errorRewriter{ResponseWriter: w}
		h.ServeHTTP(ew, r)
		ew.finish()
	})
}

// WriteAPIError answers with a Prometheus API error body whose errorType
// follows code (bad_data, unavailable, timeout, internal, …).
func WriteAPIError(w http.ResponseWriter, code int, err error) { writeAPIError(w, code, err) }

type errNotFound string

func (p errNotFound) Error() string { return "no API endpoint at " + string(p) }

// errorRewriter passes successful responses through untouched and buffers
// error responses so that finish can rewrite them.
type errorRewriter struct {
	http.ResponseWriter
	set  *metrics.Set
	code int
	buf  *bytes.Buffer
}

func (w *errorRewriter) WriteHeader(code int) {
	if code >= 400 {
		w.code = code
		w.buf = new(bytes.Buffer)
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *errorRewriter) Write(p []byte) (int, error) {
	if w.buf != nil {
		return w.buf.Write(p)
	}
	return w.ResponseWriter.Write(p)
}

// Flush lets streaming responses (export) flush through.
func (w *errorRewriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok && w.buf == nil {
		f.Flush()
	}
}

func (w *errorRewriter) finish() {
	if w.buf == nil {
		return
	}
	code := w.code
	var body struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
	}
	msg := strings.TrimSpace(w.buf.String())
	if err := json.Unmarshal(w.buf.Bytes(), &body); err == nil && body.Error != "" {
		msg = body.Error
	}
	// vmselect answers 422 for unparsable queries and bad arguments;
	// Prometheus answers 400 bad_data for both. Limits are not the
	// client's syntax error: a query past its time limit is 503 timeout
	// (as Prometheus answers), one refused for memory, points or series
	// limits is 422 execution, one that waited too long for a
	// concurrency slot is 503 unavailable.
	reason := ""
	switch {
	case strings.Contains(msg, "timeout exceeded") || strings.Contains(msg, "deadline exceeded"):
		code, reason = http.StatusServiceUnavailable, "timeout"
	case strings.Contains(msg, "concurrent requests") || strings.Contains(msg, "maxConcurrentRequests"):
		code, reason = http.StatusServiceUnavailable, "concurrency"
	case strings.Contains(msg, "maxMemoryPerQuery") || strings.Contains(msg, "not enough memory"):
		code, reason = 422, "memory"
	case strings.Contains(msg, "maxUniqueTimeseries") || strings.Contains(msg, "maxSamplesPerQuery") || strings.Contains(msg, "too many points"):
		code, reason = 422, "size"
	case code == 422:
		code = http.StatusBadRequest
	}
	if reason != "" && w.set != nil {
		w.set.GetOrCreateCounter(`ballast_query_rejected_total{reason="` + reason + `"}`).Inc()
	}
	h := w.ResponseWriter.Header()
	h.Del("Content-Length")
	errType := errorTypeFor(code)
	if reason == "timeout" {
		errType = "timeout"
	}
	writeAPIErrorType(w.ResponseWriter, code, errType, apiErr(msg))
}

type apiErr string

func (e apiErr) Error() string { return string(e) }
