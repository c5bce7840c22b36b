package node

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"
)

// Scope is what a credential allows on a listener. Every handler is mounted
// with one (Server.Handle); a request reaches the handler only when its
// credential carries that scope, or the scope is granted anonymously.
type Scope string

// The scopes. docs/security.md lists which endpoint needs which.
const (
	// ScopePublic needs no credential at all: /healthz, /readyz. A request
	// with an invalid credential is still refused (401).
	ScopePublic Scope = "public"
	// ScopeIngest: push endpoints (import, remote write, LAYOUTSTATS).
	ScopeIngest Scope = "ingest"
	// ScopeQuery: the query API, findings, status pages, /metrics.
	ScopeQuery Scope = "query"
	// ScopeAct: approve, reject and cancel actions; read-ahead desired state.
	ScopeAct Scope = "act"
	// ScopeAdmin: destructive endpoints (delete_series). Never granted
	// anonymously.
	ScopeAdmin Scope = "admin"
)

// credentialScopes are the scopes a client entry may hold.
var credentialScopes = []Scope{ScopeIngest, ScopeQuery, ScopeAct, ScopeAdmin}

// AuthClient is one credential a listener accepts: a bearer token read from
// a file, a verified client certificate's name, or both.
type AuthClient struct {
	// Name identifies the client in logs, metrics and the actions journal.
	// It is not a secret.
	Name string `yaml:"name"`
	// TokenFile holds the bearer token (the file's content without
	// surrounding white space; at least 16 bytes). It is re-read when the
	// file changes, so a token can be rotated without a restart. Tokens are
	// never taken from the command line.
	TokenFile string `yaml:"token_file"`
	// CertName matches a client certificate verified against
	// tls.client_ca_file by its subject common name or one of its DNS
	// names (mTLS).
	CertName string `yaml:"cert_name"`
	// Scopes are what the client may do: ingest, query, act, admin.
	Scopes []Scope `yaml:"scopes"`
}

// AuthConfig says who may use a listener. The zero value keeps the
// embedded demo easy: see DefaultAnonymous.
type AuthConfig struct {
	// Clients are the accepted credentials.
	Clients []AuthClient `yaml:"clients"`
	// Anonymous are the scopes granted to requests without a credential.
	// nil (the field absent) means the role's default (DefaultAnonymous);
	// an empty list grants nothing. admin is never allowed here.
	Anonymous []Scope `yaml:"anonymous"`
}

// DefaultAnonymous returns the scopes granted without credentials when
// auth.anonymous is not set:
//
//   - agents (ds, client): query, so that /metrics stays open as
//     node_exporter's does;
//   - an mds with no clients configured on a loopback listener: ingest,
//     query and act (the embedded demo, a single-host setup);
//   - an mds with no clients on any other address: ingest and query, as
//     before authentication existed (it logs a warning at start);
//   - an mds with clients configured: nothing.
func DefaultAnonymous(role, listen string, clients int) []Scope {
	switch {
	case role != RoleMDS:
		return []Scope{ScopeQuery}
	case clients > 0:
		return []Scope{}
	case IsLoopback(listen):
		return []Scope{ScopeIngest, ScopeQuery, ScopeAct}
	default:
		return []Scope{ScopeIngest, ScopeQuery}
	}
}

// AnonymousScopes returns the scopes granted without credentials on listen
// for role: auth.anonymous when set, else DefaultAnonymous.
func (a *AuthConfig) AnonymousScopes(role, listen string) []Scope {
	if a.Anonymous != nil {
		return a.Anonymous
	}
	return DefaultAnonymous(role, listen, len(a.Clients))
}

// CheckProtected returns an error when scope on an mds listening on listen
// would be open to whoever can reach the port: the listener is not
// loopback and no configured client holds the scope, or the scope is
// granted anonymously. Features that change the cluster call it from
// config validation, e.g. actions in auto or approve mode:
//
//	if err := c.Auth.CheckProtected(c.Listen, cluster.ScopeAct); err != nil {
//		errs = append(errs, fmt.Errorf("actions.mode: %q on %s: %w", mode, c.Listen, err))
//	}
func (a *AuthConfig) CheckProtected(listen string, scope Scope) error {
	if IsLoopback(listen) {
		return nil
	}
	if slices.Contains(a.AnonymousScopes(RoleMDS, listen), scope) {
		return fmt.Errorf("auth.anonymous grants %q to anyone who can reach %s; remove it or listen on a loopback address", scope, listen)
	}
	for _, c := range a.Clients {
		if slices.Contains(c.Scopes, scope) {
			return nil
		}
	}
	return fmt.Errorf("no auth.clients entry holds the %q scope; configure one (docs/security.md) or listen on a loopback address", scope)
}

// IsLoopback reports whether a HOST:PORT listen address binds only to the
// loopback interface (127.0.0.0/8, ::1 or localhost). An empty host or
// 0.0.0.0 binds every interface and is not loopback.
func IsLoopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (a *AuthConfig) Validate() error {
	var errs []error
	names := map[string]bool{}
	for i, c := range a.Clients {
		p := fmt.Sprintf("auth.clients[%d]", i)
		switch {
		case c.Name == "":
			errs = append(errs, fmt.Errorf("%s.name: must not be empty", p))
		case names[c.Name]:
			errs = append(errs, fmt.Errorf("%s.name: %q is used twice", p, c.Name))
		case c.Name == anonymousName:
			errs = append(errs, fmt.Errorf("%s.name: %q is reserved", p, c.Name))
		}
		names[c.Name] = true
		if c.TokenFile == "" && c.CertName == "" {
			errs = append(errs, fmt.Errorf("%s: needs token_file or cert_name", p))
		}
		if len(c.Scopes) == 0 {
			errs = append(errs, fmt.Errorf("%s.scopes: must list at least one of ingest, query, act, admin", p))
		}
		for j, s := range c.Scopes {
			if !slices.Contains(credentialScopes, s) {
				errs = append(errs, fmt.Errorf("%s.scopes[%d]: %q is not one of ingest, query, act, admin", p, j, s))
			}
		}
	}
	for j, s := range a.Anonymous {
		switch {
		case s == ScopeAdmin:
			errs = append(errs, fmt.Errorf("auth.anonymous[%d]: %q is never granted without a credential", j, s))
		case !slices.Contains(credentialScopes, s):
			errs = append(errs, fmt.Errorf("auth.anonymous[%d]: %q is not one of ingest, query, act", j, s))
		}
	}
	return errors.Join(errs...)
}

// TLSConfig turns a listener into HTTPS. Files are re-read when they
// change (checked at most once a second), so certificates can be renewed
// without a restart.
type TLSConfig struct {
	// CertFile and KeyFile are the PEM certificate chain and private key;
	// both empty means plain HTTP.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ClientCAFile is a PEM bundle of CAs that sign client certificates;
	// set, it enables client-certificate authentication (mTLS).
	ClientCAFile string `yaml:"client_ca_file"`
	// ClientAuth is "optional" (a client may present a certificate; one it
	// presents must verify) or "require" (every connection must present a
	// verified certificate). Default optional when ClientCAFile is set.
	ClientAuth string `yaml:"client_auth"`
}

// Enabled reports whether the listener serves HTTPS.
func (t *TLSConfig) Enabled() bool { return t.CertFile != "" }

func (t *TLSConfig) Validate(field string) error {
	var errs []error
	if (t.CertFile == "") != (t.KeyFile == "") {
		errs = append(errs, fmt.Errorf("%s: cert_file and key_file go together (got cert_file %q, key_file %q)", field, t.CertFile, t.KeyFile))
	}
	if t.ClientCAFile != "" && t.CertFile == "" {
		errs = append(errs, fmt.Errorf("%s.client_ca_file: %q needs cert_file and key_file (client certificates only exist over TLS)", field, t.ClientCAFile))
	}
	switch t.ClientAuth {
	case "", "optional":
	case "require":
		if t.ClientCAFile == "" {
			errs = append(errs, fmt.Errorf("%s.client_auth: %q needs client_ca_file", field, t.ClientAuth))
		}
	default:
		errs = append(errs, fmt.Errorf("%s.client_auth: %q is not optional or require", field, t.ClientAuth))
	}
	return errors.Join(errs...)
}

// HTTPConfig bounds what one listener spends on its clients.
type HTTPConfig struct {
	// ReadHeaderTimeout bounds reading a request's headers, and how long a
	// new connection may stay silent. Default 10s.
	ReadHeaderTimeout Duration `yaml:"read_header_timeout"`
	// ReadTimeout bounds reading a whole request, body included. Default 1m.
	ReadTimeout Duration `yaml:"read_timeout"`
	// WriteTimeout bounds writing a response. Default 5m.
	WriteTimeout Duration `yaml:"write_timeout"`
	// IdleTimeout closes keep-alive connections idle this long. Default 2m.
	IdleTimeout Duration `yaml:"idle_timeout"`
	// MaxConnections caps open connections; more wait in the kernel's
	// accept queue. Default 512.
	MaxConnections int `yaml:"max_connections"`
	// CORSOrigins are browser origins (scheme://host[:port]) allowed to
	// read query answers cross-origin. Default none: no
	// Access-Control-Allow-Origin header is sent.
	CORSOrigins []string `yaml:"cors_origins"`
}

// DefaultHTTPConfig returns the listener defaults.
func DefaultHTTPConfig() HTTPConfig {
	return HTTPConfig{
		ReadHeaderTimeout: Duration(10 * time.Second),
		ReadTimeout:       Duration(time.Minute),
		WriteTimeout:      Duration(5 * time.Minute),
		IdleTimeout:       Duration(2 * time.Minute),
		MaxConnections:    512,
	}
}

func (h *HTTPConfig) Validate() error {
	var errs []error
	for name, d := range map[string]Duration{"http.read_header_timeout": h.ReadHeaderTimeout, "http.read_timeout": h.ReadTimeout,
		"http.write_timeout": h.WriteTimeout, "http.idle_timeout": h.IdleTimeout} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s: %s must be positive", name, d))
		}
	}
	if h.MaxConnections < 1 {
		errs = append(errs, fmt.Errorf("http.max_connections: %d is below the minimum of 1", h.MaxConnections))
	}
	for i, o := range h.CORSOrigins {
		if o == "*" || !(strings.HasPrefix(o, "http://") || strings.HasPrefix(o, "https://")) {
			errs = append(errs, fmt.Errorf("http.cors_origins[%d]: %q is not an origin like https://grafana.example:3000 (wildcards are not allowed)", i, o))
		}
	}
	return errors.Join(errs...)
}

// ClientTLSConfig is how ballast connects to an HTTPS server it pulls from
// or pushes to (agents it scrapes, a remote store).
type ClientTLSConfig struct {
	// CAFile verifies the server; empty uses the system roots.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are a client certificate for mTLS.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName overrides the name checked in the server's certificate.
	ServerName string `yaml:"server_name"`
	// InsecureSkipVerify turns off server verification (tests only).
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// ClientConfig are the credentials ballast sends to a server: a bearer
// token from a file and TLS settings.
type ClientConfig struct {
	// BearerTokenFile holds the token sent as "Authorization: Bearer …",
	// re-read when the file changes.
	BearerTokenFile string          `yaml:"bearer_token_file"`
	TLS             ClientTLSConfig `yaml:"tls"`
}

func (c *ClientConfig) Validate(field string) error {
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		return fmt.Errorf("%s.tls: cert_file and key_file go together (got cert_file %q, key_file %q)", field, c.TLS.CertFile, c.TLS.KeyFile)
	}
	return nil
}
