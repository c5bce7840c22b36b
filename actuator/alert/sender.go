package alert

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// Sender delivers one notification to one receiver. It says whether a
// failure is worth retrying and does not retry itself: the dispatcher's
// retry stage owns backoff.
type Sender interface {
	Send(ctx context.Context, now time.Time, id string, n *Notification) (resp Response, retryable bool, err error)
}

// Response is what a receiver answered.
type Response struct {
	StatusCode int
	Status     string
	// Body is the start of the answer (at most maxAnswer bytes), with any
	// secret of the receiver replaced by <secret>.
	Body string
}

// maxAnswer bounds the part of a receiver's answer kept for logs and
// `ballast alerts test`.
const maxAnswer = 1024

// Headers ballast sets on every notification.
const (
	// HeaderNotificationID is stable across retries of one notification
	// ("RECEIVER/SEQ"), so a receiver can drop the duplicate that a crash
	// between its 2xx and ballast's journal commit may cause.
	HeaderNotificationID = "X-Ballast-Notification-Id"
	// HeaderSignature is "t=UNIX,v1=HEX": HMAC-SHA256 of "UNIX.BODY" keyed
	// with the receiver's hmac_secret.
	HeaderSignature = "X-Ballast-Signature"
	// HeaderTimestamp repeats the signed Unix time.
	HeaderTimestamp = "X-Ballast-Timestamp"
)

// UserAgent is the User-Agent of notifications.
var UserAgent = "ballast-alert/1"

// httpSender posts webhook v4 bodies or Alertmanager v2 alert lists.
type httpSender struct {
	r           ReceiverOptions
	target      string // the URL posted to
	externalURL string
	valid       time.Duration // endsAt ahead for Alertmanager
	client      *http.Client
	// wall is the clock of the signature timestamp: a transport detail
	// the receiver checks against its own clock, not a decision.
	wall func() time.Time
}

// NewSender returns the HTTP sender of r (TLS files are read here).
// externalURL goes into webhook bodies; valid is how far ahead a firing
// alert's endsAt is set for Alertmanager.
func NewSender(r ReceiverOptions, externalURL string, valid time.Duration) (Sender, error) {
	if err := r.Check(); err != nil {
		return nil, err
	}
	tlsCfg, err := TLSConfig(r.TLSCAFile, r.TLSCertFile, r.TLSKeyFile)
	if err != nil {
		return nil, err
	}
	if r.Timeout <= 0 {
		r.Timeout = 10 * time.Second
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsCfg
	target := r.URL
	if r.Type == TypeAlertmanager {
		target = strings.TrimRight(r.URL, "/") + "/api/v2/alerts"
	}
	return &httpSender{r: r, target: target, externalURL: externalURL, valid: valid,
		client: &http.Client{Transport: tr}, wall: time.Now}, nil
}

// TLSConfig builds the client TLS configuration from PEM files: ca verifies
// the receiver (system roots when empty), cert and key authenticate ballast
// (both or neither). Nil when no file is given.
func TLSConfig(ca, cert, key string) (*tls.Config, error) {
	if ca == "" && cert == "" && key == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("cannot read CA file %q: %w", ca, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %q holds no PEM certificate", ca)
		}
		cfg.RootCAs = pool
	}
	if (cert == "") != (key == "") {
		return nil, fmt.Errorf("a client certificate needs both a cert and a key file")
	}
	if cert != "" {
		kp, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("cannot load client certificate %q and key %q: %w", cert, key, err)
		}
		cfg.Certificates = []tls.Certificate{kp}
	}
	return cfg, nil
}

// Send posts n. 2xx is success; 5xx, 408 and 429 and transport failures
// (refused, reset, timed out) are retryable; other statuses are not.
func (s *httpSender) Send(ctx context.Context, now time.Time, id string, n *Notification) (Response, bool, error) {
	var body []byte
	var err error
	if s.r.Type == TypeAlertmanager {
		body, err = renderAlertmanager(n, now, s.valid)
	} else {
		body, _, err = renderWebhook(n, s.externalURL, s.r.MaxAlerts, s.r.MaxPayloadBytes)
	}
	if err != nil {
		return Response{}, false, fmt.Errorf("cannot render notification for receiver %q: %w", s.r.Name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.r.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.target, bytes.NewReader(body))
	if err != nil {
		return Response{}, false, fmt.Errorf("cannot build request for receiver %q: %w", s.r.Name, s.redactErr(err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", UserAgent)
	if id != "" {
		req.Header.Set(HeaderNotificationID, id)
	}
	if s.r.BearerToken != "" {
		req.Header.Set("Authorization", "Bearer "+s.r.BearerToken)
	}
	if s.r.HMACSecret != "" {
		ts := strconv.FormatInt(s.wall().Unix(), 10)
		req.Header.Set(HeaderTimestamp, ts)
		req.Header.Set(HeaderSignature, "t="+ts+",v1="+Sign([]byte(s.r.HMACSecret), ts, body))
	}
	resp, err := s.client.Do(req)
	if err != nil {
		// Timeouts, refused and reset connections, TLS failures: the
		// receiver may come back or be fixed, so keep the notification.
		return Response{}, true, fmt.Errorf("cannot reach receiver %q: %w", s.r.Name, s.redactErr(err))
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // let the connection be reused
	r := Response{StatusCode: resp.StatusCode, Status: resp.Status, Body: s.redact(string(answer))}
	if resp.StatusCode/100 == 2 {
		return r, false, nil
	}
	retry := resp.StatusCode/100 == 5 || resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode == http.StatusTooManyRequests
	err = fmt.Errorf("receiver %q answered %s", s.r.Name, resp.Status)
	if b := strings.TrimSpace(r.Body); b != "" {
		err = fmt.Errorf("%w: %s", err, truncate(b, 256))
	}
	return r, retry, err
}

// Sign returns the hex HMAC-SHA256 of "ts.body" keyed with secret: what a
// receiver recomputes to check HeaderSignature.
func Sign(secret []byte, ts string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// redactErr drops the URL from net/http's errors, which quote it.
func (s *httpSender) redactErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return errors.New(s.redact(ue.Op + " <receiver url>: " + ue.Err.Error()))
	}
	return errors.New(s.redact(err.Error()))
}

// redact replaces every secret of the receiver in text: the URL (and its
// host, path and query, any of which can carry a token), the bearer token
// and the HMAC key, in case a receiver echoes them.
func (s *httpSender) redact(text string) string {
	secrets := []string{s.target, s.r.URL, s.r.BearerToken, s.r.HMACSecret}
	if u, err := url.Parse(s.r.URL); err == nil {
		secrets = append(secrets, u.User.String(), u.RawQuery)
		if len(u.Path) > 1 {
			secrets = append(secrets, u.Path)
		}
	}
	for _, sec := range secrets {
		if len(sec) >= 4 {
			text = strings.ReplaceAll(text, sec, "<secret>")
		}
	}
	return text
}
