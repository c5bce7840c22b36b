package agent

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestAcceptsGzip(t *testing.T) {
	for h, want := range map[string]bool{
		"": false, "gzip": true, "GZIP": true, "deflate, gzip;q=0.5": true, "gzip;q=0": false, "gzip; q=0.000": false,
		"identity": false, "br, gzip ; q=1": true, "gzip;q=x": false, "gzipped": false,
	} {
		if got := acceptsGzip(h); got != want {
			t.Errorf("acceptsGzip(%q): got %v; want %v", h, got, want)
		}
	}
}

// TestGzipHandlerReusesWriters: compressed answers decode to the plain
// one, across many requests through the kept writers, and a request that
// does not accept gzip gets the plain body.
func TestGzipHandlerReusesWriters(t *testing.T) {
	body := strings.Repeat("ballast_metric{a=\"b\"} 1\n", 2000)
	inner := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", "1")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, body)
	})
	g := newGzipHandler(inner, 2)
	for i := 0; i < 5; i++ {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/metrics", nil)
		req.Header.Set("Accept-Encoding", "gzip")
		g.ServeHTTP(rec, req)
		if rec.Header().Get("Content-Encoding") != "gzip" || rec.Header().Get("Content-Length") != "" {
			t.Fatalf("request %d: got headers %v; want Content-Encoding gzip and no Content-Length", i, rec.Header())
		}
		zr, err := gzip.NewReader(rec.Body)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(zr)
		if err != nil || string(got) != body {
			t.Fatalf("request %d: got %d bytes, %v; want the %d plain bytes", i, len(got), err, len(body))
		}
	}
	if len(g.free) != 1 {
		t.Errorf("kept writers: got %d; want 1 (one writer reused by sequential scrapes)", len(g.free))
	}
	rec := httptest.NewRecorder()
	g.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Header().Get("Content-Encoding") != "" || !bytes.Equal(rec.Body.Bytes(), []byte(body)) {
		t.Errorf("without Accept-Encoding: got encoding %q, %d bytes; want plain %d bytes", rec.Header().Get("Content-Encoding"), rec.Body.Len(), len(body))
	}
}
