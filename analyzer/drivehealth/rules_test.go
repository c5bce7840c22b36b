package drivehealth

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ballast-io/ballast/models"
)

var t0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// hist builds n observations of protocol p, one per step, letting set fill
// reading i.
func hist(n int, step time.Duration, p Protocol, set func(i int, o *Observation)) []Observation {
	h := make([]Observation, n)
	for i := range h {
		h[i] = NewObservation(t0.Add(time.Duration(i)*step), p)
		set(i, &h[i])
	}
	return h
}

func daily(n int, p Protocol, set func(i int, o *Observation)) []Observation {
	return hist(n, day, p, set)
}

func lastTime(h []Observation) time.Time { return h[len(h)-1].Time }

// hitsOf returns "rule/severity" for every hit, for compact comparisons.
func hitsOf(h []Observation) string {
	var s []string
	for _, x := range EvaluateRules(h, lastTime(h), DefaultRuleOptions()) {
		s = append(s, x.Rule+"/"+string(x.Severity))
	}
	return strings.Join(s, ",")
}

func check(t *testing.T, name string, h []Observation, want string) {
	t.Helper()
	if got := hitsOf(h); got != want {
		t.Errorf("%s: got hits %q; want %q", name, got, want)
	}
}

func TestRuleCriticalWarning(t *testing.T) {
	for _, c := range []struct {
		bits float64
		want string
	}{
		{0, ""},
		{0x10, "nvme_critical_warning/critical"},
		{0x04, "nvme_critical_warning/critical"},
		{0x08, "nvme_critical_warning/critical"},
		{0x02, "nvme_critical_warning/warning"},
		{0x06, "nvme_critical_warning/critical"},
	} {
		h := daily(1, ProtocolNVMe, func(_ int, o *Observation) { o.CriticalWarning = c.bits })
		check(t, fmt.Sprintf("bits 0x%02x", int(c.bits)), h, c.want)
	}
}

func TestRuleSpare(t *testing.T) {
	below := daily(1, ProtocolNVMe, func(_ int, o *Observation) { o.AvailableSpare, o.SpareThreshold = 8, 10 })
	check(t, "below threshold", below, "spare_below_threshold/critical")
	falling := daily(20, ProtocolNVMe, func(i int, o *Observation) { o.AvailableSpare, o.SpareThreshold = float64(40-i), 10 })
	check(t, "falling to 21 (11 above threshold)", falling, "")
	falling = daily(30, ProtocolNVMe, func(i int, o *Observation) { o.AvailableSpare, o.SpareThreshold = float64(40-i), 10 })
	check(t, "falling to 11 (1 above threshold)", falling, "spare_falling/warning")
	steady := daily(30, ProtocolNVMe, func(i int, o *Observation) { o.AvailableSpare, o.SpareThreshold = 15, 10 })
	check(t, "steady near threshold", steady, "")
}

func TestRuleWearout(t *testing.T) {
	worn := daily(3, ProtocolNVMe, func(_ int, o *Observation) {
		o.PercentageUsed, o.AvailableSpare, o.SpareThreshold = 100, 100, 10
	})
	check(t, "100% used, spare fine", worn, "wearout/warning")
	a := Assess(worn, lastTime(worn), nil, DefaultRuleOptions())
	if a.Risk != 0 {
		t.Errorf("worn-out drive with spare fine: got failure risk %v; want 0", a.Risk)
	}
	fs := Analyze("ds1/nvme0n1", worn, lastTime(worn), nil, DefaultRuleOptions())
	if len(fs) != 1 || fs[0].Kind != KindWearout {
		t.Fatalf("got findings %+v; want exactly one drive_wearout", fs)
	}
	check(t, "92% used, flat", daily(3, ProtocolNVMe, func(_ int, o *Observation) { o.PercentageUsed = 92 }), "wearout/info")
	// 1 point per day from 20 %: 100 % in 50 days, inside the 90-day horizon.
	check(t, "fast wear", daily(31, ProtocolNVMe, func(i int, o *Observation) { o.PercentageUsed = float64(i) + 20 }), "wearout/warning")
	check(t, "slow wear", daily(31, ProtocolNVMe, func(i int, o *Observation) { o.PercentageUsed = 20 + float64(i)/30 }), "")
	spent := daily(3, ProtocolNVMe, func(_ int, o *Observation) {
		o.PercentageUsed, o.AvailableSpare, o.SpareThreshold = 100, 5, 10
	})
	check(t, "worn and spare gone", spent, "spare_below_threshold/critical")
}

func TestRuleMediaErrors(t *testing.T) {
	check(t, "rising by 1", daily(10, ProtocolNVMe, func(i int, o *Observation) { o.MediaErrors = float64(i / 9) }), "media_errors_growth/warning")
	check(t, "rising by 20", daily(10, ProtocolNVMe, func(i int, o *Observation) { o.MediaErrors = float64(2 * i) }), "media_errors_growth/critical")
	// A burst 60 days ago, flat since: information, not failing forever.
	old := daily(90, ProtocolNVMe, func(i int, o *Observation) {
		o.MediaErrors = 0
		if i >= 30 {
			o.MediaErrors = 500
		}
	})
	check(t, "old burst", old, "media_errors_level/info")
	if fs := Analyze("d", old, lastTime(old), nil, DefaultRuleOptions()); len(fs) != 0 {
		t.Errorf("old burst: got findings %+v; want none (information only)", fs)
	}
	// A burst 20 days ago, flat since: the level still warns (not yet
	// stable for the long window).
	recent := daily(40, ProtocolNVMe, func(i int, o *Observation) {
		o.MediaErrors = 0
		if i >= 20 {
			o.MediaErrors = 500
		}
	})
	check(t, "burst 20 days ago", recent, "media_errors_level/warning")
	if hits := EvaluateRules(recent, lastTime(recent), DefaultRuleOptions()); len(hits) != 1 || !strings.Contains(hits[0].Summary, "unchanged over 19 days of readings") {
		t.Errorf("burst 20 days ago: got %+v; want the summary to say how long the count has been unchanged", hits)
	}
	minutes := hist(30, time.Minute, ProtocolNVMe, func(_ int, o *Observation) { o.MediaErrors = 7 })
	if hits := EvaluateRules(minutes, lastTime(minutes), DefaultRuleOptions()); len(hits) != 1 || !strings.Contains(hits[0].Summary, "unchanged over 29 minutes") {
		t.Errorf("30 readings a minute apart: got %+v; want \"unchanged over 29 minutes\"", hits)
	}
}

// TestRuleLevelFromOneReading: a lone reading is judged by its level — the
// issue's Samsung 970 EVO with 7 media errors and smart status PASSED warns,
// with the count, the single reading and why in the evidence.
func TestRuleLevelFromOneReading(t *testing.T) {
	one := daily(1, ProtocolNVMe, func(_ int, o *Observation) {
		o.MediaErrors, o.ErrLogEntries, o.SMARTPassed, o.CriticalWarning = 7, 22, 1, 0
	})
	check(t, "NVMe 7 media errors", one, "media_errors_level/warning")
	fs := Analyze("ds1/nvme0", one, lastTime(one), nil, DefaultRuleOptions())
	if len(fs) != 1 || fs[0].Kind != KindFailureRisk || fs[0].Severity != models.SeverityWarning {
		t.Fatalf("got %+v; want one drive_failure_risk warning", fs)
	}
	ev := map[string]models.Evidence{}
	for _, e := range fs[0].Evidence {
		ev[e.Name] = e
	}
	if ev["media_errors"].Value != 7 || ev["readings"].Value != 1 || !strings.Contains(ev["readings"].Note, "unknown") ||
		!strings.Contains(ev["media_errors_level_warning"].Note, "uncertain") {
		t.Errorf("evidence %+v; want the count, one reading with growth unknown, and the uncertainty", fs[0].Evidence)
	}
	check(t, "NVMe noisy error log only", daily(1, ProtocolNVMe, func(_ int, o *Observation) {
		o.MediaErrors, o.ErrLogEntries, o.SMARTPassed, o.CriticalWarning = 0, 40, 1, 0
	}), "")
	check(t, "ATA 304 reallocated", daily(1, ProtocolATA, func(_ int, o *Observation) { o.Reallocated, o.Pending = 304, 0 }), "reallocated_level/warning")
	check(t, "ATA 4 reallocated", daily(1, ProtocolATA, func(_ int, o *Observation) { o.Reallocated, o.Pending = 4, 0 }), "")
	check(t, "ATA 2 pending", daily(1, ProtocolATA, func(_ int, o *Observation) { o.Reallocated, o.Pending = 0, 2 }), "pending_level/warning")
	check(t, "ATA pending placeholder", daily(1, ProtocolATA, func(_ int, o *Observation) { o.Reallocated, o.Pending = 0, 65535 }), "")
	check(t, "ATA 1 uncorrectable", daily(1, ProtocolATA, func(_ int, o *Observation) { o.MediaErrors = 1 }), "media_errors_level/warning")
	check(t, "SCSI 260 grown defects", daily(1, ProtocolSCSI, func(_ int, o *Observation) { o.Reallocated = 260 }), "reallocated_level/warning")
	// Off when the option is 0.
	opt := DefaultRuleOptions()
	opt.MediaErrorsLevelWarning = 0
	if hits := EvaluateRules(one, lastTime(one), opt); len(hits) != 0 {
		t.Errorf("level rule off: got %+v; want no hits", hits)
	}
}

func TestRuleErrorLogAloneIsNotFailure(t *testing.T) {
	noisy := daily(30, ProtocolNVMe, func(i int, o *Observation) {
		o.ErrLogEntries, o.MediaErrors = float64(1000*i), 0
		o.AvailableSpare, o.SpareThreshold, o.PercentageUsed, o.CriticalWarning = 100, 10, 3, 0
	})
	check(t, "error log growing, no media errors", noisy, "")
	both := daily(30, ProtocolNVMe, func(i int, o *Observation) {
		o.ErrLogEntries, o.MediaErrors = float64(1000*i), float64(i)
	})
	hits := EvaluateRules(both, lastTime(both), DefaultRuleOptions())
	if len(hits) != 1 {
		t.Fatalf("got %d hits; want 1", len(hits))
	}
	found := false
	for _, e := range hits[0].Evidence {
		if e.Name == "error_log_entries_delta_short" && e.Value == 7000 {
			found = true
		}
	}
	if !found {
		t.Errorf("media-error hit lacks the error-log growth evidence: %+v", hits[0].Evidence)
	}
}

func TestRuleReallocated(t *testing.T) {
	check(t, "static 20000 for 40 days", daily(40, ProtocolATA, func(_ int, o *Observation) { o.Reallocated = 20000 }), "reallocated_level/info")
	check(t, "static 20000 for 10 days", daily(10, ProtocolATA, func(_ int, o *Observation) { o.Reallocated = 20000 }), "reallocated_level/warning")
	check(t, "+3 in a week", daily(10, ProtocolATA, func(i int, o *Observation) { o.Reallocated = float64(i / 3) }), "reallocated_growth/info")
	check(t, "+14 in a week", daily(10, ProtocolATA, func(i int, o *Observation) { o.Reallocated = float64(2 * i) }), "reallocated_growth/warning")
	check(t, "+350 in a week", daily(10, ProtocolATA, func(i int, o *Observation) { o.Reallocated = float64(50 * i) }), "reallocated_growth/critical")
	// SCSI grown defects use the same counter.
	check(t, "SCSI grown defects", daily(10, ProtocolSCSI, func(i int, o *Observation) { o.Reallocated = float64(50 * i) }), "reallocated_growth/critical")
	// A counter that goes down (drive swapped, counter reset) is no rise.
	check(t, "reset", daily(10, ProtocolATA, func(i int, o *Observation) { o.Reallocated = float64(9 - i) }), "")
}

func TestRulePending(t *testing.T) {
	check(t, "pending +1", daily(10, ProtocolATA, func(i int, o *Observation) { o.Pending = float64(i / 9) }), "pending_growth/warning")
	check(t, "pending +30", daily(10, ProtocolATA, func(i int, o *Observation) { o.Pending = float64(5 * i) }), "pending_growth/critical")
	check(t, "pending steady 8", daily(40, ProtocolATA, func(_ int, o *Observation) { o.Pending = 8 }), "pending_level/info")
}

func TestRuleSMARTStatus(t *testing.T) {
	check(t, "failed", daily(1, ProtocolATA, func(_ int, o *Observation) { o.SMARTPassed = 0 }), "smart_status_failed/critical")
	check(t, "passed", daily(1, ProtocolATA, func(_ int, o *Observation) { o.SMARTPassed = 1 }), "")
	check(t, "attribute at threshold", daily(1, ProtocolATA, func(_ int, o *Observation) { o.FailingAttributes = []int{5} }), "ata_attribute_failing/critical")
}

func TestRuleTemperature(t *testing.T) {
	hot := hist(7*24, time.Hour, ProtocolNVMe, func(i int, o *Observation) {
		o.TemperatureC = 50
		if i >= 100 {
			o.TemperatureC = 75
		}
	})
	check(t, "67 h above 70 °C", hot, "temperature_time/warning")
	brief := hist(7*24, time.Hour, ProtocolNVMe, func(i int, o *Observation) {
		o.TemperatureC = 50
		if i%24 == 0 {
			o.TemperatureC = 75
		}
	})
	check(t, "7 h above 70 °C", brief, "")
	check(t, "warning temperature time", daily(5, ProtocolNVMe, func(i int, o *Observation) { o.WarningTempMinutes = float64(40 * i) }), "temperature_time/warning")
	check(t, "critical temperature time", daily(5, ProtocolNVMe, func(i int, o *Observation) { o.CriticalTempMinutes = float64(i / 4) }), "temperature_time/warning")
}

func TestRuleUnsafeShutdowns(t *testing.T) {
	check(t, "5 in a week", daily(8, ProtocolNVMe, func(i int, o *Observation) { o.UnsafeShutdowns = float64(10 + i) }), "unsafe_shutdowns/warning")
	check(t, "1 in a week", daily(8, ProtocolNVMe, func(i int, o *Observation) { o.UnsafeShutdowns = float64(10 + i/7) }), "")
}

func TestRuleLatency(t *testing.T) {
	ratios := func(rs ...float64) []Observation {
		return hist(len(rs), 15*time.Minute, ProtocolNVMe, func(i int, o *Observation) { o.LatencyVsPeers = rs[i] })
	}
	check(t, "persistent 4×", ratios(1, 4, 5, 4, 6), "latency_outlier/warning")
	check(t, "persistent 12×", ratios(12, 15, 12, 20), "latency_outlier/critical")
	check(t, "one spike", ratios(1, 1, 20, 1, 1), "")
	check(t, "not sustained", ratios(1, 1, 1, 9, 9), "")
	sparse := hist(3, 40*time.Minute, ProtocolNVMe, func(_ int, o *Observation) { o.LatencyVsPeers = 9 })
	check(t, "two readings in the window", sparse, "")
}

func TestRulesIgnoreTheFuture(t *testing.T) {
	h := daily(20, ProtocolATA, func(i int, o *Observation) {
		o.Pending = 0
		if i >= 15 {
			o.Pending = 100
		}
	})
	if hits := EvaluateRules(h, h[10].Time, DefaultRuleOptions()); len(hits) != 0 {
		t.Errorf("at day 10: got %d hits; want none (the rise is on day 15)", len(hits))
	}
	if hits := EvaluateRules(h, h[15].Time, DefaultRuleOptions()); len(hits) != 1 || hits[0].Severity != models.SeverityCritical {
		t.Errorf("at day 15: got %+v; want one critical pending hit", hits)
	}
}

func TestFindingsValidAndStable(t *testing.T) {
	h := daily(10, ProtocolATA, func(i int, o *Observation) { o.Pending, o.Reallocated = float64(5*i), float64(30*i) })
	m, err := DefaultModel()
	if err != nil {
		t.Fatal(err)
	}
	f1 := Analyze("ds2/sda", h[:9], h[8].Time, m, DefaultRuleOptions())
	f2 := Analyze("ds2/sda", h, h[9].Time, m, DefaultRuleOptions())
	if len(f1) != 1 || len(f2) != 1 {
		t.Fatalf("got %d and %d findings; want 1 each", len(f1), len(f2))
	}
	for _, f := range append(f1, f2...) {
		if err := f.Validate(); err != nil {
			t.Error(err)
		}
		if f.Kind != KindFailureRisk || f.Severity != models.SeverityCritical || f.Score < 0.99 {
			t.Errorf("got %s/%s score %v; want a critical drive_failure_risk", f.Kind, f.Severity, f.Score)
		}
	}
	if f1[0].ID != f2[0].ID || !f1[0].Start.Equal(f2[0].Start) {
		t.Errorf("finding identity moved: %s@%s vs %s@%s", f1[0].ID, f1[0].Start, f2[0].ID, f2[0].Start)
	}
	if !f2[0].LastSeen.Equal(h[9].Time) {
		t.Errorf("last seen %s; want %s", f2[0].LastSeen, h[9].Time)
	}
	healthy := daily(10, ProtocolATA, func(i int, o *Observation) { o.Pending, o.Reallocated, o.TemperatureC = 0, 0, 30 })
	if fs := Analyze("ds2/sdb", healthy, lastTime(healthy), m, DefaultRuleOptions()); len(fs) != 0 {
		t.Errorf("healthy drive: got %+v; want no findings", fs)
	}
}

// TestModelFindingStartsWhenRiskRose: a finding raised by the model alone
// dates from the first reading of the current run above its threshold.
func TestModelFindingStartsWhenRiskRose(t *testing.T) {
	m, err := DefaultModel()
	if err != nil {
		t.Fatal(err)
	}
	thr, _ := m.ThresholdAt(0.01)
	// Reallocated jumps on day 10 and then stays: the growth rules go quiet
	// after a week but the model still sees a large, recent count.
	h := daily(14, ProtocolATA, func(i int, o *Observation) {
		o.Reallocated, o.Pending, o.TemperatureC, o.PowerOnHours = 0, 0, 25, 20000
		if i >= 10 {
			o.Reallocated, o.Pending = 3000, 40
		}
	})
	a := Assess(h, lastTime(h), m, DefaultRuleOptions())
	if !(a.ModelRisk > thr) {
		t.Fatalf("model risk %v not above its 1 %% threshold %v", a.ModelRisk, thr)
	}
	if !a.ModelSince.Equal(h[10].Time) {
		t.Errorf("model since %s; want %s (the jump)", a.ModelSince, h[10].Time)
	}
	fs := Findings(models.Subject{Kind: models.SubjectDevice, ID: "x"}, a, m, lastTime(h))
	if len(fs) != 1 || !fs[0].Start.Equal(h[10].Time) {
		t.Fatalf("got %+v; want one finding starting on day 10", fs)
	}
	if a.Window == nil || !(a.Window.ToDays >= a.Window.FromDays) {
		t.Errorf("window %+v; want a failure window for a high risk", a.Window)
	}
}

// TestScoresUseOnlyThePast: every day's score of every drive is the same
// whether or not the later days exist.
func TestScoresUseOnlyThePast(t *testing.T) {
	m, err := DefaultModel()
	if err != nil {
		t.Fatal(err)
	}
	opt := DefaultRuleOptions()
	for _, d := range loadDrives(t) {
		if len(d.Days) < 20 || !(d.Failed || d.Serial < "6") {
			continue
		}
		full := ScoreDrive(&d, m, opt)
		cut := d
		cut.Days = d.Days[:len(d.Days)/2]
		for i, s := range ScoreDrive(&cut, m, opt) {
			if s.Risk != full[i].Risk || len(s.Explanation) != len(full[i].Explanation) {
				t.Fatalf("%s %s: risk %v with later days, %v without", d.Serial, s.Date, full[i].Risk, s.Risk)
			}
		}
	}
}

func TestExplanationPercentiles(t *testing.T) {
	f := ModelFeature{Healthy: make([]num, len(healthyPercentiles))}
	for i, p := range healthyPercentiles {
		f.Healthy[i] = num(p) // the value at percentile p is p
	}
	for v, want := range map[float64]float64{-1: 0, 0: 0, 0.5: 0, 15: 10, 99.7: 99.5, 100: 99.9, 101: 100} {
		if got := f.percentile(v); got != want {
			t.Errorf("percentile(%v): got %v; want %v", v, got, want)
		}
	}
}
