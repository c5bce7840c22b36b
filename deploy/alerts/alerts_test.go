// Package alerts_test checks deploy/alerts: the rules file with promtool,
// and alerting end to end against real peers on 127.0.0.1 — a real
// `ballast mds`, Debian's prometheus-alertmanager and vmalert, and a
// webhook receiver run by the test.
package alerts_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// tool returns the path of a Debian tool or skips the test, saying which
// package `make test-deps` installs it from.
func tool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not installed (Debian package %s; `make test-deps` installs it when run as root)", name, pkg)
	}
	return p
}

func TestRulesPassPromtool(t *testing.T) {
	promtool := tool(t, "promtool", "prometheus")
	for _, args := range [][]string{{"check", "rules", "ballast-rules.yml"}, {"test", "rules", "ballast-rules.test.yml"}} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// proc is a process the test started; only these are ever signalled.
type proc struct {
	name string
	cmd  *exec.Cmd
	mu   sync.Mutex
	logs strings.Builder
	done chan error
}

func start(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: exec.Command(args[0], args[1:]...), done: make(chan error, 1)}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = p.cmd.Stdout
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("cannot start %s: %v", name, err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.mu.Lock()
			p.logs.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
		p.done <- p.cmd.Wait()
	}()
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			t.Logf("%s log:\n%s", name, p.log())
		}
	})
	return p
}

func (p *proc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// stop sends SIGTERM and waits; SIGKILL after 30 s. Idempotent.
func (p *proc) stop(t *testing.T) {
	if p.cmd.ProcessState != nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
		t.Errorf("%s did not stop within 30s of SIGTERM", p.name)
	}
}

func waitFor(t *testing.T, what string, timeout time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func getJSON(url string, v any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// webhookMsg is the part of the Alertmanager webhook payload the test reads.
type webhookMsg struct {
	Version string `json:"version"`
	Status  string `json:"status"`
	Alerts  []struct {
		Status string            `json:"status"`
		Labels map[string]string `json:"labels"`
	} `json:"alerts"`
}

// receiver records webhook posts by path.
type receiver struct {
	mu  sync.Mutex
	got map[string][]webhookMsg
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var m webhookMsg
	if err := json.NewDecoder(req.Body).Decode(&m); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.got[req.URL.Path] = append(r.got[req.URL.Path], m)
	r.mu.Unlock()
}

// saw reports whether path received alertname with status.
func (r *receiver) saw(path, alertname, status string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.got[path] {
		for _, a := range m.Alerts {
			if a.Labels["alertname"] == alertname && a.Status == status {
				return true
			}
		}
	}
	return false
}

type amAlert struct {
	Labels map[string]string `json:"labels"`
	EndsAt time.Time         `json:"endsAt"`
	Status struct {
		State string `json:"state"`
	} `json:"status"`
}

func amHas(t *testing.T, am, alertname string) bool {
	var as []amAlert
	if err := getJSON("http://"+am+"/api/v2/alerts", &as); err != nil {
		t.Logf("alertmanager: %v", err)
		return false
	}
	for _, a := range as {
		if a.Labels["alertname"] == alertname && a.Status.State == "active" && a.EndsAt.After(time.Now()) {
			return true
		}
	}
	return false
}

func vmalertState(t *testing.T, vm, alertname string) string {
	var r struct {
		Data struct {
			Alerts []struct {
				Name  string `json:"name"`
				State string `json:"state"`
			} `json:"alerts"`
		} `json:"data"`
	}
	if err := getJSON("http://"+vm+"/api/v1/alerts", &r); err != nil {
		t.Logf("vmalert: %v", err)
		return ""
	}
	for _, a := range r.Data.Alerts {
		if a.Name == alertname {
			return a.State
		}
	}
	return ""
}

func post(t *testing.T, url, body string) int {
	t.Helper()
	resp, err := http.Post(url, "text/plain", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestFindingsReachAlertmanagerAndRulesFire is the end-to-end acceptance
// test: a drive reports an NVMe critical warning to a real mds; the
// drive_failure_risk finding reaches a real Alertmanager (in its
// /api/v2/alerts) and, through it, a webhook receiver; ballast's own
// webhook sender delivers it too; when the drive recovers, the resolution
// arrives both ways. Meanwhile vmalert evaluates deploy/alerts/ballast-rules.yml
// against the same mds (its query API; the mds keeps its own metrics in its
// store) and its alerts fire and reach the Alertmanager.
func TestFindingsReachAlertmanagerAndRulesFire(t *testing.T) {
	amBin := tool(t, "prometheus-alertmanager", "prometheus-alertmanager")
	vmalertBin := tool(t, "vmalert", "victoria-metrics")
	dir := t.TempDir()
	ballast := filepath.Join(dir, "ballast")
	if out, err := exec.Command("go", "build", "-o", ballast, "../../cmd/ballast").CombinedOutput(); err != nil {
		t.Fatalf("cannot build ballast: %v\n%s", err, out)
	}

	hooks := &receiver{got: map[string][]webhookMsg{}}
	hookSrv := httptest.NewServer(hooks)
	defer hookSrv.Close()

	amAddr := freePort(t)
	amCfg := filepath.Join(dir, "alertmanager.yml")
	os.WriteFile(amCfg, []byte(`route:
  receiver: hook
  group_by: ['...']
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: hook
    webhook_configs:
      - url: `+hookSrv.URL+`/am
        send_resolved: true
`), 0o644)
	start(t, "alertmanager", amBin, "--config.file="+amCfg, "--storage.path="+filepath.Join(dir, "am"),
		"--web.listen-address="+amAddr, "--cluster.listen-address=", "--log.level=warn")
	waitFor(t, "alertmanager ready", 30*time.Second, func() bool {
		resp, err := http.Get("http://" + amAddr + "/-/ready")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})

	mdsAddr, dead := freePort(t), freePort(t)
	cfg := filepath.Join(dir, "mds.yml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`role: mds
listen: %s
data_dir: %s
pipeline: {tick: 1s}
# An agent that is down. (The mds keeps its own metrics in its store.)
scrape: {interval: 1s, timeout: 1s, targets: [%q]}
alerting:
  cluster: e2e
  resend_delay: 2s
  receivers:
    - {name: am, type: alertmanager, url: "http://%s"}
    - {name: chat, type: webhook, url: "%s/direct", kinds: [drive_failure_risk], group_wait: 1s, group_interval: 1s}
`, mdsAddr, filepath.Join(dir, "data"), dead, amAddr, hookSrv.URL)), 0o644)

	// The drive's agent pushes its SMART state every second.
	var mu sync.Mutex
	warning := "1"
	stopPush := make(chan struct{})
	pushed := make(chan struct{})
	push := func() {
		mu.Lock()
		w := warning
		mu.Unlock()
		resp, err := http.Post("http://"+mdsAddr+"/api/v1/import/prometheus", "text/plain",
			strings.NewReader(`ballast_nvme_critical_warning{node="ds01",device="nvme0",bit="reliability"} `+w+"\n"))
		if err == nil {
			resp.Body.Close()
		}
	}
	go func() {
		defer close(pushed)
		for {
			select {
			case <-stopPush:
				return
			case <-time.After(time.Second):
				push()
			}
		}
	}()
	defer func() { close(stopPush); <-pushed }()

	mds := start(t, "mds", ballast, "mds", "--config", cfg)
	vm := freePort(t)
	start(t, "vmalert", vmalertBin, "-rule=ballast-rules.yml", "-datasource.url=http://"+mdsAddr, "-notifier.url=http://"+amAddr,
		"-evaluationInterval=2s", "-httpListenAddr="+vm, "-loggerLevel=WARN")

	waitFor(t, "drive_failure_risk in alertmanager's /api/v2/alerts", 60*time.Second, func() bool { return amHas(t, amAddr, "drive_failure_risk") })
	waitFor(t, "alertmanager's webhook to deliver it firing", 30*time.Second, func() bool { return hooks.saw("/am", "drive_failure_risk", "firing") })
	waitFor(t, "ballast's webhook sender to deliver it firing", 30*time.Second, func() bool { return hooks.saw("/direct", "drive_failure_risk", "firing") })

	// Rules on the same mds through vmalert: the finding, the agent that
	// is down, and rejected pushes (two, so the counter moves).
	post(t, "http://"+mdsAddr+"/api/v1/import/prometheus", "not a metric line\n")
	waitFor(t, "vmalert: BallastFindingCritical firing", 60*time.Second, func() bool { return vmalertState(t, vm, "BallastFindingCritical") == "firing" })
	waitFor(t, "BallastFindingCritical from vmalert in alertmanager", 30*time.Second, func() bool { return amHas(t, amAddr, "BallastFindingCritical") })
	waitFor(t, "vmalert: BallastScrapeTargetDown pending (for: 5m)", 30*time.Second, func() bool {
		s := vmalertState(t, vm, "BallastScrapeTargetDown")
		return s == "pending" || s == "firing"
	})
	post(t, "http://"+mdsAddr+"/api/v1/import/prometheus", "still not a metric line\n")
	waitFor(t, "vmalert: BallastIngestRejections firing", 60*time.Second, func() bool { return vmalertState(t, vm, "BallastIngestRejections") == "firing" })

	// The drive recovers; the next assessment (within a minute) ends the
	// finding and the resolution travels both ways.
	mu.Lock()
	warning = "0"
	mu.Unlock()
	waitFor(t, "alertmanager's webhook to deliver the resolution", 120*time.Second, func() bool { return hooks.saw("/am", "drive_failure_risk", "resolved") })
	waitFor(t, "ballast's webhook sender to deliver the resolution", 30*time.Second, func() bool { return hooks.saw("/direct", "drive_failure_risk", "resolved") })
	if amHas(t, amAddr, "drive_failure_risk") {
		t.Errorf("alertmanager still lists drive_failure_risk as active after the resolution")
	}
	hooks.mu.Lock()
	for _, m := range hooks.got["/direct"] {
		if m.Version != "4" {
			t.Errorf("ballast's webhook payload version %q; want 4", m.Version)
		}
	}
	hooks.mu.Unlock()
	if logs := mds.log(); strings.Contains(logs, "level=ERROR") {
		t.Errorf("the mds logged errors:\n%s", logs)
	}
}
