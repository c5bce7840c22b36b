package drivehealth

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func parseCapture(t *testing.T, name string) (Observation, Identity) {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata/smartctl", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	o, id, err := ParseSmartctl(f, time.Time{})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return o, id
}

func TestParseSmartctlFixtures(t *testing.T) {
	o, id := parseCapture(t, "nvme-null-SAMSUNG_MZWLL3T2HAJQ-00005-nvme0.json")
	if o.Protocol != ProtocolNVMe || o.CriticalWarning != 16 || o.SMARTPassed != 0 || o.AvailableSpare != 100 ||
		o.SpareThreshold != 10 || o.UnsafeShutdowns != 4 || o.PowerOnHours != 18376 || id.Model != "SAMSUNG MZWLL3T2HAJQ-00005" {
		t.Errorf("failed NVMe: got %+v %+v", o, id)
	}
	o, _ = parseCapture(t, "nvme-null-Micron_7400_MTFDKCB1T6TFC-nvme2.json")
	if o.ErrLogEntries != 40 || o.MediaErrors != 0 || o.SMARTPassed != 1 {
		t.Errorf("noisy-log NVMe: got err log %v media %v passed %v; want 40, 0, 1", o.ErrLogEntries, o.MediaErrors, o.SMARTPassed)
	}
	o, _ = parseCapture(t, "ST3500418AS_12.json")
	if o.Protocol != ProtocolATA || o.Reallocated != 304 || o.Pending != 0 || o.MediaErrors != 0 || len(o.FailingAttributes) != 0 {
		t.Errorf("ATA: got realloc %v pending %v media %v failing %v; want 304, 0, 0, none", o.Reallocated, o.Pending, o.MediaErrors, o.FailingAttributes)
	}
	o, _ = parseCapture(t, "SEAGATE_ST373453LC_26.json")
	if o.Protocol != ProtocolSCSI || o.Reallocated != 260 {
		t.Errorf("SCSI: got protocol %v grown defects %v; want scsi, 260", o.Protocol, o.Reallocated)
	}
}

// TestParseSmartctlAgreesWithObservedHealth checks every capture against
// the health fields listed in OBSERVED_HEALTH.csv by the fixtures' collector.
func TestParseSmartctlAgreesWithObservedHealth(t *testing.T) {
	b, err := os.ReadFile("testdata/smartctl/OBSERVED_HEALTH.csv")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(strings.ReplaceAll(string(b), "\r", "")), "\n")
	head := strings.Split(lines[0], ",")
	col := map[string]int{}
	for i, h := range head {
		col[h] = i
	}
	for _, l := range lines[1:] {
		r := strings.Split(l, ",")
		o, _ := parseCapture(t, r[col["file"]])
		for name, got := range map[string]float64{
			"nvme_critical_warning": o.CriticalWarning, "nvme_available_spare": o.AvailableSpare,
			"nvme_percentage_used": o.PercentageUsed, "nvme_media_errors": o.MediaErrors,
			"nvme_err_log_entries": o.ErrLogEntries, "ata_5_realloc": o.Reallocated,
			"ata_197_pending": o.Pending, "scsi_grown_defects": o.Reallocated,
		} {
			want := r[col[name]]
			if want == "" {
				continue
			}
			if s := formatFloat(got); s != want {
				t.Errorf("%s %s: got %s; want %s", r[0], name, s, want)
			}
		}
		if passed := r[col["smart_passed"]]; (passed == "True") != (o.SMARTPassed == 1) {
			t.Errorf("%s smart_passed: got %v; want %s", r[0], o.SMARTPassed, passed)
		}
	}
}

func formatFloat(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func TestParseSmartctlErrors(t *testing.T) {
	for in, want := range map[string]string{
		`{`:                                "cannot decode smartctl json",
		`{"device":{"protocol":"floppy"}}`: `unknown device protocol "floppy"`,
	} {
		_, _, err := ParseSmartctl(strings.NewReader(in), time.Time{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v; want error containing %q", in, err, want)
		}
	}
}

const bbHeader = "date,serial_number,model,capacity_bytes,failure,smart_5_raw,smart_197_raw,smart_194_raw,smart_9_raw\n"

func TestParseBackblaze(t *testing.T) {
	drives := loadDrives(t)
	failed := 0
	for _, d := range drives {
		if d.Failed {
			failed++
			if !d.Days[len(d.Days)-1].Time.Equal(d.FailDate) {
				t.Errorf("%s: last day %s is not the failure day %s", d.Serial, d.Days[len(d.Days)-1].Time, d.FailDate)
			}
		}
	}
	if len(drives) != 737 || failed != 78 {
		t.Fatalf("got %d drives, %d failed; want 737, 78", len(drives), failed)
	}
	in := bbHeader + "2013-04-11,A,m,1,0,5,,30,100\n2013-04-10,A,m,1,0,3,0,31,76\n"
	ds, err := ParseBackblaze(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	d := ds[0].Days
	if len(d) != 2 || d[0].Reallocated != 3 || d[1].Reallocated != 5 || known(d[1].Pending) || d[0].TemperatureC != 31 {
		t.Errorf("got %+v; want two sorted days with pending unknown on the second", d)
	}
	for in, want := range map[string]string{
		bbHeader + "2013-04-10,A,m,1,2,0,0,0,0\n":                             `failure "2"`,
		bbHeader + "2013-04-10,A,m,1,0,x,0,0,0\n":                             `column smart_5_raw value "x"`,
		bbHeader + "2013-13-10,A,m,1,0,0,0,0,0\n":                             `date "2013-13-10"`,
		bbHeader + "2013-04-10,A,m,1,0,0,0,0,0\n2013-04-10,A,m,1,0,0,0,0,0\n": "two rows for 2013-04-10",
		bbHeader + "2013-04-10,A,m,1,1,0,0,0,0\n2013-04-11,A,m,1,0,0,0,0,0\n": "rows after its failure",
		"date,model,failure\n":                                                `no "serial_number" column`,
		bbHeader + "2013-04-10,,m,1,0,0,0,0,0\n":                              "empty serial_number",
	} {
		_, err := ParseBackblaze(strings.NewReader(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v; want error containing %q", err, want)
		}
	}
}

// TestSplitBySerial: the split is a function of the serial only, so no
// drive can be on both sides, and both sides hold failed drives.
func TestSplitBySerial(t *testing.T) {
	drives := loadDrives(t)
	side := map[string]bool{}
	var test, testFailed, trainFailed int
	for _, d := range drives {
		s := InTestSplit(d.Serial)
		if prev, ok := side[d.Serial]; ok && prev != s {
			t.Fatalf("serial %s on both sides", d.Serial)
		}
		side[d.Serial] = s
		if s != InTestSplit(d.Serial) {
			t.Fatalf("split of %s not deterministic", d.Serial)
		}
		if s {
			test++
			if d.Failed {
				testFailed++
			}
		} else if d.Failed {
			trainFailed++
		}
	}
	if test < 180 || test > 260 || testFailed < 15 || trainFailed < 40 {
		t.Errorf("got %d test drives (%d failed), %d failed in train; want about 30 %% of 737 with failures on both sides", test, testFailed, trainFailed)
	}
	m, err := DefaultModel()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.Train.Drives, len(drives)-test; got != want {
		t.Errorf("shipped model trained on %d drives; want the %d train-split drives", got, want)
	}
}

// TestTrainingIgnoresTestDrives: changing a test drive's data leaves the
// trained model unchanged.
func TestTrainingIgnoresTestDrives(t *testing.T) {
	drives := append([]Drive(nil), loadDrives(t)...)
	for i := range drives {
		if InTestSplit(drives[i].Serial) {
			days := append([]Observation(nil), drives[i].Days...)
			for j := range days {
				days[j].Reallocated = 1e6 * float64(j)
			}
			drives[i].Days = days
		}
	}
	m, err := TrainModel(drives, DefaultTrainOptions())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := m.Marshal()
	if string(b) != string(EmbeddedModelJSON()) {
		t.Fatal("model changed when only test-split drives changed")
	}
}
