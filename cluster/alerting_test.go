package cluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ballast-io/ballast/actuator/alert"
	"github.com/ballast-io/ballast/cluster/analysis"
)

// TestAlertingConfigRejectsBadReceivers: a bad receiver stops the mds at
// load with the field named, and a secret never shows in the message.
func TestAlertingConfigRejectsBadReceivers(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("s3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	urlFile := filepath.Join(dir, "url")
	os.WriteFile(urlFile, []byte("ftp://hooks.example/T0KEN\n"), 0o600)
	for _, c := range []struct {
		name, yaml, want string
	}{
		{"unknown receiver type", "- {name: a, type: pagerduty, url: 'http://x'}", `alerting.receivers[0].type: unknown receiver type "pagerduty"`},
		{"bad url", "- {name: a, type: webhook, url: 'hooks.example/T0KEN'}", `alerting.receivers[0].url: scheme "" is not http or https`},
		{"bad url in file", "- {name: a, type: webhook, url_file: " + urlFile + "}", `alerting.receivers[0].url_file: the URL in "` + urlFile + `" scheme "ftp" is not http or https`},
		{"no url", "- {name: a, type: webhook}", `alerting.receivers[0].url: set url or url_file`},
		{"missing secret file", "- {name: a, type: webhook, url: 'http://x', bearer_token_file: " + filepath.Join(dir, "nope") + "}", `alerting.receivers[0].bearer_token_file: cannot read secret file "` + filepath.Join(dir, "nope") + `": no such file or directory`},
		{"empty secret file", "- {name: a, type: webhook, url: 'http://x', hmac_secret_file: " + empty + "}", `alerting.receivers[0].hmac_secret_file: secret file "` + empty + `" is empty`},
		{"missing CA file", "- {name: a, type: webhook, url: 'https://x', tls_ca_file: " + filepath.Join(dir, "ca.pem") + "}", `alerting.receivers[0].tls_ca_file: cannot read CA file`},
		{"unknown kind", "- {name: a, type: webhook, url: 'http://x', kinds: [hotspots]}", `alerting.receivers[0].kinds[0]: unknown kind "hotspots"`},
		{"bad severity", "- {name: a, type: webhook, url: 'http://x', severities: [page]}", `alerting.receivers[0].severities[0]: "page" is not info, warning or critical`},
		{"duplicate name", "- {name: a, type: webhook, url: 'http://x'}\n    - {name: a, type: webhook, url: 'http://y'}", `alerting.receivers[1].name: "a" is already the name of receivers[0]`},
		{"bad name", "- {name: 'a b', type: webhook, url: 'http://x'}", `alerting.receivers[0].name: name "a b" must be`},
		{"grouping on alertmanager", "- {name: a, type: alertmanager, url: 'http://x', group_wait: 1m}", `alerting.receivers[0].group_wait: applies to webhook receivers`},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, "mds.yml")
			body := "role: mds\nalerting:\n  receivers:\n    " + c.yaml + "\n"
			if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := LoadMDSConfig(path)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v; want an error containing %q", err, c.want)
			}
			if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "T0KEN") {
				t.Errorf("error shows a secret: %v", err)
			}
		})
	}
}

func TestAlertingConfigValid(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	os.WriteFile(token, []byte("s3cret-token\n"), 0o600)
	path := filepath.Join(dir, "mds.yml")
	body := `role: mds
alerting:
  cluster: prod-a
  receivers:
    - name: oncall
      type: alertmanager
      url: http://127.0.0.1:9093
      severities: [warning, critical]
    - name: chat
      type: webhook
      url: http://127.0.0.1:8080/hook
      kinds: [gpu_starvation, action_awaiting_approval]
      group_by: [alertname, cluster]
      group_wait: 10s
      repeat_interval: 1d
      bearer_token_file: ` + token + `
`
	os.WriteFile(path, []byte(body), 0o644)
	c, err := LoadMDSConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	ro, err := c.Alerting.Receiver("chat")
	if err != nil {
		t.Fatal(err)
	}
	if ro.BearerToken != "s3cret-token" || ro.GroupWait.String() != "10s" || ro.RepeatInterval.Hours() != 24 || ro.GroupInterval.String() != "5m0s" || !ro.SendResolved {
		t.Errorf("chat: got %+v; want the token read, 10s wait, 1d repeat, default 5m interval, send_resolved", ro)
	}
	if _, err := c.Alerting.Receiver("pager"); err == nil || !strings.Contains(err.Error(), `unknown receiver "pager"; alerting.receivers are oncall, chat`) {
		t.Errorf("unknown receiver: got %v", err)
	}
}

// TestEveryAlertKindHasARunbook: runbook_url points at docs/alerting.md#KIND
// for every finding and action kind, and the shipped rules link their own
// sections; each must exist.
func TestEveryAlertKindHasARunbook(t *testing.T) {
	doc, err := os.ReadFile("../docs/alerting.md")
	if err != nil {
		t.Fatal(err)
	}
	rules, err := os.ReadFile("../deploy/alerts/ballast-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]bool{}
	for _, l := range strings.Split(string(doc), "\n") {
		if h, ok := strings.CutPrefix(l, "### "); ok {
			sections[strings.ToLower(strings.TrimSpace(h))] = true
		}
	}
	want := append(analysis.Kinds(), alert.ActionKinds()...)
	want = append(want, alert.KindTest)
	for _, l := range strings.Split(string(rules), "\n") {
		if _, anchor, ok := strings.Cut(l, "docs/alerting.md#"); ok && !strings.Contains(anchor, "{{") {
			want = append(want, strings.TrimSuffix(strings.TrimSpace(anchor), `"`))
		}
	}
	for _, k := range want {
		if !sections[strings.ToLower(k)] {
			t.Errorf("docs/alerting.md has no runbook section %q", "### "+k)
		}
	}
}
