package agent

import (
	"compress/gzip"
	"net/http"
	"strconv"
	"strings"
)

// gzipHandler compresses /metrics answers with gzip writers it keeps for
// the life of the agent. promhttp keeps its writers in a sync.Pool, which
// every garbage collection empties; an agent's heap is small enough that
// a collection runs every few scrapes, so most scrapes built a new writer
// (about 800 KB of deflate state), which in turn brought the next
// collection sooner. Keeping them halves what a scrape allocates.
type gzipHandler struct {
	next http.Handler
	free chan *gzip.Writer
}

// newGzipHandler wraps next, which must not compress itself; up to
// keep writers are kept for concurrent scrapes, more are made as needed.
func newGzipHandler(next http.Handler, keep int) *gzipHandler {
	return &gzipHandler{next: next, free: make(chan *gzip.Writer, keep)}
}

func (g *gzipHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Add("Vary", "Accept-Encoding")
	if !acceptsGzip(r.Header.Get("Accept-Encoding")) {
		g.next.ServeHTTP(w, r)
		return
	}
	var gz *gzip.Writer
	select {
	case gz = <-g.free:
		gz.Reset(w)
	default:
		gz = gzip.NewWriter(w)
	}
	w.Header().Set("Content-Encoding", "gzip")
	g.next.ServeHTTP(&gzipWriter{ResponseWriter: w, gz: gz}, r)
	if err := gz.Close(); err == nil {
		gz.Reset(nil)
		select {
		case g.free <- gz:
		default:
		}
	}
}

// acceptsGzip reports whether an Accept-Encoding header lists gzip with a
// non-zero quality (RFC 9110 12.5.3).
func acceptsGzip(h string) bool {
	for part := range strings.SplitSeq(h, ",") {
		name, params, _ := strings.Cut(part, ";")
		if !strings.EqualFold(strings.TrimSpace(name), "gzip") {
			continue
		}
		for p := range strings.SplitSeq(params, ";") {
			if k, v, ok := strings.Cut(strings.TrimSpace(p), "="); ok && strings.EqualFold(k, "q") {
				q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				return err == nil && q > 0
			}
		}
		return true
	}
	return false
}

// gzipWriter sends the body through gz; a length set by the inner handler
// would be the uncompressed one, so it is dropped.
type gzipWriter struct {
	http.ResponseWriter
	gz *gzip.Writer
}

func (w *gzipWriter) WriteHeader(code int) {
	w.Header().Del("Content-Length")
	w.ResponseWriter.WriteHeader(code)
}

func (w *gzipWriter) Write(p []byte) (int, error) { return w.gz.Write(p) }
