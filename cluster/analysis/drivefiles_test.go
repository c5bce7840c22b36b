package analysis

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ballast-io/ballast/analyzer/drivehealth"
	"github.com/ballast-io/ballast/models"
)

// captureDirs are every folder of smartctl captures in the repository's
// testdata (byte-identical copies of /work/shared/fixtures/smartctl, each
// with the fixture source's OBSERVED_HEALTH.csv).
var captureDirs = []string{
	"../../collector/testdata/fixtures/smartctl",
	"../../analyzer/drivehealth/testdata/smartctl",
}

const variantsFile = "../../analyzer/drivehealth/testdata/smartctl-variants.json"

// observedClass is what OBSERVED_HEALTH.csv — the health fields the
// fixtures' collector listed for each file, independently of ballast —
// says a capture must be:
//   - "failed": the drive's own SMART verdict is FAILED;
//   - "damaged": it carries unrecovered NVMe media errors, or hundreds of
//     remapped sectors (ATA 5 or SCSI grown defects ≥ 100; issue 9:
//     "the ATA drives with hundreds of reallocated sectors are flagged"):
//     data was lost or the surface is failing, whatever the verdict;
//   - "healthy": verdict PASSED and every error counter listed (NVMe media
//     errors; ATA 5, 187, 197, 198; SCSI grown defects) at 0 — however
//     noisy its NVMe error-information log or worn its flash;
//   - "small": the rest (a few remapped sectors, one reported
//     uncorrectable): the fixture source records no outcome for them, so
//     only "not critical" is asserted; where their line falls is the level
//     rules' documented thresholds (docs/drive-model.md).
func observedClass(row map[string]string) string {
	num := func(c string) float64 {
		v, err := strconv.ParseFloat(row[c], 64)
		if err != nil {
			return 0 // empty: not reported
		}
		return v
	}
	switch {
	case row["smart_passed"] == "False":
		return "failed"
	case num("nvme_media_errors") > 0 || num("ata_5_realloc") >= 100 || num("scsi_grown_defects") >= 100:
		return "damaged"
	}
	for _, c := range []string{"nvme_media_errors", "ata_5_realloc", "ata_187_reported_uncorrect", "ata_197_pending", "ata_198_offline_uncorrectable", "scsi_grown_defects"} {
		if num(c) > 0 {
			return "small"
		}
	}
	return "healthy"
}

func readObserved(t *testing.T, dir string) map[string]map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "OBSERVED_HEALTH.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]string{}
	for _, r := range rows[1:] {
		m := map[string]string{}
		for i, h := range rows[0] {
			m[h] = r[i]
		}
		out[m["file"]] = m
	}
	return out
}

// checkClass asserts what drive health must say about a drive of class.
func checkClass(t *testing.T, r drivehealth.CaptureResult, class string) {
	t.Helper()
	var failure *models.Finding
	for i := range r.Findings {
		f := &r.Findings[i]
		if f.Kind == drivehealth.KindFailureRisk {
			failure = f
		} else if f.Kind != drivehealth.KindWearout {
			t.Errorf("%s: unexpected finding %s", r.File, f.Kind)
		}
	}
	switch class {
	case "failed":
		if failure == nil || failure.Severity != models.SeverityCritical {
			t.Errorf("%s (SMART FAILED): got %v; want drive_failure_risk critical", r.File, r.Kinds)
		}
	case "damaged":
		if failure == nil || failure.Score <= 0 || failure.Summary == "" || len(failure.Evidence) < 3 {
			t.Errorf("%s (%s): got %v %+v; want drive_failure_risk with a risk, a summary and evidence", r.File, r.Notable, r.Kinds, failure)
			return
		}
		// The evidence explains the risk and how sure it is: the count, how
		// many readings it rests on, and why the level matters.
		names := map[string]bool{}
		for _, e := range failure.Evidence {
			names[e.Name] = true
		}
		if !names["readings"] || !(names["media_errors_level_warning"] || names["reallocated_level_warning"]) {
			t.Errorf("%s: evidence %+v; want the readings it rests on and why the level warns", r.File, failure.Evidence)
		}
	case "healthy":
		if failure != nil {
			t.Errorf("%s (healthy: %s): got %v (%s); want quiet or drive_wearout only", r.File, r.Notable, r.Kinds, failure.Summary)
		}
	case "small":
		if failure != nil && failure.Severity == models.SeverityCritical {
			t.Errorf("%s (%s): got critical %s; a small count alone is never critical", r.File, r.Notable, failure.Summary)
		}
	}
}

// TestDriveHealthOnEveryCapture is issue 9's acceptance 5: every smartctl
// capture in the repository's testdata goes through the offline drive path
// (the agent's decoder, the mds's series mapping, the rules and the model)
// and is judged as OBSERVED_HEALTH.csv says it must be (observedClass).
// No capture has NVMe media errors, so the issue's own example — a Samsung
// 970 EVO with 7 media errors, PASSED — is derived from the real 970 EVO
// capture by the variants file and must be flagged too.
func TestDriveHealthOnEveryCapture(t *testing.T) {
	m, err := drivehealth.DefaultModel()
	if err != nil {
		t.Fatal(err)
	}
	opt := drivehealth.DefaultRuleOptions()
	for _, dir := range captureDirs {
		observed := readObserved(t, dir)
		drives, skipped, err := ReadDriveFiles(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(skipped) != 0 || len(drives) != len(observed) {
			t.Fatalf("%s: read %d drives, skipped %v; want all %d captures of OBSERVED_HEALTH.csv", dir, len(drives), skipped, len(observed))
		}
		count := map[string]int{}
		noisy := 0
		for _, d := range drives {
			row, ok := observed[d.Name]
			if !ok {
				t.Errorf("%s: %s is not in OBSERVED_HEALTH.csv", dir, d.Name)
				continue
			}
			class := observedClass(row)
			count[class]++
			r := drivehealth.CheckDrive(d.Name, d.Model, d.History, m, opt)
			checkClass(t, r, class)
			if class == "healthy" && row["nvme_err_log_entries"] != "" && row["nvme_err_log_entries"] != "0" {
				noisy++
			}
		}
		// The fixture set holds each kind the issue names; if it changes,
		// this test must be looked at again.
		if count["failed"] != 1 || count["damaged"] < 2 || count["healthy"] < 100 || noisy < 5 {
			t.Errorf("%s: classes %v, %d healthy NVMe with a noisy error log; want 1 failed, ≥ 2 damaged, ≥ 100 healthy, ≥ 5 noisy", dir, count, noisy)
		}
	}

	derived, vs, err := ReadDriveVariants(variantsFile, captureDirs[1])
	if err != nil {
		t.Fatal(err)
	}
	if len(derived) == 0 {
		t.Fatal("no derived readings")
	}
	for i, d := range derived {
		r := drivehealth.CheckDrive(d.Name, d.Model, d.History, m, opt)
		if vs[i].Set["nvme_smart_health_information_log.media_errors"] > 0 {
			checkClass(t, r, "damaged")
			if !strings.Contains(r.Why, "unrecovered media errors") {
				t.Errorf("%s: why %q; want the media errors named", d.Name, r.Why)
			}
		}
	}
}

// TestReadDriveFilesSkipsNonReports: files that are not one drive's report
// are skipped with a reason and never stop the run; a folder is one drive's
// readings over time, judged by growth.
func TestReadDriveFilesSkipsNonReports(t *testing.T) {
	dir := t.TempDir()
	capture := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(captureDirs[1], name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	write := func(name string, b []byte) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("scan.json", []byte(`{"json_format_version":[1,0],"smartctl":{"version":[7,3],"argv":["smartctl","--scan","--json"],"exit_status":0},"devices":[{"name":"/dev/sda","info_name":"/dev/sda","type":"scsi","protocol":"SCSI"}]}`))
	write("error.json", []byte(`{"json_format_version":[1,0],"smartctl":{"version":[7,3],"messages":[{"string":"Smartctl open device: /dev/sdz failed: No such device","severity":"error"}],"exit_status":2}}`))
	write("other.json", []byte(`{"hello":"world"}`))
	write("broken.json", []byte(`{not json`))
	write("notes.txt", []byte("not a capture"))
	write("sda.json", capture("ST3500418AS_12.json"))
	// One drive over time: 1 reallocated sector, then 304 two days later.
	early := strings.Replace(string(capture("ST3500418AS_11.json")), `"time_t": 1234567890`, `"time_t": 1234394890`, 1)
	write("ds01-sdb/2009-02-11.json", []byte(early))
	write("ds01-sdb/2009-02-13.json", capture("ST3500418AS_12.json"))

	drives, skipped, err := ReadDriveFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, s := range skipped {
		reasons[s.File] = s.Reason
	}
	for file, want := range map[string]string{
		"scan.json":   "not a drive report: smartctl --scan output listing 1 devices",
		"error.json":  "not a drive report: Smartctl open device: /dev/sdz failed: No such device (exit status 2)",
		"other.json":  "not a drive report: neither smartctl output nor nvme smart-log output",
		"broken.json": "cannot parse drive JSON",
	} {
		if !strings.Contains(reasons[file], want) {
			t.Errorf("%s: skipped with %q; want %q", file, reasons[file], want)
		}
	}
	if len(skipped) != 4 || len(drives) != 2 {
		t.Fatalf("got drives %v, skipped %v; want sda.json and ds01-sdb read, four files skipped", drives, skipped)
	}
	m, _ := drivehealth.DefaultModel()
	for _, d := range drives {
		r := drivehealth.CheckDrive(d.Name, d.Model, d.History, m, drivehealth.DefaultRuleOptions())
		want := "reallocated_level(warning)"
		if d.Name == "ds01-sdb" {
			want = "reallocated_growth(critical)" // +303 in two days
			if len(d.History) != 2 || d.Model != "ST3500418AS" {
				t.Errorf("ds01-sdb: %d readings, model %q; want 2 readings of an ST3500418AS", len(d.History), d.Model)
			}
		}
		if !strings.Contains(strings.Join(r.Rules, ","), want) {
			t.Errorf("%s: rules %v; want %s", d.Name, r.Rules, want)
		}
	}
	if _, _, err := ReadDriveFiles(filepath.Join(dir, "absent")); err == nil {
		t.Error("a missing folder: got no error")
	}
}
