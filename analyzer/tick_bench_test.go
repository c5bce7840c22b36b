package analyzer_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ballast-io/ballast/analyzer/hotspot"
	"github.com/ballast-io/ballast/analyzer/starvation"
	"github.com/ballast-io/ballast/analyzer/workload"
	"github.com/ballast-io/ballast/models"
)

// Size of the benchmarked cluster, per the issue: 1,000 DS × 24 devices and
// 128 switch ports; plus 48,000 stripe deltas (two per device) and 512
// client-group windows per tick.
const (
	benchDS      = 1000
	benchDevices = 24
	benchPorts   = 128
	benchStripes = 2
	benchGroups  = 512
)

type tickInput struct {
	loads   []hotspot.Load
	stripes []models.StripeDelta
	windows []workload.Window
}

func buildTicks(n int) []tickInput {
	r := rand.New(rand.NewPCG(1, 1))
	noise := func() float64 { return 0.8 + 0.4*r.Float64() }
	ticks := make([]tickInput, n)
	for k := range ticks {
		now := time.Unix(1e9, 0).Add(time.Duration(k) * 10 * time.Second)
		var in tickInput
		for d := range benchDS {
			ds := fmt.Sprintf("ds%04d", d)
			l := hotspot.NewLoad(models.Subject{Kind: models.SubjectDS, ID: ds}, "")
			l.Values[hotspot.IOPS], l.Values[hotspot.BytesPerSec] = 48000*noise(), 4.8e9*noise()
			in.loads = append(in.loads, l)
			for v := range benchDevices {
				dev := fmt.Sprintf("%s/nvme%d", ds, v)
				l := hotspot.NewLoad(models.Subject{Kind: models.SubjectDevice, ID: dev}, "nvme")
				l.Values[hotspot.IOPS] = 2000 * noise()
				l.Values[hotspot.BytesPerSec] = 2e8 * noise()
				l.Values[hotspot.Utilization] = 0.4 * noise()
				l.Values[hotspot.Latency] = 0.0005 * noise()
				if d == 7 && v == 3 {
					l.Values[hotspot.IOPS] *= 4 // one hot device keeps a finding open
				}
				in.loads = append(in.loads, l)
				for s := range benchStripes {
					in.stripes = append(in.stripes, models.StripeDelta{
						StripeKey: models.StripeKey{Client: "c", DeviceID: dev, FileHandle: fmt.Sprintf("fh%d", s+r.IntN(64)*benchStripes)},
						DS:        ds, End: now, Duration: 10 * time.Second,
						Read: models.StripeIO{BytesCompleted: uint64(1e9 * noise())},
					})
				}
			}
		}
		for p := range benchPorts {
			l := hotspot.NewLoad(models.Subject{Kind: models.SubjectPort, ID: fmt.Sprintf("sw%d/p%d", p/32, p%32)}, "")
			l.Values[hotspot.BytesPerSec] = 3e9 * noise()
			l.Values[hotspot.Utilization] = 0.3 * noise()
			in.loads = append(in.loads, l)
		}
		for g := range benchGroups {
			in.windows = append(in.windows, workload.Window{
				Subject: models.Subject{Kind: models.SubjectJob, ID: fmt.Sprintf("job%03d", g)},
				Start:   now.Add(-10 * time.Second), End: now,
				ReadBytes: 8e9 * noise(), WriteBytes: 1e8 * noise(), ReadOps: 3e4, WriteOps: 100,
				Sequential: 0.5, Bandwidth: []float64{790, 810, 805, 795, 800},
			})
		}
		ticks[k] = in
	}
	return ticks
}

// BenchmarkTickHotspotWorkload is one full hotspot + workload tick over
// 1,000 DS × 24 devices × 128 ports (target ≤ 100 ms on one core).
func BenchmarkTickHotspotWorkload(b *testing.B) {
	ticks := buildTicks(4)
	hs, err := hotspot.New(hotspot.Options{})
	if err != nil {
		b.Fatal(err)
	}
	wl, err := workload.New(workload.Options{})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Unix(1e9, 0)
	findings := 0
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		in := ticks[i%len(ticks)]
		now := start.Add(time.Duration(i) * 10 * time.Second)
		if err := hs.Observe(now, hotspot.Input{Loads: in.loads, Stripes: in.stripes}); err != nil {
			b.Fatal(err)
		}
		for _, w := range in.windows {
			w.Start, w.End = now.Add(-10*time.Second), now
			if _, err := wl.Observe(now, w); err != nil {
				b.Fatal(err)
			}
		}
		findings = len(hs.Findings(now)) + len(wl.Findings(now))
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/tick")
	b.ReportMetric(float64(findings), "findings")
	b.ReportMetric(float64(len(ticks[0].loads)), "subjects")
}

// BenchmarkTickStarvation is one starvation tick over the same cluster:
// 1,000 DS × 24 devices (2 stripes each) behind 128 ports, 512 GPU nodes of
// 8 GPUs each reading from 96 devices, one saturated device and one DS down,
// so a quarter of the nodes starve and are attributed.
func BenchmarkTickStarvation(b *testing.B) {
	r := rand.New(rand.NewPCG(2, 2))
	var in starvation.Input
	for p := range benchPorts {
		in.Health = append(in.Health, starvation.Health{Subject: models.Subject{Kind: models.SubjectPort, ID: fmt.Sprintf("p%d", p)}, Util: 0.3, Latency: math.NaN()})
	}
	for d := range benchDS {
		ds := models.Subject{Kind: models.SubjectDS, ID: fmt.Sprintf("ds%04d", d)}
		in.Health = append(in.Health, starvation.Health{Subject: ds, Parent: models.Subject{Kind: models.SubjectPort, ID: fmt.Sprintf("p%d", d%benchPorts)}, Util: math.NaN(), Latency: 0.0003, Down: d == 9})
		for v := range benchDevices {
			dev := models.Subject{Kind: models.SubjectDevice, ID: fmt.Sprintf("%s/nvme%d", ds.ID, v)}
			h := starvation.Health{Subject: dev, Parent: ds, Util: 0.4, Latency: 0.0002, Down: d == 9}
			if d == 7 && v == 3 {
				h.Util = 0.97
			}
			in.Health = append(in.Health, h)
			for s := range benchStripes {
				in.Health = append(in.Health, starvation.Health{Subject: models.Subject{Kind: models.SubjectStripe, ID: fmt.Sprintf("%s/fh%d", dev.ID, s)}, Parent: dev, Util: math.NaN(), Latency: math.NaN()})
			}
		}
	}
	for n := range 512 {
		node := fmt.Sprintf("gpu%03d", n)
		for range 96 {
			d, v := r.IntN(benchDS), r.IntN(benchDevices)
			if n%4 == 0 {
				d, v = 7, 3 // every fourth node also reads the saturated device
			}
			in.Paths = append(in.Paths, starvation.Path{Node: node, Subject: models.Subject{Kind: models.SubjectStripe, ID: fmt.Sprintf("ds%04d/nvme%d/fh0", d, v)}, Share: 1.0 / 96})
		}
	}
	a, err := starvation.New(starvation.Options{})
	if err != nil {
		b.Fatal(err)
	}
	gpus := func(util float64) []starvation.GPU {
		var out []starvation.GPU
		for n := range 512 {
			for g := range 8 {
				u := 0.95
				if n%4 == 0 {
					u = util
				}
				out = append(out, starvation.GPU{ID: fmt.Sprintf("gpu%03d/%d", n, g), Node: fmt.Sprintf("gpu%03d", n), Job: "j", Util: u})
			}
		}
		return out
	}
	start := time.Unix(1e9, 0)
	in.GPUs = gpus(0.95)
	if err := a.Observe(start, in); err != nil {
		b.Fatal(err)
	}
	in.GPUs = gpus(0.4)
	b.ReportAllocs()
	i := 1
	for b.Loop() {
		if err := a.Observe(start.Add(time.Duration(i)*10*time.Second), in); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/tick")
	b.ReportMetric(float64(len(a.Findings(start.Add(time.Duration(i)*10*time.Second)))), "findings")
}
