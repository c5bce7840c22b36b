package node

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

	"github.com/ballast-io/ballast/cluster/agent/readahead"
	"github.com/ballast-io/ballast/collector"
	"github.com/ballast-io/ballast/internal/units"
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
	// ReadAhead makes a client agent apply the read-ahead the mds asks for,
	// within its own bounds (docs/readahead.md); off without mds_url.
	ReadAhead readahead.Config `yaml:"readahead"`
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
		ReadAhead:        readahead.DefaultConfig(),
		HTTP:             DefaultHTTPConfig(),
	}
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
	errs = append(errs, CheckListener(c.Role, c.Listen, c.Auth, c.TLS, c.HTTP))
	return node, errors.Join(errs...)
}

// Validate reports the bad fields of c, naming each and its value.
func (c *AgentConfig) Validate() error {
	var errs []error
	if c.Role != RoleDS && c.Role != RoleClient {
		errs = append(errs, fmt.Errorf("role: %q is not %q or %q", c.Role, RoleDS, RoleClient))
	}
	errs = append(errs, ValidateListen("listen", c.Listen), ValidateLogLevel(c.LogLevel), c.Telemetry.Validate(),
		c.Auth.Validate(), c.TLS.Validate("tls"), c.HTTP.Validate(), c.ReadAhead.Validate("readahead."))
	if c.ReadAhead.Enabled() && c.Role != RoleClient {
		errs = append(errs, fmt.Errorf("readahead.mds_url: read-ahead is applied by the client role, not %s", c.Role))
	}
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

func (t *TelemetryConfig) Validate() error {
	if t.SampleRatio < 0 || t.SampleRatio > 1 {
		return fmt.Errorf("telemetry.sample_ratio: %v is outside [0, 1]", t.SampleRatio)
	}
	if t.OTLPEndpoint != "" {
		if err := ValidateHostPort(t.OTLPEndpoint); err != nil {
			return fmt.Errorf("telemetry.otlp_endpoint: %q: %w", t.OTLPEndpoint, err)
		}
	}
	return nil
}

func ValidateListen(field, addr string) error {
	if err := ValidateHostPort(addr); err != nil {
		return fmt.Errorf("%s: %q: %w", field, addr, err)
	}
	return nil
}

func ValidateHostPort(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("not HOST:PORT")
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("port %q is not a number in 0..65535", port)
	}
	return nil
}

func ValidateLogLevel(l string) error {
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

// LoadAgentConfig reads path over the defaults of role and validates it.
func LoadAgentConfig(path, role string) (AgentConfig, error) {
	c := DefaultAgentConfig(role)
	if err := LoadFile(path, &c); err != nil {
		return c, err
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("invalid config %q:\n%w", path, err)
	}
	return c, nil
}

func LoadFile(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("cannot read config %q: %w", path, err)
	}
	if err := decodeStrict(data, v); err != nil {
		return fmt.Errorf("cannot parse config %q: %w", path, err)
	}
	return nil
}
