package twin

import (
	"math"
	"math/rand/v2"
)

// Healthy-fleet noise (docs/scenarios.md, "Healthy drives"): a real fleet's
// healthy NVMe drives do not all read spare 100 %, wear 0 and error log 0,
// nor sit at one temperature. Each simulated drive takes the health
// history of one real healthy drive, drawn from healthyNVMe: its available
// spare, a percentage used at least that drive's, its error-log entries and
// their rate per power-on hour, and its composite temperature's distance
// from the captures' median (slot, airflow and firmware offsets). The data
// hall's air follows a daily swing (ambientSwingC). Failing drives start
// from the same draws, so a detector cannot tell them by a clean history.

// healthyNVMe holds the health fields of every NVMe capture in
// analyzer/drivehealth/testdata/smartctl (smartctl_exporter's testdata,
// Apache-2.0; copied from ../shared/fixtures/smartctl) whose SMART status
// is PASSED with no media errors and no critical warning: 54 drives.
// Fields: available spare %, percentage used, error-log entries, power-on
// hours, composite temperature °C; the comment names the capture.
var healthyNVMe = [...]struct{ spare, used, errLog, powerOnH, tempC float64 }{
	{100, 0, 0, 12164, 29},  // INTEL_SSDPE2KX080T8_1
	{99, 0, 0, 12164, 30},   // INTEL_SSDPE2KX080T8_3
	{100, 0, 0, 12164, 29},  // INTEL_SSDPE2KX080T8_4
	{99, 0, 0, 12671, 30},   // INTEL_SSDPE2KX080T8_5
	{100, 0, 0, 12671, 30},  // INTEL_SSDPE2KX080T8_6
	{100, 0, 0, 12671, 31},  // INTEL_SSDPE2KX080T8_7
	{100, 1, 0, 12173, 37},  // KXG60ZNV512G_TOSHIBA_2
	{100, 4, 0, 12728, 35},  // KXG60ZNV512G_TOSHIBA_8
	{100, 0, 14, 20701, 40}, // SAMSUNG_MZQLB1T9HAJR-00007_19
	{100, 0, 14, 20701, 41}, // SAMSUNG_MZQLB1T9HAJR-00007_20
	{100, 16, 0, 10423, 29}, // SAMSUNG_MZVL21T0HCLR-00B00_23
	{100, 16, 0, 10407, 30}, // SAMSUNG_MZVL21T0HCLR-00B00_24
	{100, 0, 1, 10147, 26},  // nvme-null-CT250P2SSD8-nvme0
	{100, 5, 34, 482, 40},   // nvme-null-HUSMR7632BHP301-nvme0
	{100, 1, 0, 41159, 31},  // nvme-null-INTEL_MEMPEK1W032GA-nvme0
	{100, 0, 0, 4236, 31},   // nvme-null-INTEL_SSDPE2KE016T8-nvme0
	{99, 3, 0, 26055, 14},   // nvme-null-INTEL_SSDPE2KE020T7-nvme0
	{100, 0, 0, 4643, 40},   // nvme-null-INTEL_SSDPE2KE032T8-nvme0
	{99, 73, 0, 8843, 36},   // nvme-null-INTEL_SSDPE2KX010T8-nvme1
	{99, 75, 0, 49441, 19},  // nvme-null-INTEL_SSDPE2KX020T7-nvme6
	{100, 22, 0, 36959, 29}, // nvme-null-INTEL_SSDPE2KX020T8-nvme2
	{100, 0, 0, 2434, 29},   // nvme-null-INTEL_SSDPE2KX040T8-nvme10
	{98, 0, 0, 22944, 11},   // nvme-null-INTEL_SSDPE2MX450G7-nvme0
	{100, 18, 0, 17259, 28}, // nvme-null-INTEL_SSDPEDKE020T7-nvme0
	{99, 41, 0, 57288, 21},  // nvme-null-INTEL_SSDPEDMD016T4-nvme0
	{100, 5, 0, 41951, 28},  // nvme-null-INTEL_SSDPEDMD400G4-nvme0
	{93, 51, 0, 54704, 30},  // nvme-null-INTEL_SSDPEDMD800G4-nvme0
	{100, 0, 0, 3752, 44},   // nvme-null-INTEL_SSDPEK1A058GA-nvme0
	{100, 0, 0, 4637, 38},   // nvme-null-INTEL_SSDPF2KE032T1-nvme0
	{98, 0, 0, 4454, 29},    // nvme-null-INTEL_SSDPF2KX038T1-nvme5
	{100, 0, 0, 2435, 29},   // nvme-null-INTEL_SSDPF2KX038TZ-nvme4
	{100, 69, 1, 29891, 32}, // nvme-null-MTFDHAX1T6MCE-1AN1ZABYY-nvme0
	{100, 0, 1, 5100, 22},   // nvme-null-Micron_7300_MTFDHBE1T6TDG-nvme0
	{100, 9, 0, 27233, 26},  // nvme-null-Micron_7300_MTFDHBE1T9TDF-nvme0
	{100, 0, 1, 3820, 38},   // nvme-null-Micron_7300_MTFDHBE3T2TDG-nvme0
	{99, 2, 0, 8833, 26},    // nvme-null-Micron_7300_MTFDHBE3T8TDF-nvme3
	{100, 10, 0, 26686, 27}, // nvme-null-Micron_7300_MTFDHBE960TDF-nvme0
	{100, 4, 40, 13108, 35}, // nvme-null-Micron_7400_MTFDKCB1T6TFC-nvme2
	{100, 5, 17, 9099, 33},  // nvme-null-Micron_7400_MTFDKCB1T9TDZ-nvme10
	{100, 0, 9, 10346, 24},  // nvme-null-Micron_7400_MTFDKCB3T2TFC-nvme2
	{100, 0, 15, 2436, 31},  // nvme-null-Micron_7400_MTFDKCB3T8TDZ-nvme3
	{100, 0, 0, 150, 27},    // nvme-null-Micron_7450_MTFDKCB3T8TFR-nvme6
	{100, 0, 0, 2884, 33},   // nvme-null-Micron_7450_MTFDKCC3T2TFS-nvme1
	{100, 0, 0, 2436, 25},   // nvme-null-Micron_7450_MTFDKCC3T8TFR-nvme11
	{100, 0, 8, 285, 24},    // nvme-null-Micron_9300_MTFDHAL3T8TDP-nvme0
	{100, 0, 0, 861, 33},    // nvme-null-SAMSUNG_MZPLJ6T4HALA-00007-nvme0
	{100, 6, 0, 28074, 40},  // nvme-null-SAMSUNG_MZPLL1T6HAJQ-00005-nvme0
	{100, 1, 0, 26605, 36},  // nvme-null-SAMSUNG_MZPLL1T6HEHP-00003-nvme0
	{100, 0, 0, 13138, 38},  // nvme-null-SAMSUNG_MZPLL3T2HAJQ-00005-nvme1
	{100, 6, 0, 50235, 40},  // nvme-null-SAMSUNG_MZPLL3T2HMLS-00003-nvme1
	{100, 3, 0, 13113, 22},  // nvme-null-SAMSUNG_MZQL21T9HCJR-00A07-nvme0
	{100, 3, 0, 4369, 22},   // nvme-null-SAMSUNG_MZQL23T8HCLS-00A07-nvme9
	{100, 0, 0, 1999, 22},   // nvme-null-SAMSUNG_MZQL2960HCJR-00A07-nvme0
	{100, 0, 22, 3149, 35},  // nvme-null-Samsung_SSD_970_EVO_Plus_250GB-nvme0
}

// captureMedianTempC is the median composite temperature of healthyNVMe.
const captureMedianTempC = 30.0

// ambientSwingC is the amplitude of the data hall's daily temperature
// swing seen by every drive (inlet air within ASHRAE's 18–27 °C band follows
// the outdoor day through economisers and chiller staging).
const ambientSwingC = 1.5

// fleetStream is the second word of the PCG sources of the healthy-fleet
// draws (fleetStream for the per-drive history, fleetStream + 1 + d for
// drive d's error-log entries), apart from the twin's and the faults', so
// the noise depends only on the seed and the topology, never on the
// workloads or on what ballast did.
const fleetStream = 0x666c656574

// fleetNoise is one drive's healthy-fleet state.
type fleetNoise struct {
	tempOffC   float64    // composite temperature offset, °C
	errLogPerS float64    // background error-log entries per second
	nextErrLog float64    // simulated second of the next background entry
	rng        *rand.Rand // the drive's own source for its entries; nil when the rate is 0
	// latNoise multiplies the drive's latency this tick: jitter, and a
	// housekeeping slowdown of stallBy until stallUntil (simulated second)
	latNoise, stallBy, stallUntil float64
}

// drawFleet gives every drive the health history of a real healthy drive
// and the fleet its ambient phase, and sets up the sources of the GPUs'
// step gaps and the drives' latency noise. Called once, after newSmart
// (the devices and GPUs exist).
func (t *Twin) drawFleet() {
	t.gapRng = rand.New(rand.NewPCG(t.seed, gapStream))
	t.stepGap = make([]float64, len(t.gpus))
	t.latRng = rand.New(rand.NewPCG(t.seed, latStream))
	rng := rand.New(rand.NewPCG(t.seed, fleetStream))
	t.ambientPhase = 2 * math.Pi * rng.Float64()
	for d := range t.dev {
		dv := &t.dev[d]
		c := healthyNVMe[rng.IntN(len(healthyNVMe))]
		sm := &dv.smart
		sm.spare = c.spare
		sm.pctUsedBase = max(sm.pctUsedBase, c.used)
		sm.errLog = c.errLog
		dv.fleet.tempOffC = c.tempC - captureMedianTempC
		if c.errLog > 0 && c.powerOnH > 0 {
			dv.fleet.errLogPerS = c.errLog / c.powerOnH / 3600
			dv.fleet.rng = rand.New(rand.NewPCG(t.seed, fleetStream+1+uint64(d)))
			dv.fleet.nextErrLog = dv.fleet.rng.ExpFloat64() / dv.fleet.errLogPerS
		}
	}
}

// ambient is the air temperature the drives see at simulated second now.
func (t *Twin) ambient(now float64) float64 {
	day := float64(t.start.Unix()%86400) + now
	return ambientC + ambientSwingC*math.Sin(2*math.Pi*day/86400+t.ambientPhase)
}

// tickFleet adds drive d's background error-log entries up to now (a
// Poisson process at its drawn rate: aborted or invalid commands, not
// media faults); errLogNoise keeps them apart from a fault's.
func (t *Twin) tickFleet(d int32, now float64) {
	f := &t.dev[d].fleet
	if f.rng == nil {
		return
	}
	sm := &t.dev[d].smart
	for f.nextErrLog <= now {
		sm.errLog++
		sm.errLogNoise++
		f.nextErrLog += f.rng.ExpFloat64() / f.errLogPerS
	}
}

// Step gaps (docs/scenarios.md, "GPU utilisation"): between two training
// steps the host runs the optimiser's bookkeeping, logging and the next
// launch, and hands the GPU its next batch; NVML's utilisation counts that
// time as idle, so a GPU that never waits for data still reads a little
// under 1, and by a different amount each sample. Each GPU loses
// |N(0, stepGapSigma)| of each tick, at most stepGapMax.
const (
	stepGapSigma = 0.02
	stepGapMax   = 0.1
)

// gapStream is the second word of the PCG source of the step gaps, apart
// from the twin's, the faults' and the fleet's.
const gapStream = 0x73746570676170

// drawStepGaps draws this tick's step gap of every GPU, in GPU order,
// whether its job runs or not, so the draws depend only on the seed and
// the tick.
func (t *Twin) drawStepGaps() {
	for i := range t.stepGap {
		t.stepGap[i] = min(stepGapMax, math.Abs(t.gapRng.NormFloat64())*stepGapSigma)
	}
}

// Latency noise of healthy drives (docs/scenarios.md, "Healthy drives"):
// a drive's mean latency over a second is never the same twice (the mix of
// its requests, its internal parallelism, background media scans), and now
// and then the drive's own housekeeping (garbage collection, wear
// levelling, a media scan) slows it for a few seconds. Every tick each
// drive's latency is multiplied by exp(N(0, latJitterSigma)); a drive
// starts a housekeeping slowdown with probability latStallPerS per second,
// lasting latStallMinS–latStallMaxS at latStallMin–latStallMax × its
// latency. The sizes are assumptions, not measurements.
const (
	latJitterSigma = 0.05
	latStallPerS   = 1.0 / 3600
	latStallMinS   = 1.0
	latStallMaxS   = 4.0
	latStallMin    = 1.5
	latStallMax    = 3.0
)

// latStream is the second word of the PCG source of the drives' latency
// noise, apart from every other source.
const latStream = 0x6c61746e6f697365

// drawLatencyNoise sets every drive's latency noise for the tick at now,
// drawn in drive order whether the drive is up or not, so the draws depend
// only on the seed, the topology and the tick.
func (t *Twin) drawLatencyNoise(now float64) {
	r := t.latRng
	for d := range t.dev {
		f := &t.dev[d].fleet
		j := math.Exp(r.NormFloat64() * latJitterSigma)
		if now >= f.stallUntil && r.Float64() < latStallPerS*t.dt {
			f.stallUntil = now + latStallMinS + (latStallMaxS-latStallMinS)*r.Float64()
			f.stallBy = latStallMin + (latStallMax-latStallMin)*r.Float64()
		}
		if now < f.stallUntil {
			j *= f.stallBy
		}
		f.latNoise = j
	}
}
