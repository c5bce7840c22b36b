package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ballast-io/ballast/internal/chromium"
	"github.com/ballast-io/ballast/models"
)

var screenshots = flag.Bool("screenshots", false, "TestConsoleInBrowser: run the full mixed scenario and write the console screenshots to docs/img/")

// consoleRe finds the console URL `ballast demo --serve` prints.
var consoleRe = regexp.MustCompile(`Console: (http://\S+/ui/)`)

// demoAndServe runs `ballast demo` with args into out, then serves the
// finished run with --serve --reuse, checks that this did not simulate
// again, and returns the console URL it printed. The server is stopped
// when the test ends.
func demoAndServe(t *testing.T, out string, args ...string) string {
	t.Helper()
	run := exec.Command(ballastBin, append(append([]string{"demo"}, args...), "--out", out, "--listen", "127.0.0.1:0", "--quiet")...)
	if b, err := run.CombinedOutput(); err != nil {
		t.Fatalf("demo: %v\n%s", err, b)
	} else if !strings.Contains(string(b), "bin/ballast demo --serve --reuse --out "+out) {
		t.Errorf("demo does not say how to serve its run again:\n%s", b)
	}
	summary, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}

	// Serve the finished run: no simulation, the same store.
	serve := exec.Command(ballastBin, "demo", "--serve", "--reuse", "--out", out, "--listen", "127.0.0.1:0")
	stdout, err := serve.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	serve.Stderr = &stderr
	started := time.Now()
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() })
	var printed strings.Builder
	urlCh := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			printed.WriteString(sc.Text() + "\n")
			if m := consoleRe.FindStringSubmatch(sc.Text()); m != nil {
				urlCh <- m[1]
			}
		}
	}()
	var consoleURL string
	select {
	case consoleURL = <-urlCh:
	case <-time.After(60 * time.Second):
		t.Fatalf("demo --serve --reuse did not print the console URL within 60 s:\n%s%s", printed.String(), stderr.String())
	}
	t.Logf("served the finished run in %s: %s", time.Since(started).Round(time.Millisecond), consoleURL)
	if !strings.Contains(printed.String(), "the simulation is not re-run") {
		t.Errorf("demo --serve --reuse does not say it serves the finished run:\n%s", printed.String())
	}
	if again, _ := os.ReadFile(filepath.Join(out, "summary.json")); !bytes.Equal(again, summary) {
		t.Error("demo --serve --reuse rewrote summary.json: it ran the simulation again")
	}
	return consoleURL
}

// TestConsoleInBrowser runs a demo, serves the finished run again with
// --serve --reuse (which must not simulate anything) and drives the
// console in headless Chromium: it loads, shows the run's findings in
// plain words with GPU-hours, the heat map and the charts, pages, and
// loads nothing from outside the mds. With -screenshots it runs the whole
// scenario and writes docs/img/console*.png for the README.
func TestConsoleInBrowser(t *testing.T) {
	bin := chromium.Find(t)
	out := filepath.Join(t.TempDir(), "demo")
	duration := "20m"
	if *screenshots {
		duration = "2h"
	}
	consoleURL := demoAndServe(t, out, "--scenario", "mixed", "--duration", duration)

	// What the console must show: the run's findings, by their plain-words
	// titles and subjects.
	var findings []models.Finding
	fb, err := os.ReadFile(filepath.Join(out, "findings.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range bytes.Split(bytes.TrimSpace(fb), []byte("\n")) {
		var f models.Finding
		if err := json.Unmarshal(line, &f); err != nil {
			t.Fatal(err)
		}
		findings = append(findings, f)
	}
	var driveRisk *models.Finding
	for i := range findings {
		if findings[i].Kind == "drive_failure_risk" && findings[i].Active() {
			driveRisk = &findings[i]
		}
	}
	if driveRisk == nil {
		t.Fatalf("the demo's %d findings include no active drive_failure_risk (the mixed scenario has a failing drive)", len(findings))
	}

	s := chromium.NewSession(t, bin, 1400, 1000)
	s.Navigate(consoleURL)
	var page struct {
		Banner, Findings, Pager, HeatPager, GPULost, Util string
		Rows, HeatRows, Charts, External                  int
	}
	s.Eval(`(() => {
		const q = (sel) => document.querySelector(sel);
		const txt = (sel) => (q(sel) ? q(sel).textContent.trim() : "");
		const external = [...document.querySelectorAll("[src],[href]")]
			.map((e) => e.getAttribute("src") || e.getAttribute("href"))
			.filter((u) => !u.startsWith("/") && !u.startsWith("?") && !u.startsWith(location.origin)).length;
		return {
			Banner: txt("#banner"), Findings: txt("#findings"), Pager: txt("#findings-pager"), HeatPager: txt("#heat-pager"),
			GPULost: txt("#gpu-lost"), Util: txt("#gpu-util"),
			Rows: document.querySelectorAll("tr.finding").length,
			HeatRows: document.querySelectorAll("table.heat tbody tr").length,
			Charts: document.querySelectorAll("#gpu figure svg").length,
			External: external,
		};
	})()`, &page)
	if !strings.Contains(page.Banner, "Simulated cluster") || !strings.Contains(page.Banner, "the simulation is not running") {
		t.Errorf("banner: got %q; want it to say the cluster is simulated and the simulation is not running", page.Banner)
	}
	if page.Rows == 0 || !strings.Contains(page.Pager, "of ") {
		t.Errorf("findings: got %d rows, pager %q; want the run's findings", page.Rows, page.Pager)
	}
	for _, want := range []string{"Drive likely to fail (", "GPUs are waiting for storage"} {
		if !strings.Contains(page.Findings, want) {
			t.Errorf("the findings section does not show %q", want)
		}
	}
	// The kind filter, served by the mds, shows the failing drive.
	var kindLink string
	s.Eval(`(document.querySelector('#kinds a[data-kind="drive_failure_risk"]') || {}).href || ""`, &kindLink)
	if kindLink == "" {
		t.Fatal("no filter link for drive_failure_risk findings")
	}
	s.Navigate(kindLink)
	var only string
	s.Eval(`document.querySelector("#findings table").textContent`, &only)
	if !strings.Contains(only, driveRisk.Subject.ID) || !strings.Contains(only, driveRisk.Summary) || strings.Contains(only, "GPUs are waiting") {
		t.Errorf("drive_failure_risk findings only: got %q; want %s (%s) and no other kind", only, driveRisk.Subject.ID, driveRisk.Summary)
	}
	s.Navigate(consoleURL)
	if page.HeatRows != 16 || !strings.Contains(page.HeatPager, "1–16 of 16") {
		t.Errorf("heat map: got %d rows, %q; want the scenario's 16 data servers", page.HeatRows, page.HeatPager)
	}
	if page.Charts < 2 || page.GPULost == "–" || page.Util == "–" {
		t.Errorf("GPU section: %d charts, GPU-hours lost %q, utilisation %q; want both charts and numbers", page.Charts, page.GPULost, page.Util)
	}
	if page.External != 0 {
		t.Errorf("the console refers to %d resources outside the mds; it must work offline", page.External)
	}
	t.Logf("console: %d findings on page 1 (%s), GPU-hours lost %s, GPU utilisation %s", page.Rows, page.Pager, page.GPULost, page.Util)

	// The pager's next page is served by the mds: other findings.
	var next string
	s.Eval(`(document.querySelector('#findings-pager a[rel="next"]') || {}).href || ""`, &next)
	if next == "" {
		t.Errorf("no next page of findings; the run has %d", len(findings))
	} else {
		s.Navigate(next)
		var pager string
		s.Eval(`document.querySelector("#findings-pager").textContent`, &pager)
		if !strings.Contains(pager, "21–") {
			t.Errorf("page 2 of the findings: pager %q; want it to start at 21", pager)
		}
	}

	if *screenshots {
		s.Navigate(consoleURL)
		dir := filepath.Join("..", "..", "docs", "img")
		s.Screenshot(filepath.Join(dir, "console.png"), "", 2200)
		// The rest of the page below a short findings list: actions, heat
		// map, checkpoint forecasts, capacity.
		s.Navigate(consoleURL + "?kind=drive_failure_risk")
		s.Screenshot(filepath.Join(dir, "console-heat.png"), "#actions", 2200)
		t.Logf("wrote %s and console-heat.png", filepath.Join(dir, "console.png"))
	}
}

// TestConsoleApprovesAction runs the demo with remediation in approve mode,
// serves the finished run, and in headless Chromium approves one waiting
// action and rejects another with the console's buttons; the actions API
// must then report them decided.
func TestConsoleApprovesAction(t *testing.T) {
	if help, _ := exec.Command(ballastBin, "demo", "--help").CombinedOutput(); !strings.Contains(string(help), "-actions") {
		t.Skip("this ballast has no actuators yet (demo --actions, issue 11): nothing can wait for approval")
	}
	bin := chromium.Find(t)
	out := filepath.Join(t.TempDir(), "demo")
	consoleURL := demoAndServe(t, out, "--scenario", "mixed", "--duration", "30m", "--actions", "approve")
	api := strings.TrimSuffix(consoleURL, "/ui/") + "/api/v1/actions"

	s := chromium.NewSession(t, bin, 1400, 1000)
	s.Navigate(consoleURL)
	var pending []string
	s.Eval(`[...document.querySelectorAll("tr.action.pending")].map((r) => r.dataset.id)`, &pending)
	if len(pending) == 0 {
		t.Fatalf("no action waits for approval in the console after a demo in approve mode; the actions API says:\n%s", getBody(t, api))
	}
	decide := func(id, verb, want string) {
		t.Helper()
		sel := fmt.Sprintf(`document.querySelector('tr.action.pending[data-id=%q] button[data-verb=%q]')`, id, verb)
		s.Eval(sel+".click()", nil)
		s.WaitFor(fmt.Sprintf(`document.querySelector('tr.action.pending[data-id=%q]').dataset.result`, id), 20*time.Second)
		var result, text string
		s.Eval(fmt.Sprintf(`document.querySelector('tr.action.pending[data-id=%q]').dataset.result`, id), &result)
		s.Eval(fmt.Sprintf(`document.querySelector('tr.action.pending[data-id=%q] .result').textContent`, id), &text)
		if result != want {
			t.Fatalf("%s %s in the console: got %q (%s); want %s", verb, id, result, text, want)
		}
	}
	decide(pending[0], "approve", "approved")
	if len(pending) > 1 {
		decide(pending[1], "reject", "rejected")
	}
	// The API holds the decisions; reloading the page no longer lists
	// them as waiting.
	body := getBody(t, api)
	for i, id := range pending[:min(2, len(pending))] {
		var list struct {
			Data []struct {
				ID    string `json:"id"`
				State string `json:"state"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(body), &list); err != nil {
			t.Fatalf("GET %s: %v\n%s", api, err, body)
		}
		for _, a := range list.Data {
			if a.ID == id && (a.State == "awaiting_approval" || a.State == "proposed") {
				t.Errorf("action %d (%s) still %s after the console decided it", i, id, a.State)
			}
		}
	}
	s.Navigate(consoleURL)
	var still []string
	s.Eval(`[...document.querySelectorAll("tr.action.pending")].map((r) => r.dataset.id)`, &still)
	if slices.Contains(still, pending[0]) {
		t.Errorf("after a reload the approved action %s is still listed as waiting", pending[0])
	}
	t.Logf("%d actions waited; approved %s%s", len(pending), pending[0], map[bool]string{true: ", rejected " + pending[min(1, len(pending)-1)], false: ""}[len(pending) > 1])
}

func getBody(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
