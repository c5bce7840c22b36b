package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ballast-io/ballast/actuator/alert"
)

// TestAlertsTestCommand: `ballast alerts test` posts a synthetic alert the
// way the mds would and prints the receiver's answer; a 4xx exits 1 and
// says it would not be retried; an unknown receiver is named.
func TestAlertsTestCommand(t *testing.T) {
	var got alert.WebhookMessage
	var auth string
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		json.Unmarshal(body, &got)
		auth = r.Header.Get("Authorization")
		w.WriteHeader(status)
		io.WriteString(w, "thanks, got it\n")
	}))
	defer srv.Close()
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	os.WriteFile(token, []byte("tok-77aa\n"), 0o600)
	cfg := filepath.Join(dir, "mds.yml")
	os.WriteFile(cfg, []byte("role: mds\nalerting:\n  receivers:\n    - {name: chat, type: webhook, url: '"+srv.URL+"/hook', bearer_token_file: "+token+"}\n"), 0o644)

	code, out, errs := runCLI("alerts", "test", "--config", cfg, "--receiver", "chat")
	if code != 0 || !strings.Contains(out, `receiver "chat" (webhook) answered 200 OK`) || !strings.Contains(out, "thanks, got it") {
		t.Fatalf("got exit %d, stdout %q, stderr %q; want 0 and the answer", code, out, errs)
	}
	if got.Version != "4" || len(got.Alerts) != 1 || got.Alerts[0].Labels["alertname"] != alert.KindTest || auth != "Bearer tok-77aa" {
		t.Errorf("receiver got %+v with Authorization %q; want one ballast_test alert with the bearer token", got, auth)
	}
	if strings.Contains(out+errs, srv.URL) || strings.Contains(out+errs, "tok-77aa") {
		t.Errorf("output shows the URL or the token: %q %q", out, errs)
	}

	status = http.StatusUnauthorized
	code, out, errs = runCLI("alerts", "test", "--config", cfg, "--receiver", "chat")
	if code != 1 || !strings.Contains(out, "401 Unauthorized") || !strings.Contains(errs, "would not retry") {
		t.Errorf("401: got exit %d, stdout %q, stderr %q; want 1, the answer, and not retried", code, out, errs)
	}
	code, _, errs = runCLI("alerts", "test", "--config", cfg, "--receiver", "pager")
	if code != 1 || !strings.Contains(errs, `unknown receiver "pager"; alerting.receivers are chat`) {
		t.Errorf("unknown receiver: got exit %d, stderr %q", code, errs)
	}
}
