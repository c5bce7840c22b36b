package cluster

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/ballast-io/ballast/cluster/ha"
	"github.com/ballast-io/ballast/storage"
	"github.com/ballast-io/ballast/storage/remote"
)

// RemoteOptions returns the remote store's options from c (storage.remote
// and the fields it shares with the embedded store).
func (c *MDSConfig) RemoteOptions() remote.Options {
	s, r := &c.Storage, &c.Storage.Remote
	latency := time.Duration(s.LatencyOffset)
	if latency == 0 {
		latency = -1 // remote.Options: negative sends the smallest offset
	}
	return remote.Options{
		DataDir:  c.DataDir,
		WriteURL: r.WriteURL,
		QueryURL: r.QueryURL,
		Tenant:   r.Tenant,
		Auth: remote.ClientAuth{
			BearerTokenFile:   r.BearerTokenFile,
			BasicUser:         r.BasicAuth.Username,
			BasicPasswordFile: r.BasicAuth.PasswordFile,
			CAFile:            r.TLS.CAFile,
			CertFile:          r.TLS.CertFile,
			KeyFile:           r.TLS.KeyFile,
			ServerName:        r.TLS.ServerName,
			InsecureSkipTLS:   r.TLS.InsecureSkipVerify,
		},
		Retention:        time.Duration(s.Retention),
		QueueMaxBytes:    r.QueueMaxBytes,
		BlockSamples:     r.BlockSamples,
		BlockInterval:    time.Duration(r.BlockInterval),
		Timeout:          time.Duration(r.Timeout),
		RetryMin:         time.Duration(r.RetryMin),
		RetryMax:         time.Duration(r.RetryMax),
		QueryCache:       s.QueryCache,
		LatencyOffset:    latency,
		FlushURLs:        r.FlushURLs,
		MinFreeDiskBytes: s.MinFreeDiskBytes,
	}
}

// openStore opens the configured storage backend.
func openStore(c *MDSConfig, version string, logger *slog.Logger, set *metrics.Set) (storage.Store, error) {
	if c.Storage.Backend == BackendRemote {
		o := c.RemoteOptions()
		o.UserAgent = "ballast/" + version
		o.Logger = logger
		o.Metrics = set
		st, err := remote.Open(o)
		if err != nil {
			return nil, err // not a typed nil in the interface
		}
		return st, nil
	}
	latency := time.Duration(c.Storage.LatencyOffset)
	if latency == 0 {
		latency = -1 // storage.Options: negative means none
	}
	refresh := time.Duration(c.Storage.RefreshInterval)
	if refresh == 0 {
		refresh = -1 // storage.Options: negative turns it off
	}
	st, err := storage.OpenEmbedded(storage.Options{
		DataDir:              c.DataDir,
		Retention:            time.Duration(c.Storage.Retention),
		FlushInterval:        time.Duration(c.Storage.FlushInterval),
		Durability:           c.Storage.Durability,
		Logger:               logger,
		MinFreeDiskBytes:     c.Storage.MinFreeDiskBytes,
		MemoryBytes:          c.Storage.MemoryBytes,
		DisableQueryCache:    !c.Storage.QueryCache,
		LatencyOffset:        latency,
		MaxConcurrentQueries: c.Storage.MaxConcurrentQueries,
		QueryTimeout:         time.Duration(c.Storage.QueryTimeout),
		MaxMemoryPerQuery:    c.Storage.MaxMemoryPerQuery,
		RefreshInterval:      refresh,
		LogLevel:             vmLogLevel(c.LogLevel),
		Metrics:              set,
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// StoreFlagUsage documents ApplyStoreFlag for the commands that take --store.
const StoreFlagUsage = "store: embedded, or remote=URL (a Prometheus-API root that also takes remote write at URL/api/v1/write), or remote=WRITE_URL,QUERY_URL (e.g. vminsert's …/insert/0/prometheus/api/v1/write and vmselect's …/select/0/prometheus)"

// ApplyStoreFlag sets the backend of s from a --store value (see
// StoreFlagUsage) and flushURLs (--store-flush-url).
func ApplyStoreFlag(s *StorageConfig, v string, flushURLs []string) error {
	switch {
	case v == BackendEmbedded:
		s.Backend = BackendEmbedded
		if len(flushURLs) > 0 {
			return fmt.Errorf("--store-flush-url needs --store remote=…")
		}
		return nil
	case strings.HasPrefix(v, BackendRemote+"="):
		urls := strings.Split(strings.TrimPrefix(v, BackendRemote+"="), ",")
		switch len(urls) {
		case 1:
			s.Remote.QueryURL = strings.TrimRight(urls[0], "/")
			s.Remote.WriteURL = s.Remote.QueryURL + "/api/v1/write"
		case 2:
			s.Remote.WriteURL, s.Remote.QueryURL = urls[0], urls[1]
		default:
			return fmt.Errorf("--store %q: want remote=URL or remote=WRITE_URL,QUERY_URL", v)
		}
		s.Backend = BackendRemote
		s.Remote.FlushURLs = flushURLs
		return nil
	}
	return fmt.Errorf("--store %q: want embedded, remote=URL or remote=WRITE_URL,QUERY_URL", v)
}

// HAOptions returns the elector's options from c.ha.
func (c *MDSConfig) HAOptions() ha.Options {
	name := c.HA.Name
	if name == "" {
		name = c.Listen
		if host, port, err := net.SplitHostPort(c.Listen); err == nil && (host == "" || host == "0.0.0.0" || host == "::") {
			h, _ := os.Hostname()
			name = net.JoinHostPort(h, port)
		}
	}
	return ha.Options{
		Endpoints:    c.HA.EtcdEndpoints,
		Prefix:       c.HA.ElectionPrefix,
		Name:         name,
		TTL:          time.Duration(c.HA.LeaseTTL),
		Username:     c.HA.Username,
		PasswordFile: c.HA.PasswordFile,
	}
}

// writeGlobalMetrics writes the process-wide metrics registry as far as it
// is safe: VictoriaMetrics' engine gauges only with the embedded store open
// (they read its state and panic without it), and the process metrics.
func (m *MDS) writeGlobalMetrics(w io.Writer) {
	if mw, ok := m.store.(storage.MetricsWriter); ok {
		mw.WriteMetrics(w)
	}
	metrics.WriteProcessMetrics(w)
}
