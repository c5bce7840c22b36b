package node

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// anonymousName is the principal of requests without a credential.
const anonymousName = "anonymous"

// minTokenBytes is the shortest bearer token accepted from a token file.
const minTokenBytes = 16

// authReloadEvery is how often token files are checked for changes.
const authReloadEvery = time.Second

// Authenticator decides who sent a request and whether that one may reach a
// handler mounted with a scope. Credentials are bearer tokens read from
// files and client certificates verified by the listener's TLS (mTLS). It
// never logs, counts or returns a token: only client names.
type Authenticator struct {
	anonymous []Scope
	clients   []*authClient
	byCert    map[string]*authClient
	set       *metrics.Set
	logger    *slog.Logger

	mu        sync.RWMutex
	byToken   map[[sha256.Size]byte]*authClient
	nextCheck atomic.Int64 // unix nanoseconds of the next token-file check
}

type authClient struct {
	AuthClient
	mod  time.Time // of TokenFile when last read
	size int64
	hash [sha256.Size]byte
	ok   bool // a token was read
}

// NewAuthenticator reads the token files of cfg for a listener of role on
// listen. It fails when a token file cannot be read or holds a short
// token, naming the file (never its content).
func NewAuthenticator(cfg AuthConfig, role, listen string, set *metrics.Set, logger *slog.Logger) (*Authenticator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if set == nil {
		set = metrics.NewSet()
	}
	if logger == nil {
		logger = slog.Default()
	}
	a := &Authenticator{anonymous: cfg.AnonymousScopes(role, listen), byCert: map[string]*authClient{}, set: set, logger: logger}
	for _, c := range cfg.Clients {
		ac := &authClient{AuthClient: c}
		if c.TokenFile != "" {
			if err := ac.read(); err != nil {
				return nil, err
			}
		}
		if c.CertName != "" {
			a.byCert[c.CertName] = ac
		}
		a.clients = append(a.clients, ac)
	}
	a.index()
	a.nextCheck.Store(time.Now().Add(authReloadEvery).UnixNano())
	return a, nil
}

// read loads the client's token file.
func (c *authClient) read() error {
	f, err := os.Open(c.TokenFile)
	if err != nil {
		return fmt.Errorf("cannot read token file %q of client %q: %w", c.TokenFile, c.Name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("cannot read token file %q of client %q: %w", c.TokenFile, c.Name, err)
	}
	buf := make([]byte, 4096)
	n, err := f.Read(buf)
	if err != nil {
		return fmt.Errorf("cannot read token file %q of client %q: %w", c.TokenFile, c.Name, err)
	}
	tok := bytes.TrimSpace(buf[:n])
	if len(tok) < minTokenBytes {
		return fmt.Errorf("cannot use token file %q of client %q: the token is shorter than %d bytes", c.TokenFile, c.Name, minTokenBytes)
	}
	c.hash, c.ok = sha256.Sum256(tok), true
	c.mod, c.size = fi.ModTime(), fi.Size()
	clear(buf)
	return nil
}

func (a *Authenticator) index() {
	m := make(map[[sha256.Size]byte]*authClient, len(a.clients))
	for _, c := range a.clients {
		if c.ok {
			m[c.hash] = c
		}
	}
	a.mu.Lock()
	a.byToken = m
	a.mu.Unlock()
}

// reload re-reads token files that changed, at most once per
// authReloadEvery. A file that cannot be read keeps its previous token.
func (a *Authenticator) reload() {
	now := time.Now().UnixNano()
	next := a.nextCheck.Load()
	if now < next || !a.nextCheck.CompareAndSwap(next, now+int64(authReloadEvery)) {
		return
	}
	changed := false
	for _, c := range a.clients {
		if c.TokenFile == "" {
			continue
		}
		fi, err := os.Stat(c.TokenFile)
		if err != nil || (fi.ModTime().Equal(c.mod) && fi.Size() == c.size) {
			continue
		}
		if err := c.read(); err != nil {
			a.set.GetOrCreateCounter(`ballast_auth_token_reload_errors_total`).Inc()
			a.logger.Error("keeping the previous token", "err", err)
			continue
		}
		changed = true
		a.logger.Info("token file reloaded", "client", c.Name)
	}
	if changed {
		a.index()
	}
}

// Principal is who sent a request and what it may do.
type Principal struct {
	// Name is the client's name from auth.clients, or "anonymous".
	Name   string
	scopes []Scope
}

// Has reports whether p holds scope.
func (p Principal) Has(scope Scope) bool {
	return scope == ScopePublic || slices.Contains(p.scopes, scope)
}

// Anonymous reports whether p sent no credential.
func (p Principal) Anonymous() bool { return p.Name == anonymousName }

type principalKey struct{}

// RequestPrincipal returns the name of who sent r (a client name of
// auth.clients, or "anonymous"), for audit records such as who approved an
// action. It is "" for a request that did not pass an Authenticator.
func RequestPrincipal(r *http.Request) string {
	p, _ := r.Context().Value(principalKey{}).(Principal)
	return p.Name
}

// authError is why a credential was refused; its text never holds a token.
type authError struct {
	reason string // metric label
	msg    string
}

func (e *authError) Error() string { return e.msg }

// Identify returns who sent r: the client whose bearer token it carries,
// else the client named by its verified client certificate, else the
// anonymous principal. A malformed or unknown token is an error.
func (a *Authenticator) Identify(r *http.Request) (Principal, error) {
	a.reload()
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, _ := strings.Cut(h, " ")
		tok = strings.TrimSpace(tok)
		if !strings.EqualFold(scheme, "Bearer") || tok == "" {
			return Principal{}, &authError{"malformed", "the Authorization header is not \"Bearer TOKEN\""}
		}
		sum := sha256.Sum256([]byte(tok))
		a.mu.RLock()
		c := a.byToken[sum]
		a.mu.RUnlock()
		if c == nil {
			return Principal{}, &authError{"unknown_token", "the bearer token is not valid"}
		}
		return Principal{Name: c.Name, scopes: c.Scopes}, nil
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		if c := a.certClient(r.TLS.VerifiedChains[0][0]); c != nil {
			return Principal{Name: c.Name, scopes: c.Scopes}, nil
		}
	}
	return Principal{Name: anonymousName, scopes: a.anonymous}, nil
}

// certClient finds the client whose cert_name is the certificate's common
// name or one of its DNS names.
func (a *Authenticator) certClient(cert *x509.Certificate) *authClient {
	if c := a.byCert[cert.Subject.CommonName]; c != nil && cert.Subject.CommonName != "" {
		return c
	}
	for _, n := range cert.DNSNames {
		if c := a.byCert[n]; c != nil {
			return c
		}
	}
	return nil
}

// Require wraps h so that only requests whose principal holds scope reach
// it: no or an anonymous-only credential answers 401 with
// WWW-Authenticate, a credential without the scope answers 403. The
// principal travels in the request context (RequestPrincipal).
func (a *Authenticator) Require(scope Scope, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := a.Identify(r)
		if err != nil {
			ae, _ := err.(*authError)
			a.deny(w, r, scope, http.StatusUnauthorized, ae.reason, err.Error())
			return
		}
		if !p.Has(scope) {
			if p.Anonymous() {
				a.deny(w, r, scope, http.StatusUnauthorized, "missing",
					fmt.Sprintf("%s needs a credential with the %q scope (a bearer token or a client certificate; see docs/security.md)", r.URL.Path, scope))
				return
			}
			a.deny(w, r, scope, http.StatusForbidden, "scope",
				fmt.Sprintf("client %q does not hold the %q scope that %s needs", p.Name, scope, r.URL.Path))
			return
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

func (a *Authenticator) deny(w http.ResponseWriter, r *http.Request, scope Scope, code int, reason, msg string) {
	a.set.GetOrCreateCounter(fmt.Sprintf(`ballast_http_denied_requests_total{scope=%q,reason=%q}`, scope, reason)).Inc()
	a.logger.Debug("request denied", "path", r.URL.Path, "remote", r.RemoteAddr, "scope", scope, "reason", reason)
	if code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="ballast"`)
	}
	errType := "unauthorized"
	if code == http.StatusForbidden {
		errType = "forbidden"
	}
	writeJSONError(w, code, errType, msg)
}

// writeJSONError answers in the Prometheus API error shape.
func writeJSONError(w http.ResponseWriter, code int, errType, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"status": "error", "errorType": errType, "error": msg})
}
