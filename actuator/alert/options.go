package alert

import (
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/ballast-io/ballast/models"
)

// Receiver types.
const (
	TypeAlertmanager = "alertmanager"
	TypeWebhook      = "webhook"
)

// ReceiverOptions configure one receiver: where it is, what it gets and how
// it is grouped. Secrets are the file contents, read by the caller.
type ReceiverOptions struct {
	Name string
	// Type is TypeAlertmanager or TypeWebhook.
	Type string
	// URL is the webhook URL, or the Alertmanager base URL (POSTs go to
	// URL/api/v2/alerts). Treated as a secret: never logged.
	URL string
	// Kinds and Severities select the alerts routed here; empty means all.
	Kinds      []string
	Severities []models.Severity
	// GroupBy lists the labels that split alerts into groups (webhook);
	// "..." groups by every label. Default [alertname].
	GroupBy []string
	// GroupWait is how long a new group waits before its first
	// notification; default 30s.
	GroupWait time.Duration
	// GroupInterval is how long a group waits before notifying about
	// changes; default 5m.
	GroupInterval time.Duration
	// RepeatInterval is how long before an unchanged group is notified
	// again; default 4h.
	RepeatInterval time.Duration
	// SendResolved notifies when alerts resolve (webhook).
	SendResolved bool
	// MaxAlerts bounds the alerts of one webhook notification; 0 all.
	MaxAlerts int
	// MaxPayloadBytes bounds one webhook body; 0 no bound.
	MaxPayloadBytes int
	// Timeout bounds one delivery attempt; default 10s.
	Timeout time.Duration
	// MaxQueue bounds the queued notifications; default 10000.
	MaxQueue int
	// BearerToken is sent as "Authorization: Bearer ...".
	BearerToken string
	// HMACSecret signs the body (X-Ballast-Signature).
	HMACSecret string
	// TLS files: CA to verify the receiver, client certificate and key.
	TLSCAFile, TLSCertFile, TLSKeyFile string
}

// RetryOptions shape the one retry stage: exponential backoff from Initial
// doubling up to Max, each delay spread by ±Jitter/2 of itself.
type RetryOptions struct {
	Initial, Max time.Duration
	// Jitter in [0, 1]; 0 means none.
	Jitter float64
	// Seed makes the jitter reproducible.
	Seed uint64
}

// Options configure a Dispatcher. Zero durations take the documented
// defaults.
type Options struct {
	Receivers []ReceiverOptions
	Labeler   Labeler
	// ResendDelay is how often active alerts are resent to Alertmanager;
	// default 1m.
	ResendDelay time.Duration
	// ResolvedRetention is how long resolved alerts keep being resent to
	// Alertmanager; default 15m.
	ResolvedRetention time.Duration
	// ResolveTimeout resolves a firing finding no stage has reported for
	// this long (an analyzer that lost it, e.g. across a restart); default 1h.
	ResolveTimeout time.Duration
	// ActionEventFor is how long an action event (proposed, done, failed,
	// rolled back) fires; default 1h.
	ActionEventFor time.Duration
	// Tick is the pipeline's tick, for the endsAt set ahead; default 15s.
	Tick  time.Duration
	Retry RetryOptions
	// OutboxPath is the outbox file.
	OutboxPath string
	// Actions lists the journaled actions; nil sends no action alerts.
	Actions ActionLister
	// Synchronous delivers within Reconcile (a simulated clock: the caller
	// ticks, every receiver's due deliveries run before Reconcile returns);
	// otherwise one goroutine per receiver delivers and retries on the
	// wall clock.
	Synchronous bool
	Metrics     *metrics.Set
	Logger      *slog.Logger
}

// ActionLister is where actions are read from (storage.Journal).
type ActionLister interface {
	Actions() ([]models.Action, error)
}

func (o *Options) withDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.ResendDelay, time.Minute)
	def(&o.ResolvedRetention, 15*time.Minute)
	def(&o.ResolveTimeout, time.Hour)
	def(&o.ActionEventFor, time.Hour)
	def(&o.Tick, 15*time.Second)
	def(&o.Retry.Initial, time.Second)
	def(&o.Retry.Max, 5*time.Minute)
	o.Retry.Jitter = min(max(o.Retry.Jitter, 0), 1)
	if o.Metrics == nil {
		o.Metrics = metrics.NewSet()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	for i := range o.Receivers {
		r := &o.Receivers[i]
		if len(r.GroupBy) == 0 {
			r.GroupBy = []string{LabelAlertname}
		}
		def(&r.GroupWait, 30*time.Second)
		def(&r.GroupInterval, 5*time.Minute)
		def(&r.RepeatInterval, 4*time.Hour)
		def(&r.Timeout, 10*time.Second)
		if r.MaxQueue <= 0 {
			r.MaxQueue = 10000
		}
	}
}

// Check reports what is wrong with r, naming the option (the config field
// names are the caller's to add).
func (r *ReceiverOptions) Check() error {
	if !validName(r.Name) {
		return fmt.Errorf("name %q must be 1 to 64 letters, digits, '_', '-' or '.'", r.Name)
	}
	if r.Type != TypeAlertmanager && r.Type != TypeWebhook {
		return fmt.Errorf("type %q is not %s or %s", r.Type, TypeAlertmanager, TypeWebhook)
	}
	if err := CheckURL(r.URL); err != nil {
		return err
	}
	for _, s := range r.Severities {
		if !s.Valid() {
			return fmt.Errorf("severity %q is not info, warning or critical", s)
		}
	}
	return nil
}

// validName keeps receiver names safe as metric label values, outbox keys
// and notification ids.
func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// CheckURL accepts absolute http and https URLs. Its errors never repeat
// the URL, which may carry a token.
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("is not a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("scheme %q is not http or https", u.Scheme)
	}
	if u.Host == "" {
		return fmt.Errorf("has no host")
	}
	return nil
}

// routes reports whether r takes alerts of kind and severity.
func (r *ReceiverOptions) routes(kind, severity string) bool {
	if len(r.Kinds) > 0 && !slices.Contains(r.Kinds, kind) {
		return false
	}
	if len(r.Severities) > 0 && !slices.Contains(r.Severities, models.Severity(severity)) {
		return false
	}
	return true
}
