package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ballast-io/ballast/models"
)

// capacityExposition renders the exported XFS filesystems of four scratch
// drives on two nodes (960 GB each, 50 % full at start, +1 %/day) every 15
// minutes for 4 days up to end, the root filesystem of each node (which
// the report leaves out), and NVMe health series in which scr01/nvme1 has
// its reliability critical-warning bit set.
func capacityExposition(end time.Time) []string {
	var chunks []string
	var b strings.Builder
	start := end.Add(-96 * time.Hour)
	for ts := start; !ts.After(end); ts = ts.Add(15 * time.Minute) {
		x := ts.Sub(start).Hours() / 24
		ms := ts.UnixMilli()
		for _, node := range []string{"scr00", "scr01"} {
			for _, dev := range []string{"nvme0", "nvme1"} {
				l := fmt.Sprintf(`node=%q,device=%q,serial="S-%s-%s",model="sim"`, node, dev, node, dev)
				fl := fmt.Sprintf(`node=%q,device="%sn1",mountpoint="/export/%sn1",fstype="xfs",pool="scratch"`, node, dev, dev)
				avail := int64(960e9 - 960e9*(0.5+0.01*x))
				fmt.Fprintf(&b, "%s{%s} %d %d\n", models.MetricFilesystemSize, fl, int64(960e9), ms)
				fmt.Fprintf(&b, "%s{%s} %d %d\n", models.MetricFilesystemAvail, fl, avail, ms)
				fmt.Fprintf(&b, "%s{%s} %d %d\n", models.MetricFilesystemFree, fl, avail, ms)
				if dev == "nvme0" {
					rl := fmt.Sprintf(`node=%q,device="sda2",mountpoint="/",fstype="ext4"`, node)
					fmt.Fprintf(&b, "%s{%s} %d %d\n%s{%s} %d %d\n", models.MetricFilesystemSize, rl, int64(100e9), ms, models.MetricFilesystemAvail, rl, int64(1e9), ms)
				}
				if ts.Minute() != 0 {
					continue
				}
				bad := node == "scr01" && dev == "nvme1"
				for _, bit := range models.NVMeCriticalWarningBits {
					v := 0
					if bad && bit == "reliability" && x > 2 {
						v = 1
					}
					fmt.Fprintf(&b, "%s{%s,bit=%q} %d %d\n", models.MetricNVMeCriticalWarning, l, bit, v, ms)
				}
				fmt.Fprintf(&b, "%s{%s} 1 %d\n", models.MetricNVMeAvailableSpare, l, ms)
				fmt.Fprintf(&b, "%s{%s} 0.1 %d\n", models.MetricNVMeAvailableSpareThresh, l, ms)
				fmt.Fprintf(&b, "%s{%s} 0.02 %d\n", models.MetricNVMePercentageUsed, l, ms)
				fmt.Fprintf(&b, "%s{%s} 0 %d\n", models.MetricNVMeMediaErrors, l, ms)
			}
		}
		if b.Len() > 1<<20 {
			chunks = append(chunks, b.String())
			b.Reset()
		}
	}
	return append(chunks, b.String())
}

// TestReportCapacityFromMDS runs `ballast report capacity` against a real
// `ballast mds` on loopback holding four days of drive series.
func TestReportCapacityFromMDS(t *testing.T) {
	p := startMDS(t, t.TempDir())
	end := time.Now().Add(-time.Hour).Truncate(15 * time.Minute).UTC()
	for _, chunk := range capacityExposition(end) {
		p.importText(t, chunk)
	}
	p.waitCount(t, models.MetricFilesystemAvail, end, 6)
	dir := t.TempDir()
	if msg, err := runCmd(t, "report capacity", "--url", "http://"+p.addr, "--at", end.Format(time.RFC3339),
		"--lookback", "96h", "--step", "15m", "--out", dir); err != nil {
		t.Fatalf("report capacity: %v\n%s", err, msg)
	}
	r := readReport(t, dir)
	if len(r.Devices) != 4 || len(r.Pools) != 1 || r.Pools[0].Subject.ID != "scratch" {
		t.Fatalf("devices %d, pools %+v; want 4 drives in pool scratch", len(r.Devices), r.Pools)
	}
	pool := r.Pools[0]
	// 54 % now, +1 %/day: 85 % in 31 days.
	if d := float64(pool.Crossings[0].Days); d < 29 || d > 33 {
		t.Errorf("scratch reaches 85 %% in %.2f d; want about 31", d)
	}
	if len(r.AtRisk) != 1 || r.AtRisk[0].Device != "scr01/nvme1n1" || r.AtRisk[0].Kind != "drive_failure_risk" {
		t.Errorf("at risk %+v; want scr01/nvme1n1 drive_failure_risk from its controller's critical warning", r.AtRisk)
	}
	var risk bool
	for _, e := range r.Evacuations {
		risk = risk || (e.What == "at-risk drives" && len(e.Members) == 1 && e.Moved > 500e9)
	}
	if !risk {
		t.Errorf("evacuations %+v; want one for the at-risk drive moving about 520 GB", r.Evacuations)
	}
	for _, f := range []string{"report.html", "report.md"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}

	// Drives at risk from a findings file instead: only active drive
	// findings count.
	findings := filepath.Join(t.TempDir(), "findings.jsonl")
	var lines []string
	for _, f := range []models.Finding{
		{ID: "a", Kind: "drive_wearout", Subject: models.Subject{Kind: models.SubjectDevice, ID: "scr00/nvme0"}, Severity: models.SeverityWarning, Score: 0.3, Start: end, LastSeen: end, Summary: "worn"},
		{ID: "b", Kind: "drive_failure_risk", Subject: models.Subject{Kind: models.SubjectDevice, ID: "scr00/nvme1"}, Severity: models.SeverityCritical, Score: 0.9, Start: end, LastSeen: end, End: end, Summary: "ended"},
		{ID: "c", Kind: "hotspot", Subject: models.Subject{Kind: models.SubjectDevice, ID: "scr01/nvme0"}, Severity: models.SeverityWarning, Start: end, LastSeen: end, Summary: "hot"},
	} {
		b, _ := json.Marshal(f)
		lines = append(lines, string(b))
	}
	if err := os.WriteFile(findings, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir2 := t.TempDir()
	if msg, err := runCmd(t, "report capacity", "--url", "http://"+p.addr, "--at", end.Format(time.RFC3339),
		"--lookback", "96h", "--step", "15m", "--out", dir2, "--no-drive-health", "--findings", findings); err != nil {
		t.Fatalf("report capacity --findings: %v\n%s", err, msg)
	}
	r2 := readReport(t, dir2)
	if len(r2.AtRisk) != 1 || r2.AtRisk[0].Device != "scr00/nvme0n1" || r2.AtRisk[0].Kind != "drive_wearout" {
		t.Errorf("at risk from findings %+v; want only scr00/nvme0n1 drive_wearout", r2.AtRisk)
	}
}

// TestReportCapacityDefaultAtKeepsNewestReading: with the default --at
// (now), the newest drive reading counts. scr01/nvme1 had its reliability
// critical-warning bit set for two days; 20 minutes before "now" its
// reading is clean again (the drive was replaced). The report must not
// list it. Before the fix the newest reading was lost: the hourly range
// query's last point is aligned down to the hour (or, rounded to the API's
// milliseconds, lands just after --at and is dropped), so the drive showed
// as failing.
func TestReportCapacityDefaultAtKeepsNewestReading(t *testing.T) {
	p := startMDS(t, t.TempDir())
	end := time.Now().Add(-2 * time.Hour).Truncate(time.Hour).UTC()
	for _, chunk := range capacityExposition(end) {
		p.importText(t, chunk)
	}
	fixed := end.Add(20 * time.Minute)
	var b strings.Builder
	for _, bit := range models.NVMeCriticalWarningBits {
		fmt.Fprintf(&b, "%s{node=\"scr01\",device=\"nvme1\",serial=\"S-scr01-nvme1\",model=\"sim\",bit=%q} 0 %d\n",
			models.MetricNVMeCriticalWarning, bit, fixed.UnixMilli())
	}
	p.importText(t, b.String())
	p.waitCount(t, models.MetricFilesystemAvail, end, 6)
	p.waitCount(t, models.MetricNVMeCriticalWarning+`{node="scr01",device="nvme1",bit="reliability"} == 0`, fixed, 1)

	// "Now" is 25 minutes after the last full hour, with a sub-millisecond
	// part that the API rounds up.
	now := fixed.Add(5*time.Minute + 600*time.Microsecond)
	dir := t.TempDir()
	var out, errb bytes.Buffer
	env := &cmdEnv{stdout: &out, stderr: &errb, now: func() time.Time { return now }}
	if err := commands["report capacity"].run(context.Background(), env, []string{"--url", "http://" + p.addr, "--out", dir}); err != nil {
		t.Fatalf("report capacity: %v\n%s%s", err, out.String(), errb.String())
	}
	r := readReport(t, dir)
	if !r.GeneratedAt.Equal(now.Truncate(time.Millisecond)) {
		t.Errorf("report time %s; want %s (now, to the millisecond)", r.GeneratedAt, now.Truncate(time.Millisecond))
	}
	if len(r.AtRisk) != 0 {
		t.Errorf("at risk %+v; want none: scr01/nvme1's newest reading is clean", r.AtRisk)
	}
}

func TestReportCapacityErrors(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	cases := []struct {
		args  []string
		usage bool
		want  string
	}{
		{[]string{}, true, "needs --out"},
		{[]string{"--out", t.TempDir(), "--at", "yesterday"}, true, `cannot parse --at "yesterday"`},
		{[]string{"--out", t.TempDir(), "--pools", "scr"}, true, `cannot parse --pools entry "scr"`},
		{[]string{"--out", t.TempDir(), "--step", "0s"}, true, "must be positive"},
		{[]string{"--out", t.TempDir(), "--url", closed, "--timeout", "5s"}, false, "cannot query \"max by (node, device, pool) (ballast_filesystem_size_bytes{mountpoint!~"},
	}
	for _, c := range cases {
		msg, err := runCmd(t, "report capacity", c.args...)
		if err == nil {
			t.Errorf("%q: no error", c.args)
			continue
		}
		if errors.Is(err, errUsage) != c.usage || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v (usage %v) %s; want %q, usage %v", c.args, err, errors.Is(err, errUsage), msg, c.want, c.usage)
		}
	}
}

func TestReportCapacityNoUsedSeries(t *testing.T) {
	p := startMDS(t, t.TempDir())
	_, err := runCmd(t, "report capacity", "--url", "http://"+p.addr, "--out", t.TempDir(), "--no-drive-health")
	if err == nil || !strings.Contains(err.Error(), "no series ballast_filesystem_size_bytes") {
		t.Errorf("got %v; want an error saying no used-bytes series exists", err)
	}
}

func TestEvalCapacityShort(t *testing.T) {
	out := filepath.Join(t.TempDir(), "capacity.md")
	if msg, err := runCmd(t, "eval capacity", "--out", out, "--seeds", "2", "--days", "10"); err != nil {
		t.Fatalf("eval capacity: %v\n%s", err, msg)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Capacity forecasting: backtest against predict_linear", "| **all** |", "- seed 2:", "**Real capacity series.** None"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("evaluation lacks %q:\n%s", want, b)
		}
	}
	if _, err := runCmd(t, "eval capacity", "--out", out, "--days", "5"); !errors.Is(err, errUsage) {
		t.Errorf("--days 5: got %v; want a usage error", err)
	}
}

// TestCapacityEvalDocCurrent regenerates docs/eval/capacity.md (5 seeds ×
// 30 simulated days, about a minute of CPU) and compares; it runs only with
// BALLAST_LONG_TESTS=1 or -update-capacity-eval, which rewrites the file.
func TestCapacityEvalDocCurrent(t *testing.T) {
	if os.Getenv("BALLAST_LONG_TESTS") == "" && !*updateCapacityEval {
		t.Skip("takes about a minute; set BALLAST_LONG_TESTS=1 (or -update-capacity-eval to rewrite docs/eval/capacity.md)")
	}
	doc := "../../docs/eval/capacity.md"
	out := filepath.Join(t.TempDir(), "capacity.md")
	if msg, err := runCmd(t, "eval capacity", "--out", out); err != nil {
		t.Fatalf("eval capacity: %v\n%s", err, msg)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if *updateCapacityEval {
		if err := os.WriteFile(doc, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Error("docs/eval/capacity.md is stale; run go test ./cmd/ballast -run TestCapacityEvalDocCurrent -update-capacity-eval")
	}
}

var updateCapacityEval = flag.Bool("update-capacity-eval", false, "rewrite docs/eval/capacity.md from `ballast eval capacity`")
