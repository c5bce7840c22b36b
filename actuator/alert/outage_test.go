package alert

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/ballast-io/ballast/cluster/pipeline"
	"github.com/ballast-io/ballast/models"
)

// incident is one condition a scripted stage reports: active from start
// to end, like an analyzer would.
type incident struct {
	kind    string
	subject models.Subject
	sev     models.Severity
	start   time.Duration // after t0
	end     time.Duration
}

// scriptStage reports each incident active between its start and end, and
// ended once, in the tick its end falls in. It holds no state, so a stage
// rebuilt after a restart behaves like an analyzer that re-detects what is
// still going on.
type scriptStage struct {
	t0        time.Time
	tick      time.Duration
	incidents []incident
}

func (s *scriptStage) Name() string { return "script" }

func (s *scriptStage) Run(_ context.Context, now time.Time) ([]models.Finding, error) {
	var out []models.Finding
	for i, in := range s.incidents {
		start, end := s.t0.Add(in.start), s.t0.Add(in.end)
		f := models.Finding{ID: fmt.Sprintf("%s/%d", in.kind, i), Kind: in.kind, Subject: in.subject, Severity: in.sev,
			Start: start, LastSeen: now, Summary: fmt.Sprintf("%s on %s", in.kind, in.subject)}
		switch {
		case !now.Before(start) && now.Before(end):
			out = append(out, f)
		case !now.Before(end) && now.Sub(end) < s.tick:
			f.End, f.LastSeen = end, end
			out = append(out, f)
		}
	}
	return out, nil
}

var (
	devA  = models.Subject{Kind: models.SubjectDevice, ID: "d1"}
	devB  = models.Subject{Kind: models.SubjectDevice, ID: "d2"}
	drive = models.Subject{Kind: models.SubjectDevice, ID: "ds01/nvme0"}
	job   = models.Subject{Kind: models.SubjectJob, ID: "train-7"}
)

// outageScript: two hotspots in one group, a drive that fails and
// recovers inside the outage, and a starvation that starts as the outage
// ends.
// Ends are off the 15 s tick grid, so a resolved alert's endsAt (its end)
// never equals a firing alert's (a tick plus 4 minutes).
var outageScript = []incident{
	{"hotspot", devA, models.SeverityWarning, 1 * time.Minute, 20*time.Minute + 7*time.Second},
	{"hotspot", devB, models.SeverityWarning, 3 * time.Minute, 8*time.Minute + 7*time.Second},
	{"drive_failure_risk", drive, models.SeverityCritical, 6 * time.Minute, 12*time.Minute + 7*time.Second},
	{"gpu_starvation", job, models.SeverityCritical, 14 * time.Minute, 30*time.Minute + 7*time.Second},
}

// notice is what a webhook notification says, reduced for comparison.
type notice struct {
	group  string
	status string
	alerts string // "subject=status" sorted
}

func (n notice) String() string { return n.group + " " + n.status + " [" + n.alerts + "]" }

func noticeOf(m *WebhookMessage) notice {
	var as []string
	for _, a := range m.Alerts {
		as = append(as, a.Labels[LabelSubject]+"="+a.Status)
	}
	sort.Strings(as)
	return notice{m.GroupLabels[LabelAlertname], m.Status, strings.Join(as, " ")}
}

// wantOutage is the notification sequence the group rules give for
// outageScript (group_wait 30s, group_interval 1m, repeat_interval 10m,
// send_resolved), derived by hand:
var wantOutage = []notice{
	{"hotspot", "firing", "device:d1=firing"},                        // 1:30 first flush of the group
	{"hotspot", "firing", "device:d1=firing device:d2=firing"},       // 3:30 d2 joins
	{"drive_failure_risk", "firing", "device:ds01/nvme0=firing"},     // 6:30
	{"hotspot", "firing", "device:d1=firing device:d2=resolved"},     // 8:30 d2 resolved
	{"drive_failure_risk", "resolved", "device:ds01/nvme0=resolved"}, // 12:30
	{"gpu_starvation", "firing", "job:train-7=firing"},               // 14:30
	{"hotspot", "firing", "device:d1=firing"},                        // 18:30 repeat: 10m since 8:30
	{"hotspot", "resolved", "device:d1=resolved"},                    // 20:30
	{"gpu_starvation", "firing", "job:train-7=firing"},               // 24:30 repeat
	{"gpu_starvation", "resolved", "job:train-7=resolved"},           // 30:30
}

type outageRun struct {
	down, up time.Duration // receiver outage; zero for none
	restart  time.Duration // mds restart; zero for none
}

// runOutage drives the script on a simulated clock through the real
// pipeline, with a webhook and an Alertmanager receiver on loopback.
func runOutage(t *testing.T, run outageRun) (hook, am *sink, met string) {
	t.Helper()
	hook, am = newSink(t), newSink(t)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tick := 15 * time.Second
	opts := Options{
		Receivers: []ReceiverOptions{
			{Name: "chat", Type: TypeWebhook, URL: hook.srv.URL + "/hook", GroupBy: []string{LabelAlertname},
				GroupWait: 30 * time.Second, GroupInterval: time.Minute, RepeatInterval: 10 * time.Minute, SendResolved: true, Timeout: 2 * time.Second},
			{Name: "am", Type: TypeAlertmanager, URL: am.srv.URL, Timeout: 2 * time.Second},
		},
		Labeler:     Labeler{Cluster: "test", ExternalURL: "http://mds:9750"},
		Tick:        tick,
		Retry:       RetryOptions{Initial: time.Second, Max: 30 * time.Second, Jitter: 0.2, Seed: 1},
		OutboxPath:  filepath.Join(t.TempDir(), "alerts.db"),
		Synchronous: true,
		Metrics:     metrics.NewSet(),
		Logger:      slog.New(slog.DiscardHandler),
	}
	var d *Dispatcher
	var p *pipeline.Pipeline
	start := func() {
		var err error
		if d, err = New(opts); err != nil {
			t.Fatal(err)
		}
		if err := d.Start(); err != nil {
			t.Fatal(err)
		}
		stage := &scriptStage{t0: t0, tick: tick, incidents: outageScript}
		if p, err = pipeline.NewPipeline(pipeline.PipelineOptions{Stages: []pipeline.Stage{stage}, Actuators: []pipeline.Actuator{d},
			Tick: tick, Logger: opts.Logger}); err != nil {
			t.Fatal(err)
		}
	}
	start()
	ctx := context.Background()
	for at := time.Duration(0); at <= 40*time.Minute; at += tick {
		switch {
		case run.down > 0 && at == run.down:
			hook.set(http.StatusServiceUnavailable, 0)
			am.set(http.StatusServiceUnavailable, 0)
		case run.up > 0 && at == run.up:
			hook.set(0, 0)
			am.set(0, 0)
		}
		if run.restart > 0 && at == run.restart {
			if err := d.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			start()
		}
		if res := p.Tick(ctx, t0.Add(at)); len(res.Errors) > 0 {
			t.Fatalf("tick at %s: %v", at, res.Errors)
		}
	}
	var b strings.Builder
	opts.Metrics.WritePrometheus(&b)
	if err := d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	return hook, am, b.String()
}

// TestOutageDeliversEverythingOnce is the outage acceptance test on a
// simulated clock: the receivers are down for 10 minutes while alerts fire
// and resolve, the dispatcher (its outbox and state are all an mds restart
// keeps) restarts in the middle, and afterwards every webhook notification
// the group rules call for has arrived exactly once, in order, and
// Alertmanager has been told every firing and every resolution.
func TestOutageDeliversEverythingOnce(t *testing.T) {
	for _, run := range []outageRun{
		{},
		{down: 5 * time.Minute, up: 15 * time.Minute, restart: 10 * time.Minute},
	} {
		t.Run(fmt.Sprintf("down=%s,restart=%s", run.down, run.restart), func(t *testing.T) {
			hook, am, met := runOutage(t, run)
			got := hook.deliveries()
			var notices []notice
			ids := map[string]bool{}
			lastSeq := 0
			for _, d := range got {
				notices = append(notices, noticeOf(&d.Webhook))
				if ids[d.ID] {
					t.Errorf("notification %s delivered twice", d.ID)
				}
				ids[d.ID] = true
				var seq int
				fmt.Sscanf(strings.TrimPrefix(d.ID, "chat/"), "%d", &seq)
				if seq <= lastSeq {
					t.Errorf("notification %s arrived after %d: out of order", d.ID, lastSeq)
				}
				lastSeq = seq
			}
			if !slices.Equal(notices, wantOutage) {
				t.Errorf("webhook got %d notifications:\n%s\nwant %d:\n%s", len(notices), join(notices), len(wantOutage), join(wantOutage))
			}
			checkAlertmanagerTold(t, am.deliveries())
			if run.down > 0 {
				if n := hook.attempts(); n <= len(wantOutage) {
					t.Errorf("webhook saw %d attempts; want retries beyond the %d deliveries", n, len(wantOutage))
				}
				for _, m := range []string{`ballast_alert_notifications_dropped_total{receiver="chat"} 0`, `ballast_alert_queue_length{receiver="chat"} 0`} {
					if !strings.Contains(met, m) {
						t.Errorf("metrics lack %q:\n%s", m, met)
					}
				}
			}
		})
	}
}

// checkAlertmanagerTold checks that every scripted alert reached
// Alertmanager firing and then resolved, with endsAt at its end, and that
// nothing arrived firing after its resolution.
func checkAlertmanagerTold(t *testing.T, got []delivery) {
	t.Helper()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	type seen struct {
		firing, resolved bool
		end              time.Time
	}
	state := map[string]*seen{}
	for _, d := range got {
		for _, a := range d.Alerts {
			s := state[a.Labels[LabelSubject]]
			if s == nil {
				s = &seen{}
				state[a.Labels[LabelSubject]] = s
			}
			// A resolved alert carries its end; a firing one an endsAt
			// ahead of the send.
			if slices.ContainsFunc(outageScript, func(in incident) bool {
				return in.subject.String() == a.Labels[LabelSubject] && t0.Add(in.end).Equal(a.EndsAt)
			}) {
				s.resolved, s.end = true, a.EndsAt
			} else {
				if s.resolved {
					t.Errorf("%s arrived firing (endsAt %s) after its resolution", a.Labels[LabelSubject], a.EndsAt)
				}
				s.firing = true
			}
		}
	}
	for _, in := range outageScript {
		s := state[in.subject.String()]
		if s == nil || !s.firing || !s.resolved || !s.end.Equal(t0.Add(in.end)) {
			t.Errorf("alertmanager was told %+v about %s; want firing, then resolved at %s", s, in.subject, t0.Add(in.end))
		}
	}
}

func join(ns []notice) string {
	var b strings.Builder
	for i, n := range ns {
		fmt.Fprintf(&b, "  %2d %s\n", i+1, n)
	}
	return b.String()
}
