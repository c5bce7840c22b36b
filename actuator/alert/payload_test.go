package alert

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ballast-io/ballast/models"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file; got:\n%s", name, got)
	}
}

func sampleFindings() []models.Finding {
	start := time.Date(2026, 3, 1, 11, 40, 0, 0, time.UTC)
	return []models.Finding{
		{ID: "gpu_starvation:stripe:0a1b/fh9:1772365200000", Kind: "gpu_starvation", Subject: models.Subject{Kind: models.SubjectStripe, ID: "0a1b/fh9"},
			Severity: models.SeverityCritical, Score: 1.25, Start: start, LastSeen: start.Add(10 * time.Minute),
			Summary: "16 GPUs on 2 nodes starved by stripe 0a1b/fh9 (hot stripe): 1.250 GPU-hours lost",
			Evidence: []models.Evidence{
				{Name: "gpu_hours_lost", Value: 1.25, Unit: "h", Note: "since the finding started"},
				{Name: "gpus_starved", Value: 16, Note: "at the last tick blamed"},
				{Name: "within", Value: 1, Series: "device:0a1b", Note: "ancestor 1 in the storage topology"},
				{Name: "within", Value: 2, Series: "ds:10.0.0.4:2049", Note: "ancestor 2 in the storage topology"},
			}},
		{ID: "drive_failure_risk/device:ds03/nvme2", Kind: "drive_failure_risk", Subject: models.Subject{Kind: models.SubjectDevice, ID: "ds03/nvme2"},
			Severity: models.SeverityWarning, Score: 0.4, Start: start, LastSeen: start.Add(10 * time.Minute), End: start.Add(15 * time.Minute),
			Summary: "media errors rising",
			Evidence: []models.Evidence{
				{Name: "media_errors", Value: 12},
				{Name: "failure_window_from", Value: 3, Unit: "days", Series: "model"},
				{Name: "failure_window_to", Value: 10, Unit: "days", Series: "model"},
			}},
	}
}

var sampleLabeler = Labeler{Cluster: "prod-a", ExternalURL: "http://mds01:9750", GrafanaURL: "http://grafana:3000", RunbookURL: "https://example.org/alerting.md"}

// TestWebhookPayloadGolden pins the webhook v4 body: field names and
// layout a receiver written for Alertmanager reads.
func TestWebhookPayloadGolden(t *testing.T) {
	var as []Alert
	for _, f := range sampleFindings() {
		as = append(as, sampleLabeler.FromFinding(&f))
	}
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	sortAlerts(as, at)
	n := &Notification{Receiver: "chat", GroupKey: `{}/{receiver="chat"}:{cluster="prod-a"}`, GroupLabels: map[string]string{"cluster": "prod-a"}, At: at, Alerts: as}
	body, truncated, err := renderWebhook(n, "http://mds01:9750", 0, 0)
	if err != nil || truncated != 0 {
		t.Fatal(err, truncated)
	}
	var pretty bytes.Buffer
	json.Indent(&pretty, body, "", "  ")
	pretty.WriteByte('\n')
	golden(t, "webhook.json", pretty.Bytes())

	var m WebhookMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	if m.Version != "4" || m.Status != "firing" || m.Alerts[0].Status != "firing" || m.Alerts[1].Status != "resolved" ||
		m.CommonLabels["cluster"] != "prod-a" || m.Alerts[0].Annotations[AnnotationGPUHoursLost] != "1.25" ||
		m.Alerts[0].Labels["ds"] != "10.0.0.4:2049" || m.Alerts[1].Labels["drive"] != "nvme2" || m.Alerts[1].Labels["ds"] != "ds03" {
		t.Errorf("decoded message: got %+v", m)
	}
	if len(m.Alerts[0].Fingerprint) != 16 {
		t.Errorf("fingerprint %q: want 16 hex digits as Alertmanager's", m.Alerts[0].Fingerprint)
	}
}

func TestWebhookTruncatesBySize(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var as []Alert
	for i := range 50 {
		f := hot(strings.Repeat("x", 10)+string(rune('a'+i%26))+string(rune('a'+i/26)), at)
		as = append(as, sampleLabeler.FromFinding(&f))
	}
	n := &Notification{Receiver: "chat", At: at, Alerts: as}
	body, truncated, err := renderWebhook(n, "", 0, 4096)
	if err != nil {
		t.Fatal(err)
	}
	var m WebhookMessage
	json.Unmarshal(body, &m)
	if len(body) > 4096 || truncated == 0 || m.TruncatedAlerts != truncated || len(m.Alerts)+truncated != 50 {
		t.Errorf("got %d bytes, %d alerts, truncatedAlerts %d (%d); want ≤ 4096 bytes and the rest counted", len(body), len(m.Alerts), m.TruncatedAlerts, truncated)
	}
}

// TestAlertmanagerEndsAt: firing alerts are sent with endsAt ahead of the
// send, resolved ones with their resolution time, as Prometheus does.
func TestAlertmanagerEndsAt(t *testing.T) {
	fs := sampleFindings()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	n := &Notification{Receiver: "am", At: at, Alerts: []Alert{sampleLabeler.FromFinding(&fs[0]), sampleLabeler.FromFinding(&fs[1])}}
	body, err := renderAlertmanager(n, at.Add(time.Minute), 4*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var got []Alert
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if !got[0].EndsAt.Equal(at.Add(5*time.Minute)) || !got[1].EndsAt.Equal(fs[1].End) || got[0].Labels[LabelAlertname] != "gpu_starvation" {
		t.Errorf("got endsAt %s and %s; want send time + 4m and the resolution %s", got[0].EndsAt, got[1].EndsAt, fs[1].End)
	}
}

func TestActionAlerts(t *testing.T) {
	created := time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC)
	a := models.Action{ID: "evacuate/ds03/nvme2", Kind: models.ActionEvacuateDevice, Subject: models.Subject{Kind: models.SubjectDevice, ID: "ds03/nvme2"},
		State: models.ActionAwaitingApproval, Created: created, Updated: created.Add(time.Minute), Reason: "failure risk", Params: map[string]string{"to": "ds04"}}
	al, ok := sampleLabeler.FromAction(&a, time.Hour)
	if !ok || al.Labels[LabelAlertname] != KindActionAwaitingApproval || !al.EndsAt.IsZero() || al.Labels[LabelActionID] != a.ID ||
		al.Annotations[AnnotationApproveURL] != "http://mds01:9750/api/v1/actions/evacuate/ds03/nvme2/approve" {
		t.Errorf("awaiting approval: got %+v; want a firing action_awaiting_approval without an end", al)
	}
	a.State = models.ActionFailed
	al, ok = sampleLabeler.FromAction(&a, time.Hour)
	if !ok || al.Labels[LabelAlertname] != KindActionFailed || !al.EndsAt.Equal(a.Updated.Add(time.Hour)) {
		t.Errorf("failed: got %+v; want action_failed firing for an hour", al)
	}
	a.State = models.ActionRunning
	if _, ok := sampleLabeler.FromAction(&a, time.Hour); ok {
		t.Errorf("running: got an alert; want none")
	}
}
