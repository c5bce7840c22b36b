//go:build unix

package plan

import (
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fleet is the snapshot of issue 11's planning benchmark: 1,000 data
// servers × 24 devices in one pool, 10 M stripes (2.5 M files of 4
// components on devices of 4 different data servers, 256 MiB each), heat
// from a skewed popularity, and 10 hot devices each carrying about 3× the mean
// load, the excess on 300 of its stripes.
func fleet(tb testing.TB) (*Input, []int32) {
	const (
		nDS, perDS = 1000, 24
		nDev       = nDS * perDS
		nStripes   = 10_000_000
		width      = 4
		hot        = 10
	)
	rng := rand.New(rand.NewPCG(11, 11))
	in := &Input{Devices: make([]Device, nDev)}
	for d := range in.Devices {
		in.Devices[d] = Device{DS: int32(d / perDS), Capacity: 7.68e12, Used: 0, Accepts: true, DSCapacity: 12.5e9}
	}
	in.StripeDevice = make([]int32, nStripes)
	in.StripeFile = make([]int32, nStripes)
	in.StripeMirror = make([]int8, nStripes)
	in.StripeBytes = make([]int64, nStripes)
	in.StripeHeat = make([]float32, nStripes)
	for k := range nStripes {
		f := k / width
		// components of a file on 4 data servers, round robin from a
		// random start, like the twin's round_robin placement
		ds := (f*7 + k%width*(nDS/width)) % nDS
		d := ds*perDS + rng.IntN(perDS)
		in.StripeDevice[k] = int32(d)
		in.StripeFile[k] = int32(f)
		in.StripeBytes[k] = 256 << 20
		// a Pareto-like popularity: most stripes are cold
		in.StripeHeat[k] = float32(1e3 / (1 + rng.Float64()*1e3))
		in.Devices[d].Used += float64(in.StripeBytes[k])
	}
	// 10 hot devices: 300 of their stripes share twice the mean device
	// load more, so each is at about 3× the mean
	sum := 0.0
	for _, h := range in.StripeHeat {
		sum += float64(h)
	}
	extra := float32(2 * sum / nDev / 300)
	var hotDevs []int32
	for h := range hot {
		d := int32(h * 997 % nDev)
		hotDevs = append(hotDevs, d)
		n := 0
		for k := range nStripes {
			if in.StripeDevice[k] == d {
				in.StripeHeat[k] += extra
				if n++; n == 300 {
					break
				}
			}
		}
	}
	for k, d := range in.StripeDevice {
		in.Devices[d].Load += float64(in.StripeHeat[k])
	}
	return in, hotDevs
}

// BenchmarkRebalance10MStripes plans the fleet snapshot with ballast's
// rebalancer, its sources the 10 hot devices as hotspot findings name
// them to the engine (make bench's actuator section, BENCHMARKS.md): ms
// per plan on one core (go test -cpu 1; wall and the process's CPU time,
// the steadier figure on a shared machine), the snapshot's size and the
// process's peak RSS.
func BenchmarkRebalance10MStripes(b *testing.B) {
	in, hot := fleet(b)
	snap := float64(len(in.StripeDevice))*(4+4+1+8+4) + float64(len(in.Devices))*48
	var r Result
	runtime.GC()
	b.ResetTimer()
	cpu0 := cpuTime()
	for range b.N {
		r = Rebalance(in, Options{Only: hot})
	}
	cpu := cpuTime() - cpu0
	b.StopTimer()
	for _, n := range r.Notes {
		b.Log(n)
	}
	if len(r.Moves) == 0 || len(r.Sources) < 10 {
		b.Fatalf("planned %d moves for %d sources; want moves off the 10 hot devices", len(r.Moves), len(r.Sources))
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "wall-ms/plan")
	b.ReportMetric(cpu.Seconds()*1e3/float64(b.N), "cpu-ms/plan")
	b.ReportMetric(snap/(1<<20), "snapshot-MiB")
	b.ReportMetric(peakRSSMiB(), "peak-RSS-MiB")
	b.ReportMetric(float64(len(r.Moves)), "moves")
	b.ReportMetric(r.CostRatio(), "bytes/bound")
	b.ReportMetric(r.MaxMeanAfter, "max/mean-after")
}

// cpuTime is the process's user + system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// peakRSSMiB is the process's peak resident set (VmHWM), 0 where /proc
// is missing.
func peakRSSMiB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}
