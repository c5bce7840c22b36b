package storage

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ballast-io/ballast/models"
)

func finding(id, kind, dev string, start time.Time, ended bool) models.Finding {
	f := models.Finding{ID: id, Kind: kind, Subject: models.Subject{Kind: models.SubjectDevice, ID: dev}, Severity: models.SeverityWarning,
		Start: start, LastSeen: start.Add(time.Minute), Summary: kind + " on " + dev}
	if ended {
		f.End = start.Add(2 * time.Minute)
		f.LastSeen = f.End
	}
	return f
}

func TestJournalFindingsSurviveReopenAndFilter(t *testing.T) {
	dir := t.TempDir()
	j, err := OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	if err := j.UpsertFindings([]models.Finding{
		finding("hot-1", "hotspot", "ds01/nvme0", t0, false),
		finding("hot-2", "hotspot", "ds02/nvme1", t0.Add(time.Hour), true),
		finding("risk-1", "drive_failure_risk", "ds01/nvme0", t0.Add(2*time.Hour), false),
	}); err != nil {
		t.Fatal(err)
	}
	// An update keeps the original start.
	upd := finding("hot-1", "hotspot", "ds01/nvme0", t0.Add(30*time.Minute), false)
	upd.Score = 9
	if err := j.UpsertFindings([]models.Finding{upd}); err != nil {
		t.Fatal(err)
	}
	if err := j.UpsertFindings([]models.Finding{{ID: "bad"}}); err == nil {
		t.Errorf("invalid finding accepted")
	}
	j.Close()
	if j, err = OpenJournal(dir); err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	all, _ := j.Findings(FindingFilter{})
	if len(all) != 3 || all[0].ID != "hot-1" || !all[0].Start.Equal(t0) || all[0].Score != 9 {
		t.Fatalf("after reopen: got %+v; want 3 findings, hot-1 first with the original start and the new score", all)
	}
	active := true
	for _, c := range []struct {
		f    FindingFilter
		want string
	}{
		{FindingFilter{Kind: "hotspot"}, "hot-1,hot-2"},
		{FindingFilter{Active: &active}, "hot-1,risk-1"},
		{FindingFilter{Subject: "device:ds01/nvme0"}, "hot-1,risk-1"},
		{FindingFilter{Subject: "ds02/nvme1"}, "hot-2"},
		{FindingFilter{Since: t0.Add(62 * time.Minute)}, "hot-2,risk-1"},
	} {
		fs, err := j.Findings(c.f)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, f := range fs {
			ids = append(ids, f.ID)
		}
		if got := strings.Join(ids, ","); got != c.want {
			t.Errorf("filter %+v: got %s; want %s", c.f, got, c.want)
		}
	}

	srv := httptest.NewServer(FindingsHandler(j))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/api/v1/findings?kind=hotspot&active=true")
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Status string
		Data   []models.Finding
	}
	json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if body.Status != "success" || len(body.Data) != 1 || body.Data[0].ID != "hot-1" {
		t.Errorf("API: got %+v; want hot-1 only", body)
	}
	resp, _ = http.Get(srv.URL + "/api/v1/findings?active=maybe")
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("active=maybe: got %d; want 400", resp.StatusCode)
	}
	resp.Body.Close()
}

func TestJournalActions(t *testing.T) {
	j, err := OpenJournal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	t0 := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	a := models.Action{ID: "move-s1-d2", Kind: models.ActionMoveStripe, Subject: models.Subject{Kind: models.SubjectStripe, ID: "s1"}, State: models.ActionProposed, Created: t0, Updated: t0}
	if err := j.PutAction(a); err != nil {
		t.Fatal(err)
	}
	a.State = models.ActionSucceeded
	if err := j.PutAction(a); err != nil {
		t.Fatal(err)
	}
	got, err := j.Action("move-s1-d2")
	if err != nil || got.State != models.ActionSucceeded {
		t.Errorf("got %+v, %v; want the succeeded state", got, err)
	}
	if _, err := j.Action("nope"); err == nil {
		t.Errorf("unknown action: want an error")
	}
	all, _ := j.Actions(ActionFilter{})
	if len(all) != 1 {
		t.Errorf("got %d actions; want 1", len(all))
	}
}
