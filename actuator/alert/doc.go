// Package alert sends findings and actions to Alertmanager (POST
// /api/v2/alerts, resent with endsAt ahead as Prometheus does) and to
// generic webhooks (Alertmanager's webhook v4 payload, grouped with
// group_by, group_wait, group_interval and repeat_interval).
//
// The model is Alertmanager's notify pipeline: a decision step groups and
// deduplicates alerts per receiver on the pipeline's clock, and writes each
// notification to a durable outbox (a bbolt file beside the journal) in the
// same transaction as its grouping state; one retry stage per receiver then
// delivers its queue in order, with exponential backoff and jitter. Senders
// only say whether a failure is worth retrying: 2xx is delivered, 5xx, 408,
// 429 and transport errors (timeouts, refused connections) are retried,
// any other 4xx is not retried but logged, counted and kept aside.
// Secrets (tokens, HMAC keys, URLs) never appear in logs, errors or metrics.
package alert
