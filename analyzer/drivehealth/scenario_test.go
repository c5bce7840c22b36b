package drivehealth

import (
	"bytes"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"
)

// scenarioDrives scripts three NVMe drives over 60 days:
//   - degrading: noisy error log from day 0, a burst of unsafe shutdowns on
//     days 20–22, media errors from day 35, spare falling from day 40,
//     critical warning 0x01 once the spare crosses its threshold, latency
//     outliers in the last days (readings every 15 minutes on those days);
//   - worn: percentage used climbing 1 %/day from 85 % with spare fine;
//   - burst: 50 media errors on day 5, none after.
func scenarioDrives() map[string][]Observation {
	out := map[string][]Observation{}
	deg := daily(60, ProtocolNVMe, func(i int, o *Observation) {
		o.SMARTPassed, o.CriticalWarning = 1, 0
		o.AvailableSpare, o.SpareThreshold, o.PercentageUsed = 100, 10, 30
		o.ErrLogEntries, o.MediaErrors, o.UnsafeShutdowns = float64(25*i), 0, 3
		o.TemperatureC = 45
		if i >= 20 {
			o.UnsafeShutdowns = 3 + float64(min(i-19, 3))*2
		}
		if i >= 35 {
			o.MediaErrors = float64((i - 34) * (i - 34))
		}
		if i >= 40 {
			o.AvailableSpare = max(100-float64(i-39)*6, 0)
		}
		if o.AvailableSpare <= o.SpareThreshold {
			o.CriticalWarning, o.SMARTPassed = cwSpare, 0
		}
	})
	// Latency: three 15-minute readings at 5× the peers on each of the last
	// two days (the day reading itself carries none).
	var withLat []Observation
	for i, o := range deg {
		withLat = append(withLat, o)
		if i >= 58 {
			for k := 1; k <= 3; k++ {
				l := NewObservation(o.Time.Add(-15*time.Duration(k)*time.Minute), ProtocolNVMe)
				l.LatencyVsPeers = 5
				withLat = append(withLat[:len(withLat)-1], append([]Observation{l}, withLat[len(withLat)-1])...)
			}
		}
	}
	out["ds1:nvme0n1 degrading"] = sortedByTime(withLat)
	out["ds1:nvme1n1 worn"] = daily(60, ProtocolNVMe, func(i int, o *Observation) {
		o.AvailableSpare, o.SpareThreshold, o.PercentageUsed, o.CriticalWarning = 100, 10, min(85+float64(i)/2, 100), 0
	})
	out["ds2:nvme0n1 burst"] = daily(60, ProtocolNVMe, func(i int, o *Observation) {
		o.AvailableSpare, o.SpareThreshold, o.PercentageUsed, o.CriticalWarning, o.MediaErrors = 100, 10, 5, 0, 0
		if i >= 5 {
			o.MediaErrors = 50
		}
	})
	return out
}

func sortedByTime(h []Observation) []Observation {
	sort.SliceStable(h, func(a, b int) bool { return h[a].Time.Before(h[b].Time) })
	return h
}

// TestScenarioGolden replays the scripted drives day by day through Analyze
// and compares the findings with testdata/scenario.golden (-update rewrites).
func TestScenarioGolden(t *testing.T) {
	drives := scenarioDrives()
	names := make([]string, 0, len(drives))
	for n := range drives {
		names = append(names, n)
	}
	sort.Strings(names)
	var b bytes.Buffer
	for _, name := range names {
		h := drives[name]
		prev := ""
		for d := 0; d < 60; d++ {
			now := t0.Add(time.Duration(d) * day)
			var parts []string
			for _, f := range Analyze(name, h, now, nil, DefaultRuleOptions()) {
				if err := f.Validate(); err != nil {
					t.Fatal(err)
				}
				var ev []string
				for _, e := range f.Evidence {
					ev = append(ev, e.Series)
				}
				parts = append(parts, fmt.Sprintf("%s/%s since day %d score %.2f [%s]", f.Kind, f.Severity,
					int(f.Start.Sub(t0)/day), f.Score, strings.Join(dedup(ev), ",")))
			}
			line := strings.Join(parts, "; ")
			if line == "" {
				line = "-"
			}
			if line != prev { // print only changes
				fmt.Fprintf(&b, "%-22s day %2d: %s\n", name, d, line)
				prev = line
			}
		}
	}
	const golden = "testdata/scenario.golden"
	if *update {
		if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Errorf("scenario findings differ from %s (run with -update and review):\n%s", golden, b.String())
	}
}

func dedup(s []string) []string {
	var out []string
	for _, v := range s {
		if len(out) == 0 || out[len(out)-1] != v {
			out = append(out, v)
		}
	}
	return out
}
