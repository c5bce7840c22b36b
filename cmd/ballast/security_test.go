package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ballast-io/ballast/internal/testcerts"
)

// secureSetup is a CA, an mds certificate, one token file per scope and a
// client certificate per scope, written into a folder.
type secureSetup struct {
	dir      string
	ca       *testcerts.CA
	caFile   string
	tokens   map[string]string // scope → token
	tokFiles map[string]string // scope → token file
}

var scopes = []string{"ingest", "query", "act", "admin"}

func newSecureSetup(t *testing.T) *secureSetup {
	t.Helper()
	s := &secureSetup{dir: t.TempDir(), tokens: map[string]string{}, tokFiles: map[string]string{}}
	s.ca = testcerts.NewCA(t, "ballast test CA")
	s.caFile = s.ca.WriteCA(t, s.dir, "ca.pem")
	for _, sc := range scopes {
		s.tokens[sc] = fmt.Sprintf("%s-secret-%d", sc, time.Now().UnixNano())
		s.tokFiles[sc] = filepath.Join(s.dir, sc+".token")
		if err := os.WriteFile(s.tokFiles[sc], []byte(s.tokens[sc]+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// mdsConfig renders an mds config with TLS, client certificates and a
// token and a certificate name per scope.
func (s *secureSetup) mdsConfig(t *testing.T, extra string) string {
	t.Helper()
	cert, key := s.ca.Issue(t, s.dir, "mds", true)
	var b strings.Builder
	fmt.Fprintf(&b, "role: mds\ntls:\n  cert_file: %s\n  key_file: %s\n  client_ca_file: %s\nauth:\n  clients:\n", cert, key, s.caFile)
	for _, sc := range scopes {
		fmt.Fprintf(&b, "    - {name: token-%s, token_file: %s, scopes: [%s]}\n", sc, s.tokFiles[sc], sc)
		fmt.Fprintf(&b, "    - {name: cert-%s, cert_name: cert-%s, scopes: [%s]}\n", sc, sc, sc)
	}
	b.WriteString(extra)
	p := filepath.Join(s.dir, "mds.yml")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func (s *secureSetup) client(t *testing.T, certName string) *http.Client {
	tc := &tls.Config{RootCAs: s.ca.Pool()}
	if certName != "" {
		tc.Certificates = []tls.Certificate{s.ca.KeyPair(t, s.dir, certName)}
	}
	// Redirects are answers of their own (GET / → the console), not
	// followed.
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// routeRe reads the mds's "route" debug lines; slog quotes a pattern
// with a method ("GET /api/v1/actions").
var routeRe = regexp.MustCompile(`msg=route pattern=("(?:[^"\\]|\\.)*"|\S+) scope=(\S+)`)

// documentedScopes is docs/security.md's scope table route by route (the
// mds's ServeMux patterns). Every route the mds mounts must be here with
// the same scope, everything here must be mounted, and every path must be
// in its scope's row of docs/security.md: a new endpoint cannot be added
// without deciding, testing and documenting who may reach it.
var documentedScopes = map[string]string{
	"/healthz": "public", "/readyz": "public", "GET /{$}": "public",

	"/api/v1/import/prometheus": "ingest", "/api/v1/write": "ingest", "/api/v1/layoutstats": "ingest",

	"/api/v1/query": "query", "/api/v1/query_range": "query", "/api/v1/series": "query", "/api/v1/labels": "query",
	"/api/v1/label/{name}/values": "query", "/api/v1/metadata": "query", "/api/v1/query_exemplars": "query",
	"/api/v1/status/buildinfo": "query", "/api/v1/status/tsdb": "query", "/api/v1/export": "query", "/federate": "query",
	"/vmui": "query", "/vmui/": "query", "/api/v1/findings": "query", "/api/v1/status/pipeline": "query",
	"/api/v1/status/devices": "query", "/api/v1/status/leader": "query", "GET /api/v1/reports/capacity/": "query",
	"/ui/": "query", "GET /api/v1/actions": "query", "GET /api/v1/actions/{id}": "query", "/metrics": "query",

	"POST /api/v1/actions/{id}/{verb}": "act", "POST /api/v1/readahead/sync": "act",

	"/api/v1/admin/tsdb/delete_series": "admin",
}

// checkRouteTable compares the mounted routes with documentedScopes and
// docs/security.md.
func checkRouteTable(t *testing.T, routes map[string]string) {
	t.Helper()
	for pattern, scope := range routes {
		want, ok := documentedScopes[pattern]
		switch {
		case !ok:
			t.Errorf("the mds mounts %s (scope %s), which documentedScopes and docs/security.md lack: add it to both", pattern, scope)
		case want != scope:
			t.Errorf("%s is mounted with scope %s; docs/security.md gives it %s", pattern, scope, want)
		}
	}
	for pattern := range documentedScopes {
		if _, ok := routes[pattern]; !ok {
			t.Errorf("documentedScopes lists %s, which the mds does not mount", pattern)
		}
	}
	doc, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, l := range strings.Split(string(doc), "\n") {
		for _, sc := range []string{"public", "ingest", "query", "act", "admin"} {
			if strings.HasPrefix(l, "| `"+sc+"`") {
				rows[sc] = l
			}
		}
	}
	for pattern, scope := range documentedScopes {
		_, path, ok := strings.Cut(pattern, " ")
		if !ok {
			path = pattern
		}
		if !strings.Contains(rows[scope], "`"+path+"`") {
			t.Errorf("docs/security.md's %s row does not list `%s`", scope, path)
		}
	}
}

// TestEveryEndpointNeedsItsScope runs a real mds over TLS with client
// certificates and one credential per scope, reads every route it mounts
// from its debug log, and checks each against every kind of caller. It
// also checks that vmselect's other handlers are not reachable at all and
// that no token shows up in the logs, answers or /metrics.
func TestEveryEndpointNeedsItsScope(t *testing.T) {
	s := newSecureSetup(t)
	p := startMDS(t, filepath.Join(s.dir, "data"), "--config", s.mdsConfig(t, ""), "--log-level", "debug")
	base := "https://" + p.addr
	routes := map[string]string{}
	for _, m := range routeRe.FindAllStringSubmatch(p.logs.String(), -1) {
		pattern := m[1]
		if uq, err := strconv.Unquote(pattern); err == nil {
			pattern = uq
		}
		routes[pattern] = m[2]
	}
	if len(routes) == 0 {
		t.Fatalf("no route logged at debug level:\n%s", p.logs)
	}
	checkRouteTable(t, routes)
	plain := s.client(t, "")
	certs := map[string]*http.Client{}
	for _, sc := range scopes {
		certs[sc] = s.client(t, "cert-"+sc)
	}
	var seen strings.Builder
	do := func(c *http.Client, method, path, token string) int {
		req, _ := http.NewRequest(method, base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		seen.Write(b)
		return resp.StatusCode
	}
	other := map[string]string{"ingest": "query", "query": "ingest", "act": "query", "admin": "act"}
	for pattern, scope := range routes {
		method, path, ok := strings.Cut(pattern, " ")
		if !ok {
			method, path = http.MethodGet, pattern
		}
		path = strings.NewReplacer("{id}", "x", "{name}", "job", "{verb}", "approve", "{$}", "").Replace(path)
		if scope == "public" {
			// Public routes are served to anyone, with or without a
			// credential; an unknown token is still refused (docs).
			for _, c := range []struct {
				caller string
				client *http.Client
				token  string
			}{{"no credentials", plain, ""}, {"a token", plain, s.tokens["query"]}, {"a client certificate", certs["ingest"], ""}} {
				if got := do(c.client, method, path, c.token); got == http.StatusUnauthorized || got == http.StatusForbidden {
					t.Errorf("%s (public) with %s: got %d; want it served", pattern, c.caller, got)
				}
			}
			if got := do(plain, method, path, "wrong-token-0123456789"); got != http.StatusUnauthorized {
				t.Errorf("%s (public) with a wrong token: got %d; want 401", pattern, got)
			}
			continue
		}
		passes := func(code int) bool { return code != http.StatusUnauthorized && code != http.StatusForbidden }
		for _, c := range []struct {
			caller string
			client *http.Client
			token  string
			pass   bool
			want   int
		}{
			{"no credentials", plain, "", false, http.StatusUnauthorized},
			{"wrong token", plain, "wrong-token-0123456789", false, http.StatusUnauthorized},
			{"token with another scope", plain, s.tokens[other[scope]], false, http.StatusForbidden},
			{"token with the scope", plain, s.tokens[scope], true, 0},
			{"client certificate with the scope", certs[scope], "", true, 0},
			{"client certificate with another scope", certs[other[scope]], "", false, http.StatusForbidden},
		} {
			got := do(c.client, method, path, c.token)
			if c.pass && !passes(got) {
				t.Errorf("%s (scope %s) with %s: got %d; want it served", pattern, scope, c.caller, got)
			}
			if !c.pass && got != c.want {
				t.Errorf("%s (scope %s) with %s: got %d; want %d", pattern, scope, c.caller, got, c.want)
			}
		}
	}
	t.Logf("%d routes checked against 6 kinds of caller", len(routes))
	// What vmselect serves beyond the documented API is not mounted: not
	// even admin reaches it.
	for _, path := range []string{"/internal/resetRollupResultCache", "/tags/delSeries", "/api/v1/admin/tsdb/snapshot",
		"/snapshot/create", "/internal/force_flush", "/api/v1/status/top_queries", "/prometheus/api/v1/admin/tsdb/delete_series"} {
		if got := do(plain, http.MethodPost, path, s.tokens["admin"]); got != http.StatusNotFound {
			t.Errorf("POST %s with the admin token: got %d; want 404", path, got)
		}
	}
	// The admin token does delete, through the documented endpoint only.
	q := url.Values{"match[]": {`{__name__="nothing_here"}`}}
	if got := do(plain, http.MethodPost, "/api/v1/admin/tsdb/delete_series?"+q.Encode(), s.tokens["admin"]); got != http.StatusNoContent {
		t.Errorf("delete_series with the admin token: got %d; want 204", got)
	}
	metricsText := new(strings.Builder)
	req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+s.tokens["query"])
	if resp, err := plain.Do(req); err == nil {
		io.Copy(metricsText, resp.Body)
		resp.Body.Close()
	}
	if !strings.Contains(metricsText.String(), "ballast_http_denied_requests_total") {
		t.Errorf("/metrics does not count denied requests")
	}
	for sc, tok := range s.tokens {
		for what, text := range map[string]string{"logs": p.logs.String(), "answers": seen.String(), "/metrics": metricsText.String()} {
			if strings.Contains(text, tok) {
				t.Errorf("the %s token appears in the mds %s", sc, what)
			}
		}
	}
}

// TestScrapeCarriesCredentials runs a ds agent that serves /metrics only
// over TLS to clients with a query token, and an mds whose scrapes carry
// that token and verify the agent's certificate.
func TestScrapeCarriesCredentials(t *testing.T) {
	s := newSecureSetup(t)
	cert, key := s.ca.Issue(t, s.dir, "ds01", true)
	agentCfg := filepath.Join(s.dir, "ds.yml")
	os.WriteFile(agentCfg, []byte(fmt.Sprintf("role: ds\ntls: {cert_file: %s, key_file: %s}\nauth:\n  anonymous: []\n  clients:\n    - {name: mds, token_file: %s, scopes: [query]}\n",
		cert, key, s.tokFiles["query"])), 0o600)
	agent := startAgent(t, "127.0.0.1:0", "--config", agentCfg).addr
	// Without the token the agent refuses.
	resp, err := s.client(t, "").Get("https://" + agent + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("agent /metrics without a token: got %d; want 401", resp.StatusCode)
	}
	cfg := s.mdsConfig(t, fmt.Sprintf("scrape:\n  interval: 1s\n  timeout: 1s\n  scheme: https\n  bearer_token_file: %s\n  tls: {ca_file: %s}\n", s.tokFiles["query"], s.caFile))
	p := startMDS(t, filepath.Join(s.dir, "data"), "--config", cfg, "--scrape-target", agent)
	c := s.client(t, "cert-query")
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := c.Get("https://" + p.addr + "/api/v1/query?query=" + url.QueryEscape(`up{job="ballast-agents"} == 1`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && strings.Contains(string(b), agent) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the mds did not scrape the TLS agent with its token within 30s: %d %s\n%s", resp.StatusCode, b, p.logs)
		}
		time.Sleep(300 * time.Millisecond)
	}
}
