package alert

import (
	"encoding/json"
	"sort"
	"time"
)

// Notification is one decided message to one receiver, as queued in the
// outbox: for a webhook one flush of one group; for Alertmanager a batch of
// alerts to post. Its payload is rendered when it is sent.
type Notification struct {
	Receiver    string            `json:"receiver"`
	GroupKey    string            `json:"groupKey,omitempty"`
	GroupLabels map[string]string `json:"groupLabels,omitempty"`
	// At is when it was decided, on the pipeline's clock: the instant the
	// alerts' statuses refer to.
	At     time.Time `json:"at"`
	Alerts []Alert   `json:"alerts"`
}

// WebhookVersion is the version of the webhook payload, Alertmanager's.
const WebhookVersion = "4"

// WebhookMessage is the JSON body POSTed to a webhook receiver: the
// Alertmanager webhook payload (version 4), so receivers written for
// Alertmanager take it unchanged.
type WebhookMessage struct {
	Version  string `json:"version"`
	GroupKey string `json:"groupKey"`
	// TruncatedAlerts counts alerts left out by max_alerts or
	// max_payload_bytes.
	TruncatedAlerts   int               `json:"truncatedAlerts"`
	Status            string            `json:"status"`
	Receiver          string            `json:"receiver"`
	GroupLabels       map[string]string `json:"groupLabels"`
	CommonLabels      map[string]string `json:"commonLabels"`
	CommonAnnotations map[string]string `json:"commonAnnotations"`
	ExternalURL       string            `json:"externalURL"`
	Alerts            []WebhookAlert    `json:"alerts"`
}

// WebhookAlert is one alert of a WebhookMessage. EndsAt is
// 0001-01-01T00:00:00Z for a firing alert with no planned end.
type WebhookAlert struct {
	Status       string            `json:"status"`
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
	Fingerprint  string            `json:"fingerprint"`
}

// sortAlerts orders alerts firing first, then by labels, so that
// truncation keeps the firing ones and payloads are deterministic.
func sortAlerts(as []Alert, at time.Time) {
	sort.SliceStable(as, func(i, j int) bool {
		ri, rj := as[i].Resolved(at), as[j].Resolved(at)
		if ri != rj {
			return !ri
		}
		return labelString(as[i].Labels) < labelString(as[j].Labels)
	})
}

// renderWebhook builds the webhook body of n: at most maxAlerts alerts (0:
// all) and at most maxBytes bytes (0: no bound; one alert is always kept),
// counting what it leaves out in truncatedAlerts as Alertmanager does.
func renderWebhook(n *Notification, externalURL string, maxAlerts, maxBytes int) ([]byte, int, error) {
	all := make([]WebhookAlert, len(n.Alerts))
	for i := range n.Alerts {
		a := &n.Alerts[i]
		all[i] = WebhookAlert{Status: a.Status(n.At), Labels: a.Labels, Annotations: a.Annotations,
			StartsAt: a.StartsAt, EndsAt: a.EndsAt, GeneratorURL: a.GeneratorURL, Fingerprint: a.Fingerprint()}
	}
	keep := len(all)
	if maxAlerts > 0 && keep > maxAlerts {
		keep = maxAlerts
	}
	for {
		msg := webhookMessage(n, externalURL, all[:keep], len(all)-keep)
		body, err := json.Marshal(msg)
		if err != nil {
			return nil, 0, err
		}
		if maxBytes <= 0 || len(body) <= maxBytes || keep <= 1 {
			return body, len(all) - keep, nil
		}
		// Shrink in proportion to the excess, at least by one alert.
		next := keep * maxBytes / len(body)
		keep = max(1, min(next, keep-1))
	}
}

func webhookMessage(n *Notification, externalURL string, as []WebhookAlert, truncated int) WebhookMessage {
	m := WebhookMessage{Version: WebhookVersion, GroupKey: n.GroupKey, TruncatedAlerts: truncated, Status: "resolved",
		Receiver: n.Receiver, GroupLabels: nonNil(n.GroupLabels), ExternalURL: externalURL, Alerts: as}
	ls := make([]map[string]string, len(as))
	an := make([]map[string]string, len(as))
	for i := range as {
		if as[i].Status == "firing" {
			m.Status = "firing"
		}
		ls[i], an[i] = as[i].Labels, as[i].Annotations
	}
	m.CommonLabels, m.CommonAnnotations = common(ls), common(an)
	return m
}

// common returns the pairs every map in ms has.
func common(ms []map[string]string) map[string]string {
	out := map[string]string{}
	if len(ms) == 0 {
		return out
	}
	for k, v := range ms[0] {
		same := true
		for _, m := range ms[1:] {
			if m[k] != v {
				same = false
				break
			}
		}
		if same {
			out[k] = v
		}
	}
	return out
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// renderAlertmanager builds the POST /api/v2/alerts body of n sent at now:
// Alert is the shape of Alertmanager's postable alert.
// As Prometheus does, a firing alert's endsAt is set ahead (now + valid),
// so that Alertmanager resolves it by itself if ballast stops resending
// it, and a resolved alert carries its resolution time.
func renderAlertmanager(n *Notification, now time.Time, valid time.Duration) ([]byte, error) {
	out := make([]Alert, len(n.Alerts))
	for i := range n.Alerts {
		a := &n.Alerts[i]
		end := a.EndsAt
		if !a.Resolved(n.At) {
			if until := now.Add(valid).UTC(); end.IsZero() || end.After(until) {
				end = until
			}
		}
		out[i] = *a
		out[i].EndsAt = end
	}
	return json.Marshal(out)
}
