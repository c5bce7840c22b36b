package storage

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/VictoriaMetrics/metrics"

	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/storage/ingest"
)

// BatchWriter is what the ingest endpoints write to: the embedded store, or
// later a remote one.
type BatchWriter interface {
	// Limits returns the timestamp bounds for data arriving at now.
	Limits(now time.Time) ingest.Limits
	// WriteBatch stores a validated batch; an error means nothing was stored.
	WriteBatch(b *ingest.Batch) error
}

// IngestOptions configure the push endpoints.
type IngestOptions struct {
	// MaxBodyBytes is the largest request body accepted, after decompression.
	// Larger bodies get 413. Default 32 MiB.
	MaxBodyBytes int
	// Metrics receives ballast_ingest_* counters. Default: a private set.
	Metrics *metrics.Set
	// Now returns the current time; default time.Now. Limits derive from it.
	Now func() time.Time
}

// IngestHandler serves POST /api/v1/import/prometheus (text exposition) and
// POST /api/v1/write (remote write 1.0: snappy-compressed protobuf).
type IngestHandler struct {
	w    BatchWriter
	opts IngestOptions
	set  *metrics.Set
}

// NewIngestHandler returns the push endpoints writing to w.
func NewIngestHandler(w BatchWriter, opts IngestOptions) *IngestHandler {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 32 << 20
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	set := opts.Metrics
	if set == nil {
		set = metrics.NewSet()
	}
	return &IngestHandler{w: w, opts: opts, set: set}
}

// Paths served by IngestHandler.
const (
	PathImportPrometheus = "/api/v1/import/prometheus"
	PathRemoteWrite      = "/api/v1/write"
)

type ingestState struct {
	batch ingest.Batch
	body  []byte
	dec   []byte
}

var ingestStatePool = sync.Pool{New: func() any { return new(ingestState) }}

func (h *IngestHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	format := "prometheus_text"
	if r.URL.Path == PathRemoteWrite {
		format = "remote_write"
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.reject(w, format, "method", http.StatusMethodNotAllowed, fmt.Errorf("method %s is not allowed; use POST", r.Method))
		return
	}
	st := ingestStatePool.Get().(*ingestState)
	defer ingestStatePool.Put(st)
	st.batch.Reset()

	extra, err := parseExtraLabels(r)
	if err != nil {
		h.reject(w, format, ingest.ReasonLabels, http.StatusBadRequest, err)
		return
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err := checkContentType(format, ct); err != nil {
		h.reject(w, format, "content_type", http.StatusUnsupportedMediaType, err)
		return
	}
	st.body, err = readBody(st.body[:0], r, h.opts.MaxBodyBytes, format)
	if err != nil {
		if errors.Is(err, ingest.ErrTooLarge) {
			h.reject(w, format, "too_large", http.StatusRequestEntityTooLarge, err)
		} else {
			h.reject(w, format, "body", http.StatusBadRequest, err)
		}
		return
	}
	if len(st.body) == 0 {
		h.reject(w, format, "empty", http.StatusBadRequest, fmt.Errorf("request body is empty"))
		return
	}
	lim := h.w.Limits(h.opts.Now())
	lim.ExtraLabels = extra
	if format == "remote_write" {
		st.dec, err = ingest.DecodeSnappy(st.dec, st.body, h.opts.MaxBodyBytes)
		if err == nil {
			err = ingest.ParseRemoteWrite(st.dec, &lim, &st.batch)
		}
	} else {
		// The batch aliases the body (no copy of a possibly large request);
		// both live only until WriteBatch below returns.
		err = ingest.ParseText(unsafe.String(unsafe.SliceData(st.body), len(st.body)), &lim, &st.batch)
	}
	if err != nil {
		code := http.StatusBadRequest
		if errors.Is(err, ingest.ErrTooLarge) {
			code = http.StatusRequestEntityTooLarge
		}
		h.reject(w, format, ingest.Reason(err), code, err)
		return
	}
	if err := h.w.WriteBatch(&st.batch); err != nil {
		h.reject(w, format, "storage", http.StatusServiceUnavailable, err)
		return
	}
	h.set.GetOrCreateCounter(fmt.Sprintf(`ballast_ingest_rows_total{format=%q}`, format)).Add(st.batch.Len())
	h.set.GetOrCreateCounter(fmt.Sprintf(`ballast_ingest_requests_total{format=%q}`, format)).Inc()
	w.WriteHeader(http.StatusNoContent)
}

func (h *IngestHandler) reject(w http.ResponseWriter, format, reason string, code int, err error) {
	h.set.GetOrCreateCounter(fmt.Sprintf(`ballast_ingest_rejected_requests_total{format=%q,reason=%q}`, format, reason)).Inc()
	writeAPIError(w, code, err)
}

// writeAPIError answers in the Prometheus API error shape.
func writeAPIError(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{
		"status":    "error",
		"errorType": errorTypeFor(code),
		"error":     err.Error(),
	})
}

// errorTypeFor maps an HTTP status to the Prometheus API errorType.
func errorTypeFor(code int) string {
	switch {
	case code == http.StatusServiceUnavailable:
		return "unavailable"
	case code == http.StatusGatewayTimeout:
		return "timeout"
	case code == http.StatusNotFound:
		return "not_found"
	case code >= 500:
		return "internal"
	case code == 422:
		return "execution"
	default:
		return "bad_data"
	}
}

func checkContentType(format, ct string) error {
	if format == "remote_write" {
		if ct != "application/x-protobuf" {
			return fmt.Errorf("content type %q is not remote write; want application/x-protobuf with a snappy-compressed WriteRequest", ct)
		}
		return nil
	}
	switch {
	case ct == "", strings.HasPrefix(ct, "text/"), ct == "application/openmetrics-text",
		ct == "application/x-www-form-urlencoded": // curl --data-binary's default
		return nil
	}
	return fmt.Errorf("content type %q is not Prometheus text exposition; want text/plain", ct)
}

// readBody reads at most max bytes of r's body (gunzipping text when
// Content-Encoding says so) and returns ErrTooLarge beyond that. Remote
// write bodies stay snappy-compressed here: Prometheus and vmagent send
// Content-Encoding: snappy, and the caller decodes the block.
func readBody(dst []byte, r *http.Request, max int, format string) ([]byte, error) {
	var src io.Reader = r.Body
	switch enc := r.Header.Get("Content-Encoding"); enc {
	case "", "identity":
	case "snappy":
		if format != "remote_write" {
			return dst, fmt.Errorf("content encoding snappy is only for remote write; send text plain or gzip")
		}
	case "gzip":
		if format == "remote_write" {
			return dst, fmt.Errorf("content encoding gzip is not supported here; remote write bodies are snappy-compressed")
		}
		zr, err := gzip.NewReader(io.LimitReader(r.Body, int64(max)+1))
		if err != nil {
			return dst, fmt.Errorf("cannot read gzip body: %w", err)
		}
		defer zr.Close()
		src = zr
	default:
		return dst, fmt.Errorf("content encoding %q is not supported", enc)
	}
	if r.ContentLength > int64(max) {
		return dst, fmt.Errorf("%w: content length %d bytes exceeds the limit of %d", ingest.ErrTooLarge, r.ContentLength, max)
	}
	buf := dst
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := src.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if len(buf) > max {
			return buf[:0], fmt.Errorf("%w: body exceeds the limit of %d bytes", ingest.ErrTooLarge, max)
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf[:0], fmt.Errorf("cannot read request body: %w", err)
		}
	}
}

// parseExtraLabels reads extra_label=name=value query args, as
// VictoriaMetrics' import endpoints accept them.
func parseExtraLabels(r *http.Request) ([]models.Label, error) {
	var out []models.Label
	for _, kv := range r.URL.Query()["extra_label"] {
		n, v, ok := strings.Cut(kv, "=")
		if !ok || !models.ValidLabelName(n) {
			return nil, fmt.Errorf("extra_label %q is not name=value with a valid label name", kv)
		}
		out = append(out, models.Label{Name: n, Value: v})
	}
	return out, nil
}
