package main

import (
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ballast-io/ballast/models"
)

// TestActionsCommandOverTLS: `ballast actions` reaches an https mds whose
// certificate a private CA signed (--ca-file) with a token (--token-file),
// as docs/security.md sets up every listener; `ballast findings` and
// `ballast report capacity` take the same flags. Flags may follow the ID,
// as docs/actions.md writes `ballast actions approve ID --reason …`.
func TestActionsCommandOverTLS(t *testing.T) {
	const token = "act-token-0123456789abcdef"
	var got []string
	var body string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.Path)
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			body = string(b)
		}
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(map[string]string{"status": "error", "error": "no token"})
			return
		}
		var data any = []models.Action{}
		if r.Method == http.MethodPost {
			data = models.Action{ID: "plan-1", State: models.ActionApproved}
		}
		json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": data})
	}))
	defer srv.Close()
	dir := t.TempDir()
	caFile, tokFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "token")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--url", srv.URL, "--ca-file", caFile, "--token-file", tokFile}
	if code, _, errs := runCLI(append([]string{"actions", "list"}, flags...)...); code != 0 {
		t.Fatalf("actions list over TLS: exit %d, stderr %q; want 0", code, errs)
	}
	code, out, errs := runCLI(append([]string{"actions", "approve", "plan-1", "--reason", "window agreed"}, flags...)...)
	if code != 0 || !strings.Contains(out, "plan-1: approved") {
		t.Fatalf("actions approve over TLS: exit %d, stdout %q, stderr %q; want 0 and plan-1: approved", code, out, errs)
	}
	if !strings.Contains(body, `"window agreed"`) {
		t.Errorf("approve body: got %q; want the --reason given after the ID", body)
	}
	if code, _, errs := runCLI("actions", "show", "a", "b", "--url", srv.URL); code != 2 {
		t.Errorf("actions show a b: exit %d, stderr %q; want 2 (one ID)", code, errs)
	}
	if want := "GET /api/v1/actions,POST /api/v1/actions/plan-1/approve"; strings.Join(got, ",") != want {
		t.Errorf("requests: got %q; want %q", strings.Join(got, ","), want)
	}
	// Without the CA the mds's certificate is not trusted.
	if code, _, errs := runCLI("actions", "list", "--url", srv.URL, "--token-file", tokFile); code != 1 || !strings.Contains(errs, "certificate") {
		t.Errorf("actions list without --ca-file: exit %d, stderr %q; want 1 and a certificate error", code, errs)
	}
}

// TestActionsShowSaysWhyACommittedMoveWaits: a running move in phase
// committed waits out move.grace before its old copy goes; `actions show`
// says so instead of an empty BLOCKED column, and a guard's hold still
// wins.
func TestActionsShowSaysWhyACommittedMoveWaits(t *testing.T) {
	at := time.Date(2026, 11, 27, 23, 2, 0, 0, time.UTC)
	plan := models.Action{ID: "p", Kind: models.ActionEvacuateDevice, State: models.ActionRunning}
	kids := []models.Action{
		{ID: "m1", Parent: "p", State: models.ActionRunning, Move: &models.Move{File: "f1", Phase: models.PhaseCommitted, CommittedAt: at}},
		{ID: "m2", Parent: "p", State: models.ActionRunning, Blocked: "checkpoint_window: paused", Move: &models.Move{File: "f2", Phase: models.PhaseCopying}},
		{ID: "m3", Parent: "p", State: models.ActionSucceeded, Move: &models.Move{File: "f3", Phase: models.PhaseCleaned, CommittedAt: at}},
	}
	var b strings.Builder
	printAction(&b, &plan, kids)
	out := b.String()
	for _, want := range []string{"old copy kept for move.grace after the commit at 2026-11-27T23:02:00Z", "checkpoint_window: paused"} {
		if !strings.Contains(out, want) {
			t.Errorf("actions show lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "old copy kept"); n != 1 {
		t.Errorf("%d moves said to wait for move.grace, want 1 (only the running committed one):\n%s", n, out)
	}
}
