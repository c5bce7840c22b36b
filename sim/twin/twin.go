package twin

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// Node is one simulated host whose agent ballast would scrape.
type Node struct {
	Name string // e.g. "ds03" or "gpu00"
	Role string // "ds" or "client"
}

// Node roles.
const (
	RoleDS     = "ds"
	RoleClient = "client"
)

// Resource slots per host: each DS and each client has a NIC and a switch
// port, each full duplex, so four resources per host.
const (
	slotNICTx    = 0 // host → network
	slotNICRx    = 1 // network → host
	slotPortIn   = 2 // switch port, traffic arriving from the host
	slotPortOut  = 3 // switch port, traffic leaving towards the host
	slotsPerHost = 4
)

// Twin is a running simulation of one pNFS cluster feeding GPUs. It is not
// safe for concurrent use: one goroutine calls Step, Apply and the
// telemetry methods in turn.
type Twin struct {
	sc    *Scenario
	rng   *rand.Rand // workloads and placement; faults have their own
	seed  uint64
	start time.Time
	dt    float64
	tick  int64
	// ambientPhase is the phase of the data hall's daily swing (fleet.go)
	ambientPhase float64
	// gapRng draws stepGap, each GPU's share of this tick lost to the
	// host between training steps (fleet.go)
	gapRng  *rand.Rand
	stepGap []float64
	// latRng draws the drives' latency noise (fleet.go)
	latRng *rand.Rand

	ds       []dsNode
	dev      []device
	cli      []client
	gpus     []gpu
	pools    []pool
	datasets []dataset
	files    []file
	stripes  []stripe
	jobs     []job
	streams  []stream
	faults   []faultState
	migs     []migration
	migQueue []int32
	// restripes are the files rewritten wider (restripe.go)
	restripes []restripe
	throttle  float64    // bytes/s for all migrations together, 0 = unlimited
	migBytes  [2]float64 // bytes copies and read-backs moved: [other, urgent]

	// resources: devices first, then 4 per DS, then 4 per client.
	resCap, resLoad, resUsed, resScale []float64
	resTotal                           []float64 // bytes carried since start (network resources)
	// devices first, then 4 per DS, then 4 per client, then the free
	// space of each device (bytes)
	dsBase, cliBase, spaceBase int

	flows []flow
	dtk   []devTick
	// network queueing: multiplier per resource, and per host (DS first,
	// then clients) the worst of its four and which one it is
	rq       []float64
	hostQ    []float64
	hostQRes []int32

	// layout statistics records, one per (client, stripe) touched
	recs      [][]layoutRec // chunks of recChunk
	nRecs     int
	freeRecs  []int32
	layoutSeq uint32
	recIdx    []int32 // client*len(stripes)+stripe → index in recs, -1 none
	// streamRecs caches, per stream, the record of each stripe of its
	// current file (maxStripes slots per stream, -1 none)
	streamRecs []int32
	maxStripes int
	devIDs     []string // pNFS device ids, built on first use
	dsUaddr    []string // DS universal addresses
	// ioErrs are the data-server I/O errors clients met since the last
	// LayoutStats call, what they report to the MDS (LAYOUTERROR)
	ioErrs map[ioErrKey]*ioErr

	truth []TruthRecord
	sat   []satState

	// ground truth of GPU idle time: [cause][subject index]
	idleTotal  [numCauses][]float64
	idleMinute [numCauses][]float64
	// idleCoMinute is, per cause and subject, the whole idle time of the
	// stalls it co-limited this minute (addStallIdle)
	idleCoMinute [numCauses][]float64
	minuteOf     int64
	busySec      float64
	allocSec     float64
	ioErrors     float64

	// remediation scoring (ground truth, never shown to ballast): bytes
	// copies and read-backs moved while a checkpoint burst was on,
	// [other, urgent]; components with data on a drive when it failed
	migInCk     [2]float64
	lostStripes int
	lostBytes   float64

	withheld []lossPart // scratch of withhold
}

type dsNode struct {
	name     string
	group    int
	pool     int32
	firstDev int32
	nDev     int32 // includes spares
	bits     int
	down     bool
	addr     string
	// NIC counters since boot
	rxBytes, txBytes float64
	nfsdReads        float64
	nfsdWrites       float64
}

type device struct {
	name, kname string
	ds          int32
	pool        int32
	spare       bool
	retired     bool
	failed      bool
	draining    bool
	// retireWhenEmpty marks a device a promoted spare replaces
	retireWhenEmpty bool
	fullRec         int // open device_full truth record, -1 none
	capBytes        float64
	used            float64
	readBW          float64
	writeBW         float64
	readOver        float64 // per-op overhead, seconds (1/IOPS − 4 KiB/BW)
	writeOver       float64
	readLat         float64 // base latency, seconds
	writeLat        float64
	health          float64 // fraction of nominal speed
	qmul            float64 // queueing multiplier of latency (≥ 1), smoothed
	outlier         float64 // latency multiplier this tick from a fault
	util            float64 // busy fraction of the last tick
	utilEWMA        float64
	endurance       float64 // bytes
	ageHours        float64
	fleet           fleetNoise // healthy-fleet noise (fleet.go)

	// userBytes counts the bytes user I/O moved on the device since
	// the start (reads and writes of jobs, not copies): remediation
	// scoring's device load
	userBytes float64
	// diskstats counters since boot (fractional, rendered as integers)
	rdOps, rdBytes, rdMs, wrOps, wrBytes, wrMs, ioMs, wIoMs float64
	inflight                                                float64
	// SMART, lifetime
	smart smartState
}

type client struct {
	name        string
	group       int
	firstGPU    int32
	nGPU        int32
	ra          float64 // read-ahead, bytes
	rsize       float64
	nicBW       float64
	addr        string
	rxBytes     float64
	txBytes     float64
	readOps     float64
	readBytes   float64
	readRTTms   float64
	readExems   float64
	wrOps       float64
	wrBytes     float64
	wrRTTms     float64
	wrExems     float64
	errors      float64
	readGood    float64 // bytes applications read (after read-ahead waste)
	raWaste     float64 // this tick: request size of a random reader the read-ahead overshoots, 0 none
	raRec       int     // open read_ahead_waste truth record, -1 none
	opens       float64
	layoutStats float64
}

type gpu struct {
	client  int32
	index   int32
	job     int32
	cap     float64 // prefetch queue capacity, bytes (its workers' held, stream.held)
	busy    float64 // busy fraction of the last tick
	busySec float64
	pcieRx  float64
	lastRx  float64
	energyJ float64
	// stall is the work the streams' shortfalls withheld from the GPU
	// and that no idle has been charged to yet, in GPU-seconds by cause
	// and subject, at most what the queue's usable free room could hold
	stall []lossPart
}

type pool struct {
	name    string
	devices []int32 // active devices, interleaved across DS (drive-major)
	rr      int
}

type dataset struct {
	name      string
	pool      int32
	firstFile int32
	nFiles    int32
}

type file struct {
	name    string
	dataset int32 // -1 for checkpoint files
	size    float64
	first   int32
	n       int32
	unit    float64
	gen     uint32
}

type stripe struct {
	file   int32
	idx    int32
	dev    int32
	bytes  float64 // bytes stored
	gen    uint32
	moving bool
}

// New builds a twin for sc, seeded by seed, whose simulated clock starts at
// start. Two twins built with the same arguments produce the same telemetry
// and truth, byte for byte.
func New(sc *Scenario, seed uint64, start time.Time) (*Twin, error) {
	if sc == nil {
		return nil, fmt.Errorf("cannot build twin: no scenario")
	}
	t := &Twin{
		sc:    sc,
		rng:   rand.New(rand.NewPCG(seed, 0x62616c6c617374)),
		seed:  seed,
		start: start.UTC(),
		dt:    sc.Tick.Seconds(),
	}
	if err := t.build(); err != nil {
		return nil, fmt.Errorf("cannot build twin from scenario %q: %w", sc.Name, err)
	}
	return t, nil
}

// Scenario returns the scenario the twin runs.
func (t *Twin) Scenario() *Scenario { return t.sc }

// Now returns the simulated time at the start of the next tick.
func (t *Twin) Now() time.Time {
	return t.start.Add(time.Duration(t.tick) * t.sc.Tick)
}

// Elapsed returns the simulated time since the start.
func (t *Twin) Elapsed() time.Duration { return time.Duration(t.tick) * t.sc.Tick }

// Nodes lists the data servers and then the clients, in topology order.
func (t *Twin) Nodes() []Node {
	out := make([]Node, 0, len(t.ds)+len(t.cli))
	for i := range t.ds {
		out = append(out, Node{Name: t.ds[i].name, Role: RoleDS})
	}
	for i := range t.cli {
		out = append(out, Node{Name: t.cli[i].name, Role: RoleClient})
	}
	return out
}

func hostName(prefix string, i, n int) string {
	w := 2
	if n > 100 {
		w = len(strconv.Itoa(n - 1))
	}
	return fmt.Sprintf("%s%0*d", prefix, w, i)
}

func (t *Twin) build() error {
	sc := t.sc
	poolIdx := map[string]int32{}
	for gi, g := range sc.Topology.DataServers {
		p, ok := poolIdx[g.Pool]
		if !ok {
			p = int32(len(t.pools))
			poolIdx[g.Pool] = p
			t.pools = append(t.pools, pool{name: g.Pool})
		}
		first := len(t.dev)
		for i := 0; i < g.Count; i++ {
			n := len(t.ds)
			d := dsNode{
				name:     hostName(g.NamePrefix, i, g.Count),
				group:    gi,
				pool:     p,
				firstDev: int32(len(t.dev)),
				nDev:     int32(g.Drives + g.Spares),
				bits:     g.CounterBits,
				addr:     fmt.Sprintf("10.1.%d.%d", n/250, n%250+1),
			}
			t.ds = append(t.ds, d)
			for k := 0; k < g.Drives+g.Spares; k++ {
				dr := g.Drive
				kname := fmt.Sprintf("nvme%dn1", k)
				rbw, wbw := dr.ReadMBps*1e6, dr.WriteMBps*1e6
				t.dev = append(t.dev, device{
					name:      d.name + "/" + kname,
					kname:     kname,
					ds:        int32(n),
					pool:      p,
					spare:     k >= g.Drives,
					capBytes:  dr.CapacityGB * 1e9,
					readBW:    rbw,
					writeBW:   wbw,
					readOver:  max(0, 1/dr.ReadIOPS-4096/rbw),
					writeOver: max(0, 1/dr.WriteIOPS-4096/wbw),
					readLat:   dr.ReadLatencyUS * 1e-6,
					writeLat:  dr.WriteLatencyUS * 1e-6,
					health:    1,
					fullRec:   -1,
					qmul:      1,
					outlier:   1,
					endurance: dr.EndurancePBW * 1e15,
					ageHours:  dr.AgeHours,
				})
			}
		}
		// Interleave active devices drive-major so consecutive stripe
		// components land on different data servers.
		for k := 0; k < g.Drives; k++ {
			for i := 0; i < g.Count; i++ {
				t.pools[p].devices = append(t.pools[p].devices, int32(first+i*(g.Drives+g.Spares)+k))
			}
		}
	}
	for gi, g := range sc.Topology.Clients {
		for i := 0; i < g.Count; i++ {
			n := len(t.cli)
			c := client{
				name:     hostName(g.NamePrefix, i, g.Count),
				group:    gi,
				firstGPU: int32(len(t.gpus)),
				nGPU:     int32(g.GPUs),
				ra:       g.ReadAheadKB * 1024,
				rsize:    g.RsizeKB * 1024,
				nicBW:    g.NICGbps * 1e9 / 8,
				raRec:    -1,
				addr:     fmt.Sprintf("10.2.%d.%d", n/250, n%250+1),
			}
			for k := 0; k < g.GPUs; k++ {
				t.gpus = append(t.gpus, gpu{client: int32(n), index: int32(k), job: -1})
			}
			t.cli = append(t.cli, c)
		}
	}
	// resources
	t.dsBase = len(t.dev)
	t.cliBase = t.dsBase + slotsPerHost*len(t.ds)
	t.spaceBase = t.cliBase + slotsPerHost*len(t.cli)
	nRes := t.spaceBase + len(t.dev)
	t.resCap = make([]float64, nRes)
	t.resLoad = make([]float64, nRes)
	t.resUsed = make([]float64, nRes)
	t.resScale = make([]float64, nRes)
	t.resTotal = make([]float64, nRes)
	t.rq = make([]float64, nRes)
	for i := range t.rq {
		t.rq[i] = 1
	}
	t.hostQ = make([]float64, len(t.ds)+len(t.cli))
	t.hostQRes = make([]int32, len(t.ds)+len(t.cli))
	for i := range t.hostQ {
		t.hostQ[i] = 1
	}
	for i := range t.ds {
		g := sc.Topology.DataServers[t.ds[i].group]
		b := t.dsBase + slotsPerHost*i
		t.resCap[b+slotNICTx] = g.NICGbps * 1e9 / 8 * t.dt
		t.resCap[b+slotNICRx] = g.NICGbps * 1e9 / 8 * t.dt
		t.resCap[b+slotPortIn] = g.PortGbps * 1e9 / 8 * t.dt
		t.resCap[b+slotPortOut] = g.PortGbps * 1e9 / 8 * t.dt
	}
	for i := range t.cli {
		g := sc.Topology.Clients[t.cli[i].group]
		b := t.cliBase + slotsPerHost*i
		t.resCap[b+slotNICTx] = g.NICGbps * 1e9 / 8 * t.dt
		t.resCap[b+slotNICRx] = g.NICGbps * 1e9 / 8 * t.dt
		t.resCap[b+slotPortIn] = g.PortGbps * 1e9 / 8 * t.dt
		t.resCap[b+slotPortOut] = g.PortGbps * 1e9 / 8 * t.dt
	}
	for c := range t.idleTotal {
		t.idleTotal[c] = make([]float64, nRes+len(sc.Workloads))
		t.idleMinute[c] = make([]float64, nRes+len(sc.Workloads))
		t.idleCoMinute[c] = make([]float64, nRes+len(sc.Workloads))
	}
	for i := range t.dev {
		t.dev[i].smart = newSmart(&t.dev[i])
	}
	t.drawFleet()
	t.initSaturation()
	// datasets
	for _, d := range sc.Datasets {
		p := poolIdx[d.Pool]
		if n := len(t.pools[p].devices); d.Layout.StripeCount > n {
			return fmt.Errorf("dataset %q: stripe_count %d exceeds the %d devices of pool %q", d.Name, d.Layout.StripeCount, n, d.Pool)
		}
		ds := dataset{name: d.Name, pool: p, firstFile: int32(len(t.files)), nFiles: int32(d.Files)}
		for i := 0; i < d.Files; i++ {
			f := t.addFile(fmt.Sprintf("%s/shard-%05d", d.Name, i), int32(len(t.datasets)), d.FileSizeMB*1e6, d.Layout)
			t.place(f, p, d.Layout.Placement)
			per := t.files[f].size / float64(t.files[f].n)
			for s := t.files[f].first; s < t.files[f].first+t.files[f].n; s++ {
				t.stripes[s].bytes = per
				t.dev[t.stripes[s].dev].used += per
			}
		}
		t.datasets = append(t.datasets, ds)
	}
	for i := range t.dev {
		if t.dev[i].used > t.dev[i].capBytes {
			return fmt.Errorf("device %s: datasets need %.0f GB but it holds %.0f GB", t.dev[i].name, t.dev[i].used/1e9, t.dev[i].capBytes/1e9)
		}
	}
	if err := t.buildJobs(poolIdx); err != nil {
		return err
	}
	if err := t.buildFaults(); err != nil {
		return err
	}
	t.buildLogs(poolIdx)
	t.throttle = sc.Migration.ThrottleMBps * 1e6
	t.recIdx = make([]int32, len(t.cli)*len(t.stripes))
	for i := range t.recIdx {
		t.recIdx[i] = -1
	}
	for f := range t.files {
		t.maxStripes = max(t.maxStripes, int(t.files[f].n))
	}
	t.streamRecs = make([]int32, len(t.streams)*t.maxStripes)
	for i := range t.streamRecs {
		t.streamRecs[i] = -1
	}
	return nil
}

func (t *Twin) addFile(name string, ds int32, size float64, l Layout) int32 {
	f := int32(len(t.files))
	t.files = append(t.files, file{name: name, dataset: ds, size: size, first: int32(len(t.stripes)), n: int32(l.StripeCount), unit: l.StripeUnitKB * 1024})
	for k := 0; k < l.StripeCount; k++ {
		t.stripes = append(t.stripes, stripe{file: f, idx: int32(k), dev: -1})
	}
	return f
}

// place assigns every component of file f to a distinct active device of
// pool p according to policy. Draining, failed and down devices are skipped
// while enough others remain.
func (t *Twin) place(f int32, p int32, policy string) {
	fl := &t.files[f]
	pl := &t.pools[p]
	n := len(pl.devices)
	usable := func(d int32) bool {
		dv := &t.dev[d]
		return !dv.failed && !dv.draining && !dv.retired && !t.ds[dv.ds].down
	}
	taken := func(d int32, upto int32) bool {
		for s := fl.first; s < fl.first+upto; s++ {
			if t.stripes[s].dev == d {
				return true
			}
		}
		return false
	}
	for k := int32(0); k < fl.n; k++ {
		var pick int32 = -1
		switch policy {
		case PlaceRandom:
			for try := 0; try < 4*n && pick < 0; try++ {
				d := pl.devices[t.rng.IntN(n)]
				if usable(d) && !taken(d, k) {
					pick = d
				}
			}
		case PlaceLeastUsed:
			best := -1.0
			for _, d := range pl.devices {
				if !usable(d) || taken(d, k) {
					continue
				}
				free := 1 - t.dev[d].used/t.dev[d].capBytes
				if free > best {
					best, pick = free, d
				}
			}
		}
		for try := 0; try < n && pick < 0; try++ {
			d := pl.devices[pl.rr%n]
			pl.rr++
			if (usable(d) || try >= n-int(fl.n)) && !taken(d, k) {
				pick = d
			}
		}
		if pick < 0 { // every device taken: fall back to sharing one
			pick = pl.devices[int(k)%n]
		}
		t.stripes[fl.first+k].dev = pick
		t.stripes[fl.first+k].gen++
	}
	fl.gen++
}

// stripeID is the public name of stripe s: "<file>#<component>".
func (t *Twin) stripeID(s int32) string {
	st := &t.stripes[s]
	return t.files[st.file].name + "#" + strconv.Itoa(int(st.idx))
}

func (t *Twin) findDevice(name string) int32 {
	for i := range t.dev {
		if t.dev[i].name == name {
			return int32(i)
		}
	}
	return -1
}

func (t *Twin) findDS(name string) int32 {
	for i := range t.ds {
		if t.ds[i].name == name {
			return int32(i)
		}
	}
	return -1
}

func (t *Twin) findClient(name string) int32 {
	for i := range t.cli {
		if t.cli[i].name == name {
			return int32(i)
		}
	}
	return -1
}

func (t *Twin) findStripe(id string) int32 {
	i := strings.LastIndexByte(id, '#')
	if i < 0 {
		return -1
	}
	k, err := strconv.Atoi(id[i+1:])
	if err != nil {
		return -1
	}
	for f := range t.files {
		if t.files[f].name == id[:i] {
			if k < 0 || k >= int(t.files[f].n) {
				return -1
			}
			return t.files[f].first + int32(k)
		}
	}
	return -1
}

// portName names the switch port of a DS or client: "sw/<host>".
func portName(host string) string { return "sw/" + host }

// findPort returns the resource base of the host whose port is named.
func (t *Twin) findPort(name string) int {
	host, ok := strings.CutPrefix(name, "sw/")
	if !ok {
		return -1
	}
	if d := t.findDS(host); d >= 0 {
		return t.dsBase + slotsPerHost*int(d)
	}
	if c := t.findClient(host); c >= 0 {
		return t.cliBase + slotsPerHost*int(c)
	}
	return -1
}
