package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"golang.org/x/net/netutil"
)

// ServerOptions configure a Server. Zero fields take their defaults.
type ServerOptions struct {
	// Addr is HOST:PORT to listen on.
	Addr string
	// Role is the process role (mds, ds, client); it picks the default
	// anonymous scopes (DefaultAnonymous).
	Role string
	// Metrics receives the server's counters and is served on /metrics
	// unless SetMetricsHandler replaces it. Default: a private set.
	Metrics *metrics.Set
	Logger  *slog.Logger
	// Auth says who may reach which scope.
	Auth AuthConfig
	// TLS turns the listener into HTTPS, optionally with client
	// certificates.
	TLS TLSConfig
	// HTTP bounds timeouts, connections and CORS; zero fields take
	// DefaultHTTPConfig's values.
	HTTP HTTPConfig
}

// Route is one mounted handler and the scope it needs.
type Route struct {
	Pattern string
	Scope   Scope
}

// Server is the HTTP listener every role runs: its handlers plus /metrics,
// /healthz and /readyz. Every handler is mounted with the scope a request
// needs to reach it (Handle), behind panic recovery, and, for the scopes
// that change state (ingest, act, admin), behind cross-origin protection
// so that a web page the operator opens cannot post to it. Answers carry
// no wildcard CORS header.
type Server struct {
	opts   ServerOptions
	mux    *http.ServeMux
	set    *metrics.Set
	logger *slog.Logger
	auth   *Authenticator
	tls    *serverTLS
	xorig  *http.CrossOriginProtection

	ready    atomic.Pointer[string] // nil when ready, else the reason not
	extraMet []func(io.Writer)
	// readyCheck, when set, can make /readyz answer 503 with its reason.
	readyCheck func() string
	metricsH   http.Handler
	routes     []Route
	conns      atomic.Int64

	mu   sync.Mutex
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// NewServer returns a server; it listens on Start. It reads the token and
// certificate files and fails naming the one that is missing or invalid.
func NewServer(opts ServerOptions) (*Server, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Metrics == nil {
		opts.Metrics = metrics.NewSet()
	}
	d := DefaultHTTPConfig()
	h := &opts.HTTP
	for _, f := range []struct{ v, def *Duration }{{&h.ReadHeaderTimeout, &d.ReadHeaderTimeout}, {&h.ReadTimeout, &d.ReadTimeout},
		{&h.WriteTimeout, &d.WriteTimeout}, {&h.IdleTimeout, &d.IdleTimeout}} {
		if *f.v == 0 {
			*f.v = *f.def
		}
	}
	if h.MaxConnections == 0 {
		h.MaxConnections = d.MaxConnections
	}
	if err := errors.Join(h.Validate(), opts.TLS.Validate("tls")); err != nil {
		return nil, err
	}
	auth, err := NewAuthenticator(opts.Auth, opts.Role, opts.Addr, opts.Metrics, opts.Logger)
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, mux: http.NewServeMux(), set: opts.Metrics, logger: opts.Logger, auth: auth, xorig: http.NewCrossOriginProtection()}
	if opts.TLS.Enabled() {
		if s.tls, err = newServerTLS(opts.TLS, opts.Logger); err != nil {
			return nil, err
		}
	}
	notYet := "starting"
	s.ready.Store(&notYet)
	s.set.NewGauge(`ballast_http_open_connections`, func() float64 { return float64(s.conns.Load()) })
	s.Handle("/metrics", http.HandlerFunc(s.serveMetrics), ScopeQuery)
	s.Handle("/healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") }), ScopePublic)
	s.Handle("/readyz", http.HandlerFunc(s.serveReady), ScopePublic)
	s.mux.Handle("/", s.wrap("/", ScopePublic, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if allow := s.methodsAt(r); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeJSONError(w, http.StatusMethodNotAllowed, "method_not_allowed",
				fmt.Sprintf("%s is not allowed at %s; use %s", r.Method, r.URL.Path, strings.Join(allow, " or ")))
			return
		}
		writeJSONError(w, http.StatusNotFound, "not_found", "no API endpoint at "+r.URL.Path+" (docs/storage.md lists them)")
	})))
	return s, nil
}

// methodsAt returns the methods that a route mounted with a method in its
// pattern (e.g. "POST /api/v1/actions/{id}/approve") takes at r's path,
// for the 405 answer: the catch-all "/" matches every method, so without
// this a GET to a POST-only route read "no API endpoint".
func (s *Server) methodsAt(r *http.Request) []string {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if m == r.Method {
			continue
		}
		c := r.Clone(r.Context())
		c.Method = m
		if _, pattern := s.mux.Handler(c); pattern != "" && pattern != "/" {
			allow = append(allow, m)
		}
	}
	return allow
}

// CheckListener builds, and discards, the server a daemon of role on listen
// would build: token files, certificates and CA files are read as at start,
// with the same messages, so that `ballast config check` refuses what the
// daemon would. It opens nothing (NewServer starts nothing).
func CheckListener(role, listen string, auth AuthConfig, tlsCfg TLSConfig, httpCfg HTTPConfig) error {
	_, err := NewServer(ServerOptions{Addr: listen, Role: role, Logger: slog.New(slog.DiscardHandler), Auth: auth, TLS: tlsCfg, HTTP: httpCfg})
	return err
}

// Handle mounts h at pattern (http.ServeMux syntax, e.g.
// "POST /api/v1/actions/{id}/approve") for requests whose credential holds
// scope. Requests without it get 401 (no or unknown credential) or 403 (a
// credential without the scope) and never reach h; RequestPrincipal(r)
// tells h who the caller is. Mount state-changing handlers with ScopeIngest,
// ScopeAct or ScopeAdmin: those also refuse cross-origin browser requests.
// Call before Start.
func (s *Server) Handle(pattern string, h http.Handler, scope Scope) {
	if scope != ScopePublic && !slices.Contains(credentialScopes, scope) {
		panic(fmt.Sprintf("cluster: Handle(%q) with unknown scope %q", pattern, scope))
	}
	s.routes = append(s.routes, Route{Pattern: pattern, Scope: scope})
	s.logger.Debug("route", "pattern", pattern, "scope", scope)
	s.mux.Handle(pattern, s.wrap(pattern, scope, h))
}

// Routes returns the mounted handlers in the order they were mounted.
func (s *Server) Routes() []Route { return slices.Clone(s.routes) }

// Authenticator returns the server's authenticator.
func (s *Server) Authenticator() *Authenticator { return s.auth }

// wrap puts recovery, CORS, authentication and (for state-changing scopes)
// cross-origin protection around h.
func (s *Server) wrap(pattern string, scope Scope, h http.Handler) http.Handler {
	switch scope {
	case ScopeIngest, ScopeAct, ScopeAdmin:
		h = s.xorig.Handler(h)
	}
	h = s.auth.Require(scope, h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rw := &respWriter{ResponseWriter: w}
		if o := r.Header.Get("Origin"); o != "" && scope == ScopeQuery && slices.Contains(s.opts.HTTP.CORSOrigins, o) {
			rw.origin = o
			if r.Method == http.MethodOptions {
				rw.preflight = true
				rw.WriteHeader(http.StatusNoContent)
				return
			}
		}
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.set.GetOrCreateCounter(fmt.Sprintf(`ballast_http_panics_total{path=%q}`, pattern)).Inc()
			s.logger.Error("request handler panicked; the request is answered 500 and the process goes on",
				"path", r.URL.Path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			if !rw.wrote {
				writeJSONError(rw, http.StatusInternalServerError, "internal", "internal error while serving "+r.URL.Path+"; the mds logged it")
			}
		}()
		h.ServeHTTP(rw, r)
	})
}

// respWriter drops every CORS header that handlers set (VictoriaMetrics'
// query API sends "Access-Control-Allow-Origin: *", and "*" for headers and
// methods), allowing only a configured origin and, on its preflight, the
// methods and headers the query API takes; it remembers whether the answer
// started.
type respWriter struct {
	http.ResponseWriter
	origin    string
	preflight bool
	wrote     bool
}

func (w *respWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		h := w.ResponseWriter.Header()
		for k := range h {
			if strings.HasPrefix(k, "Access-Control-Allow-") {
				h.Del(k)
			}
		}
		if w.origin != "" {
			h.Set("Access-Control-Allow-Origin", w.origin)
			h.Add("Vary", "Origin")
		}
		if w.preflight {
			h.Set("Access-Control-Allow-Methods", "GET, POST")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *respWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// Flush lets streaming answers through.
func (w *respWriter) Flush() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap serves http.ResponseController.
func (w *respWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

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

// SetReadyCheck adds a condition to readiness: f returns why the server
// is not ready (e.g. the store is read-only), or "". Call before Start.
func (s *Server) SetReadyCheck(f func() string) { s.readyCheck = f }

func (s *Server) serveReady(w http.ResponseWriter, _ *http.Request) {
	r := s.ready.Load()
	if r == nil && s.readyCheck != nil {
		if why := s.readyCheck(); why != "" {
			r = &why
		}
	}
	if r != nil {
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
	return s.opts.Addr
}

// URL returns the base URL of the started server, http or https.
func (s *Server) URL() string {
	if s.tls != nil {
		return "https://" + s.Addr()
	}
	return "http://" + s.Addr()
}

// Start binds the listener and serves in the background. Idempotent. At
// most HTTP.MaxConnections connections are open at once; more wait in the
// kernel's accept queue, so a flood of idle connections cannot use up the
// process's file descriptors.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return nil
	}
	ln, err := net.Listen("tcp", s.opts.Addr)
	if err != nil {
		return fmt.Errorf("cannot listen on %q: %w", s.opts.Addr, err)
	}
	s.ln = ln
	lim := &countingListener{Listener: netutil.LimitListener(ln, s.opts.HTTP.MaxConnections), n: &s.conns}
	h := &s.opts.HTTP
	s.srv = &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: time.Duration(h.ReadHeaderTimeout),
		ReadTimeout:       time.Duration(h.ReadTimeout),
		WriteTimeout:      time.Duration(h.WriteTimeout),
		IdleTimeout:       time.Duration(h.IdleTimeout),
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelDebug),
	}
	var serve net.Listener = lim
	if s.tls != nil {
		s.srv.TLSConfig = s.tls.config()
		serve = tls.NewListener(lim, s.srv.TLSConfig)
	}
	if !s.opts.TLS.Enabled() && !IsLoopback(s.opts.Addr) {
		s.logger.Warn("listening without TLS on a non-loopback address; tokens and data travel in clear text", "listen", s.opts.Addr)
	}
	if len(s.opts.Auth.Clients) == 0 && !IsLoopback(s.opts.Addr) && s.opts.Role == RoleMDS {
		s.logger.Warn("no auth.clients configured on a non-loopback address: ingest and query are open to anyone who can reach it", "listen", s.opts.Addr)
	}
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(serve); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logger.Error("http server stopped", "err", err)
		}
	}()
	return nil
}

// countingListener counts open connections.
type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.n.Add(1)
	return &countedConn{Conn: c, n: l.n}, nil
}

type countedConn struct {
	net.Conn
	n    *atomic.Int64
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.n.Add(-1) })
	return c.Conn.Close()
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
