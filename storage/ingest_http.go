package storage

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/VictoriaMetrics/metrics"

	"github.com/ballast-io/ballast/internal/ratelog"
	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/storage/ingest"
)

// BatchWriter is what the ingest endpoints write to: the embedded store, or
// the remote one (storage/remote).
type BatchWriter interface {
	// Limits returns the timestamp bounds for data arriving at now.
	Limits(now time.Time) ingest.Limits
	// WriteBatch stores a validated batch; an error means nothing was stored.
	WriteBatch(b *ingest.Batch) error
}

// AsReceivedWriter is a BatchWriter that can also take a remote-write body
// as it was received, for a batch whose rows are exactly that body's
// (ingest.Batch.AsReceived): the remote store forwards such a body without
// encoding it again.
type AsReceivedWriter interface {
	// WriteAsReceived stores b, whose rows are exactly those of body
	// (snappy-compressed, as received) and pb (body decoded); an error
	// means nothing was stored. Neither slice may be kept after it returns.
	WriteAsReceived(b *ingest.Batch, body, pb []byte) error
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
	// Logger receives rejected requests and samples, at most one line per
	// format and reason per minute. Default: discard.
	Logger *slog.Logger
}

// IngestHandler serves POST /api/v1/import/prometheus (text exposition) and
// POST /api/v1/write (remote write 1.0: snappy-compressed protobuf).
type IngestHandler struct {
	w    BatchWriter
	opts IngestOptions
	set  *metrics.Set
	logs *ratelog.Limiter
}

// NewIngestHandler returns the push endpoints writing to w.
func NewIngestHandler(w BatchWriter, opts IngestOptions) *IngestHandler {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 32 << 20
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	set := opts.Metrics
	if set == nil {
		set = metrics.NewSet()
	}
	return &IngestHandler{w: w, opts: opts, set: set, logs: ratelog.New(time.Minute)}
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

// keptIngestStates decode states are kept across garbage collections, as
// long as their buffers are at most maxKeptIngestBytes: a sync.Pool drops
// its items at every other collection, and a remote-write state (body,
// decoded body, rows, labels, the protobuf unmarshaler's slices: ~4 MB for
// 10,000 series) then grows back from nothing, allocating what brings the
// next collection closer. Beyond those few, states go to the sync.Pool.
var ingestStates = make(chan *ingestState, keptIngestStates)

const (
	keptIngestStates   = 2
	maxKeptIngestBytes = 2 << 20
)

func getIngestState() *ingestState {
	select {
	case st := <-ingestStates:
		return st
	default:
		return ingestStatePool.Get().(*ingestState)
	}
}

func putIngestState(st *ingestState) {
	if cap(st.body)+cap(st.dec) <= maxKeptIngestBytes {
		select {
		case ingestStates <- st:
			return
		default:
		}
	}
	ingestStatePool.Put(st)
}

func (h *IngestHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	format := "prometheus_text"
	if r.URL.Path == PathRemoteWrite {
		format = "remote_write"
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.reject(w, r, format, "method", http.StatusMethodNotAllowed, fmt.Errorf("method %s is not allowed; use POST", r.Method))
		return
	}
	st := getIngestState()
	defer putIngestState(st)
	st.batch.Reset()

	extra, err := parseExtraLabels(r)
	if err != nil {
		h.reject(w, r, format, ingest.ReasonLabels, http.StatusBadRequest, err)
		return
	}
	if err := checkContentType(format, r.Header); err != nil {
		h.reject(w, r, format, "content_type", http.StatusUnsupportedMediaType, err)
		return
	}
	st.body, err = readBody(st.body[:0], r, h.opts.MaxBodyBytes, format)
	if err != nil {
		if errors.Is(err, ingest.ErrTooLarge) {
			h.reject(w, r, format, "too_large", http.StatusRequestEntityTooLarge, err)
		} else {
			h.reject(w, r, format, "body", http.StatusBadRequest, err)
		}
		return
	}
	if len(st.body) == 0 {
		h.reject(w, r, format, "empty", http.StatusBadRequest, fmt.Errorf("request body is empty"))
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
	var rej *ingest.Rejected
	if err != nil && !errors.As(err, &rej) {
		// The body as a whole does not decode: nothing in it is usable.
		code := http.StatusBadRequest
		if errors.Is(err, ingest.ErrTooLarge) {
			code = http.StatusRequestEntityTooLarge
		}
		h.reject(w, r, format, ingest.Reason(err), code, err)
		return
	}
	stored := st.batch.Len()
	if stored > 0 {
		var werr error
		if aw, ok := h.w.(AsReceivedWriter); ok && format == "remote_write" && st.batch.AsReceived() {
			werr = aw.WriteAsReceived(&st.batch, st.body, st.dec)
		} else {
			werr = h.w.WriteBatch(&st.batch)
		}
		if werr != nil {
			h.reject(w, r, format, "storage", http.StatusServiceUnavailable, werr)
			return
		}
	}
	h.set.GetOrCreateCounter(fmt.Sprintf(`ballast_ingest_rows_total{format=%q}`, format)).Add(stored)
	if n := st.batch.NaNs(); n > 0 {
		h.set.GetOrCreateCounter(fmt.Sprintf(`ballast_ingest_nan_samples_total{format=%q}`, format)).Add(n)
	}
	if rej == nil {
		h.set.GetOrCreateCounter(fmt.Sprintf(`ballast_ingest_requests_total{format=%q}`, format)).Inc()
		w.WriteHeader(http.StatusNoContent)
		return
	}
	// Some samples were invalid: every valid one is stored, and the answer
	// is 400 (a sender must not retry the same invalid samples), saying
	// what was stored and why the rest was not.
	for reason, n := range rej.ByReason {
		h.set.GetOrCreateCounter(fmt.Sprintf(`ballast_ingest_rejected_samples_total{format=%q,reason=%q}`, format, reason)).Add(n)
	}
	accepted := stored + st.batch.NaNs()
	err = fmt.Errorf("rejected %d of %d samples (%s): %w", rej.Count, rej.Count+accepted, storedNote(accepted), rej)
	if accepted == 0 {
		h.reject(w, r, format, ingest.Reason(rej), http.StatusBadRequest, err)
		return
	}
	h.set.GetOrCreateCounter(fmt.Sprintf(`ballast_ingest_requests_total{format=%q}`, format)).Inc()
	h.logReject(r, format, ingest.Reason(rej), err)
	writeAPIError(w, http.StatusBadRequest, err)
}

// storedNote says what became of the valid samples of a request that also
// had invalid ones.
func storedNote(accepted int) string {
	switch accepted {
	case 0:
		return "nothing stored"
	case 1:
		return "the other one is stored"
	}
	return fmt.Sprintf("the other %d are stored", accepted)
}

// logReject logs a rejected request or samples, at most once a minute per
// format and reason.
func (h *IngestHandler) logReject(r *http.Request, format, reason string, err error) {
	if ok, held := h.logs.Allow(format+"/"+reason, h.opts.Now()); ok {
		h.opts.Logger.Warn("ingest rejected", "format", format, "reason", reason, "remote", r.RemoteAddr, "err", err, "rejections_not_logged", held)
	}
}

// reject answers a request of which nothing was stored.
func (h *IngestHandler) reject(w http.ResponseWriter, r *http.Request, format, reason string, code int, err error) {
	h.set.GetOrCreateCounter(fmt.Sprintf(`ballast_ingest_rejected_requests_total{format=%q,reason=%q}`, format, reason)).Inc()
	h.logReject(r, format, reason, err)
	writeAPIError(w, code, err)
}

// writeAPIError answers in the Prometheus API error shape.
func writeAPIError(w http.ResponseWriter, code int, err error) {
	writeAPIErrorType(w, code, errorTypeFor(code), err)
}

// writeAPIErrorType answers in the Prometheus API error shape with an
// explicit errorType.
func writeAPIErrorType(w http.ResponseWriter, code int, errType string, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{
		"status":    "error",
		"errorType": errType,
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

// checkContentType accepts only the documented content types: Prometheus
// text (text/plain, OpenMetrics, or none) and remote write 1.0
// (application/x-protobuf). Form encodings are refused so that a web page
// cannot post data with a plain HTML form, and remote write 2.0 is refused
// with 415 as its specification asks of a receiver that does not speak it.
func checkContentType(format string, h http.Header) error {
	raw := h.Get("Content-Type")
	ct, params, err := mime.ParseMediaType(raw)
	if raw != "" && err != nil {
		return fmt.Errorf("content type %q does not parse: %w", raw, err)
	}
	if format == "remote_write" {
		if ct != "application/x-protobuf" {
			return fmt.Errorf("content type %q is not remote write; want application/x-protobuf with a snappy-compressed WriteRequest", raw)
		}
		v := h.Get("X-Prometheus-Remote-Write-Version")
		if p := params["proto"]; (p != "" && p != "prometheus.WriteRequest") || strings.HasPrefix(v, "2.") {
			return fmt.Errorf("remote write 2.0 (proto %q, version %q) is not supported; send remote write 1.0 (proto=prometheus.WriteRequest)", p, v)
		}
		return nil
	}
	switch {
	case ct == "", ct == "text/plain", ct == "application/openmetrics-text":
		return nil
	}
	return fmt.Errorf("content type %q is not Prometheus text exposition; want text/plain (curl: -H 'Content-Type: text/plain')", raw)
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
// VictoriaMetrics' import endpoints accept them, within
// ingest.MaxExtraLabelBytes.
func parseExtraLabels(r *http.Request) ([]models.Label, error) {
	var out []models.Label
	for _, kv := range r.URL.Query()["extra_label"] {
		n, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("extra_label %s is not name=value", models.Abbrev(kv))
		}
		out = append(out, models.Label{Name: n, Value: v})
	}
	if err := ingest.CheckExtraLabels(out); err != nil {
		return nil, err
	}
	return out, nil
}
