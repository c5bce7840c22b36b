package twin

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// GeneratedPrefix names a generated scenario: LoadScenario("generated:7")
// returns GenerateScenario(7).
const GeneratedPrefix = "generated:"

// genStream is the second word of the generator's PCG source, apart from the
// twin's own so that a scenario seed and a twin seed never share a stream.
const genStream = 0x67656e6572617465

// GenerateScenario builds a valid scenario from seed: a randomised but
// physically plausible topology, clients, datasets, workloads and zero to
// four faults of the kinds the twin supports, with graded intensities.
// The same seed gives the same scenario. Every range and its reason is in
// docs/scenarios.md ("Generated scenarios"); the ranges were fixed without
// looking at any detector's score.
func GenerateScenario(seed uint64) (*Scenario, error) {
	g := &generator{r: rand.New(rand.NewPCG(seed, genStream))}
	sc := g.scenario(seed)
	sc.applyDefaults()
	if err := sc.validate(); err != nil {
		return nil, fmt.Errorf("generated scenario %d is invalid (a generator bug): %w", seed, err)
	}
	return sc, nil
}

// MarshalScenario writes sc as scenario YAML that ParseScenario reads back
// to the same scenario; zero fields are left out.
func MarshalScenario(sc *Scenario) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(sc); err != nil {
		return nil, fmt.Errorf("cannot write scenario %q: %w", sc.Name, err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("cannot write scenario %q: %w", sc.Name, err)
	}
	return b.Bytes(), nil
}

func loadGenerated(name string) (*Scenario, error) {
	s := strings.TrimPrefix(name, GeneratedPrefix)
	seed, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("cannot load scenario %q: %q is not a seed (a whole number, e.g. %s7)", name, s, GeneratedPrefix)
	}
	return GenerateScenario(seed)
}

type generator struct {
	r    *rand.Rand
	used map[string]bool // fault subjects already taken
}

// uni draws uniformly from [lo, hi], rounded to step.
func (g *generator) uni(lo, hi, step float64) float64 {
	return roundStep(lo+g.r.Float64()*(hi-lo), step)
}

// logUni draws log-uniformly from [lo, hi], rounded to step: for
// intensities that span orders of magnitude.
func (g *generator) logUni(lo, hi, step float64) float64 {
	return roundStep(math.Exp(math.Log(lo)+g.r.Float64()*(math.Log(hi)-math.Log(lo))), step)
}

// intIn draws an integer from [lo, hi].
func (g *generator) intIn(lo, hi int) int { return lo + g.r.IntN(hi-lo+1) }

func (g *generator) chance(p float64) bool { return g.r.Float64() < p }

func pickOf[T any](g *generator, xs ...T) T { return xs[g.r.IntN(len(xs))] }

// minutes draws a whole number of minutes in [lo, hi].
func (g *generator) minutes(lo, hi time.Duration) time.Duration {
	return time.Duration(g.intIn(int(lo/time.Minute), int(hi/time.Minute))) * time.Minute
}

func roundStep(v, step float64) float64 {
	r := math.Round(v/step) * step
	// Keep the decimal a person would write (0.35, not 0.35000000000000003).
	f, _ := strconv.ParseFloat(strconv.FormatFloat(r, 'f', 6, 64), 64)
	return f
}

// genPool is what the generator knows of a pool while it fills it.
type genPool struct {
	name    string
	devices int     // active drives
	bytes   float64 // raw capacity of active drives
	gbps    float64 // data servers' NIC bandwidth, Gbit/s
	planned float64 // bytes the generator already put there
}

func (g *generator) scenario(seed uint64) *Scenario {
	sc := &Scenario{
		Name:     GeneratedPrefix + strconv.FormatUint(seed, 10),
		Tick:     time.Second,
		Duration: time.Duration(g.intIn(2, 8)) * 30 * time.Minute,
	}
	t := &sc.Topology
	t.MDS = pickOf(g, 1, 2, 2, 2)
	t.NetRTTMicros = g.logUni(20, 300, 5)

	// Data servers: a fast pool, sometimes a capacity tier beside it.
	fast := DSGroup{
		NamePrefix: "ds", Count: g.intIn(4, 24), Pool: "fast",
		Drives: g.intIn(4, 12), Spares: g.intIn(0, 2),
		NICGbps: pickOf(g, 100.0, 100, 200, 200, 400), CounterBits: 64,
	}
	fast.PortGbps = fast.NICGbps
	if g.chance(0.1) {
		fast.CounterBits = 32
	}
	capGB := pickOf(g, 3840.0, 7680, 7680, 15360)
	dwpd := pickOf(g, 1.0, 1, 3)
	if g.chance(0.7) { // PCIe Gen4
		fast.Drive = Drive{Model: fmt.Sprintf("simulated-gen4-nvme-%gtb", capGB/1000), CapacityGB: capGB,
			ReadMBps: 6500, WriteMBps: 3500, ReadIOPS: 900_000, WriteIOPS: 200_000, ReadLatencyUS: 80, WriteLatencyUS: 20}
	} else { // PCIe Gen5
		fast.Drive = Drive{Model: fmt.Sprintf("simulated-gen5-nvme-%gtb", capGB/1000), CapacityGB: capGB,
			ReadMBps: 14000, WriteMBps: 7000, ReadIOPS: 2_500_000, WriteIOPS: 400_000, ReadLatencyUS: 70, WriteLatencyUS: 15}
	}
	fast.Drive.EndurancePBW = roundStep(capGB*dwpd*5*365/1e6, 0.1)
	fast.Drive.AgeHours = float64(g.intIn(0, 4*8760/24) * 24)
	t.DataServers = append(t.DataServers, fast)
	pools := []*genPool{poolOf(fast)}
	if g.chance(0.3) {
		qlc := pickOf(g, 15360.0, 30720)
		cp := DSGroup{
			NamePrefix: "cap", Count: g.intIn(2, 8), Pool: "capacity",
			Drives: g.intIn(8, 24), Spares: g.intIn(0, 1),
			NICGbps: pickOf(g, 100.0, 200), CounterBits: 64,
			Drive: Drive{Model: fmt.Sprintf("simulated-gen4-nvme-%gtb-qlc", qlc/1000), CapacityGB: qlc,
				ReadMBps: 7000, WriteMBps: 2000, ReadIOPS: 800_000, WriteIOPS: 30_000, ReadLatencyUS: 80, WriteLatencyUS: 30,
				EndurancePBW: roundStep(qlc*0.3*5*365/1e6, 0.1)},
		}
		cp.PortGbps = cp.NICGbps
		cp.Drive.AgeHours = float64(g.intIn(0, 4*8760/24) * 24)
		t.DataServers = append(t.DataServers, cp)
		pools = append(pools, poolOf(cp))
	}

	// Clients: GPU nodes, sometimes inference and analytics nodes.
	gpu := ClientGroup{NamePrefix: "gpu", Count: g.intIn(2, 16), GPUs: pickOf(g, 4, 8, 8),
		GPUModel: "simulated-h100-sxm5-80gb", NICGbps: pickOf(g, 200.0, 400, 400),
		RsizeKB: pickOf(g, 1024.0, 1024, 512)}
	gpu.ReadAheadKB = pickOf(g, 128.0, 128, 128, 1024, 15*gpu.RsizeKB) // kernel default, a tuned 1 MiB, nfsrahead's 15 × rsize
	gpu.PortGbps = gpu.NICGbps
	t.Clients = append(t.Clients, gpu)
	var inf, ana *ClientGroup
	if g.chance(0.5) {
		c := ClientGroup{NamePrefix: "inf", Count: g.intIn(1, 4), NICGbps: pickOf(g, 100.0, 200),
			ReadAheadKB: pickOf(g, 64.0, 128, 1024), RsizeKB: 1024}
		c.PortGbps = c.NICGbps
		t.Clients = append(t.Clients, c)
		inf = &t.Clients[len(t.Clients)-1]
	}
	if g.chance(0.4) {
		c := ClientGroup{NamePrefix: "ana", Count: g.intIn(1, 4), NICGbps: pickOf(g, 100.0, 200),
			ReadAheadKB: 128, RsizeKB: 1024}
		c.PortGbps = c.NICGbps
		t.Clients = append(t.Clients, c)
		ana = &t.Clients[len(t.Clients)-1]
	}

	// Training: one job on every GPU node, or two side by side.
	jobs := 1
	if gpu.Count >= 4 && g.chance(0.4) {
		jobs = 2
	}
	totalGPUs := float64(gpu.Count * gpu.GPUs)
	readGBps := pools[0].gbps / 8 * g.uni(0.1, 0.7, 0.01) // steady read demand of all training
	first := 0
	for j := 0; j < jobs; j++ {
		n := gpu.Count - first
		if j == 0 && jobs == 2 {
			n = g.intIn(1, gpu.Count-1)
		}
		ds := g.dataset(fmt.Sprintf("train%d", j), pools[0], 500, 8000, 100, 4000)
		sc.Datasets = append(sc.Datasets, ds)
		perGPU := min(2, readGBps/totalGPUs) * 1e9
		bps := pickOf(g, 100e3, 300e3, 500e3, 1e6, 2e6)
		w := Workload{
			Name: fmt.Sprintf("train-%c", 'a'+j), Kind: KindTraining, Clients: gpu.NamePrefix,
			First: first, Count: n, Dataset: ds.Name,
			SamplesPerSec: max(1, roundStep(perGPU/bps, 1)), BytesPerSample: bps,
			PrefetchMB: pickOf(g, 512.0, 1024, 2048, 4096), Workers: pickOf(g, 2, 4, 4, 8),
			ReadKB: pickOf(g, 128.0, 256, 256, 1024),
		}
		if g.chance(0.85) {
			w.Checkpoint = g.checkpoint(pools, float64(n*gpu.GPUs), j)
		}
		sc.Workloads = append(sc.Workloads, w)
		first += n
	}
	if inf != nil {
		ds := g.dataset("weights", pools[0], 16, 128, 1000, 8000)
		ds.Layout.StripeCount = min(8, pools[0].devices)
		sc.Datasets = append(sc.Datasets, ds)
		w := Workload{Name: "serve", Kind: KindInference, Clients: inf.NamePrefix, Dataset: ds.Name,
			Streams: g.intIn(2, 16), QueueDepth: pickOf(g, 4, 8, 16, 32), ReadKB: pickOf(g, 16.0, 64, 64, 128),
			RateMBps: g.logUni(50, 500, 10)}
		if g.chance(0.5) {
			w.HotFraction = g.uni(0.05, 0.3, 0.01)
		}
		sc.Workloads = append(sc.Workloads, w)
	}
	if ana != nil {
		ds := g.dataset("logs", pools[0], 128, 1024, 1000, 4000)
		sc.Datasets = append(sc.Datasets, ds)
		w := Workload{Name: "scan", Kind: KindAnalytics, Clients: ana.NamePrefix, Dataset: ds.Name,
			Streams: g.intIn(2, 8), ReadKB: pickOf(g, 1024.0, 1024, 4096), RateMBps: g.logUni(200, 2000, 50)}
		if g.chance(0.5) {
			w.Start = g.minutes(0, sc.Duration/2)
			w.End = w.Start + g.minutes(15*time.Minute, sc.Duration-w.Start)
		}
		sc.Workloads = append(sc.Workloads, w)
	}

	// Faults: 0–4, of any kind, on distinct subjects.
	g.used = map[string]bool{}
	var kinds []string
	for i, n := 0, g.intIn(0, 4); i < n; i++ {
		f, ok := g.fault(sc, pools)
		if ok {
			sc.Faults = append(sc.Faults, f)
			kinds = append(kinds, f.Kind)
		}
	}
	sc.Migration = MigrationSpec{MBps: 1000}
	faults := "no fault"
	if len(kinds) > 0 {
		faults = "faults: " + strings.Join(kinds, ", ")
	}
	sc.Description = fmt.Sprintf("generated from seed %d (twin/generate.go): %d DS in %d pool(s), %d client node(s), %d workload(s), %s",
		seed, dsCount(sc), len(pools), clientCount(sc), len(sc.Workloads), faults)
	return sc
}

func poolOf(gr DSGroup) *genPool {
	return &genPool{name: gr.Pool, devices: gr.Count * gr.Drives, bytes: float64(gr.Count*gr.Drives) * gr.Drive.CapacityGB * 1e9, gbps: float64(gr.Count) * gr.NICGbps}
}

func dsCount(sc *Scenario) (n int) {
	for _, g := range sc.Topology.DataServers {
		n += g.Count
	}
	return n
}

func clientCount(sc *Scenario) (n int) {
	for _, g := range sc.Topology.Clients {
		n += g.Count
	}
	return n
}

// dataset lays out files of sizes in [loMB, hiMB] on p, no more than a
// quarter of the pool's capacity per dataset.
func (g *generator) dataset(name string, p *genPool, loFiles, hiFiles int, loMB, hiMB float64) Dataset {
	d := Dataset{Name: name, Pool: p.name, Files: g.intIn(loFiles, hiFiles), FileSizeMB: g.logUni(loMB, hiMB, 10),
		Layout: Layout{StripeUnitKB: pickOf(g, 512.0, 1024, 1024, 2048), StripeCount: min(p.devices, pickOf(g, 1, 2, 4, 4, 8)),
			Placement: pickOf(g, PlaceRoundRobin, PlaceRoundRobin, PlaceRoundRobin, PlaceRandom, PlaceLeastUsed)}}
	if most := 0.25 * p.bytes / (d.FileSizeMB * 1e6); float64(d.Files) > most {
		d.Files = max(1, int(most))
	}
	p.planned += float64(d.Files) * d.FileSizeMB * 1e6
	return d
}

// checkpoint sizes a periodic checkpoint of a job on gpus GPUs.
func (g *generator) checkpoint(pools []*genPool, gpus float64, job int) *Checkpoint {
	p := pools[0]
	if len(pools) > 1 && g.chance(0.5) {
		p = pools[1]
	}
	c := &Checkpoint{
		Interval: g.minutes(10*time.Minute, 40*time.Minute),
		Mode:     pickOf(g, ModeSync, ModeSync, ModeAsync),
		Keep:     g.intIn(1, 3),
		Pool:     p.name,
	}
	c.SizeGB = roundStep(gpus*g.logUni(10, 125, 1), 10)
	// Written in at most 15 % of the interval at the pool's NIC bandwidth.
	if most := 0.15 * c.Interval.Seconds() * p.gbps / 8; c.SizeGB > most {
		c.SizeGB = max(10, roundStep(most, 10))
	}
	// Kept copies (plus the one being written) in at most a quarter of
	// what is left of the pool.
	if most := 0.25 * (p.bytes - p.planned) / 1e9 / float64(c.Keep+1); c.SizeGB > most {
		c.SizeGB = max(1, math.Floor(most))
	}
	p.planned += c.SizeGB * 1e9 * float64(c.Keep+1)
	c.Jitter = time.Duration(g.intIn(0, 180)) * time.Second
	if c.Jitter >= c.Interval/2 {
		c.Jitter = c.Interval/2 - time.Second
	}
	if job > 0 {
		c.First = c.Interval/2 + g.minutes(0, c.Interval/2)
	}
	return c
}

// window places a fault's start and end inside the run.
func (g *generator) window(d time.Duration, lo, hi time.Duration) (start, end time.Duration) {
	start = g.minutes(5*time.Minute, d*7/10)
	if g.chance(0.15) {
		return start, 0 // to the end of the run
	}
	hi = min(hi, d-start-time.Minute)
	end = start + g.minutes(min(lo, hi), hi)
	return start, end
}

func (g *generator) take(subject string) bool {
	if g.used[subject] {
		return false
	}
	g.used[subject] = true
	return true
}

// fault draws one fault; false when its subject was already taken.
func (g *generator) fault(sc *Scenario, pools []*genPool) (Fault, bool) {
	t := &sc.Topology
	d := sc.Duration
	kind := pickOf(g, FaultFailingDrive, FaultSlowDrive, FaultHotShard, FaultNodeLoss, FaultPortSaturation, FaultCapacityPressure, FaultWorkloadShift)
	f := Fault{Kind: kind}
	dsg := t.DataServers[g.r.IntN(len(t.DataServers))]
	host := hostName(dsg.NamePrefix, g.r.IntN(dsg.Count), dsg.Count)
	switch kind {
	case FaultFailingDrive, FaultSlowDrive:
		f.Device = fmt.Sprintf("%s/nvme%dn1", host, g.r.IntN(dsg.Drives))
		if !g.take(f.Device) {
			return f, false
		}
		if kind == FaultSlowDrive {
			f.Start, f.End = g.window(d, 5*time.Minute, 60*time.Minute)
			f.Factor = g.uni(0.1, 0.7, 0.05)
			break
		}
		f.Start = g.minutes(5*time.Minute, d/2)
		f.End = f.Start + g.minutes((d-f.Start)*3/10, d-f.Start-time.Minute)
		f.MediaErrors = g.logUni(50, 5000, 10)
		f.FinalSpare = g.uni(2, 50, 1)
		f.WearRise = g.uni(1, 8, 1)
		f.TempExcursC = g.uni(5, 25, 1)
		f.OutlierRate = g.uni(0.02, 0.2, 0.01)
		f.FinalSpeed = g.uni(0.3, 0.9, 0.05)
	case FaultHotShard:
		ds := sc.Datasets[g.r.IntN(len(sc.Datasets))]
		if !g.take("dataset:" + ds.Name) {
			return f, false
		}
		f.Dataset = ds.Name
		for n := g.intIn(1, 3); len(f.Files) < n && len(f.Files) < ds.Files; {
			k := g.r.IntN(ds.Files)
			if !containsInt(f.Files, k) {
				f.Files = append(f.Files, k)
			}
		}
		f.Share = g.uni(0.1, 0.6, 0.05)
		f.Start, f.End = g.window(d, 10*time.Minute, 60*time.Minute)
	case FaultNodeLoss:
		if !g.take("ds:" + host) {
			return f, false
		}
		f.DS = host
		f.Start = g.minutes(5*time.Minute, d*7/10)
		f.End = f.Start + g.minutes(time.Minute, 15*time.Minute)
	case FaultPortSaturation:
		speed := dsg.PortGbps
		if g.chance(0.2) {
			cg := t.Clients[g.r.IntN(len(t.Clients))]
			host, speed = hostName(cg.NamePrefix, g.r.IntN(cg.Count), cg.Count), cg.PortGbps
		}
		f.Port = portName(host)
		if !g.take(f.Port) {
			return f, false
		}
		f.Gbps = roundStep(speed*g.uni(1.05, 1.5, 0.01), 1)
		f.Start, f.End = g.window(d, 5*time.Minute, 40*time.Minute)
	case FaultCapacityPressure:
		p := pools[g.r.IntN(len(pools))]
		if !g.take("pool:" + p.name) {
			return f, false
		}
		f.Pool = p.name
		f.MBps = roundStep(p.gbps/8*1000*g.uni(0.02, 0.3, 0.01), 100)
		f.MBps = max(f.MBps, 100)
		f.Start, f.End = g.window(d, 20*time.Minute, d)
	case FaultWorkloadShift:
		w := sc.Workloads[g.r.IntN(len(sc.Workloads))]
		if !g.take("workload:" + w.Name) {
			return f, false
		}
		f.Workload = w.Name
		f.Factor = g.uni(1.3, 3.5, 0.1)
		f.Start, f.End = g.window(d, 10*time.Minute, 40*time.Minute)
	}
	return f, true
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
