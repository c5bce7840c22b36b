package alert

import (
	"context"
	"testing"
	"time"

	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/storage"
)

// TestActionsBecomeAlerts: an action waiting for approval fires
// action_awaiting_approval (with the URLs to decide it) until it is
// approved; its success fires action_done. Actions are read from a real
// journal each tick, level-based.
func TestActionsBecomeAlerts(t *testing.T) {
	j, err := storage.OpenJournal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	s := newSink(t)
	o := testOptions(t, nil, webhook("approvals", s))
	o.Actions = journalPlans{j}
	d := startDispatcher(t, o)
	ctx := context.Background()
	act := models.Action{ID: "evacuate-ds03-nvme2", Kind: models.ActionEvacuateDevice, Subject: models.Subject{Kind: models.SubjectDevice, ID: "ds03/nvme2"},
		State: models.ActionAwaitingApproval, Created: t0.Add(-time.Minute), Updated: t0.Add(-time.Minute), Reason: "drive failure risk"}
	step := func(at time.Duration, state models.ActionState) {
		if state != "" {
			act.State, act.Updated = state, t0.Add(at)
			if err := j.PutAction(act); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 3 { // a few ticks: group interval 1 s
			d.Reconcile(ctx, t0.Add(at+time.Duration(i)*time.Second), nil)
		}
	}
	step(0, models.ActionAwaitingApproval)
	step(10*time.Second, models.ActionApproved)
	step(20*time.Second, models.ActionRunning)
	step(30*time.Second, models.ActionSucceeded)
	var got []string
	for _, dl := range s.deliveries() {
		for _, a := range dl.Webhook.Alerts {
			got = append(got, a.Labels[LabelAlertname]+"="+a.Status)
			if a.Labels[LabelAlertname] == KindActionAwaitingApproval && a.Status == "firing" && a.Annotations[AnnotationApproveURL] != "http://mds:9750/api/v1/actions/evacuate-ds03-nvme2/approve" {
				t.Errorf("approve_url: got %q", a.Annotations[AnnotationApproveURL])
			}
		}
	}
	want := []string{"action_awaiting_approval=firing", "action_awaiting_approval=resolved", "action_done=firing"}
	if len(got) != len(want) {
		t.Fatalf("got %v; want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("notification %d: got %s; want %s", i, got[i], want[i])
		}
	}
}

// TestSeverityChangeEndsTheOldAlert: severity is a label, so a finding
// whose severity rises becomes a new alert; the old one resolves at once
// rather than lingering until resolve_timeout.
func TestSeverityChangeEndsTheOldAlert(t *testing.T) {
	s := newSink(t)
	r := webhook("chat", s)
	r.GroupBy = []string{LabelAlertname}
	d := startDispatcher(t, testOptions(t, nil, r))
	ctx := context.Background()
	f := hot("d1", t0)
	d.Reconcile(ctx, t0, []models.Finding{f})
	f.Severity, f.LastSeen = models.SeverityCritical, t0.Add(5*time.Second)
	for i := 5; i < 8; i++ {
		d.Reconcile(ctx, t0.Add(time.Duration(i)*time.Second), []models.Finding{f})
	}
	got := s.deliveries()
	if len(got) != 2 {
		t.Fatalf("got %d notifications; want 2", len(got))
	}
	var last []string
	for _, a := range got[1].Webhook.Alerts {
		last = append(last, a.Labels[LabelSeverity]+"="+a.Status)
	}
	if len(last) != 2 || last[0] != "critical=firing" || last[1] != "warning=resolved" {
		t.Errorf("second notification: got %v; want critical firing and warning resolved", last)
	}
}

// journalPlans lists a journal's plans, as the mds hands them to alerting.
type journalPlans struct{ j *storage.Journal }

func (p journalPlans) Actions() ([]models.Action, error) {
	return p.j.Actions(storage.ActionFilter{Plans: true})
}
