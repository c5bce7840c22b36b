package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/ballast-io/ballast/actuator/alert"
	"github.com/ballast-io/ballast/cluster/analysis"
	"github.com/ballast-io/ballast/models"
)

// AlertingConfig is the alerting: section of the mds config: where
// findings and actions are sent (docs/alerting.md).
type AlertingConfig struct {
	// Cluster is the cluster label of every alert; empty leaves it out.
	Cluster string `yaml:"cluster"`
	// ExternalURL is how people reach this mds (generatorURL, webhook
	// externalURL); empty means http://LISTEN.
	ExternalURL string `yaml:"external_url"`
	// GrafanaURL is the Grafana of the dashboard_url annotation; empty
	// leaves it out.
	GrafanaURL string `yaml:"grafana_url"`
	// RunbookURL is the page with a #KIND section per alert kind.
	RunbookURL string `yaml:"runbook_url"`
	// ResendDelay: active alerts are resent to Alertmanager this often.
	ResendDelay Duration `yaml:"resend_delay"`
	// ResolvedRetention: resolved alerts keep being resent this long.
	ResolvedRetention Duration `yaml:"resolved_retention"`
	// ResolveTimeout resolves a finding no analyzer reports any more.
	ResolveTimeout Duration `yaml:"resolve_timeout"`
	// ActionEventFor is how long an action event alert fires.
	ActionEventFor Duration         `yaml:"action_event_for"`
	Retry          AlertRetryConfig `yaml:"retry"`
	Receivers      []ReceiverConfig `yaml:"receivers"`
}

// AlertRetryConfig shapes the retry of failed deliveries.
type AlertRetryConfig struct {
	InitialBackoff Duration `yaml:"initial_backoff"`
	MaxBackoff     Duration `yaml:"max_backoff"`
	Jitter         float64  `yaml:"jitter"`
}

// ReceiverConfig is one alert receiver: an Alertmanager or a webhook.
type ReceiverConfig struct {
	Name string `yaml:"name"`
	// Type is alertmanager or webhook.
	Type string `yaml:"type"`
	// URL, or URLFile holding it (for URLs that carry a token).
	URL     string `yaml:"url"`
	URLFile string `yaml:"url_file"`
	// Kinds and Severities route alerts here; empty means all.
	Kinds      []string `yaml:"kinds"`
	Severities []string `yaml:"severities"`
	// Grouping, webhook receivers only.
	GroupBy         []string `yaml:"group_by"`
	GroupWait       Duration `yaml:"group_wait"`
	GroupInterval   Duration `yaml:"group_interval"`
	RepeatInterval  Duration `yaml:"repeat_interval"`
	SendResolved    *bool    `yaml:"send_resolved"`
	MaxAlerts       int      `yaml:"max_alerts"`
	MaxPayloadBytes int      `yaml:"max_payload_bytes"`
	// Delivery.
	Timeout  Duration `yaml:"timeout"`
	MaxQueue int      `yaml:"max_queue"`
	// Secrets come from files, never from the config itself.
	BearerTokenFile string `yaml:"bearer_token_file"`
	HMACSecretFile  string `yaml:"hmac_secret_file"`
	TLSCAFile       string `yaml:"tls_ca_file"`
	TLSCertFile     string `yaml:"tls_cert_file"`
	TLSKeyFile      string `yaml:"tls_key_file"`
}

// DefaultRunbookURL is the runbook_url default: docs/alerting.md, whose
// sections are named after the alert kinds.
const DefaultRunbookURL = "https://github.com/ballast-io/ballast/blob/main/docs/alerting.md"

func defaultAlertingConfig() AlertingConfig {
	return AlertingConfig{
		RunbookURL:        DefaultRunbookURL,
		ResendDelay:       Duration(time.Minute),
		ResolvedRetention: Duration(15 * time.Minute),
		ResolveTimeout:    Duration(time.Hour),
		ActionEventFor:    Duration(time.Hour),
		Retry:             AlertRetryConfig{InitialBackoff: Duration(time.Second), MaxBackoff: Duration(5 * time.Minute), Jitter: 0.2},
	}
}

// Receiver defaults, applied to fields left out.
const (
	defaultGroupWait       = 30 * time.Second
	defaultGroupInterval   = 5 * time.Minute
	defaultRepeatInterval  = 4 * time.Hour
	defaultReceiverTimeout = 10 * time.Second
	defaultMaxQueue        = 10000
	defaultMaxPayloadBytes = 1 << 20
)

// validate reports every bad field of the alerting section, each named with
// its path; it reads the secret and TLS files (never showing their
// contents) so that a missing one stops the mds at load.
func (a *AlertingConfig) validate() error {
	var errs []error
	bad := func(field string, format string, args ...any) {
		errs = append(errs, fmt.Errorf("alerting.%s: "+format, append([]any{field}, args...)...))
	}
	for field, u := range map[string]string{"external_url": a.ExternalURL, "grafana_url": a.GrafanaURL, "runbook_url": a.RunbookURL} {
		if u != "" {
			if err := alert.CheckURL(u); err != nil {
				bad(field, "%q %v", u, err)
			}
		}
	}
	if time.Duration(a.ResendDelay) < time.Second {
		bad("resend_delay", "%s is below the minimum of 1s", a.ResendDelay)
	}
	if a.ResolvedRetention < 0 {
		bad("resolved_retention", "%s is negative", a.ResolvedRetention)
	}
	if time.Duration(a.ResolveTimeout) < time.Minute {
		bad("resolve_timeout", "%s is below the minimum of 1m", a.ResolveTimeout)
	}
	if a.ActionEventFor <= 0 {
		bad("action_event_for", "%s must be positive", a.ActionEventFor)
	}
	if a.Retry.InitialBackoff <= 0 {
		bad("retry.initial_backoff", "%s must be positive", a.Retry.InitialBackoff)
	}
	if a.Retry.MaxBackoff < a.Retry.InitialBackoff {
		bad("retry.max_backoff", "%s is below retry.initial_backoff (%s)", a.Retry.MaxBackoff, a.Retry.InitialBackoff)
	}
	if a.Retry.Jitter < 0 || a.Retry.Jitter > 1 {
		bad("retry.jitter", "%v is outside [0, 1]", a.Retry.Jitter)
	}
	kinds := append(analysis.Kinds(), alert.ActionKinds()...)
	names := map[string]int{}
	for i := range a.Receivers {
		r := &a.Receivers[i]
		f := func(name string) string { return fmt.Sprintf("receivers[%d].%s", i, name) }
		if j, dup := names[r.Name]; dup {
			bad(f("name"), "%q is already the name of receivers[%d]", r.Name, j)
		}
		names[r.Name] = i
		ro := alert.ReceiverOptions{Name: r.Name, Type: r.Type, URL: "http://placeholder"}
		if err := ro.Check(); err != nil {
			field := "name"
			if r.Type != alert.TypeAlertmanager && r.Type != alert.TypeWebhook {
				field = "type"
				err = fmt.Errorf("unknown receiver type %q: want %s or %s", r.Type, alert.TypeAlertmanager, alert.TypeWebhook)
			}
			bad(f(field), "%v", err)
		}
		switch {
		case r.URL == "" && r.URLFile == "":
			bad(f("url"), "set url or url_file")
		case r.URL != "" && r.URLFile != "":
			bad(f("url_file"), "set url or url_file, not both")
		case r.URL != "":
			// The URL is not repeated: it may carry a token.
			if err := alert.CheckURL(r.URL); err != nil {
				bad(f("url"), "%v", err)
			}
		default:
			if u, err := readSecretFile(r.URLFile); err != nil {
				bad(f("url_file"), "%v", err)
			} else if err := alert.CheckURL(u); err != nil {
				bad(f("url_file"), "the URL in %q %v", r.URLFile, err)
			}
		}
		for j, k := range r.Kinds {
			if !slices.Contains(kinds, k) {
				bad(fmt.Sprintf("receivers[%d].kinds[%d]", i, j), "unknown kind %q; kinds are %s", k, strings.Join(kinds, ", "))
			}
		}
		for j, s := range r.Severities {
			if !models.Severity(s).Valid() {
				bad(fmt.Sprintf("receivers[%d].severities[%d]", i, j), "%q is not info, warning or critical", s)
			}
		}
		if r.Type == alert.TypeAlertmanager {
			for field, set := range map[string]bool{"group_by": len(r.GroupBy) > 0, "group_wait": r.GroupWait != 0, "group_interval": r.GroupInterval != 0,
				"repeat_interval": r.RepeatInterval != 0, "send_resolved": r.SendResolved != nil, "max_alerts": r.MaxAlerts != 0, "max_payload_bytes": r.MaxPayloadBytes != 0} {
				if set {
					bad(f(field), "applies to webhook receivers; Alertmanager groups and notifies by its own route")
				}
			}
		}
		for j, l := range r.GroupBy {
			if l == "" {
				bad(fmt.Sprintf("receivers[%d].group_by[%d]", i, j), "must not be empty")
			}
		}
		for field, d := range map[string]Duration{"group_wait": r.GroupWait, "group_interval": r.GroupInterval, "repeat_interval": r.RepeatInterval, "timeout": r.Timeout} {
			if d < 0 {
				bad(f(field), "%s is negative", d)
			}
		}
		if r.MaxAlerts < 0 {
			bad(f("max_alerts"), "%d is negative", r.MaxAlerts)
		}
		if r.MaxPayloadBytes != 0 && r.MaxPayloadBytes < 1024 {
			bad(f("max_payload_bytes"), "%d is below the minimum of 1024", r.MaxPayloadBytes)
		}
		if r.MaxQueue < 0 {
			bad(f("max_queue"), "%d is negative", r.MaxQueue)
		}
		for field, p := range map[string]string{"bearer_token_file": r.BearerTokenFile, "hmac_secret_file": r.HMACSecretFile} {
			if p != "" {
				if _, err := readSecretFile(p); err != nil {
					bad(f(field), "%v", err)
				}
			}
		}
		if _, err := alert.TLSConfig(r.TLSCAFile, r.TLSCertFile, r.TLSKeyFile); err != nil {
			field := "tls_ca_file"
			if r.TLSCAFile == "" || strings.Contains(err.Error(), "client certificate") {
				field = "tls_cert_file"
			}
			bad(f(field), "%v", err)
		}
	}
	sortErrors(errs)
	return errors.Join(errs...)
}

// sortErrors orders errors by text, so that fields checked from maps come
// out in a stable order.
func sortErrors(errs []error) {
	slices.SortStableFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
}

// readSecretFile returns the content of a secret file without its trailing
// newline. Errors name the file, never its content.
func readSecretFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("cannot read secret file %q: %w", path, errors.Unwrap(err))
	}
	s := strings.TrimRight(string(b), "\r\n")
	if strings.TrimSpace(s) == "" {
		return "", fmt.Errorf("secret file %q is empty", path)
	}
	return s, nil
}

// receiverOptions turns receiver r into the sender's options, reading its
// secret files.
func (r *ReceiverConfig) receiverOptions() (alert.ReceiverOptions, error) {
	ro := alert.ReceiverOptions{
		Name: r.Name, Type: r.Type, URL: r.URL, Kinds: r.Kinds, GroupBy: r.GroupBy,
		GroupWait: or(r.GroupWait, defaultGroupWait), GroupInterval: or(r.GroupInterval, defaultGroupInterval),
		RepeatInterval: or(r.RepeatInterval, defaultRepeatInterval), SendResolved: r.SendResolved == nil || *r.SendResolved,
		MaxAlerts: r.MaxAlerts, MaxPayloadBytes: r.MaxPayloadBytes, Timeout: or(r.Timeout, defaultReceiverTimeout),
		MaxQueue: r.MaxQueue, TLSCAFile: r.TLSCAFile, TLSCertFile: r.TLSCertFile, TLSKeyFile: r.TLSKeyFile,
	}
	if ro.MaxQueue == 0 {
		ro.MaxQueue = defaultMaxQueue
	}
	if ro.MaxPayloadBytes == 0 && r.Type == alert.TypeWebhook {
		ro.MaxPayloadBytes = defaultMaxPayloadBytes
	}
	for _, s := range r.Severities {
		ro.Severities = append(ro.Severities, models.Severity(s))
	}
	var err error
	read := func(dst *string, path string) {
		if path != "" && err == nil {
			*dst, err = readSecretFile(path)
		}
	}
	read(&ro.URL, r.URLFile)
	read(&ro.BearerToken, r.BearerTokenFile)
	read(&ro.HMACSecret, r.HMACSecretFile)
	if err != nil {
		return ro, fmt.Errorf("receiver %q: %w", r.Name, err)
	}
	return ro, nil
}

func or(d Duration, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return time.Duration(d)
}

// Receiver returns the options of the receiver called name, with its
// secrets read, for `ballast alerts test`.
func (a *AlertingConfig) Receiver(name string) (alert.ReceiverOptions, error) {
	var names []string
	for i := range a.Receivers {
		if a.Receivers[i].Name == name {
			return a.Receivers[i].receiverOptions()
		}
		names = append(names, a.Receivers[i].Name)
	}
	if len(names) == 0 {
		return alert.ReceiverOptions{}, fmt.Errorf("unknown receiver %q: the config has no alerting.receivers", name)
	}
	return alert.ReceiverOptions{}, fmt.Errorf("unknown receiver %q; alerting.receivers are %s", name, strings.Join(names, ", "))
}

// Labeler returns the labeler for an mds listening on addr.
func (a *AlertingConfig) Labeler(addr string) alert.Labeler {
	ext := a.ExternalURL
	if ext == "" {
		ext = "http://" + addr
	}
	return alert.Labeler{Cluster: a.Cluster, ExternalURL: ext, GrafanaURL: a.GrafanaURL, RunbookURL: a.RunbookURL}
}

// AlertOptions returns the dispatcher's options for an mds whose listener
// is at addr and whose pipeline ticks every tick.
func (a *AlertingConfig) AlertOptions(dataDir, addr string, tick time.Duration, actions alert.ActionLister, synchronous bool, set *metrics.Set, logger *slog.Logger) (alert.Options, error) {
	o := alert.Options{
		Labeler:           a.Labeler(addr),
		ResendDelay:       time.Duration(a.ResendDelay),
		ResolvedRetention: time.Duration(a.ResolvedRetention),
		ResolveTimeout:    time.Duration(a.ResolveTimeout),
		ActionEventFor:    time.Duration(a.ActionEventFor),
		Tick:              tick,
		Retry:             alert.RetryOptions{Initial: time.Duration(a.Retry.InitialBackoff), Max: time.Duration(a.Retry.MaxBackoff), Jitter: a.Retry.Jitter},
		OutboxPath:        filepath.Join(dataDir, "alerts.db"),
		Actions:           actions,
		Synchronous:       synchronous,
		Metrics:           set,
		Logger:            logger,
	}
	for i := range a.Receivers {
		ro, err := a.Receivers[i].receiverOptions()
		if err != nil {
			return o, err
		}
		o.Receivers = append(o.Receivers, ro)
	}
	return o, nil
}
