package node

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// tlsReloadEvery is how often certificate files are checked for changes.
const tlsReloadEvery = time.Second

// fileStamp identifies a version of a file by modification time and size.
type fileStamp struct {
	mod  time.Time
	size int64
}

func stampOf(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{fi.ModTime(), fi.Size()}, nil
}

// serverTLS serves a listener's certificate and client CAs, re-reading the
// files when they change. Written by hand because the standard library
// has no reloading certificate source; exporter-toolkit's would bring its
// own configuration format and basic auth instead of scoped tokens.
type serverTLS struct {
	cfg    TLSConfig
	logger *slog.Logger

	mu        sync.Mutex
	nextCheck time.Time
	stamps    [3]fileStamp // cert, key, client CA
	cert      *tls.Certificate
	pool      *x509.CertPool
}

// newServerTLS loads cfg's files; it fails naming the file that is missing
// or invalid.
func newServerTLS(cfg TLSConfig, logger *slog.Logger) (*serverTLS, error) {
	s := &serverTLS{cfg: cfg, logger: logger}
	if err := s.load(); err != nil {
		return nil, err
	}
	s.nextCheck = time.Now().Add(tlsReloadEvery)
	return s, nil
}

func (s *serverTLS) load() error {
	var st [3]fileStamp
	var err error
	for i, p := range []string{s.cfg.CertFile, s.cfg.KeyFile, s.cfg.ClientCAFile} {
		if p == "" {
			continue
		}
		if st[i], err = stampOf(p); err != nil {
			return fmt.Errorf("cannot read TLS file %q: %w", p, err)
		}
	}
	cert, err := tls.LoadX509KeyPair(s.cfg.CertFile, s.cfg.KeyFile)
	if err != nil {
		return fmt.Errorf("cannot load TLS certificate %q with key %q: %w", s.cfg.CertFile, s.cfg.KeyFile, err)
	}
	var pool *x509.CertPool
	if s.cfg.ClientCAFile != "" {
		if pool, err = loadCAPool(s.cfg.ClientCAFile); err != nil {
			return err
		}
	}
	s.cert, s.pool, s.stamps = &cert, pool, st
	return nil
}

func loadCAPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read CA file %q: %w", path, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("cannot use CA file %q: no PEM certificate in it", path)
	}
	return pool, nil
}

// current returns the certificate and CA pool, reloading changed files at
// most once per tlsReloadEvery; a failed reload keeps the previous ones.
func (s *serverTLS) current() (*tls.Certificate, *x509.CertPool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now := time.Now(); now.After(s.nextCheck) {
		s.nextCheck = now.Add(tlsReloadEvery)
		changed := false
		for i, p := range []string{s.cfg.CertFile, s.cfg.KeyFile, s.cfg.ClientCAFile} {
			if p == "" {
				continue
			}
			if st, err := stampOf(p); err == nil && st != s.stamps[i] {
				changed = true
			}
		}
		if changed {
			if err := s.load(); err != nil {
				s.logger.Error("keeping the previous TLS certificate", "err", err)
			} else {
				s.logger.Info("TLS files reloaded", "cert_file", s.cfg.CertFile)
			}
		}
	}
	return s.cert, s.pool
}

// config returns the listener's tls.Config: TLS 1.2 or newer, the current
// certificate and client CAs on every handshake.
func (s *serverTLS) config() *tls.Config {
	auth := tls.NoClientCert
	if s.cfg.ClientCAFile != "" {
		auth = tls.VerifyClientCertIfGiven
		if s.cfg.ClientAuth == "require" {
			auth = tls.RequireAndVerifyClientCert
		}
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool := s.current()
			return &tls.Config{
				MinVersion:   tls.VersionTLS12,
				NextProtos:   []string{"h2", "http/1.1"},
				Certificates: []tls.Certificate{*cert},
				ClientCAs:    pool,
				ClientAuth:   auth,
			}, nil
		},
	}
}

// NewClientTransport returns a transport that sends c's bearer token (read
// from its file, re-read when it changes) and uses c's TLS settings. Use it
// for every request ballast makes to a server that may require
// credentials: scrapes of agents, a remote store, `ballast report`.
func NewClientTransport(c ClientConfig) (http.RoundTripper, error) {
	if err := c.Validate("client"); err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.TLS.ServerName, InsecureSkipVerify: c.TLS.InsecureSkipVerify}
	if c.TLS.CAFile != "" {
		pool, err := loadCAPool(c.TLS.CAFile)
		if err != nil {
			return nil, err
		}
		tc.RootCAs = pool
	}
	if c.TLS.CertFile != "" {
		if _, err := tls.LoadX509KeyPair(c.TLS.CertFile, c.TLS.KeyFile); err != nil {
			return nil, fmt.Errorf("cannot load client certificate %q with key %q: %w", c.TLS.CertFile, c.TLS.KeyFile, err)
		}
		certFile, keyFile := c.TLS.CertFile, c.TLS.KeyFile
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, err := tls.LoadX509KeyPair(certFile, keyFile)
			if err != nil {
				return nil, fmt.Errorf("cannot load client certificate %q: %w", certFile, err)
			}
			return &cert, nil
		}
	}
	tr.TLSClientConfig = tc
	if c.BearerTokenFile == "" {
		return tr, nil
	}
	bt := &bearerTransport{next: tr, file: c.BearerTokenFile}
	if _, err := bt.token(); err != nil {
		return nil, err
	}
	return bt, nil
}

// bearerTransport adds "Authorization: Bearer TOKEN" from a file.
type bearerTransport struct {
	next http.RoundTripper
	file string

	mu    sync.Mutex
	stamp fileStamp
	tok   string
}

func (b *bearerTransport) token() (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	st, err := stampOf(b.file)
	if err == nil && st == b.stamp && b.tok != "" {
		return b.tok, nil
	}
	data, err := os.ReadFile(b.file)
	if err != nil {
		if b.tok != "" {
			return b.tok, nil // keep the last good token
		}
		return "", fmt.Errorf("cannot read bearer token file %q: %w", b.file, err)
	}
	tok := string(bytes.TrimSpace(data))
	if tok == "" || strings.ContainsAny(tok, "\r\n") {
		return "", fmt.Errorf("cannot use bearer token file %q: want one token on one line", b.file)
	}
	b.tok, b.stamp = tok, st
	return tok, nil
}

// RoundTrip adds the token to a copy of the request.
func (b *bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	tok, err := b.token()
	if err != nil {
		return nil, err
	}
	r2 := r.Clone(r.Context())
	r2.Header.Set("Authorization", "Bearer "+tok)
	return b.next.RoundTrip(r2)
}
