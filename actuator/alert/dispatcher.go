package alert

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/ballast-io/ballast/models"
)

// alertmanagerBatch bounds the alerts of one POST to Alertmanager, as
// Prometheus' notifier does.
const alertmanagerBatch = 256

// saveSeenEvery bounds how stale the saved last-seen times may be: they
// only matter for resolve_timeout, so they are not worth an fsync a tick.
const saveSeenEvery = time.Minute

// Dispatcher is the alerting actuator of the mds pipeline. Each tick it
// turns findings and actions into alerts, routes them to receivers, groups
// and deduplicates them on the pipeline's clock, and commits the decided
// notifications with its state to the outbox in one transaction. One retry
// stage per receiver delivers that receiver's queue in order.
type Dispatcher struct {
	opts      Options
	receivers []*receiver

	mu     sync.Mutex // decision state
	outbox *Outbox
	st     *state
	good   []byte // state as last committed, to roll back to
	saved  time.Time

	life    sync.Mutex
	started bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// state is what the dispatcher knows across ticks and restarts.
type state struct {
	// Alerts are the alerts ballast knows, by fingerprint.
	Alerts map[string]*tracked `json:"alerts"`
	// Groups are the webhook receivers' groups: receiver → key → group.
	Groups map[string]map[string]*group `json:"groups"`
	// Sent is, per Alertmanager receiver and fingerprint, what was last
	// queued for it.
	Sent map[string]map[string]sentMark `json:"sent"`
}

type tracked struct {
	Alert Alert `json:"alert"`
	// Source is "finding:ID" or "action:ID".
	Source string `json:"source"`
	// Seen is the last tick a stage reported the finding.
	Seen time.Time `json:"seen"`
}

type sentMark struct {
	At       time.Time `json:"at"`
	Resolved bool      `json:"resolved"`
	StartsAt time.Time `json:"startsAt"`
}

func newState() *state {
	return &state{Alerts: map[string]*tracked{}, Groups: map[string]map[string]*group{}, Sent: map[string]map[string]sentMark{}}
}

// receiver is one receiver's sender and retry stage.
type receiver struct {
	opts   ReceiverOptions
	sender Sender
	d      *Dispatcher

	deliver sync.Mutex // one delivery round at a time
	rng     *rand.Rand
	// retry state, under deliver
	attempts int
	retryAt  time.Time
	lastErr  string

	queued   atomic.Int64
	queueLen *metrics.Gauge
	kick     chan struct{}

	enqueued, delivered, rejected, dropped *metrics.Counter
	attemptsC, retryableC                  *metrics.Counter
	duration                               *metrics.Summary
}

// New checks opts and builds a sender per receiver (reading TLS files);
// it opens and starts nothing.
func New(opts Options) (*Dispatcher, error) {
	opts.withDefaults()
	d := &Dispatcher{opts: opts}
	names := map[string]bool{}
	valid := 4 * max(opts.ResendDelay, opts.Tick)
	for i, ro := range opts.Receivers {
		if names[ro.Name] {
			return nil, fmt.Errorf("receiver %q is defined twice", ro.Name)
		}
		names[ro.Name] = true
		s, err := NewSender(ro, opts.Labeler.ExternalURL, valid)
		if err != nil {
			return nil, fmt.Errorf("receiver %q: %w", ro.Name, err)
		}
		d.receivers = append(d.receivers, d.newReceiver(ro, s, opts.Retry.Seed+uint64(i)))
	}
	return d, nil
}

// SetSender replaces the sender of receiver name (tests, other transports).
func (d *Dispatcher) SetSender(name string, s Sender) error {
	for _, r := range d.receivers {
		if r.opts.Name == name {
			r.sender = s
			return nil
		}
	}
	return fmt.Errorf("no receiver %q", name)
}

func (d *Dispatcher) newReceiver(ro ReceiverOptions, s Sender, seed uint64) *receiver {
	set := d.opts.Metrics
	l := fmt.Sprintf(`{receiver=%q}`, ro.Name)
	r := &receiver{opts: ro, sender: s, d: d, rng: rand.New(rand.NewPCG(seed, 0x616c657274)), kick: make(chan struct{}, 1),
		enqueued:   set.GetOrCreateCounter(`ballast_alert_notifications_total` + l),
		delivered:  set.GetOrCreateCounter(`ballast_alert_notifications_delivered_total` + l),
		rejected:   set.GetOrCreateCounter(`ballast_alert_notifications_rejected_total` + l),
		dropped:    set.GetOrCreateCounter(`ballast_alert_notifications_dropped_total` + l),
		attemptsC:  set.GetOrCreateCounter(`ballast_alert_delivery_attempts_total` + l),
		retryableC: set.GetOrCreateCounter(`ballast_alert_delivery_retries_total` + l),
		duration:   set.GetOrCreateSummary(`ballast_alert_delivery_duration_seconds` + l),
	}
	r.queueLen = set.GetOrCreateGauge(`ballast_alert_queue_length`+l, nil)
	return r
}

// Name implements pipeline.Actuator.
func (d *Dispatcher) Name() string { return "alerts" }

// Receivers returns the configured receiver names in order.
func (d *Dispatcher) Receivers() []string {
	out := make([]string, len(d.receivers))
	for i, r := range d.receivers {
		out[i] = r.opts.Name
	}
	return out
}

// Start opens the outbox and loads the state; without synchronous delivery
// it starts one delivery goroutine per receiver. With no receivers it
// opens nothing, but says so when an earlier configuration left
// notifications queued. Idempotent.
func (d *Dispatcher) Start() error {
	d.life.Lock()
	defer d.life.Unlock()
	if d.started {
		return nil
	}
	if len(d.receivers) == 0 {
		d.reportOrphans()
		d.started = true
		return nil
	}
	ob, err := OpenOutbox(d.opts.OutboxPath)
	if err != nil {
		return err
	}
	raw, err := ob.State()
	if err != nil {
		ob.Close()
		return fmt.Errorf("cannot read alert state: %w", err)
	}
	st := newState()
	if raw != nil {
		if err := json.Unmarshal(raw, st); err != nil {
			ob.Close()
			return fmt.Errorf("cannot read alert state from %q: %w", d.opts.OutboxPath, err)
		}
	}
	d.mu.Lock()
	d.outbox, d.st, d.good = ob, st, raw
	d.mu.Unlock()
	configured := map[string]bool{}
	for _, r := range d.receivers {
		configured[r.opts.Name] = true
		n, err := ob.Len(r.opts.Name)
		if err != nil {
			ob.Close()
			return fmt.Errorf("cannot count queued notifications of %q: %w", r.opts.Name, err)
		}
		r.setQueued(int64(n))
		if n > 0 {
			d.opts.Logger.Info("alert notifications queued from before the restart", "receiver", r.opts.Name, "queued", n)
		}
	}
	if qs, err := ob.Queues(); err == nil {
		for _, q := range qs {
			if !configured[q] {
				n, _ := ob.Len(q)
				d.opts.Logger.Warn("alert notifications are queued for a receiver that is no longer configured; they are kept, not sent", "receiver", q, "queued", n, "outbox", d.opts.OutboxPath)
			}
		}
	}
	// Receivers removed from the configuration leave state behind.
	for name := range st.Groups {
		if !configured[name] {
			delete(st.Groups, name)
		}
	}
	for name := range st.Sent {
		if !configured[name] {
			delete(st.Sent, name)
		}
	}
	if !d.opts.Synchronous {
		ctx, cancel := context.WithCancel(context.Background())
		d.cancel = cancel
		for _, r := range d.receivers {
			d.wg.Go(func() { r.loop(ctx) })
		}
	}
	d.started = true
	return nil
}

// reportOrphans warns about notifications left in an outbox that no
// configured receiver will send.
func (d *Dispatcher) reportOrphans() {
	if d.opts.OutboxPath == "" {
		return
	}
	if _, err := os.Stat(d.opts.OutboxPath); err != nil {
		return
	}
	ob, err := OpenOutbox(d.opts.OutboxPath)
	if err != nil {
		d.opts.Logger.Warn("cannot inspect the alert outbox", "err", err)
		return
	}
	defer ob.Close()
	qs, _ := ob.Queues()
	for _, q := range qs {
		n, _ := ob.Len(q)
		d.opts.Logger.Warn("alert notifications are queued for a receiver that is no longer configured; they are kept, not sent", "receiver", q, "queued", n, "outbox", d.opts.OutboxPath)
	}
}

// countAlerts sets ballast_alert_alerts{status} at now.
func (d *Dispatcher) countAlerts(now time.Time) {
	var firing, resolved float64
	for _, t := range d.st.Alerts {
		if t.Alert.Resolved(now) {
			resolved++
		} else {
			firing++
		}
	}
	d.opts.Metrics.GetOrCreateGauge(`ballast_alert_alerts{status="firing"}`, nil).Set(firing)
	d.opts.Metrics.GetOrCreateGauge(`ballast_alert_alerts{status="resolved"}`, nil).Set(resolved)
}

// Stop stops the delivery goroutines (an attempt in flight is cancelled
// and stays queued) and closes the outbox. Bounded by ctx; idempotent.
func (d *Dispatcher) Stop(ctx context.Context) error {
	d.life.Lock()
	defer d.life.Unlock()
	if !d.started {
		return nil
	}
	d.started = false
	if d.cancel != nil {
		d.cancel()
		d.cancel = nil
		done := make(chan struct{})
		go func() { d.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			return fmt.Errorf("cannot stop alert delivery: %w", ctx.Err())
		}
	}
	// Hold every receiver's delivery lock while closing, so that no round
	// (a synchronous one inside a Reconcile) uses the outbox meanwhile.
	for _, r := range d.receivers {
		r.deliver.Lock()
		defer r.deliver.Unlock()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	err := d.outbox.Close()
	d.outbox = nil
	return err
}

// Reconcile implements pipeline.Actuator: decide what to notify at now,
// commit it, then deliver (synchronously) or wake the delivery goroutines.
func (d *Dispatcher) Reconcile(ctx context.Context, now time.Time, findings []models.Finding) error {
	if len(d.receivers) == 0 {
		return nil
	}
	d.mu.Lock()
	if d.outbox == nil {
		d.mu.Unlock()
		return errors.New("alert dispatcher is not started")
	}
	err := d.decide(now, findings)
	d.mu.Unlock()
	if d.opts.Synchronous {
		var wg sync.WaitGroup
		for _, r := range d.receivers {
			wg.Go(func() { r.round(ctx, now) })
		}
		wg.Wait()
	} else {
		for _, r := range d.receivers {
			select {
			case r.kick <- struct{}{}:
			default:
			}
		}
	}
	return err
}

// decide updates the alerts from findings and actions, runs every
// receiver's routing and grouping, and commits the notifications. On a
// failed commit the state rolls back to the last committed one, so the
// notifications are decided again next tick.
func (d *Dispatcher) decide(now time.Time, findings []models.Finding) error {
	st := d.st
	material := false
	bySource := d.firingBySource(now)
	for i := range findings {
		a := d.opts.Labeler.FromFinding(&findings[i])
		src := "finding:" + findings[i].ID
		material = d.track(a, src, now) || material
		// A finding whose labels changed (its severity rose) is a new
		// alert; the old one ends.
		end := now
		if a.Resolved(now) {
			end = a.EndsAt
		}
		material = d.supersede(bySource[src], a.Fingerprint(), end, "the finding is now alerted as "+a.Labels[LabelAlertname]+" with severity "+a.Labels[LabelSeverity]) || material
	}
	var errs []error
	if d.opts.Actions != nil {
		m, err := d.trackActions(now, bySource)
		material = m || material
		if err != nil {
			errs = append(errs, err)
		}
	}
	// A firing finding no stage has reported for resolve_timeout has been
	// lost (an analyzer forgot it, e.g. across a restart): resolve it.
	for _, fp := range slices.Sorted(maps.Keys(st.Alerts)) {
		t := st.Alerts[fp]
		if strings.HasPrefix(t.Source, "finding:") && !t.Alert.Resolved(now) && !now.Before(t.Seen.Add(d.opts.ResolveTimeout)) {
			t.Alert.EndsAt = now.UTC()
			t.Alert.Annotations = maps.Clone(t.Alert.Annotations)
			t.Alert.Annotations["resolved_reason"] = fmt.Sprintf("no analyzer has reported it for %s", d.opts.ResolveTimeout)
			material = true
		}
	}
	var appends []Entry
	limits := map[string]int{}
	for _, r := range d.receivers {
		var ns []*Notification
		if r.opts.Type == TypeWebhook {
			ns = d.groupWebhook(r, now)
		} else {
			ns = d.batchAlertmanager(r, now)
		}
		for _, n := range ns {
			b, err := json.Marshal(n)
			if err != nil {
				return err
			}
			appends = append(appends, Entry{Queue: r.opts.Name, Value: b})
		}
		limits[r.opts.Name] = r.opts.MaxQueue
	}
	// Forget resolved alerts once they are past resolved_retention.
	for fp, t := range st.Alerts {
		if t.Alert.Resolved(now) && !now.Before(t.Alert.EndsAt.Add(d.opts.ResolvedRetention)) {
			delete(st.Alerts, fp)
			for _, s := range st.Sent {
				delete(s, fp)
			}
			material = true
		}
	}
	d.countAlerts(now)
	if !material && len(appends) == 0 && now.Sub(d.saved) < saveSeenEvery {
		return errors.Join(errs...)
	}
	raw, err := json.Marshal(st)
	if err != nil {
		return err
	}
	added, dropped, err := d.outbox.Commit(raw, appends, limits)
	if err != nil {
		d.rollback()
		return errors.Join(append(errs, err)...)
	}
	d.good, d.saved = raw, now
	for _, e := range added {
		r := d.receiver(e.Queue)
		r.enqueued.Inc()
		r.addQueued(1)
	}
	for _, e := range dropped {
		r := d.receiver(e.Queue)
		r.dropped.Inc()
		r.addQueued(-1)
		var n Notification
		json.Unmarshal(e.Value, &n)
		d.opts.Logger.Error("alert queue full: dropped the oldest queued notification", "receiver", e.Queue,
			"max_queue", r.opts.MaxQueue, "group", n.GroupKey, "alerts", len(n.Alerts), "decided_at", n.At)
	}
	return errors.Join(errs...)
}

func (d *Dispatcher) rollback() {
	st := newState()
	if d.good != nil {
		if err := json.Unmarshal(d.good, st); err != nil {
			d.opts.Logger.Error("cannot roll back alert state", "err", err)
		}
	}
	d.st = st
}

func (d *Dispatcher) receiver(name string) *receiver {
	for _, r := range d.receivers {
		if r.opts.Name == name {
			return r
		}
	}
	panic("alert: no receiver " + name)
}

// track records alert a from source at now and reports whether anything
// but its annotations and last-seen time changed. An alert with the same
// labels from another source (a new incident of the same condition)
// replaces it, unless it is the older incident's resolution arriving while
// the newer fires. A resolved alert ballast never saw firing is ignored:
// no receiver was told it fired.
func (d *Dispatcher) track(a Alert, source string, now time.Time) bool {
	fp := a.Fingerprint()
	t := d.st.Alerts[fp]
	if t == nil {
		if a.Resolved(now) {
			return false
		}
		d.st.Alerts[fp] = &tracked{Alert: a, Source: source, Seen: now}
		return true
	}
	if t.Source != source && a.Resolved(now) && !t.Alert.Resolved(now) {
		return false
	}
	// The same finding re-detected after a restart keeps its first start,
	// as the journal does.
	if t.Source == source && !t.Alert.Resolved(now) && a.StartsAt.After(t.Alert.StartsAt) {
		a.StartsAt = t.Alert.StartsAt
	}
	material := t.Source != source || !t.Alert.StartsAt.Equal(a.StartsAt) || !t.Alert.EndsAt.Equal(a.EndsAt)
	t.Alert, t.Source, t.Seen = a, source, now
	return material
}

// trackActions derives the alert of every journaled action's current
// state, and resolves the alert of a state the action has left.
func (d *Dispatcher) trackActions(now time.Time, bySource map[string][]string) (bool, error) {
	acts, err := d.opts.Actions.Actions()
	if err != nil {
		return false, fmt.Errorf("cannot read actions for alerts: %w", err)
	}
	material := false
	for i := range acts {
		act := &acts[i]
		src := "action:" + act.ID
		cur := ""
		if a, ok := d.opts.Labeler.FromAction(act, d.opts.ActionEventFor); ok {
			cur = a.Fingerprint()
			material = d.track(a, src, now) || material
		}
		end := act.Updated
		if end.IsZero() || end.After(now) {
			end = now
		}
		material = d.supersede(bySource[src], cur, end, "the action is now "+string(act.State)) || material
	}
	return material, nil
}

// firingBySource indexes the firing alerts by the finding or action they
// come from.
func (d *Dispatcher) firingBySource(now time.Time) map[string][]string {
	out := map[string][]string{}
	for _, fp := range slices.Sorted(maps.Keys(d.st.Alerts)) {
		if t := d.st.Alerts[fp]; !t.Alert.Resolved(now) {
			out[t.Source] = append(out[t.Source], fp)
		}
	}
	return out
}

// supersede resolves at end the firing alerts fps of one source other than
// keep: the source is now alerted as keep, or (keep "") not at all.
func (d *Dispatcher) supersede(fps []string, keep string, end time.Time, reason string) bool {
	material := false
	for _, fp := range fps {
		t := d.st.Alerts[fp]
		if fp == keep || t == nil || !t.Alert.EndsAt.IsZero() && !t.Alert.EndsAt.After(end) {
			continue
		}
		t.Alert.EndsAt = end.UTC()
		t.Alert.Annotations = maps.Clone(t.Alert.Annotations)
		t.Alert.Annotations["resolved_reason"] = reason
		material = true
	}
	return material
}

// groupWebhook feeds receiver r's groups and flushes the due ones.
func (d *Dispatcher) groupWebhook(r *receiver, now time.Time) []*Notification {
	groups := d.st.Groups[r.opts.Name]
	if groups == nil {
		groups = map[string]*group{}
		d.st.Groups[r.opts.Name] = groups
	}
	for _, fp := range slices.Sorted(maps.Keys(d.st.Alerts)) {
		a := d.st.Alerts[fp].Alert
		if !r.opts.routes(a.Labels[LabelAlertname], a.Labels[LabelSeverity]) {
			continue
		}
		key, gl := groupBy(&r.opts, a.Labels)
		g := groups[key]
		if a.Resolved(now) {
			// A resolution only matters to a group that holds the alert
			// firing.
			if g != nil {
				if old, ok := g.Alerts[fp]; ok && !old.Resolved(now) {
					g.Alerts[fp] = a
				}
			}
			continue
		}
		if g == nil {
			g = &group{Labels: gl, Alerts: map[string]Alert{}}
			groups[key] = g
		}
		g.insert(fp, a, now, r.opts.GroupWait)
	}
	var out []*Notification
	for _, key := range slices.Sorted(maps.Keys(groups)) {
		g := groups[key]
		if now.Before(g.Next) {
			continue
		}
		if as := g.flush(now, &r.opts); len(as) > 0 {
			out = append(out, &Notification{Receiver: r.opts.Name, GroupKey: key, GroupLabels: g.Labels, At: now.UTC(), Alerts: as})
		}
		if len(g.Alerts) == 0 {
			delete(groups, key)
		}
	}
	return out
}

// batchAlertmanager picks what receiver r (an Alertmanager) must be sent at
// now, the way Prometheus' notifier does: an alert that newly fires or
// resolves at once; every active alert, and every alert resolved within
// resolved_retention, again each resend_delay so that an Alertmanager that
// restarted or lost a request heals. Resends are held back while the queue
// is not empty: the queue already carries the alerts, and the resend after
// it drains brings the present state.
func (d *Dispatcher) batchAlertmanager(r *receiver, now time.Time) []*Notification {
	sent := d.st.Sent[r.opts.Name]
	if sent == nil {
		sent = map[string]sentMark{}
		d.st.Sent[r.opts.Name] = sent
	}
	backlog := r.queued.Load() > 0
	var batch []Alert
	for _, fp := range slices.Sorted(maps.Keys(d.st.Alerts)) {
		t := d.st.Alerts[fp]
		a := t.Alert
		if !r.opts.routes(a.Labels[LabelAlertname], a.Labels[LabelSeverity]) {
			continue
		}
		m, told := sent[fp]
		res := a.Resolved(now)
		resendDue := told && !now.Before(m.At.Add(d.opts.ResendDelay))
		var send bool
		switch {
		case !res && (!told || m.Resolved || !m.StartsAt.Equal(a.StartsAt)):
			send = true // fires, or fires again
		case res && told && !m.Resolved:
			send = true // resolved
		case !res || now.Before(a.EndsAt.Add(d.opts.ResolvedRetention)):
			send = resendDue && !backlog
		}
		if !send {
			continue
		}
		batch = append(batch, a)
		sent[fp] = sentMark{At: now.UTC(), Resolved: res, StartsAt: a.StartsAt}
	}
	var out []*Notification
	for len(batch) > 0 {
		n := min(len(batch), alertmanagerBatch)
		out = append(out, &Notification{Receiver: r.opts.Name, At: now.UTC(), Alerts: batch[:n]})
		batch = batch[n:]
	}
	return out
}

func (r *receiver) setQueued(n int64) { r.queued.Store(n); r.queueLen.Set(float64(n)) }
func (r *receiver) addQueued(n int64) { r.queueLen.Set(float64(r.queued.Add(n))) }

// loop is a receiver's delivery goroutine on the wall clock: it delivers
// when the pipeline has queued something and when a retry is due.
func (r *receiver) loop(ctx context.Context) {
	for {
		r.deliver.Lock()
		at := r.retryAt
		r.deliver.Unlock()
		var timer *time.Timer
		var due <-chan time.Time
		if !at.IsZero() {
			timer = time.NewTimer(time.Until(at))
			due = timer.C
		}
		select {
		case <-ctx.Done():
		case <-r.kick:
		case <-due:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
		r.round(ctx, time.Now())
	}
}

// round is the retry stage: it sends the head of the queue until the queue
// is empty or a send fails. A retryable failure schedules the next attempt
// with exponential backoff and jitter and keeps the notification at the
// head (per-receiver order); any other failure sets it aside as rejected.
func (r *receiver) round(ctx context.Context, now time.Time) {
	r.deliver.Lock()
	defer r.deliver.Unlock()
	d := r.d
	log := d.opts.Logger.With("receiver", r.opts.Name)
	for ctx.Err() == nil && !now.Before(r.retryAt) {
		d.mu.Lock()
		ob := d.outbox
		d.mu.Unlock()
		if ob == nil {
			return
		}
		e, ok, err := ob.Head(r.opts.Name)
		if err != nil {
			log.Error("cannot read the alert outbox", "err", err)
			return
		}
		if !ok {
			r.setQueued(0)
			return
		}
		id := fmt.Sprintf("%s/%d", r.opts.Name, e.Seq)
		var n Notification
		var retry bool
		if err = json.Unmarshal(e.Value, &n); err == nil {
			start := time.Now()
			_, retry, err = r.sender.Send(ctx, now, id, &n)
			r.duration.UpdateDuration(start)
			r.attemptsC.Inc()
		} else {
			err = fmt.Errorf("notification %s is corrupt: %w", id, err)
		}
		if err != nil && retry && ctx.Err() != nil {
			return // stopping: the notification stays queued
		}
		switch {
		case err == nil:
			if err := ob.Done(r.opts.Name, e.Seq); err != nil {
				log.Error("cannot mark alert notification delivered", "id", id, "err", err)
				return
			}
			if r.attempts > 0 {
				log.Info("alert receiver answers again", "id", id, "attempts", r.attempts+1)
			}
			r.attempts, r.retryAt, r.lastErr = 0, time.Time{}, ""
			r.delivered.Inc()
			r.addQueued(-1)
		case !retry:
			if err := ob.Reject(r.opts.Name, e.Seq, now, err.Error()); err != nil {
				log.Error("cannot set a rejected alert notification aside", "id", id, "err", err)
				return
			}
			log.Error("alert receiver rejected a notification; not retried, kept in the outbox's rejected list", "id", id, "group", n.GroupKey, "alerts", len(n.Alerts), "err", err)
			r.attempts, r.retryAt, r.lastErr = 0, time.Time{}, ""
			r.rejected.Inc()
			r.addQueued(-1)
		default:
			r.attempts++
			r.retryableC.Inc()
			delay := backoff(r.attempts, d.opts.Retry, r.rng)
			r.retryAt = now.Add(delay)
			if msg := err.Error(); msg != r.lastErr {
				log.Warn("alert notification failed; will retry", "id", id, "attempt", r.attempts, "retry_in", delay.Round(time.Millisecond), "queued", r.queued.Load(), "err", msg)
				r.lastErr = msg
			}
			return
		}
	}
}

// backoff is the delay before attempt+1: Initial doubling per attempt up
// to Max, spread by ±Jitter/2 so that receivers recovering together are
// not hit in lockstep.
func backoff(attempt int, o RetryOptions, rng *rand.Rand) time.Duration {
	d := o.Initial
	for i := 1; i < attempt && d < o.Max; i++ {
		d *= 2
	}
	d = min(d, o.Max)
	f := 1 + o.Jitter*(rng.Float64()-0.5)
	return time.Duration(float64(d) * f)
}
