package collector

import (
	"context"
	"encoding/csv"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/ballast-io/ballast/models"
)

// TestSmartctlObservedHealth checks the series parsed from every smartctl
// capture against OBSERVED_HEALTH.csv, which the fixture source derived
// from the same files independently of ballast.
func TestSmartctlObservedHealth(t *testing.T) {
	f, err := os.Open("testdata/fixtures/smartctl/OBSERVED_HEALTH.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	head := rows[0]
	col := map[string]int{}
	for i, h := range head {
		col[h] = i
	}
	// CSV column → (metric, trailing label value or "" for none, scale).
	type check struct {
		metric, label string
		scale         float64
	}
	checks := map[string]check{
		"nvme_available_spare":          {models.MetricNVMeAvailableSpare, "", 0.01},
		"nvme_spare_threshold":          {models.MetricNVMeAvailableSpareThresh, "", 0.01},
		"nvme_percentage_used":          {models.MetricNVMePercentageUsed, "", 0.01},
		"nvme_media_errors":             {models.MetricNVMeMediaErrors, "", 1},
		"nvme_err_log_entries":          {models.MetricNVMeErrorLogEntries, "", 1},
		"power_on_hours":                {models.MetricDrivePowerOn, "", 3600},
		"ata_5_realloc":                 {models.MetricATAAttributeRaw, "5", 1},
		"ata_187_reported_uncorrect":    {models.MetricATAAttributeRaw, "187", 1},
		"ata_197_pending":               {models.MetricATAAttributeRaw, "197", 1},
		"ata_198_offline_uncorrectable": {models.MetricATAAttributeRaw, "198", 1},
		"scsi_grown_defects":            {models.MetricSCSIGrownDefects, "", 1},
	}
	checked := 0
	for _, row := range rows[1:] {
		file := row[col["file"]]
		rep, err := parseSmartctlJSON(readFixture(t, "smartctl/"+file))
		samples := rep.Samples
		if err != nil {
			t.Errorf("%s: %v", file, err)
			continue
		}
		find := func(metric, label string) (float64, bool) {
			for _, s := range samples {
				if s.Name != metric {
					continue
				}
				if label == "" || (len(s.Values) > 3 && s.Values[3] == label) {
					return s.Value, true
				}
			}
			return 0, false
		}
		if want := row[col["smart_passed"]]; want != "" {
			got, ok := find(models.MetricDriveSmartHealthy, "")
			if !ok || (got == 1) != (want == "True") {
				t.Errorf("%s: smart_healthy got %v (present %v); want passed=%s", file, got, ok, want)
			}
			checked++
		}
		if cw := row[col["nvme_critical_warning"]]; cw != "" {
			bits, _ := strconv.Atoi(cw)
			for bit, name := range models.NVMeCriticalWarningBits {
				got, ok := find(models.MetricNVMeCriticalWarning, name)
				if !ok || got != float64(bits>>bit&1) {
					t.Errorf("%s: critical warning bit %s got %v; want %d", file, name, got, bits>>bit&1)
				}
			}
			checked++
		}
		for c, ck := range checks {
			v := row[col[c]]
			if v == "" {
				continue
			}
			want, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s column %s: %v", file, c, err)
			}
			if ck.scale < 1 { // percent → ratio, divided as the collector does
				want /= 100
			} else {
				want *= ck.scale
			}
			got, ok := find(ck.metric, ck.label)
			if !ok || got != want {
				t.Errorf("%s: %s got %v (present %v); want %v", file, c, got, ok, want)
			}
			checked++
		}
	}
	if checked < 500 {
		t.Errorf("checked only %d values; the CSV has more", checked)
	}
}

func TestNVMeCLIEncodingsAgree(t *testing.T) {
	var first []Sample
	for _, f := range []string{"netdata_nvme-smart-log.json", "netdata_nvme-smart-log-string.json", "netdata_nvme-smart-log-float.json"} {
		r, err := ParseDriveReport(readFixture(t, "nvme-cli/"+f), "nvme0")
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		s := r.Samples
		if first == nil {
			first = s
			for _, x := range s {
				if x.Name == models.MetricDriveTemperature && x.Value != 37 {
					t.Errorf("temperature: got %v °C; want 37 (310 K)", x.Value)
				}
			}
			continue
		}
		if !reflect.DeepEqual(s, first) {
			t.Errorf("%s yields different series from the integer encoding", f)
		}
	}
	if _, err := parseNVMeCLISmartLog([]byte(`{"critical_warning":"zero"}`)); err == nil || !strings.Contains(err.Error(), "critical_warning") {
		t.Errorf("got %v; want an error naming critical_warning", err)
	}
}

// TestSmartctlRunsBinary runs the collector against a stand-in smartctl
// script that prints fixture captures, with exit status 4 (a drive
// problem bit, whose output is still used) for the drive and 2 (open
// failed) for a second device.
func TestSmartctlRunsBinary(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	if err := os.WriteFile(good, readFixture(t, "smartctl/INTEL_SSDPE2KX080T8_1.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := `#!/bin/sh
case "$*" in
*--scan-open*) echo '{"devices":[{"name":"/dev/nvme0","type":"nvme"},{"name":"/dev/sdz","type":"sat"}]}' ;;
*/dev/nvme0*) cat ` + good + `; exit 4 ;;
*) echo '{"smartctl":{"exit_status":2}}'; exit 2 ;;
esac
`
	bin := filepath.Join(dir, "smartctl")
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := collectWith(t, "smartctl", Options{SmartctlPath: bin})
	if err != nil {
		t.Fatal(err)
	}
	up := map[string]float64{}
	temp := 0.0
	for _, x := range s {
		switch x.Name {
		case models.MetricCollectorDeviceUp:
			up[x.Values[1]] = x.Value
		case models.MetricDriveTemperature:
			temp = x.Value
		}
	}
	if up["nvme0"] != 1 || up["sdz"] != 0 || temp != 29 {
		t.Errorf("got device_up %v, temperature %v; want nvme0 up with 29 °C, sdz down", up, temp)
	}
	s, err = collectWith(t, "smartctl", Options{SmartctlPath: bin, nvmeEnabled: true})
	if err != nil || len(s) != 1 || s[0].Values[1] != "sdz" {
		t.Errorf("with the nvme collector on: got %v, %v; want only sdz (NVMe left to nvme)", s, err)
	}
	_, err = collectWith(t, "smartctl", Options{SmartctlPath: filepath.Join(dir, "absent")})
	if !errors.Is(err, ErrNotApplicable) {
		t.Errorf("missing smartctl: got %v; want ErrNotApplicable", err)
	}
}

func TestSmartctlDropDir(t *testing.T) {
	dir := fakeRoot(t, map[string]string{
		"nvme3.json": string(readFixture(t, "nvme-cli/netdata_nvme-smart-log-string.json")),
		"sda.json":   string(readFixture(t, "smartctl/ST3200820AS_15.json")),
		"bad.json":   "{not json",
	})
	s, err := (&smartctlCollector{dropDir: dir, log: newOnceLogger(Options{}.withDefaults().Logger)}).Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	devs := map[string]bool{}
	for _, x := range s {
		if x.Name == models.MetricDriveInfo {
			devs[x.Values[0]] = true
		}
		if x.Name == models.MetricCollectorDeviceUp && (x.Values[1] != "bad.json" || x.Value != 0) {
			t.Errorf("unexpected %v", x)
		}
	}
	if !devs["nvme3"] || !devs["sda"] || len(devs) != 2 {
		t.Errorf("drives: got %v; want nvme3 (nvme-cli) and sda (smartctl)", devs)
	}
}
