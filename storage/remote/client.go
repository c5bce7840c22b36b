package remote

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// newHTTPClient builds the client both directions use: TLS from files, and
// the credentials added to every request by authTransport.
func newHTTPClient(a ClientAuth, timeout time.Duration) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 8
	if a.CAFile != "" || a.CertFile != "" || a.ServerName != "" || a.InsecureSkipTLS {
		tc := &tls.Config{ServerName: a.ServerName, InsecureSkipVerify: a.InsecureSkipTLS, MinVersion: tls.VersionTLS12}
		if a.CAFile != "" {
			pem, err := os.ReadFile(a.CAFile)
			if err != nil {
				return nil, fmt.Errorf("cannot read storage.remote.tls.ca_file %q: %w", a.CAFile, err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("cannot use storage.remote.tls.ca_file %q: no PEM certificate in it", a.CAFile)
			}
			tc.RootCAs = pool
		}
		if a.CertFile != "" {
			// Loaded per handshake, so a renewed certificate is used
			// without a restart.
			if _, err := tls.LoadX509KeyPair(a.CertFile, a.KeyFile); err != nil {
				return nil, fmt.Errorf("cannot load storage.remote.tls cert_file %q / key_file %q: %w", a.CertFile, a.KeyFile, err)
			}
			tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				c, err := tls.LoadX509KeyPair(a.CertFile, a.KeyFile)
				return &c, err
			}
		}
		tr.TLSClientConfig = tc
	}
	at := &authTransport{next: tr}
	switch {
	case a.BearerTokenFile != "":
		at.secret = &secretFile{path: a.BearerTokenFile, field: "storage.remote.bearer_token_file"}
		at.scheme = "Bearer"
	case a.BasicPasswordFile != "":
		at.secret = &secretFile{path: a.BasicPasswordFile, field: "storage.remote.basic_auth.password_file"}
		at.user = a.BasicUser
	}
	if at.secret != nil {
		if _, err := at.secret.value(); err != nil {
			return nil, err
		}
	}
	return &http.Client{Transport: at, Timeout: timeout}, nil
}

// authTransport adds the remote's credentials to each request, replacing
// any Authorization the request carried (a proxied client's credentials are
// for ballast, not for the remote).
type authTransport struct {
	next   http.RoundTripper
	secret *secretFile
	scheme string // "Bearer", or "" for basic auth
	user   string
}

func (t *authTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Del("Authorization")
	if t.secret != nil {
		v, err := t.secret.value()
		if err != nil {
			return nil, err
		}
		if t.scheme != "" {
			r.Header.Set("Authorization", t.scheme+" "+v)
		} else {
			r.SetBasicAuth(t.user, v)
		}
	}
	return t.next.RoundTrip(r)
}

// secretFile is a credential kept in a file, re-read when its modification
// time changes (rotation without a restart). Trailing newlines are trimmed.
type secretFile struct {
	path, field string

	mu    sync.Mutex
	mtime time.Time
	v     string
}

func (s *secretFile) value() (string, error) {
	fi, err := os.Stat(s.path)
	if err != nil {
		return "", fmt.Errorf("cannot read %s %q: %w", s.field, s.path, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !fi.ModTime().Equal(s.mtime) || s.v == "" {
		b, err := os.ReadFile(s.path)
		if err != nil {
			return "", fmt.Errorf("cannot read %s %q: %w", s.field, s.path, err)
		}
		v := strings.TrimRight(string(b), "\r\n")
		if v == "" {
			return "", fmt.Errorf("cannot use %s %q: the file is empty", s.field, s.path)
		}
		s.v, s.mtime = v, fi.ModTime()
	}
	return s.v, nil
}
