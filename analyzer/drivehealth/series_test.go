package drivehealth

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/ballast-io/ballast/models"
)

func lbl(kv ...string) []models.Label {
	var out []models.Label
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, models.Label{Name: kv[i], Value: kv[i+1]})
	}
	return out
}

// TestReadingsMapEveryProtocol feeds the series an agent exposes for an
// NVMe, an ATA and a SCSI drive and checks every observation field.
func TestReadingsMapEveryProtocol(t *testing.T) {
	var r Readings
	at := t0
	add := func(d, name string, v float64, kv ...string) { r.Add(d, at, name, lbl(kv...), v) }

	add("nvme", models.MetricDriveInfo, 1, "protocol", "NVMe")
	add("nvme", models.MetricDriveSmartHealthy, 1)
	add("nvme", models.MetricDriveTemperature, 41)
	add("nvme", models.MetricDrivePowerOn, 7200)
	add("nvme", models.MetricNVMeCriticalWarning, 1, "bit", "reliability")
	add("nvme", models.MetricNVMeCriticalWarning, 0, "bit", "spare")
	add("nvme", models.MetricNVMeCriticalWarning, 1, "bit", "read_only")
	add("nvme", models.MetricNVMeAvailableSpare, 0.5)
	add("nvme", models.MetricNVMeAvailableSpareThresh, 0.1)
	add("nvme", models.MetricNVMePercentageUsed, 0.25)
	add("nvme", models.MetricNVMeMediaErrors, 7)
	add("nvme", models.MetricNVMeErrorLogEntries, 22)
	add("nvme", models.MetricNVMeWarningTempTime, 120)
	add("nvme", models.MetricNVMeCriticalTempTime, 60)
	add("nvme", models.MetricNVMeUnsafeShutdowns, 3)
	add("nvme", models.MetricNVMeDataRead, 1e12) // not used: ignored
	add("nvme", models.MetricDriveTemperature, math.NaN())

	for _, a := range []struct {
		id              string
		value, thr, raw float64
	}{{"5", 93, 36, 304}, {"197", 100, 0, 2}, {"187", 100, 0, 1}, {"198", 100, 0, 3}, {"194", 30, 0, 0x2d0000001e}, {"9", 80, 0, 44668}, {"10", 30, 97, 0}} {
		add("ata", models.MetricATAAttributeValue, a.value, "attribute_id", a.id)
		add("ata", models.MetricATAAttributeThresh, a.thr, "attribute_id", a.id)
		add("ata", models.MetricATAAttributeRaw, a.raw, "attribute_id", a.id)
	}
	add("scsi", models.MetricSCSIGrownDefects, 260)
	add("scsi", models.MetricSCSIUncorrected, 1, "direction", "read")
	add("scsi", models.MetricSCSIUncorrected, 535, "direction", "write")
	add("scsi", models.MetricSCSIUncorrected, 0, "direction", "verify")
	add("scsi", models.MetricDrivePowerOn, 3600*102880)

	h := r.Histories()
	if len(h) != 3 || r.Len() != 3 {
		t.Fatalf("got %d drives; want 3", len(h))
	}
	n := h["nvme"][0]
	want := NewObservation(at, ProtocolNVMe)
	want.SMARTPassed, want.TemperatureC, want.PowerOnHours = 1, 41, 2
	want.CriticalWarning, want.AvailableSpare, want.SpareThreshold, want.PercentageUsed = cwReliability|cwReadOnly, 50, 10, 25
	want.MediaErrors, want.ErrLogEntries, want.WarningTempMinutes, want.CriticalTempMinutes, want.UnsafeShutdowns = 7, 22, 2, 1, 3
	if !sameObservation(n, want) {
		t.Errorf("NVMe: got %+v; want %+v", n, want)
	}
	a := h["ata"][0]
	if a.Protocol != ProtocolATA || a.Reallocated != 304 || a.Pending != 2 || a.MediaErrors != 4 || a.TemperatureC != 30 ||
		a.PowerOnHours != 44668 || !reflect.DeepEqual(a.FailingAttributes, []int{10}) {
		t.Errorf("ATA: got %+v; want protocol ata, reallocated 304, pending 2, media errors 1+3, 30 °C, 44668 h, attribute 10 failing", a)
	}
	s := h["scsi"][0]
	if s.Protocol != ProtocolSCSI || s.Reallocated != 260 || s.MediaErrors != 536 || s.PowerOnHours != 102880 || known(s.Pending) {
		t.Errorf("SCSI: got %+v; want protocol scsi, grown defects 260, uncorrected 1+535+0, 102880 h", s)
	}
}

func sameObservation(a, b Observation) bool {
	eq := func(x, y float64) bool { return x == y || (math.IsNaN(x) && math.IsNaN(y)) }
	fs := []field{fMediaErrors, fErrLog, fReallocated, fPending, fPercentUsed, fSpare, fWarnTemp, fCritTemp, fUnsafe,
		fPowerOnHours, fCriticalBits, fSMARTPassed, fSpareThreshold,
		func(o *Observation) float64 { return o.TemperatureC }, func(o *Observation) float64 { return o.LatencyVsPeers }}
	for _, f := range fs {
		if !eq(f(&a), f(&b)) {
			return false
		}
	}
	return a.Time.Equal(b.Time) && a.Protocol == b.Protocol && reflect.DeepEqual(a.FailingAttributes, b.FailingAttributes)
}

// TestReadingsHistory: readings at several times make a sorted history;
// the drive-info protocol wins over the families seen.
func TestReadingsHistory(t *testing.T) {
	var r Readings
	for _, k := range []int{3, 1, 2} {
		at := t0.Add(time.Duration(k) * time.Hour)
		r.Add("ds1/sda", at, models.MetricATAAttributeRaw, lbl("attribute_id", "5"), float64(10*k))
		r.Add("ds1/sda", at, models.MetricDriveInfo, lbl("protocol", "SCSI"), 1)
	}
	h := r.Histories()["ds1/sda"]
	if len(h) != 3 || h[0].Reallocated != 10 || h[2].Reallocated != 30 || !h[0].Time.Before(h[1].Time) || h[1].Protocol != ProtocolSCSI {
		t.Errorf("got %+v; want three readings in time order, protocol from drive info", h)
	}
	if got := NodeDevice(lbl("node", "ds03", "device", "nvme2", "serial", "S")); got != "ds03/nvme2" {
		t.Errorf("NodeDevice: got %q; want ds03/nvme2", got)
	}
	if got := NodeDevice(lbl("device", "nvme2")); got != "" {
		t.Errorf("NodeDevice without node: got %q; want empty", got)
	}
}

// TestLevelThresholdsAgreeWithData: the default level thresholds sit where
// the shipped model's level bands (Backblaze train split) say the odds of
// failure become clearly higher: the band that starts at the threshold has
// its whole 95 % interval above 1, the band below it does not.
func TestLevelThresholdsAgreeWithData(t *testing.T) {
	m, err := DefaultModel()
	if err != nil {
		t.Fatal(err)
	}
	opt := DefaultRuleOptions()
	for counter, thr := range map[string]float64{"reallocated": opt.ReallocLevelWarning, "pending": opt.PendingLevelWarning} {
		at, ok := m.LevelOddsFor(counter, thr)
		if !ok || float64(at.From) != thr || !(at.Low > 1) {
			t.Errorf("%s: band at the threshold %v: %+v (found %v); want one starting there with its interval above 1", counter, thr, at, ok)
		}
		if below, ok := m.LevelOddsFor(counter, thr-1); ok && below.Low > 1 {
			t.Errorf("%s: the band below the threshold %v already has odds %v (%v–%v): the threshold is too high", counter, thr, below.OddsRatio, below.Low, below.High)
		}
	}
	// The level finding carries the band's odds with the interval.
	h := daily(1, ProtocolATA, func(_ int, o *Observation) { o.Reallocated = 304 })
	fs := Analyze("ds1/sdb", h, lastTime(h), m, opt)
	var or *models.Evidence
	for i := range fs {
		for j := range fs[i].Evidence {
			if fs[i].Evidence[j].Name == "failure_odds_ratio" {
				or = &fs[i].Evidence[j]
			}
		}
	}
	if or == nil || or.Value <= 1 {
		t.Fatalf("findings %+v; want a failure_odds_ratio above 1 for 304 reallocated sectors", fs)
	}
	if b, _ := m.LevelOddsFor("reallocated", 304); or.Value != float64(b.OddsRatio) {
		t.Errorf("odds ratio %v; want the model's band value %v", or.Value, b.OddsRatio)
	}
}
