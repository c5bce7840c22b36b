// Package remote is the remote backend of storage.Store: samples go out by
// Prometheus remote write (to a VictoriaMetrics cluster's vminsert, a
// single-node VictoriaMetrics, Prometheus with its remote-write receiver, or
// any compatible receiver) through an on-disk queue, and queries go to a
// Prometheus HTTP API (vmselect, VictoriaMetrics, Prometheus). The query API
// ballast serves becomes a proxy to that API, so Grafana keeps one URL.
//
// Delivery: Append validates like the embedded store, then the samples join
// an in-memory block that reaches the on-disk queue within BlockInterval or
// when it holds BlockSamples; one sender delivers queued blocks in order and
// removes a block only once the receiver acknowledged it, retrying with
// exponential backoff. The queue survives restarts; when it is full, the
// oldest blocks are dropped, counted and logged (docs/storage.md). A
// remote-write request that passed validation unchanged is forwarded as
// received, without being encoded again (Store.WriteAsReceived).
package remote

import (
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// Options configure a remote store. Zero values mean the documented
// defaults (docs/config.md, storage.remote.*).
type Options struct {
	// DataDir holds the queue (remote-write-queue.db) and, beside it, the
	// mds's journals; required.
	DataDir string
	// WriteURL is the remote-write endpoint, e.g.
	// http://prometheus:9090/api/v1/write; with Tenant set, the root of
	// vminsert (http://vminsert:8480). Required.
	WriteURL string
	// QueryURL is the root of the Prometheus HTTP API (…/api/v1/query is
	// appended), e.g. http://prometheus:9090; with Tenant set, the root of
	// vmselect (http://vmselect:8481). Required.
	QueryURL string
	// Tenant is a VictoriaMetrics cluster tenant, accountID[:projectID].
	// When set, writes go to WriteURL/insert/TENANT/prometheus/api/v1/write
	// and queries to QueryURL/select/TENANT/prometheus/api/v1/….
	Tenant string
	// Auth and TLS of both URLs.
	Auth ClientAuth
	// Retention bounds the timestamps Append accepts, as the embedded store
	// does; set it to the remote's retention so that ballast refuses what
	// the remote would drop silently. Default 30 days.
	Retention time.Duration
	// QueueMaxBytes bounds the on-disk queue's payload. Default 1 GiB.
	QueueMaxBytes int64
	// BlockSamples is the most samples per remote-write request. Default 10000.
	BlockSamples int
	// BlockInterval is how long accepted samples may wait in memory before
	// their block is queued on disk; a crash can lose that much. Default 1s.
	BlockInterval time.Duration
	// Timeout bounds one request to the remote. Default 30s.
	Timeout time.Duration
	// RetryMin and RetryMax bound the backoff between failed sends.
	// Defaults 500ms and 1m.
	RetryMin, RetryMax time.Duration
	// QueryCache lets the remote use its query result cache; false adds
	// nocache=1 (VictoriaMetrics) to every query.
	QueryCache bool
	// LatencyOffset, when not zero, is sent as latency_offset
	// (VictoriaMetrics); negative sends its minimum, 1ms.
	LatencyOffset time.Duration
	// FlushURLs are requested (GET) by Flush after the queue drained, to
	// make the remote's recent writes searchable at once, e.g. each
	// vmstorage's /internal/force_flush. Only simulated clocks (demo, eval)
	// call Flush.
	FlushURLs []string
	// MinFreeDiskBytes: below this free space in DataDir the store refuses
	// writes (503) instead of filling the disk. Default 100 MB.
	MinFreeDiskBytes int64
	// UserAgent of requests. Default "ballast".
	UserAgent string
	Logger    *slog.Logger
	// Metrics receives ballast_remote_* series. Default: a private set.
	Metrics *metrics.Set
}

// ClientAuth are the credentials and TLS settings of the remote. Secrets
// come from files, re-read when they change, and never appear in logs or
// errors.
type ClientAuth struct {
	BearerTokenFile   string
	BasicUser         string
	BasicPasswordFile string
	CAFile            string
	CertFile          string
	KeyFile           string
	ServerName        string
	InsecureSkipTLS   bool
}

var tenantRE = regexp.MustCompile(`^[0-9]+(:[0-9]+)?$`)

// Validate reports the first bad option, naming its config field.
func (o *Options) Validate() error {
	if o.DataDir == "" {
		return fmt.Errorf("data_dir: must not be empty")
	}
	for _, u := range []struct{ field, v string }{{"storage.remote.write_url", o.WriteURL}, {"storage.remote.query_url", o.QueryURL}} {
		if err := checkURL(u.v); err != nil {
			return fmt.Errorf("%s: %w", u.field, err)
		}
	}
	for i, u := range o.FlushURLs {
		if err := checkURL(u); err != nil {
			return fmt.Errorf("storage.remote.flush_urls[%d]: %w", i, err)
		}
	}
	switch a := &o.Auth; {
	case o.Tenant != "" && !tenantRE.MatchString(o.Tenant):
		return fmt.Errorf("storage.remote.tenant: %q is not accountID or accountID:projectID (numbers)", o.Tenant)
	case a.BearerTokenFile != "" && (a.BasicUser != "" || a.BasicPasswordFile != ""):
		return fmt.Errorf("storage.remote.bearer_token_file: set either it or basic auth, not both")
	case (a.BasicUser == "") != (a.BasicPasswordFile == ""):
		return fmt.Errorf("storage.remote.basic_auth: username and password_file go together")
	case (a.CertFile == "") != (a.KeyFile == ""):
		return fmt.Errorf("storage.remote.tls: cert_file and key_file go together")
	case o.QueueMaxBytes != 0 && o.QueueMaxBytes < 1<<20:
		return fmt.Errorf("storage.remote.queue_max_bytes: %d is below the minimum of 1048576", o.QueueMaxBytes)
	case o.BlockSamples < 0:
		return fmt.Errorf("storage.remote.block_samples: %d is negative", o.BlockSamples)
	case o.BlockInterval < 0:
		return fmt.Errorf("storage.remote.block_interval: %s is negative", o.BlockInterval)
	case o.Timeout < 0:
		return fmt.Errorf("storage.remote.timeout: %s is negative", o.Timeout)
	case o.RetryMin < 0 || o.RetryMax < 0 || (o.RetryMax != 0 && o.RetryMin > o.RetryMax):
		return fmt.Errorf("storage.remote.retry_min/retry_max: %s/%s must be non-negative with min ≤ max", o.RetryMin, o.RetryMax)
	}
	return nil
}

// CheckFiles reads the TLS and credential files o names, as Open does, so
// that `ballast config check` refuses what the store would refuse at start.
func (o *Options) CheckFiles() error {
	_, err := newHTTPClient(o.Auth, o.Timeout)
	return err
}

func checkURL(s string) error {
	if s == "" {
		return fmt.Errorf("must not be empty")
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http:// or https:// URL", redact(s))
	}
	if u.User != nil {
		return fmt.Errorf("%q carries credentials; use basic_auth or bearer_token_file", redact(s))
	}
	return nil
}

// redact removes credentials from a URL for messages.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

func (o *Options) withDefaults() Options {
	r := *o
	if r.Retention == 0 {
		r.Retention = 30 * 24 * time.Hour
	}
	if r.QueueMaxBytes == 0 {
		r.QueueMaxBytes = 1 << 30
	}
	if r.BlockSamples == 0 {
		r.BlockSamples = 10000
	}
	if r.BlockInterval == 0 {
		r.BlockInterval = time.Second
	}
	if r.Timeout == 0 {
		r.Timeout = 30 * time.Second
	}
	if r.RetryMin == 0 {
		r.RetryMin = 500 * time.Millisecond
	}
	if r.RetryMax == 0 {
		r.RetryMax = time.Minute
	}
	if r.RetryMin > r.RetryMax {
		r.RetryMin = r.RetryMax
	}
	if r.MinFreeDiskBytes == 0 {
		r.MinFreeDiskBytes = 100e6
	}
	if r.UserAgent == "" {
		r.UserAgent = "ballast"
	}
	if r.Logger == nil {
		r.Logger = slog.Default()
	}
	if r.Metrics == nil {
		r.Metrics = metrics.NewSet()
	}
	return r
}

// writeEndpoint and queryRoot apply the tenant.
func (o *Options) writeEndpoint() string {
	if o.Tenant == "" {
		return o.WriteURL
	}
	return strings.TrimRight(o.WriteURL, "/") + "/insert/" + o.Tenant + "/prometheus/api/v1/write"
}

func (o *Options) queryRoot() string {
	root := strings.TrimRight(o.QueryURL, "/")
	if o.Tenant == "" {
		return root
	}
	return root + "/select/" + o.Tenant + "/prometheus"
}
