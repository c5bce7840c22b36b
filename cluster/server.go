package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// Server is the HTTP listener every role runs: its handlers plus /metrics,
// /healthz and /readyz.
type Server struct {
	addr   string
	mux    *http.ServeMux
	set    *metrics.Set
	logger *slog.Logger

	ready    atomic.Pointer[string] // nil when ready, else the reason not
	extraMet []func(io.Writer)
	metricsH http.Handler

	mu   sync.Mutex
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// NewServer returns a server for addr; it listens on Start.
func NewServer(addr string, set *metrics.Set, logger *slog.Logger) *Server {
	s := &Server{addr: addr, mux: http.NewServeMux(), set: set, logger: logger}
	notYet := "starting"
	s.ready.Store(&notYet)
	s.mux.HandleFunc("/metrics", s.serveMetrics)
	s.mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	s.mux.HandleFunc("/readyz", s.serveReady)
	return s
}

// Handle registers h for pattern (http.ServeMux syntax).
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// AddMetricsWriter adds output appended to /metrics (e.g. collectors).
func (s *Server) AddMetricsWriter(f func(io.Writer)) { s.extraMet = append(s.extraMet, f) }

// SetMetricsHandler replaces the /metrics output (agents serve their
// collectors' registry there). Call before Start.
func (s *Server) SetMetricsHandler(h http.Handler) { s.metricsH = h }

// SetReady marks the server ready (reason "") or not, with why.
func (s *Server) SetReady(reason string) {
	if reason == "" {
		s.ready.Store(nil)
		return
	}
	s.ready.Store(&reason)
}

func (s *Server) serveReady(w http.ResponseWriter, _ *http.Request) {
	if r := s.ready.Load(); r != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "not ready: %s\n", *r)
		return
	}
	io.WriteString(w, "ok\n")
}

func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	if s.metricsH != nil {
		s.metricsH.ServeHTTP(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	s.set.WritePrometheus(w)
	for _, f := range s.extraMet {
		f(w)
	}
	metrics.WriteProcessMetrics(w)
}

// Addr returns the bound address once started (useful with port 0).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return s.ln.Addr().String()
	}
	return s.addr
}

// Start binds the listener and serves in the background. Idempotent.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return nil
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("cannot listen on %q: %w", s.addr, err)
	}
	s.ln = ln
	s.srv = &http.Server{Handler: s.mux, ReadHeaderTimeout: 10 * time.Second}
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logger.Error("http server stopped", "err", err)
		}
	}()
	return nil
}

// Stop stops accepting, waits for in-flight requests until ctx ends, then
// closes what is left. Idempotent.
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv == nil {
		return nil
	}
	notReady := "stopping"
	s.ready.Store(&notReady)
	err := s.srv.Shutdown(ctx)
	if err != nil {
		s.srv.Close()
	}
	<-s.done
	s.srv = nil
	return err
}
