package cluster

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ballast-io/ballast/actuator"
	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/storage"
)

func TestActionsAPI(t *testing.T) {
	j, err := storage.OpenJournal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	t0 := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	plan := models.Action{ID: "rebalance:pool:fast:1", Kind: models.ActionRebalance, Subject: models.Subject{Kind: models.SubjectPool, ID: "fast"},
		Mode: models.ModeApprove, State: models.ActionAwaitingApproval, Created: t0, Updated: t0}
	move := models.Action{ID: "rebalance:pool:fast:1:m:1", Kind: models.ActionMoveStripe, Parent: plan.ID, Subject: models.Subject{Kind: models.SubjectStripe, ID: "d0/fh"},
		State: models.ActionAwaitingApproval, Created: t0, Updated: t0, Move: &models.Move{File: "f", From: "d0", To: "d1", Phase: models.PhasePending}}
	if err := j.PutActions([]models.Action{plan, move}); err != nil {
		t.Fatal(err)
	}
	e, err := actuator.New(actuator.Options{Config: actuator.DefaultConfig(), Journal: j,
		Load: func() ([]models.Action, error) { return j.Actions(storage.ActionFilter{}) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer e.Stop(context.Background())
	h := &actionsHandler{journal: j, engine: e, now: func() time.Time { return t0.Add(time.Minute) }}

	do := func(method, target, ctype, body, remote string) (*httptest.ResponseRecorder, map[string]any) {
		req := httptest.NewRequest(method, target, strings.NewReader(body))
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		if remote != "" {
			req.RemoteAddr = remote
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var out map[string]any
		json.Unmarshal(rec.Body.Bytes(), &out)
		return rec, out
	}
	const local = "127.0.0.1:5000"
	for _, tc := range []struct {
		name, method, target, ctype, body, remote string
		code                                      int
		want                                      string
	}{
		{"list plans", "GET", "/api/v1/actions?plans=true", "", "", local, 200, `"rebalance:pool:fast:1"`},
		{"list moves of a plan", "GET", "/api/v1/actions?parent=rebalance:pool:fast:1", "", "", local, 200, `"rebalance:pool:fast:1:m:1"`},
		{"bad state filter", "GET", "/api/v1/actions?state=sleeping", "", "", local, 400, "not an action state"},
		{"bad kind filter", "GET", "/api/v1/actions?kind=restripe", "", "", local, 400, "not an action kind (one of [rebalance"},
		{"show", "GET", "/api/v1/actions/rebalance:pool:fast:1", "", "", local, 200, `"awaiting_approval"`},
		{"show unknown", "GET", "/api/v1/actions/nope", "", "", local, 404, "no such action"},
		{"form post refused", "POST", "/api/v1/actions/rebalance:pool:fast:1/approve", "application/x-www-form-urlencoded", "by=x", local, 415, "want application/json"},
		{"unknown field", "POST", "/api/v1/actions/rebalance:pool:fast:1/approve", "application/json", `{"who":"x"}`, local, 400, "unknown field"},
		{"approve a move", "POST", "/api/v1/actions/rebalance:pool:fast:1:m:1/approve", "application/json", "", local, 409, "step of plan"},
		{"approve", "POST", "/api/v1/actions/rebalance:pool:fast:1/approve", "application/json", `{"by":"alice","reason":"ok"}`, local, 200, `"approved"`},
		{"approve again", "POST", "/api/v1/actions/rebalance:pool:fast:1/approve", "application/json", "", local, 409, "not awaiting approval"},
		{"unknown verb", "POST", "/api/v1/actions/rebalance:pool:fast:1/explode", "application/json", "", local, 404, "no such endpoint"},
		{"unknown action", "POST", "/api/v1/actions/nope/cancel", "application/json", "", local, 404, "no such action"},
		{"cancel", "POST", "/api/v1/actions/rebalance:pool:fast:1/cancel", "application/json", "", local, 200, `"cancelled"`},
	} {
		rec, _ := do(tc.method, tc.target, tc.ctype, tc.body, tc.remote)
		if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.want) {
			t.Errorf("%s: got %d %s; want %d containing %q", tc.name, rec.Code, strings.TrimSpace(rec.Body.String()), tc.code, tc.want)
		}
	}
	a, err := j.Action(plan.ID)
	if err != nil || a.State != models.ActionCancelled || a.Decision == nil || a.Decision.Verb != "cancel" {
		t.Errorf("journal has %+v, %v; want the plan cancelled with the decision recorded", a, err)
	}
	if m, _ := j.Action(move.ID); m.State != models.ActionCancelled {
		t.Errorf("move is %s; want cancelled with its plan", m.State)
	}
	if rec, _ := do("GET", "/api/v1/actions", "", "", local); rec.Header().Get("Content-Type") != "application/json" || rec.Code != http.StatusOK {
		t.Errorf("list: %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
}

// TestLogActuatorsSaysWhatRuns: the start line names the driver and each
// kind's mode as the engine runs it, per-kind modes included.
func TestLogActuatorsSaysWhatRuns(t *testing.T) {
	j, err := storage.OpenJournal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	c := actuator.DefaultConfig()
	c.Modes = map[models.ActionKind]models.ActionMode{models.ActionEvacuateDevice: models.ModeOff, models.ActionSetReadAhead: models.ModeAuto}
	e, err := actuator.New(actuator.Options{Config: c, Journal: j,
		Load: func() ([]models.Action, error) { return j.Actions(storage.ActionFilter{}) }})
	if err != nil {
		t.Fatal(err)
	}
	var buf strings.Builder
	logActuators(slog.New(slog.NewTextHandler(&buf, nil)), e)
	want := `msg=actuators driver=none modes="rebalance=dry-run evacuate_device=off promote_spare=dry-run set_read_ahead=auto"`
	if !strings.Contains(buf.String(), want) {
		t.Fatalf("start line %q; want it to contain %q", buf.String(), want)
	}
	if !strings.Contains(buf.String(), "are not planned") {
		t.Fatalf("start line %q: without a driver it must say that no data move is planned", buf.String())
	}
}
