package cluster

import (
	"errors"
	"fmt"
	"os"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/ballast-io/ballast/actuator"
	"github.com/ballast-io/ballast/cluster/identity"
	"github.com/ballast-io/ballast/cluster/node"
	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/storage"
)

// Storage backends.
const (
	BackendEmbedded = "embedded"
	BackendRemote   = "remote"
)

// StorageConfig configures the time-series store: the embedded
// VictoriaMetrics (default) or a remote engine (docs/storage.md).
type StorageConfig struct {
	// Backend is embedded or remote.
	Backend       string   `yaml:"backend"`
	Retention     Duration `yaml:"retention"`
	FlushInterval Duration `yaml:"flush_interval"`
	// Durability is window or wal (docs/storage.md#durability).
	Durability       string   `yaml:"durability"`
	MinFreeDiskBytes int64    `yaml:"min_free_disk_bytes"`
	MemoryBytes      int64    `yaml:"memory_bytes"`
	QueryCache       bool     `yaml:"query_cache"`
	LatencyOffset    Duration `yaml:"latency_offset"`
	// Query limits of the embedded store (docs/storage.md#query-limits).
	MaxConcurrentQueries int      `yaml:"max_concurrent_queries"`
	QueryTimeout         Duration `yaml:"query_timeout"`
	MaxMemoryPerQuery    int64    `yaml:"max_memory_per_query"`
	// RefreshInterval: a query finds every row acknowledged this long
	// before it (rows are made searchable on read, at most once per
	// interval); 0 leaves it to VictoriaMetrics' own timers
	// (docs/storage.md#freshness).
	RefreshInterval Duration `yaml:"refresh_interval"`
	// Remote is used when Backend is remote.
	Remote RemoteConfig `yaml:"remote"`
}

// RemoteConfig is a remote store: Prometheus remote write out, the
// Prometheus HTTP API in (a VictoriaMetrics cluster, single-node
// VictoriaMetrics, Prometheus).
type RemoteConfig struct {
	WriteURL        string          `yaml:"write_url"`
	QueryURL        string          `yaml:"query_url"`
	Tenant          string          `yaml:"tenant"`
	BearerTokenFile string          `yaml:"bearer_token_file"`
	BasicAuth       BasicAuthConfig `yaml:"basic_auth"`
	TLS             TLSClientConfig `yaml:"tls"`
	QueueMaxBytes   int64           `yaml:"queue_max_bytes"`
	BlockSamples    int             `yaml:"block_samples"`
	BlockInterval   Duration        `yaml:"block_interval"`
	Timeout         Duration        `yaml:"timeout"`
	RetryMin        Duration        `yaml:"retry_min"`
	RetryMax        Duration        `yaml:"retry_max"`
	FlushURLs       []string        `yaml:"flush_urls"`
}

// BasicAuthConfig is HTTP basic auth with the password in a file.
type BasicAuthConfig struct {
	Username     string `yaml:"username"`
	PasswordFile string `yaml:"password_file"`
}

// TLSClientConfig is how ballast checks a server and presents itself.
type TLSClientConfig struct {
	CAFile             string `yaml:"ca_file"`
	CertFile           string `yaml:"cert_file"`
	KeyFile            string `yaml:"key_file"`
	ServerName         string `yaml:"server_name"`
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify"`
}

// IngestConfig bounds the push endpoints.
type IngestConfig struct {
	MaxBodyBytes int `yaml:"max_body_bytes"`
	// MaxInflightRequests, MaxInflightBytes and QueueTimeout are the
	// backpressure of every ingest endpoint (Admission): past either limit
	// a request waits QueueTimeout for room, then gets 429 with
	// Retry-After.
	MaxInflightRequests int      `yaml:"max_inflight_requests"`
	MaxInflightBytes    int64    `yaml:"max_inflight_bytes"`
	QueueTimeout        Duration `yaml:"queue_timeout"`
	// MaxWorkers bounds the admitted requests that decode, parse and
	// store at once (the CPU ingest takes); 0 is GOMAXPROCS − 1, at least
	// 1 (DefaultIngestWorkers).
	MaxWorkers int `yaml:"max_workers"`
}

// ScrapeConfig lists the agents the MDS pulls from.
type ScrapeConfig struct {
	Interval Duration `yaml:"interval"`
	Timeout  Duration `yaml:"timeout"`
	// Targets are host:port of ds and client agents.
	Targets []string `yaml:"targets"`
	// TargetFiles are Prometheus file_sd files (JSON or YAML), re-read when
	// they change.
	TargetFiles []string `yaml:"target_files"`
	// Scheme is http or https, for every target. Default http.
	Scheme string `yaml:"scheme"`
	// ClientConfig holds the credentials sent to the targets: a bearer
	// token file and TLS settings (bearer_token_file, tls.*).
	ClientConfig `yaml:",inline"`
}

// PipelineConfig sets the analysis cadence.
type PipelineConfig struct {
	Tick Duration `yaml:"tick"`
}

// ReportConfig schedules the capacity forecasts report.
type ReportConfig struct {
	// CapacityDir receives report.html, report.md and report.json; empty
	// means DATA_DIR/reports/capacity.
	CapacityDir string `yaml:"capacity_dir"`
	// CapacityEvery is how often the report is rewritten; 0 turns it off.
	CapacityEvery Duration `yaml:"capacity_every"`
}

// MDSConfig is the configuration file of the mds role.
type MDSConfig struct {
	Role      string          `yaml:"role"`
	Listen    string          `yaml:"listen"`
	DataDir   string          `yaml:"data_dir"`
	LogLevel  string          `yaml:"log_level"`
	Storage   StorageConfig   `yaml:"storage"`
	Ingest    IngestConfig    `yaml:"ingest"`
	Scrape    ScrapeConfig    `yaml:"scrape"`
	Pipeline  PipelineConfig  `yaml:"pipeline"`
	Report    ReportConfig    `yaml:"report"`
	Telemetry TelemetryConfig `yaml:"telemetry"`
	// Devices is the device table: pNFS device id → DS and drive (or
	// export), copied from the pNFS server's configuration, so that
	// findings name drives and DSs as operators do (cluster/identity).
	Devices []identity.Device `yaml:"devices"`
	// DataServers names DS addresses (the netaddrs of GETDEVICEINFO);
	// optional, they are also learned from LAYOUTSTATS.
	DataServers []identity.DataServer `yaml:"data_servers"`
	Alerting    AlertingConfig        `yaml:"alerting"`
	HA          HAConfig              `yaml:"ha"`
	// Auth, TLS and HTTP secure and bound the listener (docs/security.md).
	Auth AuthConfig `yaml:"auth"`
	TLS  TLSConfig  `yaml:"tls"`
	HTTP HTTPConfig `yaml:"http"`
	// Actuators configures remediation (docs/actions.md).
	Actuators actuator.Config `yaml:"actuators"`
}

// HAConfig makes this mds one of an active/passive pair elected through
// etcd (docs/ha.md). Without etcd_endpoints the mds runs alone and always
// acts.
type HAConfig struct {
	EtcdEndpoints []string `yaml:"etcd_endpoints"`
	// Name identifies this mds in the election; empty means HOST:PORT of
	// listen with the host name for an unspecified host.
	Name           string   `yaml:"name"`
	ElectionPrefix string   `yaml:"election_prefix"`
	LeaseTTL       Duration `yaml:"lease_ttl"`
	Username       string   `yaml:"username"`
	PasswordFile   string   `yaml:"password_file"`
}

// DefaultMDSConfig returns the mds defaults.
func DefaultMDSConfig() MDSConfig {
	return MDSConfig{
		Role:     RoleMDS,
		Listen:   "127.0.0.1:9750",
		DataDir:  "ballast-data",
		LogLevel: "info",
		Storage: StorageConfig{
			Backend:          BackendEmbedded,
			Retention:        Duration(30 * 24 * time.Hour),
			FlushInterval:    Duration(5 * time.Second),
			Durability:       storage.DurabilityWindow,
			MinFreeDiskBytes: 100e6,
			QueryCache:       true,
			LatencyOffset:    0,
			QueryTimeout:     Duration(30 * time.Second),
			RefreshInterval:  Duration(storage.DefaultRefreshInterval),
			Remote: RemoteConfig{
				QueueMaxBytes: 1 << 30,
				BlockSamples:  10000,
				BlockInterval: Duration(time.Second),
				Timeout:       Duration(30 * time.Second),
				RetryMin:      Duration(500 * time.Millisecond),
				RetryMax:      Duration(time.Minute),
			},
		},
		Ingest:    IngestConfig{MaxBodyBytes: 32 << 20, MaxInflightRequests: 8, MaxInflightBytes: 64 << 20, QueueTimeout: Duration(time.Second)},
		Scrape:    ScrapeConfig{Interval: Duration(15 * time.Second), Timeout: Duration(10 * time.Second), Scheme: "http"},
		Pipeline:  PipelineConfig{Tick: Duration(15 * time.Second)},
		Report:    ReportConfig{CapacityEvery: Duration(24 * time.Hour)},
		Telemetry: TelemetryConfig{ServiceName: "ballast", SampleRatio: 1},
		Alerting:  defaultAlertingConfig(),
		HA:        HAConfig{ElectionPrefix: "/ballast/mds/leader", LeaseTTL: Duration(10 * time.Second)},
		HTTP:      node.DefaultHTTPConfig(),
		Actuators: actuator.DefaultConfig(),
	}
}

// Validate reports the first bad field of c, naming it and its value.
func (c *MDSConfig) Validate() error {
	var errs []error
	if c.Role != RoleMDS {
		errs = append(errs, fmt.Errorf("role: %q is not %q", c.Role, RoleMDS))
	}
	errs = append(errs, node.ValidateListen("listen", c.Listen), node.ValidateLogLevel(c.LogLevel), c.Telemetry.Validate(),
		c.Auth.Validate(), c.TLS.Validate("tls"), c.HTTP.Validate(), c.Scrape.ClientConfig.Validate("scrape"))
	if c.Scrape.Scheme != "http" && c.Scrape.Scheme != "https" {
		errs = append(errs, fmt.Errorf("scrape.scheme: %q is not http or https", c.Scrape.Scheme))
	}
	if c.DataDir == "" {
		errs = append(errs, fmt.Errorf("data_dir: must not be empty"))
	}
	s := &c.Storage
	if time.Duration(s.Retention) < 24*time.Hour {
		errs = append(errs, fmt.Errorf("storage.retention: %s is below the minimum of 24h", s.Retention))
	}
	if time.Duration(s.FlushInterval) < time.Second {
		errs = append(errs, fmt.Errorf("storage.flush_interval: %s is below the minimum of 1s", s.FlushInterval))
	}
	if s.Durability != storage.DurabilityWindow && s.Durability != storage.DurabilityWAL {
		errs = append(errs, fmt.Errorf("storage.durability: %q is not %s or %s", s.Durability, storage.DurabilityWindow, storage.DurabilityWAL))
	}
	if s.MinFreeDiskBytes < 0 {
		errs = append(errs, fmt.Errorf("storage.min_free_disk_bytes: %d is negative", s.MinFreeDiskBytes))
	}
	if s.MemoryBytes < 0 {
		errs = append(errs, fmt.Errorf("storage.memory_bytes: %d is negative", s.MemoryBytes))
	}
	if s.RefreshInterval < 0 {
		errs = append(errs, fmt.Errorf("storage.refresh_interval: %s is negative (0s turns the refresh off)", s.RefreshInterval))
	}
	if s.LatencyOffset < 0 {
		errs = append(errs, fmt.Errorf("storage.latency_offset: %s is negative", s.LatencyOffset))
	}
	if s.MaxConcurrentQueries < 0 {
		errs = append(errs, fmt.Errorf("storage.max_concurrent_queries: %d is negative (0 means the default)", s.MaxConcurrentQueries))
	}
	if time.Duration(s.QueryTimeout) < time.Second {
		errs = append(errs, fmt.Errorf("storage.query_timeout: %s is below the minimum of 1s", s.QueryTimeout))
	}
	if s.MaxMemoryPerQuery < 0 {
		errs = append(errs, fmt.Errorf("storage.max_memory_per_query: %d is negative (0 means only the shared limit)", s.MaxMemoryPerQuery))
	}
	if len(c.HA.EtcdEndpoints) > 0 {
		o := c.HAOptions()
		errs = append(errs, o.Validate())
	}
	switch s.Backend {
	case BackendEmbedded:
	case BackendRemote:
		o := c.RemoteOptions()
		errs = append(errs, o.Validate())
	default:
		errs = append(errs, fmt.Errorf("storage.backend: %q is not %q or %q", s.Backend, BackendEmbedded, BackendRemote))
	}
	if c.Ingest.MaxBodyBytes < 1024 {
		errs = append(errs, fmt.Errorf("ingest.max_body_bytes: %d is below the minimum of 1024", c.Ingest.MaxBodyBytes))
	}
	if c.Ingest.MaxInflightRequests < 1 {
		errs = append(errs, fmt.Errorf("ingest.max_inflight_requests: %d is below the minimum of 1", c.Ingest.MaxInflightRequests))
	}
	if c.Ingest.MaxInflightBytes < 1024 {
		errs = append(errs, fmt.Errorf("ingest.max_inflight_bytes: %d is below the minimum of 1024", c.Ingest.MaxInflightBytes))
	}
	if c.Ingest.MaxWorkers < 0 {
		errs = append(errs, fmt.Errorf("ingest.max_workers: %d is negative", c.Ingest.MaxWorkers))
	}
	if c.Ingest.QueueTimeout <= 0 {
		errs = append(errs, fmt.Errorf("ingest.queue_timeout: %s must be positive", c.Ingest.QueueTimeout))
	}
	if time.Duration(c.Scrape.Interval) < time.Second {
		errs = append(errs, fmt.Errorf("scrape.interval: %s is below the minimum of 1s", c.Scrape.Interval))
	}
	if c.Scrape.Timeout <= 0 || c.Scrape.Timeout > c.Scrape.Interval {
		errs = append(errs, fmt.Errorf("scrape.timeout: %s must be positive and at most scrape.interval (%s)", c.Scrape.Timeout, c.Scrape.Interval))
	}
	for i, t := range c.Scrape.Targets {
		if err := node.ValidateHostPort(t); err != nil {
			errs = append(errs, fmt.Errorf("scrape.targets[%d]: %q: %w", i, t, err))
		}
	}
	for i, f := range c.Scrape.TargetFiles {
		if f == "" {
			errs = append(errs, fmt.Errorf("scrape.target_files[%d]: must not be empty", i))
		}
	}
	if e := time.Duration(c.Report.CapacityEvery); e != 0 && e < time.Minute {
		errs = append(errs, fmt.Errorf("report.capacity_every: %s is below the minimum of 1m (0 turns the report off)", c.Report.CapacityEvery))
	}
	if time.Duration(c.Pipeline.Tick) < time.Second {
		errs = append(errs, fmt.Errorf("pipeline.tick: %s is below the minimum of 1s", c.Pipeline.Tick))
	}
	errs = append(errs, c.Alerting.validate())
	errs = append(errs, identity.Validate(c.Devices, c.DataServers))
	errs = append(errs, c.Actuators.Validate("actuators."))
	for _, k := range append(actuator.PlanKinds[:len(actuator.PlanKinds):len(actuator.PlanKinds)], models.ActionSetReadAhead) {
		if m := c.Actuators.ModeOf(k); m == models.ModeApprove || m == models.ModeAuto {
			if err := c.Auth.CheckProtected(c.Listen, node.ScopeAct); err != nil {
				errs = append(errs, fmt.Errorf("actuators.mode: %q for %s on %s: %w", m, k, c.Listen, err))
			}
			break
		}
	}
	return errors.Join(errs...)
}

// LoadMDSConfig reads path over the defaults and validates the result.
func LoadMDSConfig(path string) (MDSConfig, error) {
	c := DefaultMDSConfig()
	if err := node.LoadFile(path, &c); err != nil {
		return c, err
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("invalid config %q:\n%w", path, err)
	}
	return c, nil
}

// CheckStart runs the checks `ballast mds` makes before it starts beyond
// LoadMDSConfig's (which covers every field and alerting's secret files):
// it reads the listener's token, certificate and CA files and the remote
// store's and etcd's credentials, and refuses a mover driver a real mds
// cannot run, with the messages the daemon gives, so that `ballast config
// check` refuses what the daemon would. The demo and eval, which run the
// twin's driver, do not call it.
func (c *MDSConfig) CheckStart() error {
	errs := []error{node.CheckListener(RoleMDS, c.Listen, c.Auth, c.TLS, c.HTTP)}
	if d := c.Actuators.Driver; d == actuator.DriverTwin {
		errs = append(errs, driverUnavailable(d))
	}
	if c.Storage.Backend == BackendRemote {
		o := c.RemoteOptions()
		errs = append(errs, o.CheckFiles())
	}
	if len(c.HA.EtcdEndpoints) > 0 {
		o := c.HAOptions()
		errs = append(errs, o.CheckFiles())
	}
	return errors.Join(errs...)
}

// FileRole returns the role: field of a config file, to pick its schema.
func FileRole(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("cannot read config %q: %w", path, err)
	}
	var probe struct {
		Role string `yaml:"role"`
	}
	if err := yaml.Unmarshal(data, &probe); err != nil {
		return "", fmt.Errorf("cannot parse config %q: %w", path, err)
	}
	switch probe.Role {
	case RoleMDS, RoleDS, RoleClient:
		return probe.Role, nil
	case "":
		return "", fmt.Errorf("config %q has no role: field; set role: mds, ds or client", path)
	}
	return "", fmt.Errorf("config %q: role: %q is not mds, ds or client", path, probe.Role)
}

// CheckFile loads and validates a config of any role, running the checks
// its daemon runs before it starts (AgentConfig.Check for agents).
func CheckFile(path string) (string, error) {
	role, err := FileRole(path)
	if err != nil {
		return "", err
	}
	if role == RoleMDS {
		c, err := LoadMDSConfig(path)
		if err == nil {
			if err = c.CheckStart(); err != nil {
				err = fmt.Errorf("invalid config %q:\n%w", path, err)
			}
		}
		return role, err
	}
	c, err := node.LoadAgentConfig(path, role)
	if err == nil {
		if _, err = c.Check(); err != nil {
			err = fmt.Errorf("invalid config %q:\n%w", path, err)
		}
	}
	return role, err
}
