package alert

import (
	"bytes"
	"context"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/ballast-io/ballast/models"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// webhook returns a webhook receiver on s that notifies at once: no group
// wait, a 1 s group interval, each alert its own group.
func webhook(name string, s *sink) ReceiverOptions {
	return ReceiverOptions{Name: name, Type: TypeWebhook, URL: s.srv.URL + "/hook", GroupBy: []string{"..."},
		GroupWait: time.Nanosecond, GroupInterval: time.Second, RepeatInterval: time.Hour, SendResolved: true, Timeout: 2 * time.Second}
}

func testOptions(t *testing.T, logs *bytes.Buffer, rs ...ReceiverOptions) Options {
	t.Helper()
	var w = any(logs)
	if logs == nil {
		w = nil
	}
	logger := slog.New(slog.DiscardHandler)
	if w != nil {
		logger = slog.New(slog.NewTextHandler(logs, nil))
	}
	return Options{Receivers: rs, Labeler: Labeler{ExternalURL: "http://mds:9750"}, Tick: time.Second,
		Retry:      RetryOptions{Initial: time.Second, Max: time.Minute, Jitter: 0.2, Seed: 7},
		OutboxPath: filepath.Join(t.TempDir(), "alerts.db"), Synchronous: true, Metrics: metrics.NewSet(), Logger: logger}
}

func startDispatcher(t *testing.T, o Options) *Dispatcher {
	t.Helper()
	d, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(context.Background()) })
	return d
}

// hot is a hotspot finding reported at at, started a second before: older
// than the test receivers' group_wait, so its group notifies at once.
func hot(id string, at time.Time) models.Finding {
	return models.Finding{ID: "hotspot/" + id, Kind: "hotspot", Subject: models.Subject{Kind: models.SubjectDevice, ID: id},
		Severity: models.SeverityWarning, Start: at.Add(-time.Second), LastSeen: at, Summary: "hot " + id}
}

// recorder wraps a sender and records the (simulated) instants of its
// attempts and their outcomes.
type recorder struct {
	Sender
	mu    sync.Mutex
	at    []time.Duration
	retry []bool
	errs  []error
}

func (r *recorder) Send(ctx context.Context, now time.Time, id string, n *Notification) (Response, bool, error) {
	resp, retry, err := r.Sender.Send(ctx, now, id, n)
	r.mu.Lock()
	r.at = append(r.at, now.Sub(t0))
	r.retry = append(r.retry, retry)
	r.errs = append(r.errs, err)
	r.mu.Unlock()
	return resp, retry, err
}

func record(t *testing.T, d *Dispatcher, name string) *recorder {
	t.Helper()
	r := &recorder{Sender: d.receiver(name).sender}
	if err := d.SetSender(name, r); err != nil {
		t.Fatal(err)
	}
	return r
}

func metricsText(o Options) string {
	var b strings.Builder
	o.Metrics.WritePrometheus(&b)
	return b.String()
}

// TestFailureTable: how each kind of failure is handled.
func TestFailureTable(t *testing.T) {
	ctx := context.Background()

	t.Run("4xx is not retried but counted, logged and kept aside", func(t *testing.T) {
		s := newSink(t)
		s.set(http.StatusBadRequest, 0)
		var logs bytes.Buffer
		o := testOptions(t, &logs, webhook("hook", s))
		d := startDispatcher(t, o)
		rec := record(t, d, "hook")
		d.Reconcile(ctx, t0, []models.Finding{hot("d1", t0)})
		for i := 1; i <= 10; i++ {
			d.Reconcile(ctx, t0.Add(time.Duration(i)*time.Second), nil)
		}
		if s.attempts() != 1 || len(rec.retry) != 1 || rec.retry[0] {
			t.Errorf("got %d attempts (retryable %v); want 1, not retryable", s.attempts(), rec.retry)
		}
		met := metricsText(o)
		for _, m := range []string{`ballast_alert_notifications_rejected_total{receiver="hook"} 1`, `ballast_alert_queue_length{receiver="hook"} 0`} {
			if !strings.Contains(met, m) {
				t.Errorf("metrics lack %q", m)
			}
		}
		if !strings.Contains(logs.String(), "rejected a notification") || !strings.Contains(logs.String(), "400 Bad Request") {
			t.Errorf("log does not say the receiver rejected it with 400:\n%s", logs.String())
		}
		rej, err := d.outbox.Rejected("hook")
		if err != nil || len(rej) != 1 || !strings.Contains(rej[0].Reason, "400") {
			t.Errorf("rejected list: got %+v, %v; want one with the 400", rej, err)
		}
		// The next notification goes through: a rejection does not block.
		s.set(0, 0)
		d.Reconcile(ctx, t0.Add(20*time.Second), []models.Finding{hot("d2", t0.Add(20*time.Second))})
		if got := s.deliveries(); len(got) != 1 || got[0].Webhook.Alerts[0].Labels["device"] != "d2" {
			t.Errorf("after a rejection: got %d deliveries; want the next notification", len(got))
		}
	})

	t.Run("5xx is retried with exponential backoff and jitter, in order", func(t *testing.T) {
		s := newSink(t)
		s.set(http.StatusServiceUnavailable, 0)
		o := testOptions(t, nil, webhook("hook", s))
		d := startDispatcher(t, o)
		rec := record(t, d, "hook")
		d.Reconcile(ctx, t0, []models.Finding{hot("d1", t0)})
		d.Reconcile(ctx, t0.Add(time.Second), []models.Finding{hot("d2", t0.Add(time.Second))})
		// Tick every 100 ms of simulated time for 40 s.
		for i := 11; i <= 400; i++ {
			if i == 300 {
				s.set(0, 0)
			}
			d.Reconcile(ctx, t0.Add(time.Duration(i)*100*time.Millisecond), nil)
		}
		// Attempts at 0, then after ~1 s, ~2 s, ~4 s, ~8 s, ~16 s, each
		// within ±10 % (jitter 0.2) of the doubled delay.
		want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second}
		if len(rec.at) < len(want)+2 {
			t.Fatalf("got attempts at %v; want at least %d", rec.at, len(want)+2)
		}
		for i, w := range want {
			gap := rec.at[i+1] - rec.at[i]
			// +100 ms: a retry runs on the first tick at or after it is due.
			if gap < w*9/10 || gap > w*11/10+100*time.Millisecond {
				t.Errorf("gap before attempt %d: got %s; want %s ±10%%", i+2, gap, w)
			}
			if !rec.retry[i] {
				t.Errorf("attempt %d: 503 not marked retryable", i+1)
			}
		}
		got := s.deliveries()
		if len(got) != 2 || got[0].Webhook.Alerts[0].Labels["device"] != "d1" || got[1].Webhook.Alerts[0].Labels["device"] != "d2" {
			t.Errorf("after recovery: got %d deliveries; want d1 then d2", len(got))
		}
	})

	t.Run("timeouts are retried", func(t *testing.T) {
		s := newSink(t)
		s.set(0, 3*time.Second)
		r := webhook("hook", s)
		r.Timeout = 200 * time.Millisecond
		o := testOptions(t, nil, r)
		d := startDispatcher(t, o)
		rec := record(t, d, "hook")
		d.Reconcile(ctx, t0, []models.Finding{hot("d1", t0)})
		s.set(0, 0)
		d.Reconcile(ctx, t0.Add(2*time.Second), nil)
		if len(rec.retry) != 2 || !rec.retry[0] || rec.errs[0] == nil || !strings.Contains(rec.errs[0].Error(), "deadline exceeded") || rec.errs[1] != nil {
			t.Errorf("got attempts %v errors %v; want a retryable timeout, then success", rec.retry, rec.errs)
		}
		if len(s.deliveries()) != 1 {
			t.Errorf("got %d deliveries; want 1", len(s.deliveries()))
		}
	})

	t.Run("a slow receiver does not block the others", func(t *testing.T) {
		slow, fast := newSink(t), newSink(t)
		slow.set(0, 30*time.Second) // answers only when the test is over
		rs := webhook("slow", slow)
		rs.Timeout = time.Minute
		o := testOptions(t, nil, rs, webhook("fast", fast))
		o.Synchronous = false // the wall-clock goroutine per receiver
		d := startDispatcher(t, o)
		now := time.Now()
		d.Reconcile(ctx, now, []models.Finding{hot("d1", now)})
		deadline := time.Now().Add(20 * time.Second)
		for len(fast.deliveries()) == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if len(fast.deliveries()) != 1 || slow.attempts() != 1 || len(slow.deliveries()) != 0 {
			t.Errorf("got fast %d, slow %d attempts/%d answered; want the fast one delivered while the slow one hangs",
				len(fast.deliveries()), slow.attempts(), len(slow.deliveries()))
		}
		// Stop cancels the hanging attempt; the notification stays queued.
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := d.Stop(sctx); err != nil {
			t.Fatal(err)
		}
		ob, err := OpenOutbox(o.OutboxPath)
		if err != nil {
			t.Fatal(err)
		}
		defer ob.Close()
		if n, _ := ob.Len("slow"); n != 1 {
			t.Errorf("slow queue after stop: got %d; want the 1 notification kept", n)
		}
	})

	t.Run("oversized payloads are truncated as Alertmanager does", func(t *testing.T) {
		s := newSink(t)
		r := webhook("hook", s)
		r.GroupBy = []string{LabelAlertname}
		r.MaxAlerts = 2
		o := testOptions(t, nil, r)
		d := startDispatcher(t, o)
		var fs []models.Finding
		for i := range 5 {
			fs = append(fs, hot(fmt.Sprintf("d%d", i), t0))
		}
		d.Reconcile(ctx, t0, fs)
		got := s.deliveries()
		if len(got) != 1 || len(got[0].Webhook.Alerts) != 2 || got[0].Webhook.TruncatedAlerts != 3 {
			t.Fatalf("got %d deliveries; want 1 with 2 alerts and truncatedAlerts 3", len(got))
		}
	})

	t.Run("a full queue drops its oldest notification, counted and logged", func(t *testing.T) {
		s := newSink(t)
		s.set(http.StatusBadGateway, 0)
		r := webhook("hook", s)
		r.MaxQueue = 3
		var logs bytes.Buffer
		o := testOptions(t, &logs, r)
		d := startDispatcher(t, o)
		for i := range 5 {
			at := t0.Add(time.Duration(i) * 2 * time.Second)
			d.Reconcile(ctx, at, []models.Finding{hot(fmt.Sprintf("d%d", i), at)})
		}
		met := metricsText(o)
		for _, m := range []string{`ballast_alert_notifications_dropped_total{receiver="hook"} 2`, `ballast_alert_queue_length{receiver="hook"} 3`, `ballast_alert_notifications_total{receiver="hook"} 5`} {
			if !strings.Contains(met, m) {
				t.Errorf("metrics lack %q", m)
			}
		}
		if n := strings.Count(logs.String(), "alert queue full"); n != 2 {
			t.Errorf("got %d queue-full log lines; want 2:\n%s", n, logs.String())
		}
		s.set(0, 0)
		d.Reconcile(ctx, t0.Add(time.Minute), nil)
		var devs []string
		for _, g := range s.deliveries() {
			devs = append(devs, g.Webhook.Alerts[0].Labels["device"])
		}
		if strings.Join(devs, ",") != "d0,d3,d4" {
			t.Errorf("delivered after the overflow: got %v; want the head d0 and the newest d3, d4", devs)
		}
	})
}

// TestSecretsStayOut: the bearer token, the HMAC key and a URL carrying a
// token reach the receiver but never the logs, the errors or /metrics,
// even when the receiver echoes them back.
func TestSecretsStayOut(t *testing.T) {
	const token, key, path = "tok-3f9a7c1e", "hmac-b71d22e0", "/hook/T0KEN-in-path-81c2"
	var mu sync.Mutex
	fail := true
	var sigOK, authOK bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := new(bytes.Buffer)
		body.ReadFrom(r.Body)
		mu.Lock()
		defer mu.Unlock()
		authOK = r.Header.Get("Authorization") == "Bearer "+token
		ts := r.Header.Get(HeaderTimestamp)
		sigOK = ts != "" && r.Header.Get(HeaderSignature) == "t="+ts+",v1="+Sign([]byte(key), ts, body.Bytes())
		if fail {
			// A careless receiver that echoes the request back.
			http.Error(w, "no: "+r.Header.Get("Authorization")+" "+r.URL.String()+" "+key, http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	r := ReceiverOptions{Name: "hook", Type: TypeWebhook, URL: srv.URL + path, BearerToken: token, HMACSecret: key,
		GroupBy: []string{"..."}, GroupWait: time.Nanosecond, GroupInterval: time.Second, RepeatInterval: time.Hour, SendResolved: true, Timeout: time.Second}
	var logs bytes.Buffer
	o := testOptions(t, &logs, r)
	d := startDispatcher(t, o)
	rec := record(t, d, "hook")
	ctx := context.Background()
	d.Reconcile(ctx, t0, []models.Finding{hot("d1", t0)})
	srv.Close() // now unreachable: a transport error quoting the URL
	d.Reconcile(ctx, t0.Add(5*time.Second), nil)
	var text strings.Builder
	text.WriteString(logs.String())
	text.WriteString(metricsText(o))
	for _, err := range rec.errs {
		if err != nil {
			text.WriteString(err.Error() + "\n")
		}
	}
	if len(rec.errs) != 2 || rec.errs[0] == nil || rec.errs[1] == nil {
		t.Fatalf("got errors %v; want two failed attempts", rec.errs)
	}
	for _, secret := range []string{token, key, path, "T0KEN"} {
		if strings.Contains(text.String(), secret) {
			t.Errorf("%q leaked into logs, errors or metrics:\n%s", secret, text.String())
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !authOK || !sigOK {
		t.Errorf("receiver saw bearer ok=%v, signature ok=%v; want both", authOK, sigOK)
	}
}

// TestTLSWithCAFile: a receiver behind TLS is reached with its CA file;
// without it the certificate is refused and the notification stays
// queued (retryable), not lost.
func TestTLSWithCAFile(t *testing.T) {
	var got int
	var mu sync.Mutex
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got++
		mu.Unlock()
	}))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	base := ReceiverOptions{Name: "tls", Type: TypeWebhook, URL: srv.URL + "/hook", GroupBy: []string{"..."},
		GroupWait: time.Nanosecond, GroupInterval: time.Second, RepeatInterval: time.Hour, Timeout: 2 * time.Second}
	ctx := context.Background()

	without := startDispatcher(t, testOptions(t, nil, base))
	rec := record(t, without, "tls")
	without.Reconcile(ctx, t0, []models.Finding{hot("d1", t0)})
	if len(rec.errs) != 1 || rec.errs[0] == nil || !rec.retry[0] || !strings.Contains(rec.errs[0].Error(), "certificate") {
		t.Errorf("without the CA: got %v (retryable %v); want a retryable certificate error", rec.errs, rec.retry)
	}
	if n := without.receiver("tls").queued.Load(); n != 1 {
		t.Errorf("without the CA: %d queued; want the notification kept", n)
	}

	base.TLSCAFile = ca
	with := startDispatcher(t, testOptions(t, nil, base))
	with.Reconcile(ctx, t0, []models.Finding{hot("d1", t0)})
	mu.Lock()
	defer mu.Unlock()
	if got != 1 {
		t.Errorf("with the CA file: receiver got %d notifications; want 1", got)
	}
}

// TestAlertmanagerResend: as Prometheus does, a firing alert is resent
// every resend_delay with endsAt set ahead, and a resolved one is sent at
// once with its end and resent until resolved_retention has passed.
func TestAlertmanagerResend(t *testing.T) {
	s := newSink(t)
	o := testOptions(t, nil, ReceiverOptions{Name: "am", Type: TypeAlertmanager, URL: s.srv.URL, Timeout: time.Second})
	o.ResendDelay, o.ResolvedRetention, o.Tick = time.Minute, 3*time.Minute, 10*time.Second
	d := startDispatcher(t, o)
	ctx := context.Background()
	f := hot("d1", t0)
	end := t0.Add(150*time.Second + 3*time.Second)
	var sentAt []time.Duration
	for at := time.Duration(0); at <= 8*time.Minute; at += 10 * time.Second {
		now := t0.Add(at)
		f.LastSeen = now
		if !now.Before(end) {
			f.End = end
		}
		before := len(s.deliveries())
		d.Reconcile(ctx, now, []models.Finding{f})
		if got := s.deliveries(); len(got) > before {
			sentAt = append(sentAt, at)
			a := got[len(got)-1].Alerts[0]
			switch {
			case now.Before(end) && !a.EndsAt.Equal(now.Add(4*time.Minute)):
				t.Errorf("at %s: firing endsAt %s; want now + 4 × resend_delay", at, a.EndsAt)
			case !now.Before(end) && !a.EndsAt.Equal(end):
				t.Errorf("at %s: resolved endsAt %s; want the end %s", at, a.EndsAt, end)
			}
		}
	}
	// Fires at 0, resent at 1m and 2m; resolved at 2m40s (the tick after
	// 2m33s), resent at 3m40s and 4m40s; 5m33s is past the retention.
	want := []time.Duration{0, time.Minute, 2 * time.Minute, 160 * time.Second, 220 * time.Second, 280 * time.Second}
	if fmt.Sprint(sentAt) != fmt.Sprint(want) {
		t.Errorf("posts at %v; want %v", sentAt, want)
	}
}
