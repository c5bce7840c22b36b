package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ballast-io/ballast/analyzer/drivehealth"
)

const testBackblaze = "../../analyzer/drivehealth/testdata/backblaze-2013/drives.csv"

func runCmd(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	c, ok := commands[name]
	if !ok {
		t.Fatalf("command %q is not registered", name)
	}
	var out, errb bytes.Buffer
	err := c.run(context.Background(), &cmdEnv{stdout: &out, stderr: &errb}, args)
	return out.String() + errb.String(), err
}

// subsetCSV writes the rows of the test CSV whose date is at most last
// (all rows when last is empty) and whose serial is in keep (all when nil).
func subsetCSV(t *testing.T, last string, keep map[string]bool) string {
	t.Helper()
	f, err := os.Open(testBackblaze)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b strings.Builder
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 0; sc.Scan(); n++ {
		line := sc.Text()
		if n > 0 {
			cols := strings.SplitN(line, ",", 3)
			if (last != "" && cols[0] > last) || (keep != nil && !keep[cols[1]]) {
				continue
			}
		}
		b.WriteString(line + "\n")
	}
	p := filepath.Join(t.TempDir(), "drives.csv")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

func TestDrivesScoreFormat(t *testing.T) {
	out := filepath.Join(t.TempDir(), "scores.jsonl")
	if msg, err := runCmd(t, "drives score", "--backblaze", testBackblaze, "--out", out); err != nil {
		t.Fatalf("drives score: %v\n%s", err, msg)
	}
	lines := readLines(t, out)
	if got, want := len(lines), 26968; got != want {
		t.Fatalf("got %d lines; want %d (one per drive-day of the CSV)", got, want)
	}
	flaggedFailed := false
	for i, l := range lines {
		if !strings.HasPrefix(l, `{"serial":"`) {
			t.Fatalf("line %d does not start with {\"serial\": %s", i+1, l)
		}
		dec := json.NewDecoder(strings.NewReader(l))
		dec.UseNumber()
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			t.Fatalf("line %d is not JSON: %v", i+1, err)
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		if len(keys) != 4 || obj["serial"] == nil || obj["date"] == nil || obj["risk"] == nil || obj["explanation"] == nil {
			t.Fatalf("line %d has keys %v; want exactly serial, date, risk, explanation", i+1, keys)
		}
		// Key order is part of the format.
		si, di, ri, ei := strings.Index(l, `"serial":`), strings.Index(l, `,"date":`), strings.Index(l, `,"risk":`), strings.Index(l, `,"explanation":[`)
		if !(si == 1 && si < di && di < ri && ri < ei) {
			t.Fatalf("line %d keys out of order: %s", i+1, l)
		}
		risk, _ := obj["risk"].(json.Number).Float64()
		if risk < 0 || risk > 1 {
			t.Fatalf("line %d risk %v outside [0,1]", i+1, risk)
		}
		if _, ok := obj["explanation"].([]any); !ok {
			t.Fatalf("line %d explanation is not a list", i+1)
		}
		if obj["serial"] == "9VS1JM8V" && risk > 0.9 {
			flaggedFailed = true
		}
	}
	// 9VS1JM8V failed on 2013-05-09 after its reallocated count grew from 503
	// to 3968 and pending from 0 to 127: some day must score high.
	if !flaggedFailed {
		t.Error("failed drive 9VS1JM8V never scored above 0.9")
	}
}

// TestDrivesScoreNoLookahead: removing later days changes no earlier score.
func TestDrivesScoreNoLookahead(t *testing.T) {
	keep := map[string]bool{"9VS1JM8V": true, "6XW0SAYZ": true, "9VS2A88N": true, "S1F04A4M": true, "MJ1311YNG77GMA": true, "5XW0AJW0": true}
	dir := t.TempDir()
	full, cut := filepath.Join(dir, "full.jsonl"), filepath.Join(dir, "cut.jsonl")
	if _, err := runCmd(t, "drives score", "--backblaze", subsetCSV(t, "", keep), "--out", full); err != nil {
		t.Fatal(err)
	}
	if _, err := runCmd(t, "drives score", "--backblaze", subsetCSV(t, "2013-04-25", keep), "--out", cut); err != nil {
		t.Fatal(err)
	}
	fl := map[string]string{}
	for _, l := range readLines(t, full) {
		var s drivehealth.DayScore
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatal(err)
		}
		fl[s.Serial+" "+s.Date] = l
	}
	cl := readLines(t, cut)
	if len(cl) < 6*10 {
		t.Fatalf("got %d truncated lines; want at least 60", len(cl))
	}
	for _, l := range cl {
		var s drivehealth.DayScore
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatal(err)
		}
		if s.Date > "2013-04-25" {
			t.Fatalf("truncated output has a later day: %s", l)
		}
		if got := fl[s.Serial+" "+s.Date]; got != l {
			t.Fatalf("score changed when later days were removed:\n with: %s\n without: %s", got, l)
		}
	}
}

func TestTrainDriveModelReproducesShipped(t *testing.T) {
	out := filepath.Join(t.TempDir(), "model.json")
	if msg, err := runCmd(t, "train drive-model", "--backblaze", testBackblaze, "--out", out); err != nil {
		t.Fatalf("train drive-model: %v\n%s", err, msg)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, drivehealth.EmbeddedModelJSON()) {
		t.Fatal("train drive-model output differs from the shipped analyzer/drivehealth/model/drive-model.json")
	}
}

func TestEvalDrives(t *testing.T) {
	out := filepath.Join(t.TempDir(), "drives.md")
	if msg, err := runCmd(t, "eval drives", "--out", out, "--backblaze", testBackblaze,
		"--smartctl", "../../analyzer/drivehealth/testdata/smartctl", "--variants", "../../"+defaultVariants); err != nil {
		t.Fatalf("eval drives: %v\n%s", err, msg)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	for _, want := range []string{"## Drive failure prediction", "static rules (smartctl_exporter-style)", "day-to-day differences (Ceph-style)", "**Ceiling.**"} {
		if !strings.Contains(md, want) {
			t.Errorf("evaluation lacks %q", want)
		}
	}
	row := func(prefix string) string {
		for _, l := range strings.Split(md, "\n") {
			if strings.HasPrefix(l, "| "+prefix) {
				return l
			}
		}
		return ""
	}
	for prefix, want := range map[string]string{
		"nvme-null-SAMSUNG_MZWLL3T2HAJQ-00005-nvme0.json |": "drive_failure_risk(critical)",
		"ST3500418AS_12.json |":                             "drive_failure_risk(warning)",
		"SEAGATE_ST373453LC_26.json |":                      "drive_failure_risk(warning)",
		"nvme-null-Micron_7400_MTFDKCB1T6TFC-nvme2.json |":  "| – | – | – |",
		// The derived reading of the issue: 7 media errors on the 970 EVO.
		"nvme-null-Samsung_SSD_970_EVO_Plus_250GB-nvme0.json: nvme_smart_health_information_log.media_errors set to 7": "drive_failure_risk(warning)",
	} {
		if r := row(prefix); !strings.Contains(r, want) {
			t.Errorf("row %q: got %q; want %q in it", prefix, r, want)
		}
	}
}

func TestDriveCommandsHelpAndUsage(t *testing.T) {
	for name, flags := range map[string][]string{
		"train drive-model": {"-backblaze", "-out", "-horizon-days", "-l2"},
		"drives score":      {"-backblaze", "-smartctl", "-out", "-model"},
		"eval drives":       {"-out", "-backblaze", "-smartctl", "-variants", "-model"},
	} {
		out, err := runCmd(t, name, "--help")
		if !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%s --help: got %v; want flag.ErrHelp", name, err)
		}
		for _, f := range flags {
			if !strings.Contains(out, f) {
				t.Errorf("%s --help does not explain %s:\n%s", name, f, out)
			}
		}
		if _, err := runCmd(t, name); !errors.Is(err, errUsage) {
			t.Errorf("%s without flags: got %v; want a usage error", name, err)
		}
	}
	_, err := runCmd(t, "drives score", "--backblaze", "/nonexistent/x.csv", "--out", filepath.Join(t.TempDir(), "o"))
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/x.csv") {
		t.Errorf("missing CSV: got %v; want an error naming the path", err)
	}
}

// TestDrivesScoreSmartctl judges a folder of smartctl files with the
// command: the FAILED NVMe and the 304-sector ATA drive are flagged with
// their evidence, the noisy-log NVMe is quiet, and a --scan listing is
// skipped with its reason, not an error.
func TestDrivesScoreSmartctl(t *testing.T) {
	src := "../../analyzer/drivehealth/testdata/smartctl"
	dir := t.TempDir()
	for _, f := range []string{"nvme-null-SAMSUNG_MZWLL3T2HAJQ-00005-nvme0.json", "ST3500418AS_12.json", "nvme-null-Micron_7400_MTFDKCB1T6TFC-nvme2.json"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "scan.json"), []byte(`{"smartctl":{"exit_status":0},"devices":[{"name":"/dev/sda","type":"sat"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "scores.jsonl")
	msg, err := runCmd(t, "drives score", "--smartctl", dir, "--out", out)
	if err != nil {
		t.Fatalf("drives score --smartctl: %v\n%s", err, msg)
	}
	if !strings.Contains(msg, "skipped scan.json: not a drive report: smartctl --scan output") || !strings.Contains(msg, "judged 3 drives") {
		t.Errorf("stderr %q; want the --scan file skipped with its reason and 3 drives judged", msg)
	}
	got := map[string]driveScore{}
	for _, l := range readLines(t, out) {
		var s driveScore
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatal(err)
		}
		got[s.Drive] = s
	}
	kinds := func(s driveScore) string {
		var k []string
		for _, f := range s.Findings {
			k = append(k, f.Kind+"/"+string(f.Severity))
		}
		return strings.Join(k, ",")
	}
	for file, want := range map[string]string{
		"nvme-null-SAMSUNG_MZWLL3T2HAJQ-00005-nvme0.json": "drive_failure_risk/critical",
		"ST3500418AS_12.json":                             "drive_failure_risk/warning",
		"nvme-null-Micron_7400_MTFDKCB1T6TFC-nvme2.json":  "",
	} {
		s, ok := got[file]
		if !ok || kinds(s) != want || s.Readings != 1 {
			t.Errorf("%s: got %+v; want findings %q from one reading", file, s, want)
		}
	}
	if s := got["ST3500418AS_12.json"]; s.Protocol != "ata" || s.Model != "ST3500418AS" || s.Risk <= 0 || len(s.Explanation) == 0 {
		t.Errorf("ATA drive: got %+v; want protocol ata, its model, a risk and an explanation", s)
	}
	if _, err := runCmd(t, "drives score", "--smartctl", dir, "--backblaze", testBackblaze, "--out", out); !errors.Is(err, errUsage) {
		t.Errorf("both sources: got %v; want a usage error", err)
	}
}

// The score lines decode into DayScore with nothing lost.
func TestDayScoreRoundTrip(t *testing.T) {
	s := drivehealth.DayScore{Serial: "X", Date: "2013-04-10", Risk: 0.5, Explanation: []drivehealth.Explanation{{Feature: "pending", Value: 3}}}
	b, _ := json.Marshal(s)
	var back drivehealth.DayScore
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(s, back) {
		t.Fatalf("round trip: got %+v (%v); want %+v", back, err, s)
	}
}

var updateDriveEval = flag.Bool("update-drive-eval", false, "rewrite docs/eval/drives.md from `ballast eval drives`")

// TestDriveEvalDocCurrent keeps the committed docs/eval/drives.md equal to
// what `ballast eval drives` writes; -update-drive-eval regenerates it.
func TestDriveEvalDocCurrent(t *testing.T) {
	doc := "../../docs/eval/drives.md"
	out := filepath.Join(t.TempDir(), "drives.md")
	if _, err := runCmd(t, "eval drives", "--out", out, "--backblaze", testBackblaze,
		"--smartctl", "../../analyzer/drivehealth/testdata/smartctl", "--variants", "../../"+defaultVariants); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if *updateDriveEval {
		if err := os.WriteFile(doc, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("docs/eval/drives.md is stale; run go test ./cmd/ballast -run TestDriveEvalDocCurrent -update-drive-eval")
	}
}
