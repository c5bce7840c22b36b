package twin

import (
	"math"
)

// Causes of GPU idle time in the ground truth.
const (
	causeCheckpoint = iota // synchronous checkpoint: GPUs wait for the write
	causeDevice            // a device saturated or slow (queueing latency)
	causeDSNIC             // a data server's NIC saturated
	causePort              // a switch port saturated
	causeClientNIC         // the client's own NIC saturated
	causeReadAhead         // the mount's read-ahead window limits a stream
	causeIOError           // reads failed on a failed device
	causeNodeDown          // reads failed on a data server that is down
	causeLoader            // no storage cause: shard changes, loader ramp-up, the host's gaps between steps
	numCauses
)

var causeNames = [numCauses]string{"checkpoint", "device", "ds_nic", "port", "client_nic", "read_ahead", "io_error", "node_down", "loader"}

// Flow sources.
const (
	srcStream uint8 = iota
	srcMigration
	srcVerify
	srcCross
	srcFill
)

// flow is one stream's (or migration's, or background traffic's) demand on
// one stripe for one tick, with the resources it crosses in order. Each
// resource's units per byte are 1 for network resources and space, and
// device-seconds per byte for devices: the devices' are kept in devCoef,
// in path order, at the positions devAt marks (coef), so that a flow stays
// small (a tick of a restriped hot file holds tens of thousands of them).
type flow struct {
	src     uint8
	write   bool
	err     int8 // cause of an I/O error, -1 none
	n       uint8
	seg     uint8 // the stream's file this tick (stream.segs)
	devAt   uint8 // bit k: res[k] is a device, its units per byte in devCoef
	owner   int32 // stream, migration or fault index
	stripe  int32
	rec     int32
	dev     int32
	res     [maxPath]int32
	lim     int32 // limiting resource, -1 none
	errSubj int32 // subject index an error is blamed on
	devCoef [2]float64
	want    float64 // wire bytes wanted
	demand  float64 // wire bytes after the stream's concurrency cap
	served  float64
	req     float64
	amp     float64
}

// coef is the units of resource res[k] one byte of the flow costs: its
// device coefficient where devAt marks a device (the first or the second
// on the path), else 1.
func (f *flow) coef(k uint8) float64 {
	switch {
	case f.devAt&(1<<k) == 0:
		return 1
	case f.devAt&(1<<k-1) == 0:
		return f.devCoef[0]
	}
	return f.devCoef[1]
}

// maxPath is the most resources a flow crosses: a copy between data
// servers reads a device, crosses two NICs and two ports, writes a device
// and takes its free space.
const maxPath = 7

// nfsTimeout is how long a request to a lost data server hangs before the
// client gives up with EIO: the flex-files layout driver's default
// dataserver_timeo of 600 tenths of a second.
const nfsTimeout = 60.0

func (t *Twin) devAvailable(d int32) bool {
	dv := &t.dev[d]
	return !dv.failed && !dv.retired && !t.ds[dv.ds].down
}

// devTick caches what flows need of a device during one tick, so that the
// per-flow work has no divisions: latency = base + req × per, device time
// per byte = inv + over ÷ req.
type devTick struct {
	avail                    bool
	rBase, rPer, wBase, wPer float64
	rInv, wInv, rOver, wOver float64
}

// prepDevices fills the per-tick device cache from the queueing state the
// last tick left.
func (t *Twin) prepDevices() {
	if len(t.dtk) != len(t.dev) {
		t.dtk = make([]devTick, len(t.dev))
	}
	for d := range t.dev {
		dv := &t.dev[d]
		o := dv.outlier * dv.fleet.latNoise
		m := dv.qmul * o
		h := max(dv.health, 0.01)
		t.dtk[d] = devTick{
			avail: t.devAvailable(int32(d)),
			rBase: dv.readLat * o, rPer: m / (dv.readBW * h),
			wBase: dv.writeLat * o, wPer: m / (dv.writeBW * h),
			rInv: 1 / dv.readBW, wInv: 1 / dv.writeBW, rOver: dv.readOver, wOver: dv.writeOver,
		}
	}
}

// devLatency is the latency of one request of req bytes at device d in
// seconds: base + (req/bandwidth) × queueing multiplier, all × outlier,
// with bandwidth scaled by the device's health. The base latency is a pure
// delay (an NVMe drive overlaps it across its many queues); only the
// transfer, which the drive serialises, queues.
func (t *Twin) devLatency(d int32, req float64, write bool) float64 {
	c := &t.dtk[d]
	if write {
		return c.wBase + req*c.wPer
	}
	return c.rBase + req*c.rPer
}

// devCoef is the device time one byte costs in requests of req bytes:
// 1/bandwidth plus the per-request overhead spread over the request.
func (t *Twin) devCoef(d int32, req float64, write bool) float64 {
	c := &t.dtk[d]
	if write {
		return c.wInv + c.wOver/req
	}
	return c.rInv + c.rOver/req
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Step advances the simulation by one tick.
func (t *Twin) Step() {
	now := float64(t.tick) * t.dt
	t.runFaults(now)
	t.drawLatencyNoise(now)
	t.prepDevices()
	t.scheduleJobs(now)
	t.setWants()
	t.flows = t.flows[:0]
	for si := range t.streams {
		st := &t.streams[si]
		st.got, st.lossAmt, st.losses, st.errored, st.errDown = 0, 0, st.losses[:0], false, false
		if st.active && st.want > 0 && st.file >= 0 {
			t.addStreamFlows(int32(si))
			if st.kind == streamRandRead && t.cli[st.client].ra >= raWasteFactor*st.appReq {
				t.cli[st.client].raWaste = st.appReq
			}
		}
	}
	t.trackReadAheadWaste(now)
	t.addMigrationFlows()
	t.addFaultFlows()
	t.share()
	t.updateDevices()
	t.settleFlows(now)
	t.settleJobs(now)
	t.settleMigrations(now)
	t.endTick(now)
	t.noteEvidence(now)
	t.tick++
}

// Run advances the simulation by n ticks.
func (t *Twin) Run(n int64) {
	for i := int64(0); i < n; i++ {
		t.Step()
	}
}

// addStreamFlows splits a stream's demand this tick over the stripes of
// its file. A stream keeps a window of bytes in flight (read-ahead for
// sequential reads, queue depth × fetch size for random reads and writes);
// by Little's law it cannot move more than window ÷ latency per second,
// where latency is that of its slowest device plus the network round trip.
// A data-loader worker whose file ends within the tick goes on into its
// next files (chainFiles).
func (t *Twin) addStreamFlows(si int32) {
	st := &t.streams[si]
	c := &t.cli[st.client]
	var req, window, amp float64
	write := st.kind == streamWrite
	switch st.kind {
	case streamSeqRead:
		req = min(c.rsize, max(st.appReq, c.ra))
		window = st.appReq + c.ra
		amp = 1
	case streamRandRead:
		fetch := max(st.appReq, c.ra)
		req = min(c.rsize, fetch)
		window = st.depth * fetch
		amp = fetch / st.appReq
	default:
		req = min(c.rsize, st.appReq)
		window = st.depth * st.appReq
		amp = 1
	}
	req = max(req, 4096)
	st.segs, st.slowest = st.segs[:0], st.slowest[:0]
	lat, downDS, failed := t.stripeTimes(st, st.file, req, write)
	lat += req / c.nicBW
	if st.gpu >= 0 && st.kind == streamSeqRead && downDS < 0 && !failed {
		t.chainFiles(si, st, req, window, lat)
		return
	}
	wantWire := st.want * amp
	if math.IsInf(wantWire, 1) {
		wantWire = 1e30
	}
	capWire := window/lat*t.dt + st.credit*amp
	if st.kind == streamSeqRead && st.gpu < 0 {
		// a file end mid-tick leaves the rest of the tick to the next file:
		// carry it over instead of losing it
		st.credit = max(0, min(st.desired*amp, capWire)-wantWire) / amp
	}
	if st.gpu >= 0 && downDS < 0 {
		// a loader worker on a file with a failed device reads only that
		// file (and then skips it); one hung on a lost data server wants
		// all it wanted, which the hang withholds
		wantWire = min(wantWire, t.files[st.file].size-st.pos)
	}
	t.addFileFlows(si, st, st.file, wantWire, min(wantWire, capWire), req, amp, downDS)
}

// stripeTimes adds to st.slowest the stripes of file f that set the
// stream's latency there this tick, as the stream's next segment, and
// returns that latency (device plus queued network round trip), the data
// server found down (-1 none) and whether a device of the file is
// unavailable.
func (t *Twin) stripeTimes(st *stream, f int32, req float64, write bool) (worst float64, downDS int32, failed bool) {
	fl := &t.files[f]
	rtt := t.sc.Topology.NetRTTMicros * 1e-6
	ch := len(t.ds) + int(st.client)
	downDS = -1
	// each stripe's time through device and network, and which of the two
	// dominates it (slowPart.lat is reused as the stripe's time)
	first, seg := len(st.slowest), uint8(len(st.segs))
	for s := fl.first; s < fl.first+fl.n; s++ {
		d := t.stripes[s].dev
		c := &t.dtk[d]
		if !c.avail {
			failed = true
			if t.ds[t.dev[d].ds].down {
				downDS = t.dev[d].ds
			}
			continue
		}
		l := c.rBase + req*c.rPer
		if write {
			l = c.wBase + req*c.wPer
		}
		dh := int(t.dev[d].ds)
		q, qr := t.hostQ[dh], t.hostQRes[dh]
		if t.hostQ[ch] > q {
			q, qr = t.hostQ[ch], t.hostQRes[ch]
		}
		p := slowPart{dev: d, net: -1, seg: seg, lat: l + rtt*q}
		if rtt*q > l {
			p.net = qr
		}
		st.slowest = append(st.slowest, p)
		worst = max(worst, p.lat)
	}
	// the stream completes with its slowest stripes: keep those within
	// equalLimit of the slowest, each of which limits it alike
	// (docs/scenarios.md)
	kept := st.slowest[:first]
	for _, p := range st.slowest[first:] {
		if p.lat >= worst*(1-equalLimit) {
			kept = append(kept, p)
		}
	}
	st.slowest = kept
	return worst, downDS, failed
}

// maxOpens is how many more files a data-loader worker opens in one tick
// at most (docs/scenarios.md): it bounds the twin's work per tick; at the
// generator's smallest shards and highest demand a worker needs fewer.
const maxOpens = 16

// chainFiles is a data-loader worker's tick (docs/scenarios.md, "data
// loaders"): it reads on in its file and, when the file ends within the
// tick, opens the next one and reads on there, as a real worker does,
// instead of waiting for the next tick. Each file it opens costs the
// OPEN and LAYOUTGET round trips to the MDS and the first read's latency
// (the read-ahead window refills from empty), during which it moves no
// bytes. Its bytes are bounded by its window ÷ latency over the time left,
// file by file; what the window could not fetch in the last file is its
// shortfall, blamed as any stream's is; what the opens took is not wanted
// (the loader's, not storage's).
func (t *Twin) chainFiles(si int32, st *stream, req, window, lat float64) {
	j := &t.jobs[st.job]
	rtt := t.sc.Topology.NetRTTMicros * 1e-6
	st.credit = 0
	w, left, opened := st.want, t.dt, 0.0
	f, start := st.file, st.pos
	for {
		rate := window / lat
		rem := t.files[f].size - start
		can := rate * max(0, left)
		if w <= rem || can < rem || len(st.segs) >= maxOpens {
			// the tick ends in this file: of the shortfall, what the opens'
			// time would have fetched at this file's rate is the loader's
			// (not wanted), the rest the window's; past maxOpens files the
			// rest of the tick is the loader's too
			d := min(w, can, rem)
			want := w - min(w-d, rate*opened)
			if d == rem && w > rem {
				want = rem
			}
			t.addFileFlows(si, st, f, want, d, req, 1, -1)
			st.segs[len(st.segs)-1].start = start
			st.segs[len(st.segs)-1].time = d / rate
			return
		}
		t.addFileFlows(si, st, f, rem, rem, req, 1, -1)
		st.segs[len(st.segs)-1].start = start
		st.segs[len(st.segs)-1].time = rem / rate
		w -= rem
		left -= rem / rate
		// the next file: its open, then its first read's latency
		f, start = t.nextLoaderFile(j, st), 0
		t.cli[st.client].opens++
		l, downDS, failed := t.stripeTimes(st, f, req, false)
		lat = l + req/t.cli[st.client].nicBW
		open := 2*rtt + lat
		left -= open
		opened += open
		if downDS >= 0 || failed {
			// an unreadable file ends the chain, read as a stream's only
			// file is: a lost data server hangs it, a failed device fails
			// its stripes there; the stream then skips it or waits as usual
			want, d := w, 0.0
			if downDS < 0 {
				want = min(w, t.files[f].size)
				d = min(want, window/lat*max(0, left))
			}
			t.addFileFlows(si, st, f, want, d, req, 1, downDS)
			st.segs[len(st.segs)-1].time = d * lat / window
			return
		}
	}
}

// nextLoaderFile is the next file of a data-loader worker: one it picked
// last tick but did not reach, else the job's next.
func (t *Twin) nextLoaderFile(j *job, st *stream) int32 {
	if len(st.ahead) > 0 {
		f := st.ahead[0]
		st.ahead = st.ahead[1:]
		return f
	}
	return t.nextFile(j, st.kind)
}

// addFileFlows adds one flow per stripe of file f for a stream that wants
// wantWire wire bytes of it this tick and may move demand of them, as
// segment len(st.segs) of its tick.
func (t *Twin) addFileFlows(si int32, st *stream, f int32, wantWire, demand, req, amp float64, downDS int32) {
	fl := &t.files[f]
	write := st.kind == streamWrite
	seg := len(st.segs)
	nslow := int32(0)
	for _, p := range st.slowest {
		if int(p.seg) == seg {
			nslow++
		}
	}
	st.segs = append(st.segs, segment{file: f, nslow: nslow})
	invReq := 1 / req
	n := float64(fl.n)
	cb := t.cliBase + slotsPerHost*int(st.client)
	perWant, perDemand := wantWire/n, demand/n
	for s := fl.first; s < fl.first+fl.n; s++ {
		d := t.stripes[s].dev
		t.flows = append(t.flows, flow{})
		f := &t.flows[len(t.flows)-1]
		f.src, f.write, f.err, f.owner, f.stripe, f.dev = srcStream, write, -1, si, s, d
		f.want, f.demand, f.lim, f.req, f.amp = perWant, perDemand, -1, req, amp
		f.seg = uint8(seg)
		if seg == 0 {
			f.rec = t.streamRecord(si, st, s-fl.first)
		} else {
			f.rec = t.record(st.client, s)
		}
		dv := &t.dev[d]
		c := &t.dtk[d]
		// a request to a lost data server hangs, and holds up the whole
		// sequential stream behind it
		if downDS >= 0 {
			f.err, f.errSubj, f.demand = causeNodeDown, int32(t.dsBase+slotsPerHost*int(downDS)), 0
			continue
		}
		if !c.avail || (write && dv.used >= dv.capBytes) {
			f.err, f.errSubj, f.demand = causeIOError, d, 0
			continue
		}
		db := t.dsBase + slotsPerHost*int(dv.ds)
		if write {
			f.res = [maxPath]int32{int32(cb + slotNICTx), int32(cb + slotPortIn), int32(db + slotPortOut), int32(db + slotNICRx), d, int32(t.spaceBase) + d}
			f.devAt, f.devCoef[0] = 1<<4, c.wInv+c.wOver*invReq
			f.n = 6
		} else {
			f.res = [maxPath]int32{d, int32(db + slotNICTx), int32(db + slotPortIn), int32(cb + slotPortOut), int32(cb + slotNICRx)}
			f.devAt, f.devCoef[0] = 1<<0, c.rInv+c.rOver*invReq
			f.n = 5
		}
	}
}

// segment is one file a stream reads in a tick: the file, where in it the
// stream started, the goodput it got there and the time it took.
type segment struct {
	file       int32
	start, got float64
	// time is how long the stream spent on the file this tick (its
	// bytes ÷ window × the file's time, Little's law); nslow how many of
	// st.slowest are this file's
	time  float64
	nslow int32
}

// walkSegments moves a data-loader worker that read several files this
// tick to where its goodput took it: through each file it finished, to
// the file where the goodput ends; files it opened but did not reach wait
// in st.ahead for next tick. A stream that met an error stays on the file
// that failed, the last it opened.
func (t *Twin) walkSegments(st *stream) {
	last := len(st.segs) - 1
	if st.errored {
		sg := st.segs[last]
		st.file, st.pos = sg.file, sg.start+sg.got
		return
	}
	g := 0.0
	for _, sg := range st.segs {
		g += sg.got
	}
	for i, sg := range st.segs {
		room := t.files[sg.file].size - sg.start
		if i < last && g >= room-1 {
			g -= room
			continue
		}
		st.file, st.pos = sg.file, sg.start+min(g, room)
		if i < last {
			back := make([]int32, 0, last-i+len(st.ahead))
			for _, x := range st.segs[i+1:] {
				back = append(back, x.file)
			}
			st.ahead = append(back, st.ahead...)
		}
		return
	}
}

// share serves every flow: each resource whose offered load exceeds its
// capacity scales all flows through it by capacity ÷ load, and a flow gets
// the smallest scale on its path. This is proportional sharing at the
// bottleneck (what a FIFO device queue or a shared link without per-flow
// scheduling does): no resource ever serves more than its capacity.
func (t *Twin) share() {
	load, used, scale, capa := t.resLoad, t.resUsed, t.resScale, t.resCap
	for i := range load {
		load[i], used[i] = 0, 0
	}
	for i := range t.flows {
		f := &t.flows[i]
		for k := uint8(0); k < f.n; k++ {
			load[f.res[k]] += f.demand * f.coef(k)
		}
	}
	for i := range load {
		switch {
		case load[i] <= capa[i]:
			scale[i] = 1
		case capa[i] <= 0:
			scale[i] = 0
		default:
			// nextafter guards against rounding pushing the sum of
			// scaled flows one ulp above the capacity
			scale[i] = math.Nextafter(capa[i]/load[i], 0)
		}
	}
	for i := range t.flows {
		f := &t.flows[i]
		x, lim := 1.0, int32(-1)
		for k := uint8(0); k < f.n; k++ {
			if s := scale[f.res[k]]; s < x {
				x, lim = s, f.res[k]
			}
		}
		f.served = f.demand * x
		f.lim = lim
		for k := uint8(0); k < f.n; k++ {
			used[f.res[k]] += f.served * f.coef(k)
		}
	}
}

// updateDevices turns the tick's device time into utilisation and the
// queueing multiplier of latency: 1/(1−ρ) capped at ρ = 0.95 (an M/M/1
// curve), times offered ÷ capacity when the device is oversubscribed (the
// queue of a closed loop grows with the excess). The multiplier is
// smoothed (half-life one tick) so that streams, whose windows depend on
// latency, settle instead of oscillating.
func (t *Twin) updateDevices() {
	for d := range t.dev {
		dv := &t.dev[d]
		c := t.resCap[d]
		if c <= 0 {
			dv.util = 0
			continue
		}
		rho := t.resUsed[d] / c
		dv.util = rho
		target := 1 / (1 - min(rho, 0.95))
		if over := t.resLoad[d] / c; over > 1 {
			target *= over
		}
		dv.qmul = 0.5*dv.qmul + 0.5*target
		dv.utilEWMA += (rho - dv.utilEWMA) * min(1, t.dt/60)
	}
	// network resources queue the same way; each host keeps the worst of
	// its NIC and port directions, which multiplies the round trip of
	// every request through it
	for r := t.dsBase; r < t.spaceBase; r++ {
		c := t.resCap[r]
		target := 1.0
		if c > 0 {
			target = 1 / (1 - min(t.resUsed[r]/c, 0.95))
			if over := t.resLoad[r] / c; over > 1 {
				target *= over
			}
		}
		t.rq[r] = 0.5*t.rq[r] + 0.5*target
	}
	for h := range t.hostQ {
		b := t.dsBase + slotsPerHost*h
		if h >= len(t.ds) {
			b = t.cliBase + slotsPerHost*(h-len(t.ds))
		}
		q, qr := t.rq[b], int32(b)
		for k := 1; k < slotsPerHost; k++ {
			if t.rq[b+k] > q {
				q, qr = t.rq[b+k], int32(b+k)
			}
		}
		t.hostQ[h], t.hostQRes[h] = q, qr
	}
}

// settleFlows books every flow's bytes on streams, counters and records.
func (t *Twin) settleFlows(now float64) {
	rtt := t.sc.Topology.NetRTTMicros * 1e-3 // ms
	ck := t.checkpointing()
	for i := range t.flows {
		f := &t.flows[i]
		switch f.src {
		case srcMigration:
			m := &t.migs[f.owner]
			got := min(f.served, f.want) // its pace's share, up to what it has left
			m.moved += got
			t.bookDevice(f.dev, got, 1<<20, false)
			t.bookDevice(m.dst, got, 1<<20, true)
			t.dev[m.dst].used += got
			t.migBytes[b2i(m.urgent)] += got
			if ck {
				t.migInCk[b2i(m.urgent)] += got
			}
			continue
		case srcVerify:
			m := &t.migs[f.owner]
			got := min(f.served, f.want)
			if f.rec == 0 {
				m.verSrc += got
			} else {
				m.verDst += got
			}
			t.bookDevice(f.dev, got, 1<<20, false)
			t.migBytes[b2i(m.urgent)] += got
			if ck {
				t.migInCk[b2i(m.urgent)] += got
			}
			continue
		case srcFill:
			dv := &t.dev[f.dev]
			t.bookDevice(f.dev, f.served, 1<<20, true)
			dv.used = min(dv.capBytes, dv.used+f.served)
			t.faults[f.owner].fillDev[f.stripe] += f.served
			continue
		case srcCross:
			continue
		}
		st := &t.streams[f.owner]
		if f.err >= 0 {
			t.noteLoss(st, f.want/f.amp, int8(f.err), f.errSubj)
			st.errored = true
			if f.err == causeNodeDown {
				st.errDown = true
				if float64(st.errTicks+1)*t.dt < nfsTimeout {
					continue // still hanging, not failed yet
				}
			}
			t.ioErrors++
			t.cli[st.client].errors++
			if f.rec >= 0 {
				r := t.rec(f.rec)
				r.stamp(t, now)
				notDelivered := min(f.want, t.dt*t.cli[st.client].nicBW/float64(t.files[t.stripes[f.stripe].file].n))
				io := &r.rd
				if f.write {
					io = &r.wr
				}
				io.fail(notDelivered/f.req, notDelivered)
				t.noteIOError(st, f, r, now, notDelivered/f.req)
			}
			continue
		}
		good := f.served / f.amp
		st.got += good
		if f.dev >= 0 {
			t.dev[f.dev].userBytes += f.served
		}
		if capLoss := f.want - f.demand; capLoss > 1e-9*f.want {
			// a round trip through a link without a queue is a fixed
			// delay: the window in flight (read-ahead) limits the stream,
			// not the link; a link is blamed once its queue at least
			// doubles the round trip, as a device is (docs/scenarios.md)
			// the stream's slowest stripes share it alike; a worker that
			// read several files this tick ran out of time on all of
			// them, each owing the share of the time it took
			for _, p := range st.slowest {
				part := capLoss / f.amp * t.segShare(st, p.seg)
				if part <= 0 {
					continue
				}
				if p.net >= 0 && t.rq[p.net] >= 2 {
					t.noteLoss(st, part, t.causeOfRes(p.net), p.net)
				} else if p.dev >= 0 && t.dev[p.dev].qmul*t.dev[p.dev].outlier*t.dev[p.dev].fleet.latNoise >= 2 {
					t.noteLoss(st, part, causeDevice, p.dev)
				} else if !f.write {
					t.noteLoss(st, part, causeReadAhead, int32(t.cliBase+slotsPerHost*int(st.client)+slotNICRx))
				}
			}
		}
		if resLoss := f.demand - f.served; resLoss > 1e-9*f.demand && f.lim >= 0 {
			t.noteLoss(st, resLoss/f.amp, t.causeOfRes(f.lim), f.lim)
		}
		if f.served <= 0 {
			continue
		}
		ops := f.served / f.req
		lat := t.devLatency(f.dev, f.req, f.write)
		t.bookDevice(f.dev, f.served, f.req, f.write)
		c := &t.cli[st.client]
		ms := ops * (lat*1e3 + rtt*max(t.hostQ[t.dev[f.dev].ds], t.hostQ[len(t.ds)+int(st.client)]))
		dv := &t.dev[f.dev]
		sp := &t.stripes[f.stripe]
		if f.write {
			c.wrOps += ops
			c.wrBytes += f.served
			c.wrRTTms += ms
			c.wrExems += ms + ops*0.01
			sp.bytes += f.served
			dv.used += f.served
			st.pos += f.served
			t.ds[dv.ds].nfsdWrites += ops
		} else {
			c.readOps += ops
			c.readBytes += f.served
			c.readGood += good
			c.readRTTms += ms
			c.readExems += ms + ops*0.01
			if st.kind == streamSeqRead {
				if len(st.segs) > 1 {
					st.segs[f.seg].got += good
				} else {
					st.pos += good
				}
			}
			t.ds[dv.ds].nfsdReads += ops
		}
		r := t.rec(f.rec)
		r.stamp(t, now)
		io := &r.rd
		if f.write {
			io = &r.wr
		}
		io.complete(t.tick, t.dt, ops, f.served, ms*1e-3)
	}
	// sequential streams that hit an error skip the rest of the file, as a
	// data loader skips an unreadable shard
	for si := range t.streams {
		st := &t.streams[si]
		if len(st.segs) > 1 {
			t.walkSegments(st)
		}
		if !st.errored {
			st.errTicks = 0
			continue
		}
		st.errTicks++
		if st.errDown && float64(st.errTicks)*t.dt < nfsTimeout {
			continue
		}
		st.errTicks = 0
		if st.kind == streamSeqRead {
			st.pos = t.files[st.file].size
		}
		if st.kind == streamWrite && !st.bg {
			j := &t.jobs[st.job]
			if j.ckOn && j.ckFailed == "" {
				j.ckFailed = "io_error"
				dv := t.stripes[t.files[st.file].first].dev
				if t.dev[dv].used >= t.dev[dv].capBytes {
					j.ckFailed = "enospc"
				}
			}
		}
	}
	// network counters from what the resources carried
	for i := range t.ds {
		b := t.dsBase + slotsPerHost*i
		t.ds[i].txBytes += t.resUsed[b+slotNICTx]
		t.ds[i].rxBytes += t.resUsed[b+slotNICRx]
	}
	for i := range t.cli {
		b := t.cliBase + slotsPerHost*i
		t.cli[i].txBytes += t.resUsed[b+slotNICTx]
		t.cli[i].rxBytes += t.resUsed[b+slotNICRx]
	}
}

// bookDevice adds served bytes in requests of req bytes to device d's
// diskstats counters.
func (t *Twin) bookDevice(d int32, bytes, req float64, write bool) {
	if bytes <= 0 {
		return
	}
	dv := &t.dev[d]
	ops := bytes / req
	ms := ops * t.devLatency(d, req, write) * 1e3
	if write {
		dv.wrOps += ops
		dv.wrBytes += bytes
		dv.wrMs += ms
		dv.smart.hostWrites += ops
		dv.smart.bytesWritten += bytes
	} else {
		dv.rdOps += ops
		dv.rdBytes += bytes
		dv.rdMs += ms
		dv.smart.hostReads += ops
		dv.smart.bytesRead += bytes
	}
	dv.wIoMs += ms
}

// noteLoss books a shortfall of amt bytes of stream st on the resource
// subj that caused it. A stream's goodput is the sum of its components'
// (one flow per stripe), so each component's shortfall is that much of
// the stream's loss, and the GPU idle time it causes is split over the
// shortfalls in proportion (docs/scenarios.md, "GPU idle truth"): a
// checkpoint that saturates every DS a file is striped over starves its
// readers on all of them, not on the first stripe's.
func (t *Twin) noteLoss(st *stream, amt float64, cause int8, subj int32) {
	if amt <= 0 {
		return
	}
	st.losses = addLoss(st.losses, cause, subj, amt)
	st.lossAmt += amt
}

// slowPart is one stripe of a stream as its latency cap sees it: the
// device, the network resource whose queue dominates its time (-1 none),
// the stream's segment (file) it belongs to and that time.
type slowPart struct {
	dev, net int32
	seg      uint8
	lat      float64
}

// segShare is the share of a latency-capped stream's shortfall one of
// the slowest stripes of its segment seg owes: the segment's share of the
// time the stream spent on its files this tick, split alike over that
// file's slowest stripes. With no time booked (a stream read nothing
// before the cap), the last file's stripes owe it all.
func (t *Twin) segShare(st *stream, seg uint8) float64 {
	sg := &st.segs[seg]
	if sg.nslow <= 0 {
		return 0
	}
	tot := 0.0
	for i := range st.segs {
		tot += st.segs[i].time
	}
	if len(st.segs) == 1 || tot <= 0 {
		if int(seg) != len(st.segs)-1 {
			return 0
		}
		return 1 / float64(sg.nslow)
	}
	return sg.time / tot / float64(sg.nslow)
}

// equalLimit is how close to the slowest stripe's time another stripe's
// must be to limit the stream alike: the queue multipliers behind it are
// themselves averaged half-and-half per tick, so smaller differences are
// below what the model resolves.
const equalLimit = 0.05

// lossPart is one cause's share of a shortfall: its cause, subject and
// bytes (or, for a GPU's stall, the weight of its idle time).
type lossPart struct {
	cause int8
	subj  int32
	amt   float64
}

// addLoss adds amt to the part of ls with cause and subj, or appends one.
func addLoss(ls []lossPart, cause int8, subj int32, amt float64) []lossPart {
	for i := range ls {
		if ls[i].cause == cause && ls[i].subj == subj {
			ls[i].amt += amt
			return ls
		}
	}
	return append(ls, lossPart{cause: cause, subj: subj, amt: amt})
}

// stallTotal is the weight of a GPU's remembered stall causes.
func stallTotal(ls []lossPart) float64 {
	s := 0.0
	for _, l := range ls {
		s += l.amt
	}
	return s
}

// causeOfRes maps a limiting resource to its idle-time cause.
func (t *Twin) causeOfRes(r int32) int8 {
	switch {
	case int(r) < t.dsBase:
		return causeDevice
	case int(r) >= t.spaceBase:
		return causeIOError // no space left
	case int(r) < t.cliBase:
		if (int(r)-t.dsBase)%slotsPerHost < slotPortIn {
			return causeDSNIC
		}
		return causePort
	default:
		if (int(r)-t.cliBase)%slotsPerHost < slotPortIn {
			return causeClientNIC
		}
		return causePort
	}
}

// endTick finishes device counters and SMART for the tick and flushes a
// minute of GPU idle truth when a minute ends.
func (t *Twin) endTick(now float64) {
	dtms := t.dt * 1e3
	for d := range t.dev {
		dv := &t.dev[d]
		if t.ds[dv.ds].down {
			continue
		}
		dv.ioMs += min(1, dv.util) * dtms
		// mean queue length of an M/M/1 queue: ρ/(1−ρ) = ρ × multiplier
		dv.inflight = min(1, dv.util) * dv.qmul
		t.tickSmart(int32(d), now)
		// a device at 98 % of its capacity is full for the truth; it stops
		// being full below 95 %
		if f := dv.used / dv.capBytes; f >= 0.98 && dv.fullRec < 0 && !dv.spare {
			dv.fullRec = t.openTruth("device_full", t.deviceSubject(int32(d)), now, map[string]any{"pool": t.pools[dv.pool].name, "capacity_bytes": dv.capBytes})
		} else if f < 0.95 && dv.fullRec >= 0 {
			t.closeTruth(dv.fullRec, now)
			dv.fullRec = -1
		}
	}
	for r := t.dsBase; r < t.spaceBase; r++ {
		t.resTotal[r] += t.resUsed[r]
	}
	t.trackSaturation(now)
	end := now + t.dt
	if m := int64(end) / 60; m != t.minuteOf {
		t.flushIdleMinute(float64(t.minuteOf*60), float64(m*60))
		t.minuteOf = m
		// clients send LAYOUTSTATS for each layout in use about once a
		// minute
		for i := 0; i < t.nRecs; i++ {
			if r := t.rec(int32(i)); r.client >= 0 && end-r.last <= layoutRecentWindow {
				t.cli[r.client].layoutStats++
			}
		}
		t.sweepRecords(end)
	}
}
