package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/ballast-io/ballast/actuator"
	"github.com/ballast-io/ballast/cluster/identity"
	"github.com/ballast-io/ballast/collector"
	"github.com/ballast-io/ballast/internal/units"
	"github.com/ballast-io/ballast/models"
)

// Duration is a time.Duration that YAML reads from Go duration strings
// ("15s", "2h30m") and also accepts d (24h) and w (7d) units, as operators
// write retention.
type Duration time.Duration

// UnmarshalYAML parses a duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseDuration(n.Value)
	if err != nil {
		return &valueError{line: n.Line, col: n.Column, err: err}
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML renders the duration in its shortest Go form.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// String renders the duration, in days when it is a whole number of them.
func (d Duration) String() string {
	if d > 0 && time.Duration(d)%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(time.Duration(d)/(24*time.Hour)), 10) + "d"
	}
	return time.Duration(d).String()
}

// ParseDuration parses Go durations plus a trailing d (days) or w (weeks).
func ParseDuration(s string) (time.Duration, error) { return units.ParseDuration(s) }

// Role names.
const (
	RoleMDS    = "mds"
	RoleDS     = "ds"
	RoleClient = "client"
)

// TelemetryConfig selects where ballast's own traces go.
type TelemetryConfig struct {
	// OTLPEndpoint is host:port of an OTLP/HTTP collector; empty disables
	// trace export.
	OTLPEndpoint string `yaml:"otlp_endpoint"`
	// OTLPInsecure sends OTLP over plain HTTP instead of HTTPS.
	OTLPInsecure bool `yaml:"otlp_insecure"`
	// ServiceName is the service.name resource attribute.
	ServiceName string `yaml:"service_name"`
	// SampleRatio is the share of pipeline ticks traced, 0..1.
	SampleRatio float64 `yaml:"sample_ratio"`
}

// Storage backends.
const (
	BackendEmbedded = "embedded"
	BackendRemote   = "remote"
)

// StorageConfig configures the time-series store: the embedded
// VictoriaMetrics (default) or a remote engine (docs/storage.md).
type StorageConfig struct {
	// Backend is embedded or remote.
	Backend          string   `yaml:"backend"`
	Retention        Duration `yaml:"retention"`
	FlushInterval    Duration `yaml:"flush_interval"`
	MinFreeDiskBytes int64    `yaml:"min_free_disk_bytes"`
	MemoryBytes      int64    `yaml:"memory_bytes"`
	QueryCache       bool     `yaml:"query_cache"`
	LatencyOffset    Duration `yaml:"latency_offset"`
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

// RootsConfig are the host paths agents read; change them to point an agent
// at a copied tree (tests, containers).
type RootsConfig struct {
	Proc string `yaml:"proc"`
	Sys  string `yaml:"sys"`
	Dev  string `yaml:"dev"`
	// RootFS is where the host's / is seen, for statfs of its mounts.
	RootFS string `yaml:"rootfs"`
}

// AgentConfig is the configuration file of the ds and client roles.
type AgentConfig struct {
	Role   string `yaml:"role"`
	Listen string `yaml:"listen"`
	// NodeName names this host in the node label the mds puts on every
	// series it scrapes from the agent; empty means the host name.
	NodeName  string          `yaml:"node_name"`
	LogLevel  string          `yaml:"log_level"`
	Roots     RootsConfig     `yaml:"roots"`
	Telemetry TelemetryConfig `yaml:"telemetry"`
	// Collectors turns collectors on or off by name, overriding the role's
	// defaults, e.g. {nvme: false, smartctl: true}.
	Collectors map[string]bool `yaml:"collectors"`
	// CollectorTimeout bounds one collector run.
	CollectorTimeout Duration `yaml:"collector_timeout"`
	// CacheFor reuses a collection for scrapes that arrive within this window.
	CacheFor Duration `yaml:"cache_for"`
	// SmartctlPath is the smartctl binary; SmartctlDropDir, when set, is a
	// directory of `smartctl --json --xall` outputs read instead.
	SmartctlPath    string `yaml:"smartctl_path"`
	SmartctlDropDir string `yaml:"smartctl_drop_dir"`
	// DCGMExporterURL makes the dcgm collector read an existing
	// dcgm-exporter /metrics instead of libdcgm; DCGMHostEngine is the
	// address of a standalone nv-hostengine (empty: embedded).
	DCGMExporterURL string `yaml:"dcgm_exporter_url"`
	DCGMHostEngine  string `yaml:"dcgm_host_engine"`
	// Auth, TLS and HTTP secure and bound the listener (docs/security.md).
	// /metrics is granted anonymously unless auth.anonymous says otherwise.
	Auth AuthConfig `yaml:"auth"`
	TLS  TLSConfig  `yaml:"tls"`
	HTTP HTTPConfig `yaml:"http"`
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
			MinFreeDiskBytes: 100e6,
			QueryCache:       true,
			LatencyOffset:    0,
			Remote: RemoteConfig{
				QueueMaxBytes: 1 << 30,
				BlockSamples:  10000,
				BlockInterval: Duration(time.Second),
				Timeout:       Duration(30 * time.Second),
				RetryMin:      Duration(500 * time.Millisecond),
				RetryMax:      Duration(time.Minute),
			},
		},
		Ingest:    IngestConfig{MaxBodyBytes: 32 << 20},
		Scrape:    ScrapeConfig{Interval: Duration(15 * time.Second), Timeout: Duration(10 * time.Second), Scheme: "http"},
		Pipeline:  PipelineConfig{Tick: Duration(15 * time.Second)},
		Report:    ReportConfig{CapacityEvery: Duration(24 * time.Hour)},
		Telemetry: TelemetryConfig{ServiceName: "ballast", SampleRatio: 1},
		Alerting:  defaultAlertingConfig(),
		HA:        HAConfig{ElectionPrefix: "/ballast/mds/leader", LeaseTTL: Duration(10 * time.Second)},
		HTTP:      DefaultHTTPConfig(),
		Actuators: actuator.DefaultConfig(),
	}
}

// DefaultAgentConfig returns the defaults of the ds or client role.
func DefaultAgentConfig(role string) AgentConfig {
	listen := "127.0.0.1:9751"
	if role == RoleClient {
		listen = "127.0.0.1:9752"
	}
	return AgentConfig{
		Role:             role,
		Listen:           listen,
		LogLevel:         "info",
		Roots:            RootsConfig{Proc: "/proc", Sys: "/sys", Dev: "/dev", RootFS: "/"},
		Telemetry:        TelemetryConfig{ServiceName: "ballast-" + role, SampleRatio: 1},
		CollectorTimeout: Duration(5 * time.Second),
		CacheFor:         Duration(time.Second),
		SmartctlPath:     "smartctl",
		HTTP:             DefaultHTTPConfig(),
	}
}

// Validate reports the first bad field of c, naming it and its value.
func (c *MDSConfig) Validate() error {
	var errs []error
	if c.Role != RoleMDS {
		errs = append(errs, fmt.Errorf("role: %q is not %q", c.Role, RoleMDS))
	}
	errs = append(errs, validateListen("listen", c.Listen), validateLogLevel(c.LogLevel), c.Telemetry.validate(),
		c.Auth.validate(), c.TLS.validate("tls"), c.HTTP.validate(), c.Scrape.ClientConfig.validate("scrape"))
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
	if s.MinFreeDiskBytes < 0 {
		errs = append(errs, fmt.Errorf("storage.min_free_disk_bytes: %d is negative", s.MinFreeDiskBytes))
	}
	if s.MemoryBytes < 0 {
		errs = append(errs, fmt.Errorf("storage.memory_bytes: %d is negative", s.MemoryBytes))
	}
	if s.LatencyOffset < 0 {
		errs = append(errs, fmt.Errorf("storage.latency_offset: %s is negative", s.LatencyOffset))
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
	if time.Duration(c.Scrape.Interval) < time.Second {
		errs = append(errs, fmt.Errorf("scrape.interval: %s is below the minimum of 1s", c.Scrape.Interval))
	}
	if c.Scrape.Timeout <= 0 || c.Scrape.Timeout > c.Scrape.Interval {
		errs = append(errs, fmt.Errorf("scrape.timeout: %s must be positive and at most scrape.interval (%s)", c.Scrape.Timeout, c.Scrape.Interval))
	}
	for i, t := range c.Scrape.Targets {
		if err := validateHostPort(t); err != nil {
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
	for _, k := range actuator.PlanKinds {
		if m := c.Actuators.ModeOf(k); m == models.ModeApprove || m == models.ModeAuto {
			if err := c.Auth.CheckProtected(c.Listen, ScopeAct); err != nil {
				errs = append(errs, fmt.Errorf("actuators.mode: %q for %s on %s: %w", m, k, c.Listen, err))
			}
			break
		}
	}
	return errors.Join(errs...)
}

// Node returns the node name the agent announces: NodeName, else the host
// name.
func (c *AgentConfig) Node() (string, error) {
	if c.NodeName != "" {
		return c.NodeName, nil
	}
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "", fmt.Errorf("node_name: not set and the host name is unknown (%v); set node_name", err)
	}
	return h, nil
}

// Check is what an agent runs before it starts, and `ballast config check`
// runs the same: Validate, then what this host must provide — the proc and
// sys roots the collectors open, and a node name. It returns the node name.
func (c *AgentConfig) Check() (string, error) {
	if err := c.Validate(); err != nil {
		return "", err
	}
	var errs []error
	for _, r := range []struct{ field, path string }{{"roots.proc", c.Roots.Proc}, {"roots.sys", c.Roots.Sys}} {
		if fi, err := os.Stat(r.path); err != nil || !fi.IsDir() {
			errs = append(errs, fmt.Errorf("%s: %q is not a directory on this host", r.field, r.path))
		}
	}
	node, err := c.Node()
	if err != nil {
		errs = append(errs, err)
	}
	return node, errors.Join(errs...)
}

// Validate reports the bad fields of c, naming each and its value.
func (c *AgentConfig) Validate() error {
	var errs []error
	if c.Role != RoleDS && c.Role != RoleClient {
		errs = append(errs, fmt.Errorf("role: %q is not %q or %q", c.Role, RoleDS, RoleClient))
	}
	errs = append(errs, validateListen("listen", c.Listen), validateLogLevel(c.LogLevel), c.Telemetry.validate(),
		c.Auth.validate(), c.TLS.validate("tls"), c.HTTP.validate())
	for name, p := range map[string]string{"roots.proc": c.Roots.Proc, "roots.sys": c.Roots.Sys, "roots.dev": c.Roots.Dev, "roots.rootfs": c.Roots.RootFS} {
		if p == "" {
			errs = append(errs, fmt.Errorf("%s: must not be empty", name))
		}
	}
	if len(c.NodeName) > 253 || !utf8.ValidString(c.NodeName) {
		errs = append(errs, fmt.Errorf("node_name: %q is not a host name (UTF-8, at most 253 bytes)", c.NodeName))
	}
	names := make([]string, 0, len(c.Collectors))
	for name := range c.Collectors {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := collector.CheckName(name); err != nil {
			errs = append(errs, fmt.Errorf("collectors: %q is not a collector (have %s)", name, strings.Join(collector.Names(), ", ")))
		}
	}
	if c.DCGMExporterURL != "" {
		if err := collector.CheckDCGMExporterURL(c.DCGMExporterURL); err != nil {
			errs = append(errs, fmt.Errorf("dcgm_exporter_url: %w", err))
		}
	}
	if c.CollectorTimeout <= 0 {
		errs = append(errs, fmt.Errorf("collector_timeout: %s must be positive", c.CollectorTimeout))
	}
	if c.CacheFor < 0 {
		errs = append(errs, fmt.Errorf("cache_for: %s is negative", c.CacheFor))
	}
	return errors.Join(errs...)
}

func (t *TelemetryConfig) validate() error {
	if t.SampleRatio < 0 || t.SampleRatio > 1 {
		return fmt.Errorf("telemetry.sample_ratio: %v is outside [0, 1]", t.SampleRatio)
	}
	if t.OTLPEndpoint != "" {
		if err := validateHostPort(t.OTLPEndpoint); err != nil {
			return fmt.Errorf("telemetry.otlp_endpoint: %q: %w", t.OTLPEndpoint, err)
		}
	}
	return nil
}

func validateListen(field, addr string) error {
	if err := validateHostPort(addr); err != nil {
		return fmt.Errorf("%s: %q: %w", field, addr, err)
	}
	return nil
}

func validateHostPort(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("not HOST:PORT")
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("port %q is not a number in 0..65535", port)
	}
	return nil
}

func validateLogLevel(l string) error {
	switch l {
	case "debug", "info", "warn", "error":
		return nil
	}
	return fmt.Errorf("log_level: %q is not one of debug, info, warn, error", l)
}

// decodeStrict decodes YAML into v, rejecting unknown fields and trailing
// documents. Errors name the field path (storage.retention) and the line.
func decodeStrict(data []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // an empty file keeps the defaults
		}
		return nameFields(data, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return fmt.Errorf("more than one YAML document")
	}
	return nil
}

// valueError is a value that does not parse, at its place in the file.
type valueError struct {
	line, col int
	err       error
}

func (e *valueError) Error() string { return fmt.Sprintf("line %d: %v", e.line, e.err) }
func (e *valueError) Unwrap() error { return e.err }

// nameFields rewrites yaml.v3's errors, which give only a line, to name
// the field each one is about.
func nameFields(data []byte, err error) error {
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil {
		return err
	}
	var ve *valueError
	if errors.As(err, &ve) {
		if p := fieldAt(&root, ve.line, ve.col); p != "" {
			return fmt.Errorf("%s: %w (line %d)", p, ve.err, ve.line)
		}
		return err
	}
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	msgs := make([]string, len(te.Errors))
	for i, m := range te.Errors {
		msgs[i] = m
		var line int
		if _, serr := fmt.Sscanf(m, "line %d:", &line); serr != nil {
			continue
		}
		if p := fieldAt(&root, line, 0); p != "" {
			msgs[i] = fmt.Sprintf("%s: %s (line %d)", p, strings.TrimSpace(m[strings.Index(m, ":")+1:]), line)
		}
	}
	return errors.New(strings.Join(msgs, "; "))
}

// fieldAt returns the path (scrape.targets[1]) of the value at line and
// column of the YAML tree; column 0 matches the one scalar value on the
// line. It returns "" when nothing or more than one matches.
func fieldAt(root *yaml.Node, line, col int) string {
	var found []string
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		at := func(c *yaml.Node) bool {
			return c.Line == line && (col == 0 && c.Kind == yaml.ScalarNode || c.Column == col)
		}
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := k.Value
				if path != "" {
					p = path + "." + k.Value
				}
				if at(v) {
					found = append(found, p)
				}
				walk(v, p)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				p := fmt.Sprintf("%s[%d]", path, i)
				if at(c) {
					found = append(found, p)
				}
				walk(c, p)
			}
		}
	}
	walk(root, "")
	if len(found) == 1 {
		return found[0]
	}
	return ""
}

// LoadMDSConfig reads path over the defaults and validates the result.
func LoadMDSConfig(path string) (MDSConfig, error) {
	c := DefaultMDSConfig()
	if err := loadFile(path, &c); err != nil {
		return c, err
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("invalid config %q:\n%w", path, err)
	}
	return c, nil
}

// LoadAgentConfig reads path over the defaults of role and validates it.
func LoadAgentConfig(path, role string) (AgentConfig, error) {
	c := DefaultAgentConfig(role)
	if err := loadFile(path, &c); err != nil {
		return c, err
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("invalid config %q:\n%w", path, err)
	}
	return c, nil
}

func loadFile(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("cannot read config %q: %w", path, err)
	}
	if err := decodeStrict(data, v); err != nil {
		return fmt.Errorf("cannot parse config %q: %w", path, err)
	}
	return nil
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
		_, err = LoadMDSConfig(path)
		return role, err
	}
	c, err := LoadAgentConfig(path, role)
	if err == nil {
		if _, err = c.Check(); err != nil {
			err = fmt.Errorf("invalid config %q:\n%w", path, err)
		}
	}
	return role, err
}
