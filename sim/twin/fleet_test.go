package twin

import (
	"math"
	"math/rand/v2"
	"testing"
)

const fleetScenario = `
name: fleet
topology:
  data_servers: [{count: 16, drives: 12, pool: fast}]
  clients: [{count: 1, gpus: 8}]
datasets: [{name: d, pool: fast, files: 64, file_size_mb: 1000}]
workloads:
  - {name: j, kind: training, clients: gpu, dataset: d, samples_per_sec: 1000, bytes_per_sample: 200000}
`

// TestHealthyFleetNoise: 192 healthy drives do not all read spare 100,
// error log 0 and one temperature; what they read comes from the real
// healthy captures; a seed gives the same fleet every time.
func TestHealthyFleetNoise(t *testing.T) {
	tw := build(t, fleetScenario)
	tw.Run(60)
	var spareLow, errLogged int
	lo, hi := math.Inf(1), math.Inf(-1)
	for i := 0; i < 16; i++ {
		hs, err := tw.Smart(tw.ds[i].name)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hs {
			if h.AvailableSpare < 100 {
				spareLow++
			}
			if h.AvailableSpare < 93 || h.MediaErrors != 0 || h.CriticalWarning != 0 {
				t.Fatalf("%s: a healthy drive outside the captures: %+v", h.Device, h)
			}
			if h.ErrorLogEntries > 0 {
				errLogged++
			}
			lo, hi = min(lo, h.TemperatureC), max(hi, h.TemperatureC)
		}
	}
	// the captures: 12 of 54 below 100 % spare, 14 of 54 with log entries,
	// temperatures 11–44 °C
	if spareLow < 192*5/54 || spareLow > 192*24/54 {
		t.Errorf("%d of 192 drives below 100 %% spare; want about 192 × 12/54", spareLow)
	}
	if errLogged < 192*6/54 || errLogged > 192*26/54 {
		t.Errorf("%d of 192 drives with error-log entries; want about 192 × 14/54", errLogged)
	}
	if hi-lo < 15 {
		t.Errorf("drive temperatures %v–%v °C; want the captures' spread", lo, hi)
	}
	again := build(t, fleetScenario)
	for d := range tw.dev {
		if a, b := tw.dev[d].smart, again.dev[d].smart; a.spare != b.spare || a.errLog != b.errLog || tw.dev[d].fleet.tempOffC != again.dev[d].fleet.tempOffC {
			t.Fatalf("drive %d drew differently for one seed", d)
		}
	}
}

// TestBackgroundErrorLogIsNotEvidence: a drive's healthy error-log entries
// accrue at its drawn rate and are never a failing drive's evidence.
func TestBackgroundErrorLogIsNotEvidence(t *testing.T) {
	tw := build(t, fleetScenario)
	d := int32(0)
	f := &tw.dev[d].fleet
	*f = fleetNoise{errLogPerS: 1.0 / 60}
	f.rng = rand.New(rand.NewPCG(1, 2))
	f.nextErrLog = f.rng.ExpFloat64() / f.errLogPerS
	before := tw.dev[d].smart.errLog
	base := tw.smartEvidence(d)
	for now := 0.0; now <= 6*3600; now += 60 {
		tw.tickFleet(d, now)
	}
	got := tw.dev[d].smart.errLog - before
	if got < 300 || got > 420 { // Poisson, mean 360
		t.Errorf("%v background entries in 6 h at one a minute", got)
	}
	if e := tw.smartEvidence(d); e.errLog != base.errLog {
		t.Errorf("background entries counted as evidence: %v → %v", base.errLog, e.errLog)
	}
}

// TestStepGapsAreTheHosts: a GPU that never waits for data reads a little
// under 1, differently each tick, and its idle is charged to no storage
// cause.
func TestStepGapsAreTheHosts(t *testing.T) {
	tw := build(t, ampleStorage)
	var sum, sq float64
	n := 600
	for i := 0; i < n; i++ {
		tw.Step()
		u := tw.gpus[0].busy
		sum += u
		sq += u * u
	}
	mean := sum / float64(n)
	sd := math.Sqrt(sq/float64(n) - mean*mean)
	if mean < 0.98 || mean > 0.99 || sd < 0.008 {
		t.Errorf("a fed GPU: utilisation %.4f ± %.4f; want 1 − 0.016 ± 0.012 (|N(0, 0.02)| gaps)", mean, sd)
	}
	for cause, sec := range tw.GPUStats().IdleByCause {
		if cause != "loader" && sec > 0 {
			t.Errorf("%.1f GPU-s of a fed GPU's idle charged to %s", sec, cause)
		}
	}
}

// TestDriveLatencyNoise: every drive's latency jitters by about 5 % a tick,
// and about once a drive-hour a drive slows 1.5–3× for 1–4 s.
func TestDriveLatencyNoise(t *testing.T) {
	tw := build(t, fleetScenario)
	var sum, sq float64
	n, stalls := 0, 0
	inStall := make([]bool, len(tw.dev))
	for tick := 0; tick < 7200; tick++ {
		tw.drawLatencyNoise(float64(tick))
		for d := range tw.dev {
			f := &tw.dev[d].fleet
			on := float64(tick) < f.stallUntil
			if on && !inStall[d] {
				stalls++
				if f.stallBy < 1.5 || f.stallBy > 3 || f.stallUntil-float64(tick) > 4 {
					t.Fatalf("drive %d: slowdown ×%v until %v at %d", d, f.stallBy, f.stallUntil, tick)
				}
			}
			inStall[d] = on
			if !on {
				l := math.Log(f.latNoise)
				sum += l
				sq += l * l
				n++
			}
		}
	}
	mean := sum / float64(n)
	sd := math.Sqrt(sq/float64(n) - mean*mean)
	if math.Abs(mean) > 0.002 || sd < 0.045 || sd > 0.055 {
		t.Errorf("log latency jitter %.4f ± %.4f; want 0 ± 0.05", mean, sd)
	}
	// 192 drives for 2 h at one an hour: 384 (Poisson, sd 20)
	if stalls < 300 || stalls > 470 {
		t.Errorf("%d slowdowns in 384 drive-hours; want about 384", stalls)
	}
}
