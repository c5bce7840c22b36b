package storage

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/VictoriaMetrics/VictoriaMetrics/app/vmselect"
)

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
func (e *Embedded) QueryHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.RLock()
		defer e.mu.RUnlock()
		if e.closed {
			writeAPIError(w, http.StatusServiceUnavailable, ErrClosed)
			return
		}
		ew := &errorRewriter{ResponseWriter: w}
		if !vmselect.RequestHandler(ew, r) {
			writeAPIError(w, http.StatusNotFound, errNotFound(r.URL.Path))
			return
		}
		ew.finish()
	})
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
	// Prometheus answers 400 bad_data for both.
	if code == 422 {
		code = http.StatusBadRequest
	}
	h := w.ResponseWriter.Header()
	h.Del("Content-Length")
	writeAPIError(w.ResponseWriter, code, apiErr(msg))
}

type apiErr string

func (e apiErr) Error() string { return string(e) }
