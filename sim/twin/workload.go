package twin

import (
	"fmt"
	"math"
)

// Stream kinds.
const (
	streamSeqRead  uint8 = iota // sequential read through a file (shard, scan)
	streamRandRead              // random reads of appReq bytes over files
	streamWrite                 // sequential write of a checkpoint file
)

// stream is one client-side I/O stream: a data-loader worker, a scan, an
// inference reader or a checkpoint writer.
type stream struct {
	kind   uint8
	active bool
	client int32
	gpu    int32 // -1 if not feeding a GPU
	job    int32
	file   int32
	pos    float64 // bytes done in file
	want   float64 // goodput wanted this tick, bytes
	// desired is what the stream would want were its file not ending;
	// credit is the part of last tick a file end left unused, which the
	// stream may use this tick (it would have opened the next file at
	// once)
	desired float64
	credit  float64
	// segs are the files the stream reads this tick (a data-loader worker
	// reads on into its next files, chainFiles); ahead are files a worker
	// opened but did not reach, read first next tick
	segs   []segment
	ahead  []int32
	got    float64 // goodput delivered this tick, bytes
	appReq float64 // application request size, bytes
	depth  float64 // outstanding application requests
	// what the stream got less than it wanted this tick, in total and by
	// the cause and subject of each shortfall
	lossAmt float64
	losses  []lossPart
	// slowest are the stripes that set the stream's latency cap this
	// tick (within equalLimit of the slowest), of each file it read
	// (slowPart.seg)
	slowest  []slowPart
	errored  bool
	errDown  bool  // the error is a hang on a lost data server
	errTicks int32 // consecutive ticks with errors

	// bg marks a training node's log writer (logs.go): a write stream
	// that is no checkpoint's
	bg bool

	// held is what a data-loader worker delivered that its GPU has not
	// consumed yet: its prefetched batches, at most its share of the
	// GPU's prefetch queue and of a tick's consumption (setWants,
	// settleJobs: in-order delivery)
	held float64
}

// job is the runtime state of one workload.
type job struct {
	w        *Workload
	kind     string
	clients  []int32
	gpus     []int32
	first    int32 // first stream
	nRead    int32 // read streams
	dataset  int32
	perGPU   float64 // training: bytes/s each GPU consumes at full speed
	rate     float64 // inference/analytics: goodput bytes/s per stream, 0 = unlimited
	scale    float64
	active   bool
	perm     []int32
	permPos  int
	hot      []hotSet // active hot_shard faults on the dataset, in start order
	phaseRec int

	ck       *Checkpoint
	ckFiles  []int32 // slot*ranks + rank
	ckSlots  int
	ckCount  int
	ckNext   float64
	ckOn     bool
	ckStart  float64
	ckRec    int
	ckWriter int32 // first writer stream
	ckFailed string

	// the job's log writers (logs.go), one per node from logWriter on:
	// bytes each has appended and not yet written back, and the
	// simulated second of its next writeback
	logWriter  int32
	logPending []float64
	logNext    []float64

	// GPU-seconds of the job's GPUs (remediation scoring): allocated,
	// busy, and paused for a synchronous checkpoint
	allocSec, busySec, pauseSec float64
}

func (t *Twin) buildJobs(poolIdx map[string]int32) error {
	sc := t.sc
	for ji := range sc.Workloads {
		w := &sc.Workloads[ji]
		j := job{w: w, kind: w.Kind, scale: 1, phaseRec: -1, ckRec: -1, ckWriter: -1, logWriter: -1}
		for di := range t.datasets {
			if t.datasets[di].name == w.Dataset {
				j.dataset = int32(di)
			}
		}
		for ci := range t.cli {
			g := sc.Topology.Clients[t.cli[ci].group]
			if g.NamePrefix != w.Clients {
				continue
			}
			idx := ci - t.firstClientOf(t.cli[ci].group)
			if idx >= w.First && idx < w.First+w.Count {
				j.clients = append(j.clients, int32(ci))
			}
		}
		j.first = int32(len(t.streams))
		switch w.Kind {
		case KindTraining:
			j.perGPU = w.SamplesPerSec * w.BytesPerSample
			for _, ci := range j.clients {
				c := &t.cli[ci]
				for g := c.firstGPU; g < c.firstGPU+c.nGPU; g++ {
					if t.gpus[g].job >= 0 {
						return fmt.Errorf("workload %q: GPU %d of %s already runs workload %q", w.Name, t.gpus[g].index, c.name, sc.Workloads[t.gpus[g].job].Name)
					}
					t.gpus[g].job = int32(ji)
					t.gpus[g].cap = w.PrefetchMB * 1e6
					j.gpus = append(j.gpus, g)
					for k := 0; k < w.Workers; k++ {
						t.streams = append(t.streams, stream{kind: streamSeqRead, client: ci, gpu: g, job: int32(ji), file: -1, appReq: w.ReadKB * 1024, depth: 1})
					}
				}
			}
		case KindAnalytics, KindInference:
			kind := streamSeqRead
			if w.Kind == KindInference {
				kind = streamRandRead
			}
			j.rate = w.RateMBps * 1e6
			for _, ci := range j.clients {
				for k := 0; k < w.Streams; k++ {
					t.streams = append(t.streams, stream{kind: kind, client: ci, gpu: -1, job: int32(ji), file: -1, appReq: w.ReadKB * 1024, depth: float64(w.QueueDepth)})
				}
			}
		}
		j.nRead = int32(len(t.streams)) - j.first
		if c := w.Checkpoint; c != nil {
			j.ck = c
			j.ckSlots = c.Keep + 1
			ranks := len(j.gpus)
			p := poolIdx[c.Pool]
			if n := len(t.pools[p].devices); c.Layout.StripeCount > n {
				return fmt.Errorf("workload %q: checkpoint stripe_count %d exceeds the %d devices of pool %q", w.Name, c.Layout.StripeCount, n, c.Pool)
			}
			size := c.SizeGB * 1e9 / float64(ranks)
			for s := 0; s < j.ckSlots; s++ {
				for r := 0; r < ranks; r++ {
					f := t.addFile(fmt.Sprintf("%s/ckpt-%d/rank-%04d", w.Name, s, r), -1, size, c.Layout)
					t.place(f, p, c.Layout.Placement)
					j.ckFiles = append(j.ckFiles, f)
				}
			}
			j.ckWriter = int32(len(t.streams))
			for r := 0; r < ranks; r++ {
				g := j.gpus[r]
				t.streams = append(t.streams, stream{kind: streamWrite, client: t.gpus[g].client, gpu: -1, job: int32(ji), file: -1, appReq: c.WriteKB * 1024, depth: float64(c.Depth)})
			}
			j.ckNext = c.First.Seconds() + t.jitter(c.Jitter.Seconds())
		}
		t.jobs = append(t.jobs, j)
	}
	return nil
}

func (t *Twin) firstClientOf(group int) int {
	for i := range t.cli {
		if t.cli[i].group == group {
			return i
		}
	}
	return 0
}

func (t *Twin) jitter(j float64) float64 {
	if j <= 0 {
		return 0
	}
	return (t.rng.Float64()*2 - 1) * j
}

// scheduleJobs starts and stops workloads and checkpoints at time now
// (seconds since start).
func (t *Twin) scheduleJobs(now float64) {
	for ji := range t.jobs {
		j := &t.jobs[ji]
		w := j.w
		on := now >= w.Start.Seconds() && (w.End == 0 || now < w.End.Seconds())
		if on && !j.active {
			j.active = true
			j.phaseRec = t.openTruth("workload_phase", subjectJob(w.Name), now, map[string]any{
				"class": w.Kind, "clients": w.Clients, "nodes": len(j.clients), "dataset": w.Dataset,
			})
		} else if !on && j.active {
			j.active = false
			t.closeTruth(j.phaseRec, now)
			for s := j.first; s < j.first+j.nRead; s++ {
				t.streams[s].active = false
			}
			t.stopLogs(j)
		}
		if j.ck != nil && j.active && !j.ckOn && now >= j.ckNext {
			t.startCheckpoint(ji, now)
		}
	}
}

func (t *Twin) startCheckpoint(ji int, now float64) {
	j := &t.jobs[ji]
	ranks := len(j.gpus)
	slot := j.ckCount % j.ckSlots
	j.ckCount++
	j.ckOn = true
	j.ckStart = now
	j.ckFailed = ""
	pi := int32(0)
	for i := range t.pools {
		if t.pools[i].name == j.ck.Pool {
			pi = int32(i)
		}
	}
	for r := 0; r < ranks; r++ {
		f := j.ckFiles[slot*ranks+r]
		t.deleteFile(f) // the oldest checkpoint makes room
		t.place(f, pi, j.ck.Layout.Placement)
		s := &t.streams[j.ckWriter+int32(r)]
		s.active, s.file, s.pos = true, f, 0
		t.cli[s.client].opens++
	}
	j.ckRec = t.openTruth("checkpoint_burst", subjectJob(j.w.Name), now, map[string]any{
		"mode": j.ck.Mode, "bytes": j.ck.SizeGB * 1e9, "ranks": ranks, "slot": slot,
	})
}

// deleteFile frees the bytes a file holds on its devices.
func (t *Twin) deleteFile(f int32) {
	fl := &t.files[f]
	for s := fl.first; s < fl.first+fl.n; s++ {
		st := &t.stripes[s]
		if st.dev >= 0 {
			t.dev[st.dev].used = max(0, t.dev[st.dev].used-st.bytes)
		}
		st.bytes = 0
	}
}

func (t *Twin) finishCheckpoint(ji int, now float64) {
	j := &t.jobs[ji]
	j.ckOn = false
	for r := range j.gpus {
		t.streams[j.ckWriter+int32(r)].active = false
	}
	if j.ckFailed != "" {
		t.truth[j.ckRec].Params["failed"] = j.ckFailed
		slot := (j.ckCount - 1) % j.ckSlots
		for r := range j.gpus {
			t.deleteFile(j.ckFiles[slot*len(j.gpus)+r])
		}
	}
	t.closeTruth(j.ckRec, now)
	base := now
	if j.ck.Mode == ModeAsync {
		base = j.ckStart
	}
	j.ckNext = max(now+t.dt, base+j.ck.Interval.Seconds()+t.jitter(j.ck.Jitter.Seconds()))
}

// paused reports whether the GPUs of job ji wait for a synchronous
// checkpoint.
func (j *job) paused() bool { return j.ckOn && j.ck.Mode == ModeSync }

// hotSet is one active hot_shard fault as a job sees it: a share of its
// file picks goes to these files.
type hotSet struct {
	fault int // index in Twin.faults
	files []int32
	share float64
}

// nextFile picks the next file of a read stream: shuffled order for
// training (one permutation per epoch shared by all ranks, like a
// distributed sampler), sequential for scans, uniform for random readers;
// each active hot-shard fault diverts its share of picks to its hot files
// (several faults on one dataset take their shares side by side, the later
// ones getting what is left when the shares add up to more than 1).
func (t *Twin) nextFile(j *job, kind uint8) int32 {
	ds := &t.datasets[j.dataset]
	if len(j.hot) > 0 {
		r, acc := t.rng.Float64(), 0.0
		for _, h := range j.hot {
			if acc += h.share; r < acc {
				return h.files[t.rng.IntN(len(h.files))]
			}
		}
	}
	if kind == streamRandRead {
		if j.w.HotFraction > 0 && t.rng.Float64() < 0.9 {
			n := max(1, int(float64(ds.nFiles)*j.w.HotFraction))
			return ds.firstFile + int32(t.rng.IntN(n))
		}
		return ds.firstFile + int32(t.rng.IntN(int(ds.nFiles)))
	}
	if j.permPos >= len(j.perm) {
		if j.perm == nil {
			j.perm = make([]int32, ds.nFiles)
		}
		for i := range j.perm {
			j.perm[i] = ds.firstFile + int32(i)
		}
		if j.kind == KindTraining {
			t.rng.Shuffle(len(j.perm), func(a, b int) { j.perm[a], j.perm[b] = j.perm[b], j.perm[a] })
		}
		j.permPos = 0
	}
	f := j.perm[j.permPos]
	j.permPos++
	return f
}

// setWants decides how many bytes each active stream wants this tick.
func (t *Twin) setWants() {
	dt := t.dt
	for ji := range t.jobs {
		j := &t.jobs[ji]
		if !j.active {
			continue
		}
		switch j.kind {
		case KindTraining:
			w := float64(j.w.Workers)
			c := j.perGPU * j.scale * dt
			if j.paused() {
				c = 0
			}
			for k, g := range j.gpus {
				// each worker holds at most its share of the prefetch
				// queue and wants the room in it plus its share of the
				// tick's consumption (the GPU takes a batch from each
				// worker in turn); a full one reads only what the GPU
				// took from it
				share := t.gpus[g].cap / w
				for s := j.first + int32(k)*int32(j.w.Workers); s < j.first+int32(k+1)*int32(j.w.Workers); s++ {
					st := &t.streams[s]
					st.active = true
					if st.file < 0 || t.fileDone(st) {
						st.file, st.pos = t.nextLoaderFile(j, st), 0
						t.cli[st.client].opens++
					}
					// the worker reads on into its next files within the
					// tick (chainFiles)
					st.desired = max(0, share-st.held+c/w)
					st.want = st.desired
				}
			}
		default:
			for s := j.first; s < j.first+j.nRead; s++ {
				st := &t.streams[s]
				st.active = true
				if st.kind == streamRandRead || st.file < 0 || t.fileDone(st) {
					if st.kind == streamSeqRead || st.file < 0 {
						t.cli[st.client].opens++
					}
					st.file, st.pos = t.nextFile(j, st.kind), 0
				}
				want := math.Inf(1)
				if j.rate > 0 {
					want = j.rate*j.scale*dt + st.credit
				}
				st.desired = want
				if st.kind == streamSeqRead {
					want = min(want, t.files[st.file].size-st.pos)
				}
				st.want = want
			}
		}
		if j.ckOn {
			for r := range j.gpus {
				st := &t.streams[j.ckWriter+int32(r)]
				st.want = max(0, t.files[st.file].size-st.pos)
			}
		}
		t.logWants(j)
	}
}

// settleJobs moves delivered bytes into prefetch queues, runs the GPUs and
// attributes their idle time, and completes checkpoints.
func (t *Twin) settleJobs(now float64) {
	dt := t.dt
	t.drawStepGaps()
	for ji := range t.jobs {
		j := &t.jobs[ji]
		if j.ckOn {
			done := true
			for r := range j.gpus {
				st := &t.streams[j.ckWriter+int32(r)]
				if !t.fileDone(st) {
					done = false
				}
			}
			if done || j.ckFailed != "" {
				t.finishCheckpoint(ji, now+dt)
			}
		}
		if j.kind != KindTraining {
			continue
		}
		t.settleLogs(j)
		paused := j.paused()
		for k, g := range j.gpus {
			gp := &t.gpus[g]
			if !j.active {
				gp.busy = 0
				continue
			}
			ws := t.streams[j.first+int32(k)*int32(j.w.Workers) : j.first+int32(k+1)*int32(j.w.Workers)]
			got, low := 0.0, math.Inf(1)
			for i := range ws {
				ws[i].held += ws[i].got
				got += ws[i].got
				low = min(low, ws[i].held)
			}
			w := float64(len(ws))
			gp.pcieRx += got
			gp.lastRx = got
			t.allocSec += dt
			j.allocSec += dt
			rate := j.perGPU * j.scale // bytes/s the GPU consumes
			if rate > 0 {
				t.withhold(gp, ws, rate)
			}
			if paused {
				j.pauseSec += dt
				gp.busy = 0
				gp.energyJ += gpuIdleWatts * dt
				t.addIdle(causeCheckpoint, len(t.resCap)+ji, dt)
				capStall(gp, gp.cap-w*low, rate)
				continue
			}
			c := j.perGPU * j.scale * dt
			// the host's gaps between steps (fleet.go) leave the GPU idle
			// for gap of the tick whatever the loader holds
			gap := 0.0
			if c > 0 {
				gap = t.stepGap[g]
			}
			// the GPU takes batches in order, one from each worker in
			// turn, so it can use at most workers × the least any worker
			// holds (docs/scenarios.md, step 8)
			used := min(c*(1-gap), w*low)
			for i := range ws {
				ws[i].held = max(0, ws[i].held-used/w)
			}
			low = max(0, low-used/w)
			busy := 1.0
			if c > 0 {
				busy = used / c
			}
			gp.busy = busy
			gp.busySec += busy * dt
			t.busySec += busy * dt
			j.busySec += busy * dt
			gp.energyJ += (gpuIdleWatts + (gpuBusyWatts-gpuIdleWatts)*busy) * dt
			// the host's gaps come with the steps the GPU ran (a GPU
			// that ran none had none): busy × gap/(1 − gap) of the tick,
			// the host's (no storage cause); the rest of the idle goes to
			// what withheld the data
			hostIdle := busy * gap / (1 - gap) * dt
			idle := max(0, (1-busy)*dt-hostIdle)
			if idle > 1e-12 {
				if rest := idle - t.addStallIdle(gp, idle); rest > 1e-12 {
					t.addIdle(causeLoader, t.cliBase+slotsPerHost*int(gp.client)+slotNICRx, rest)
				}
			}
			if hostIdle > 0 {
				t.addIdle(causeLoader, t.cliBase+slotsPerHost*int(gp.client)+slotNICRx, hostIdle)
			}
			capStall(gp, gp.cap-w*low, rate)
		}
	}
}

// withhold adds to a GPU's stall the work its workers' shortfalls withheld
// this tick (docs/scenarios.md, step 9). The GPU takes a batch from each
// of its w workers in turn, so a worker's missing bytes hold back w times
// as many of its consumption once the others' prefetch is full, and the
// tick's shortfalls together at most w times the largest one worker had:
// each cause and subject is owed w × the most it withheld from one worker,
// all scaled down to that total where they add up to more (workers short
// alike of one cause owe what they missed together; of different causes,
// each its own).
func (t *Twin) withhold(gp *gpu, ws []stream, rate float64) {
	top := 0.0
	parts := t.withheld[:0]
	for i := range ws {
		top = max(top, ws[i].lossAmt)
		for _, l := range ws[i].losses {
			parts = maxLoss(parts, l.cause, l.subj, l.amt)
		}
	}
	t.withheld = parts
	if top <= 0 {
		return
	}
	sum := stallTotal(parts)
	f := float64(len(ws)) * min(1, top/sum) / rate
	for _, l := range parts {
		gp.stall = addLoss(gp.stall, l.cause, l.subj, l.amt*f)
	}
}

// maxLoss keeps in ls the largest amt seen for cause and subj.
func maxLoss(ls []lossPart, cause int8, subj int32, amt float64) []lossPart {
	for i := range ls {
		if ls[i].cause == cause && ls[i].subj == subj {
			ls[i].amt = max(ls[i].amt, amt)
			return ls
		}
	}
	return append(ls, lossPart{cause: cause, subj: subj, amt: amt})
}

// GPU power model, H100 SXM class (docs/scenarios.md).
const (
	gpuIdleWatts = 90.0
	gpuBusyWatts = 650.0
)

// fileDone reports whether stream st has finished its file; less than a
// byte left counts as done (float sums of a tick's shares round).
func (t *Twin) fileDone(st *stream) bool { return st.pos >= t.files[st.file].size-1 }
