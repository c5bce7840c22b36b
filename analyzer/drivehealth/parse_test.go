package drivehealth

import (
	"strings"
	"testing"
)

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
