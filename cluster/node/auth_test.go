package node

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballast-io/ballast/internal/testcerts"
)

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// lockedBuffer collects logs from concurrent handlers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestAuthTable mounts one handler per scope on a TLS listener with client
// certificates and checks every endpoint against every kind of caller.
func TestAuthTable(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "ballast test CA")
	caFile := ca.WriteCA(t, dir, "ca.pem")
	srvCert, srvKey := ca.Issue(t, dir, "mds", true)
	secrets := map[Scope]string{}
	var clients []AuthClient
	for _, sc := range credentialScopes {
		tok := fmt.Sprintf("tok-%s-%x", sc, time.Now().UnixNano())
		secrets[sc] = tok
		f := filepath.Join(dir, string(sc)+".token")
		writeFile(t, f, tok+"\n")
		clients = append(clients, AuthClient{Name: "client-" + string(sc), TokenFile: f, Scopes: []Scope{sc}})
		clients = append(clients, AuthClient{Name: "cert-" + string(sc), CertName: "cert-" + string(sc), Scopes: []Scope{sc}})
	}
	logs := &lockedBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := NewServer(ServerOptions{Addr: "127.0.0.1:0", Role: RoleMDS, Logger: logger,
		Auth: AuthConfig{Clients: clients},
		TLS:  TLSConfig{CertFile: srvCert, KeyFile: srvKey, ClientCAFile: caFile}})
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range credentialScopes {
		s.Handle("/x/"+string(sc), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "hello %s", RequestPrincipal(r))
		}), sc)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(t.Context())
	s.SetReady("")

	pool := ca.Pool()
	client := func(certName string) *http.Client {
		tc := &tls.Config{RootCAs: pool}
		if certName != "" {
			tc.Certificates = []tls.Certificate{ca.KeyPair(t, dir, certName)}
		}
		return &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 10 * time.Second}
	}
	plain := client("")
	var bodies strings.Builder
	do := func(c *http.Client, path, token string) int {
		req, _ := http.NewRequest(http.MethodGet, s.URL()+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		bodies.Write(b)
		bodies.WriteString(fmt.Sprint(resp.Header))
		return resp.StatusCode
	}
	wrongScope := map[Scope]Scope{ScopeIngest: ScopeQuery, ScopeQuery: ScopeIngest, ScopeAct: ScopeQuery, ScopeAdmin: ScopeAct}
	for _, sc := range credentialScopes {
		path := "/x/" + string(sc)
		for _, c := range []struct {
			caller string
			client *http.Client
			token  string
			want   int
		}{
			{"no credentials", plain, "", http.StatusUnauthorized},
			{"wrong token", plain, "not-a-token-of-this-mds", http.StatusUnauthorized},
			{"token with wrong scope", plain, secrets[wrongScope[sc]], http.StatusForbidden},
			{"token with the scope", plain, secrets[sc], http.StatusOK},
			{"client certificate with the scope", client("cert-" + string(sc)), "", http.StatusOK},
			{"client certificate with another scope", client("cert-" + string(wrongScope[sc])), "", http.StatusForbidden},
			{"client certificate unknown to auth", client("stranger"), "", http.StatusUnauthorized},
		} {
			if got := do(c.client, path, c.token); got != c.want {
				t.Errorf("%s (scope %s) with %s: got %d; want %d", path, sc, c.caller, got, c.want)
			}
		}
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if got := do(plain, p, ""); got != http.StatusOK {
			t.Errorf("%s without credentials: got %d; want 200", p, got)
		}
		if got := do(plain, p, "not-a-token-of-this-mds"); got != http.StatusUnauthorized {
			t.Errorf("%s with a wrong token: got %d; want 401", p, got)
		}
	}
	if got := do(plain, "/metrics", secrets[ScopeQuery]); got != http.StatusOK {
		t.Errorf("/metrics with a query token: got %d; want 200", got)
	}
	// A client certificate from another CA does not get through the handshake.
	forged := testcerts.NewCA(t, "other CA").KeyPair(t, dir, "cert-admin-forged")
	fc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &forged, nil }}}}
	if resp, err := fc.Get(s.URL() + "/x/admin"); err == nil {
		resp.Body.Close()
		t.Errorf("client certificate of another CA: got %d; want a failed handshake", resp.StatusCode)
	}

	// No secret anywhere a person or a scraper can see.
	m := new(strings.Builder)
	s.set.WritePrometheus(m)
	for sc, tok := range secrets {
		for what, text := range map[string]string{"logs": logs.String(), "answers": bodies.String(), "/metrics": m.String()} {
			if strings.Contains(text, tok) {
				t.Errorf("the %s token appears in %s", sc, what)
			}
		}
	}
	if !strings.Contains(m.String(), `ballast_http_denied_requests_total{scope="admin",reason="scope"}`) {
		t.Errorf("/metrics does not count denied requests:\n%s", m)
	}
}

// TestTokenAndCertificateReload rotates a token and the server certificate
// on disk and checks both are picked up without a restart.
func TestTokenAndCertificateReload(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "ballast test CA")
	srvCert, srvKey := ca.Issue(t, dir, "mds", true)
	tokFile := filepath.Join(dir, "ingest.token")
	writeFile(t, tokFile, "first-token-0123456789")
	s, err := NewServer(ServerOptions{Addr: "127.0.0.1:0", Role: RoleMDS, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Auth: AuthConfig{Clients: []AuthClient{{Name: "pusher", TokenFile: tokFile, Scopes: []Scope{ScopeIngest}}}},
		TLS:  TLSConfig{CertFile: srvCert, KeyFile: srvKey}})
	if err != nil {
		t.Fatal(err)
	}
	s.Handle("/push", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}), ScopeIngest)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(t.Context())
	pool := ca.Pool()
	serialOf := func() *big.Int {
		c, err := tls.Dial("tcp", s.Addr(), &tls.Config{RootCAs: pool})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber
	}
	status := func(tok string) int {
		req, _ := http.NewRequest(http.MethodGet, s.URL()+"/push", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	before := serialOf()
	if got := status("first-token-0123456789"); got != http.StatusOK {
		t.Fatalf("first token: got %d; want 200", got)
	}
	// Rotate both; files are checked at most once a second.
	time.Sleep(10 * time.Millisecond)
	writeFile(t, tokFile, "second-token-0123456789")
	newCert, newKey := ca.Issue(t, dir, "mds2", true)
	for _, f := range [][2]string{{newCert, srvCert}, {newKey, srvKey}} {
		if err := os.Rename(f[0], f[1]); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for serialOf().Cmp(before) == 0 || status("second-token-0123456789") != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatalf("rotated certificate or token not used within 5s")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got := status("first-token-0123456789"); got != http.StatusUnauthorized {
		t.Errorf("old token after rotation: got %d; want 401", got)
	}
}

func TestAnonymousDefaultsAndProtection(t *testing.T) {
	for _, c := range []struct {
		role, listen string
		clients      int
		want         string
	}{
		{RoleMDS, "127.0.0.1:9750", 0, "[ingest query act]"},
		{RoleMDS, "[::1]:9750", 0, "[ingest query act]"},
		{RoleMDS, "localhost:9750", 0, "[ingest query act]"},
		{RoleMDS, "0.0.0.0:9750", 0, "[ingest query]"},
		{RoleMDS, ":9750", 0, "[ingest query]"},
		{RoleMDS, "127.0.0.1:9750", 1, "[]"},
		{RoleDS, "0.0.0.0:9751", 2, "[query]"},
	} {
		if got := fmt.Sprint(DefaultAnonymous(c.role, c.listen, c.clients)); got != c.want {
			t.Errorf("DefaultAnonymous(%s, %s, %d): got %s; want %s", c.role, c.listen, c.clients, got, c.want)
		}
	}
	withAct := AuthConfig{Clients: []AuthClient{{Name: "console", TokenFile: "x", Scopes: []Scope{ScopeAct}}}}
	for _, c := range []struct {
		auth   AuthConfig
		listen string
		ok     bool
	}{
		{AuthConfig{}, "127.0.0.1:9750", true},
		{AuthConfig{}, "0.0.0.0:9750", false},
		{withAct, "0.0.0.0:9750", true},
		{AuthConfig{Anonymous: []Scope{ScopeAct}}, "10.0.0.1:9750", false},
	} {
		err := c.auth.CheckProtected(c.listen, ScopeAct)
		if (err == nil) != c.ok {
			t.Errorf("CheckProtected(%+v, %s): got %v; want ok=%v", c.auth, c.listen, err, c.ok)
		}
	}
}

func TestAuthConfigErrorsNameField(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	writeFile(t, short, "abc")
	for _, c := range []struct {
		cfg  AuthConfig
		want string
	}{
		{AuthConfig{Clients: []AuthClient{{Name: "a", Scopes: []Scope{ScopeQuery}}}}, "auth.clients[0]: needs token_file or cert_name"},
		{AuthConfig{Clients: []AuthClient{{Name: "a", CertName: "a", Scopes: []Scope{"root"}}}}, `auth.clients[0].scopes[0]: "root" is not one of`},
		{AuthConfig{Anonymous: []Scope{ScopeAdmin}}, `auth.anonymous[0]: "admin" is never granted`},
		{AuthConfig{Clients: []AuthClient{{Name: "a", TokenFile: short, Scopes: []Scope{ScopeQuery}}}}, "shorter than 16 bytes"},
		{AuthConfig{Clients: []AuthClient{{Name: "a", TokenFile: filepath.Join(dir, "missing"), Scopes: []Scope{ScopeQuery}}}}, "cannot read token file"},
	} {
		_, err := NewAuthenticator(c.cfg, RoleMDS, "127.0.0.1:1", nil, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v; want an error containing %q", c.cfg, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "abc") {
			t.Errorf("error shows the token: %v", err)
		}
	}
}

// TestCORSHeadersOnlyForAllowedOrigin: whatever CORS headers a handler sets
// (VictoriaMetrics' query handlers send "*" for origin, methods and
// headers), an answer carries none but to a configured origin, and to that
// origin only its own origin and, on a preflight, the methods and headers
// the query API takes.
func TestCORSHeadersOnlyForAllowedOrigin(t *testing.T) {
	const allowed = "https://grafana.example:3000"
	s, err := NewServer(ServerOptions{Addr: "127.0.0.1:0", Role: RoleMDS, Logger: slog.New(slog.DiscardHandler),
		HTTP: HTTPConfig{CORSOrigins: []string{allowed}}})
	if err != nil {
		t.Fatal(err)
	}
	s.Handle("/api/v1/query", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, k := range []string{"Origin", "Methods", "Headers"} {
			w.Header().Set("Access-Control-Allow-"+k, "*")
		}
		fmt.Fprint(w, "{}")
	}), ScopeQuery)
	ask := func(method, origin string) http.Header {
		r := httptest.NewRequest(method, "/api/v1/query?query=1", nil)
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		w := httptest.NewRecorder()
		s.mux.ServeHTTP(w, r)
		return w.Result().Header
	}
	for _, c := range []struct {
		method, origin       string
		allow, methods, hdrs string
	}{
		{http.MethodGet, "", "", "", ""},
		{http.MethodGet, "https://evil.example", "", "", ""},
		{http.MethodOptions, "https://evil.example", "", "", ""},
		{http.MethodGet, allowed, allowed, "", ""},
		{http.MethodOptions, allowed, allowed, "GET, POST", "Authorization, Content-Type"},
	} {
		h := ask(c.method, c.origin)
		got := [3]string{h.Get("Access-Control-Allow-Origin"), h.Get("Access-Control-Allow-Methods"), h.Get("Access-Control-Allow-Headers")}
		if want := [3]string{c.allow, c.methods, c.hdrs}; got != want {
			t.Errorf("%s from %q: got origin/methods/headers %q; want %q", c.method, c.origin, got, want)
		}
	}
}

// TestWrongMethodOnARoute: a method a route does not take is 405 with
// Allow naming the ones it does, not "no API endpoint"; an unknown path
// stays 404.
func TestWrongMethodOnARoute(t *testing.T) {
	s, err := NewServer(ServerOptions{Addr: "127.0.0.1:0", Role: RoleMDS, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	s.Handle("POST /api/v1/actions/{id}/approve", ok, ScopeAct)
	s.Handle("GET /api/v1/actions", ok, ScopeQuery)
	for _, c := range []struct {
		method, path string
		code         int
		allow        string
	}{
		{http.MethodGet, "/api/v1/actions/a1/approve", http.StatusMethodNotAllowed, "POST"},
		{http.MethodDelete, "/api/v1/actions", http.StatusMethodNotAllowed, "GET"},
		{http.MethodPost, "/api/v1/actions/a1/approve", http.StatusOK, ""},
		{http.MethodGet, "/api/v1/nothing", http.StatusNotFound, ""},
	} {
		w := httptest.NewRecorder()
		s.mux.ServeHTTP(w, httptest.NewRequest(c.method, c.path, strings.NewReader("")))
		if w.Code != c.code || w.Header().Get("Allow") != c.allow {
			t.Errorf("%s %s: got %d Allow %q (%s); want %d Allow %q", c.method, c.path, w.Code, w.Header().Get("Allow"), strings.TrimSpace(w.Body.String()), c.code, c.allow)
		}
	}
}
