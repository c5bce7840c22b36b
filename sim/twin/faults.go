package twin

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/ballast-io/ballast/models"
)

// faultState is the runtime state of one scenario fault.
type faultState struct {
	f       *Fault
	dev     int32
	ds      int32
	port    int // resource base of the port's host
	pool    int32
	job     int32
	dataset int32
	on      bool
	done    bool
	rec     int
	hotRecs []int
	fillDev []float64  // bytes this fault wrote to each pool device
	prog    float64    // failing drive: progress 0..1 at the last tick
	rng     *rand.Rand // the fault's own noise (see faultStream)
	// failing drive: the SMART values its drive exported before the
	// onset, and whether noteEvidence has seen them differ
	evBase   smartEvidence
	evNoted  bool
	errNoted bool
}

// smartEvidence is what of a drive's exported SMART / Health values can
// tell a failing drive from a healthy one.
type smartEvidence struct {
	mediaErr, errLog, spare float64
	warning                 uint8
}

func (t *Twin) smartEvidence(d int32) smartEvidence {
	sm := &t.dev[d].smart
	return smartEvidence{mediaErr: sm.mediaErr, errLog: sm.errLog - sm.errLogNoise, spare: sm.spare, warning: t.criticalWarning(d)}
}

// noteEvidence records, on each failing drive's truth record, when its
// drive first became observably different in what the agents export
// (Smart): evidence_after_onset_s, the first tick its media errors or
// error-log entries rose above their values before the onset, its
// available spare fell below it, its critical-warning bits changed, or it
// failed (first_evidence names which); and error_after_onset_s, the first
// tick its media errors or error-log entries rose (or it failed). No
// detector can see a drive before then; the scorer measures detection
// delay from these as well as from the onset (docs/evaluation.md).
func (t *Twin) noteEvidence(now float64) {
	for i := range t.faults {
		fs := &t.faults[i]
		if fs.f.Kind != FaultFailingDrive || fs.rec < 0 || fs.errNoted {
			continue
		}
		e, b, failed := t.smartEvidence(fs.dev), fs.evBase, t.dev[fs.dev].failed
		r := &t.truth[fs.rec]
		after := t.at(now).Sub(r.Start).Seconds()
		if e.mediaErr > b.mediaErr || e.errLog > b.errLog || failed {
			fs.errNoted = true
			r.Params["error_after_onset_s"] = after
		}
		if fs.evNoted {
			continue
		}
		what := ""
		switch {
		case failed:
			what = "failed"
		case e.mediaErr > b.mediaErr:
			what = "media_errors"
		case e.errLog > b.errLog:
			what = "error_log_entries"
		case e.spare < b.spare:
			what = "available_spare"
		case e.warning != b.warning:
			what = "critical_warning"
		default:
			continue
		}
		fs.evNoted = true
		r.Params["evidence_after_onset_s"] = after
		r.Params["first_evidence"] = what
	}
}

// faultStream is the second word of each fault's PCG source (plus the
// fault's index), apart from the twin's and the generator's. A fault draws
// its own noise (when a failing drive logs media errors, its latency
// outliers and temperature excursions) from its own source, so that noise
// depends only on the seed and the fault, never on what the workloads drew
// or on what an operator or ballast did to the cluster: runs that differ in
// their actions see the same drive decay (common random numbers).
const faultStream = 0x6661756c7473

// NVMe SMART thresholds of the simulated drives (typical data-centre
// values: warning composite temperature 70 °C, critical 85 °C, spare
// threshold 10 %).
const (
	warnTempC   = 70.0
	critTempC   = 85.0
	spareThresh = 10.0
	ambientC    = 33.0
	loadHeatC   = 14.0
)

// NVMe critical-warning bits (NVMe base specification, SMART / Health
// Information log, byte 0).
const (
	cwSpare       = 1 << 0
	cwTemperature = 1 << 1
	cwReliability = 1 << 2
	cwReadOnly    = 1 << 3
)

// smartState holds one drive's NVMe SMART / Health values, lifetime.
type smartState struct {
	tempC          float64
	excursion      float64
	excursionUntil float64
	spare          float64
	pctUsedBase    float64
	wear           float64
	bytesRead      float64
	bytesWritten   float64
	hostReads      float64
	hostWrites     float64
	busyMin        float64
	powerCycles    float64
	powerOnHours   float64
	unsafe         float64
	mediaErr       float64
	errLog         float64
	errLogNoise    float64 // of errLog, the healthy background entries (fleet.go)
	warnTempMin    float64
	critTempMin    float64
	reliability    bool
}

// newSmart gives a drive the history of its age: written at 0.3 drive
// writes per day, read twice that, one power cycle a month.
func newSmart(dv *device) smartState {
	written := 0.3 * dv.capBytes * dv.ageHours / 24
	return smartState{
		tempC:        ambientC,
		spare:        100,
		pctUsedBase:  100 * written / dv.endurance,
		bytesWritten: written,
		bytesRead:    2 * written,
		hostWrites:   written / 131072,
		hostReads:    2 * written / 131072,
		busyMin:      dv.ageHours * 60 * 0.2,
		powerCycles:  1 + math.Floor(dv.ageHours/720),
		powerOnHours: dv.ageHours,
		unsafe:       math.Floor(dv.ageHours / 4000),
	}
}

func (t *Twin) buildFaults() error {
	// each fault acts as graded by its intensity; the scenario keeps
	// what it says (so --print-scenario loads back the same)
	graded := make([]Fault, len(t.sc.Faults))
	for i := range t.sc.Faults {
		graded[i] = t.sc.Faults[i].Graded()
		f := &graded[i]
		fs := faultState{f: f, dev: -1, ds: -1, port: -1, pool: -1, job: -1, dataset: -1, rec: -1,
			rng: rand.New(rand.NewPCG(t.seed, faultStream+uint64(i)))}
		p := fmt.Sprintf("faults[%d]", i)
		switch f.Kind {
		case FaultFailingDrive, FaultSlowDrive:
			if fs.dev = t.findDevice(f.Device); fs.dev < 0 {
				return fieldErr(p+".device", fmt.Sprintf("%q", f.Device), "no such device (names look like ds03/nvme2n1)")
			}
		case FaultNodeLoss:
			if fs.ds = t.findDS(f.DS); fs.ds < 0 {
				return fieldErr(p+".ds", fmt.Sprintf("%q", f.DS), "no such data server")
			}
		case FaultPortSaturation:
			if fs.port = t.findPort(f.Port); fs.port < 0 {
				return fieldErr(p+".port", fmt.Sprintf("%q", f.Port), "no such port (names look like sw/ds05 or sw/gpu03)")
			}
		case FaultCapacityPressure:
			for pi := range t.pools {
				if t.pools[pi].name == f.Pool {
					fs.pool = int32(pi)
				}
			}
			fs.fillDev = make([]float64, len(t.pools[fs.pool].devices))
		case FaultHotShard:
			for di := range t.datasets {
				if t.datasets[di].name == f.Dataset {
					fs.dataset = int32(di)
				}
			}
			for _, k := range f.Files {
				if k < 0 || k >= int(t.datasets[fs.dataset].nFiles) {
					return fieldErr(p+".files", k, fmt.Sprintf("dataset %q has files 0..%d", f.Dataset, t.datasets[fs.dataset].nFiles-1))
				}
			}
		case FaultWorkloadShift:
			for ji := range t.jobs {
				if t.jobs[ji].w.Name == f.Workload {
					fs.job = int32(ji)
				}
			}
		}
		t.faults = append(t.faults, fs)
	}
	return nil
}

func (t *Twin) deviceSubject(d int32) models.Subject {
	return models.Subject{Kind: models.SubjectDevice, ID: t.dev[d].name}
}

// runFaults starts, advances and ends faults at time now, then refreshes
// the capacities of devices and hosts.
func (t *Twin) runFaults(now float64) {
	for i := range t.faults {
		fs := &t.faults[i]
		f := fs.f
		start, end := f.Start.Seconds(), f.End.Seconds()
		if !fs.on && !fs.done && now >= start {
			fs.on = true
			t.startFault(i, now)
		}
		if fs.on && end > 0 && now >= end {
			fs.on, fs.done = false, true
			t.endFault(i, now)
		}
		if fs.on && f.Kind == FaultFailingDrive {
			t.degrade(fs, (now-start)/(end-start), now)
		}
	}
	for d := range t.dev {
		dv := &t.dev[d]
		if t.devAvailable(int32(d)) {
			t.resCap[d] = t.dt * dv.health
		} else {
			t.resCap[d] = 0
		}
		t.resCap[t.spaceBase+d] = max(0, dv.capBytes-dv.used)
	}
	for i := range t.ds {
		g := t.sc.Topology.DataServers[t.ds[i].group]
		c := g.NICGbps * 1e9 / 8 * t.dt
		if t.ds[i].down {
			c = 0
		}
		b := t.dsBase + slotsPerHost*i
		t.resCap[b+slotNICTx], t.resCap[b+slotNICRx] = c, c
	}
}

func (t *Twin) startFault(i int, now float64) {
	fs := &t.faults[i]
	f := fs.f
	switch f.Kind {
	case FaultFailingDrive:
		fs.evBase = t.smartEvidence(fs.dev)
		fs.rec = t.openTruth("failing_drive", t.deviceSubject(fs.dev), now, map[string]any{
			"ds": t.ds[t.dev[fs.dev].ds].name, "fails_at_s": f.End.Seconds(), "media_errors": f.MediaErrors,
			"final_spare": f.FinalSpare, "wear_rise": f.WearRise, "final_speed": f.FinalSpeed,
		})
	case FaultSlowDrive:
		t.dev[fs.dev].health = f.Factor
		fs.rec = t.openTruth("slow_drive", t.deviceSubject(fs.dev), now, map[string]any{"factor": f.Factor})
	case FaultNodeLoss:
		t.ds[fs.ds].down = true
		fs.rec = t.openTruth("node_loss", models.Subject{Kind: models.SubjectDS, ID: t.ds[fs.ds].name}, now, nil)
	case FaultPortSaturation:
		fs.rec = t.openTruth("port_saturation", models.Subject{Kind: models.SubjectPort, ID: f.Port}, now, map[string]any{"cross_traffic_gbps": f.Gbps})
	case FaultCapacityPressure:
		fs.rec = t.openTruth("capacity_pressure", models.Subject{Kind: models.SubjectPool, ID: f.Pool}, now, map[string]any{"fill_mbps": f.MBps})
	case FaultHotShard:
		ds := &t.datasets[fs.dataset]
		var hot []int32
		for _, k := range f.Files {
			fi := ds.firstFile + int32(k)
			hot = append(hot, fi)
			fl := &t.files[fi]
			for s := fl.first; s < fl.first+fl.n; s++ {
				d := t.stripes[s].dev
				fs.hotRecs = append(fs.hotRecs, t.openTruth("hot_shard", models.Subject{Kind: models.SubjectStripe, ID: t.stripeID(s)}, now, map[string]any{
					"dataset": f.Dataset, "share": f.Share, "device": t.dev[d].name, "ds": t.ds[t.dev[d].ds].name,
				}))
			}
		}
		for ji := range t.jobs {
			if t.jobs[ji].dataset == fs.dataset {
				t.jobs[ji].hot = append(t.jobs[ji].hot, hotSet{fault: i, files: hot, share: f.Share})
			}
		}
	case FaultWorkloadShift:
		t.jobs[fs.job].scale = f.Factor
		fs.rec = t.openTruth("workload_shift", subjectJob(f.Workload), now, map[string]any{"factor": f.Factor, "class": t.jobs[fs.job].kind})
	}
}

func (t *Twin) endFault(i int, now float64) {
	fs := &t.faults[i]
	f := fs.f
	t.closeTruth(fs.rec, now)
	switch f.Kind {
	case FaultFailingDrive:
		dv := &t.dev[fs.dev]
		t.degrade(fs, 1, now)
		dv.failed = true
		for s := range t.stripes {
			if t.stripes[s].dev == fs.dev && t.holds(int32(s)) {
				t.lostStripes++
				t.lostBytes += t.stripes[s].bytes
			}
		}
		t.openTruth("drive_failed", t.deviceSubject(fs.dev), now, map[string]any{"ds": t.ds[dv.ds].name})
	case FaultSlowDrive:
		t.dev[fs.dev].health = 1
	case FaultNodeLoss:
		t.rebootDS(fs.ds)
	case FaultCapacityPressure:
		// the other tenant cleans up: its bytes are deleted
		for k, d := range t.pools[fs.pool].devices[:min(len(fs.fillDev), len(t.pools[fs.pool].devices))] {
			t.dev[d].used = max(0, t.dev[d].used-fs.fillDev[k])
			fs.fillDev[k] = 0
		}
	case FaultHotShard:
		for _, r := range fs.hotRecs {
			t.closeTruth(r, now)
		}
		// Only this fault's files cool down: another hot_shard fault on
		// the same dataset stays hot.
		for ji := range t.jobs {
			j := &t.jobs[ji]
			j.hot = slices.DeleteFunc(j.hot, func(h hotSet) bool { return h.fault == i })
		}
	case FaultWorkloadShift:
		t.jobs[fs.job].scale = 1
	}
}

// rebootDS brings a lost data server back: kernel counters restart at zero
// and every drive counts a power cycle and an unsafe shutdown.
func (t *Twin) rebootDS(ds int32) {
	n := &t.ds[ds]
	n.down = false
	n.rxBytes, n.txBytes, n.nfsdReads, n.nfsdWrites = 0, 0, 0, 0
	for d := n.firstDev; d < n.firstDev+n.nDev; d++ {
		dv := &t.dev[d]
		dv.rdOps, dv.rdBytes, dv.rdMs, dv.wrOps, dv.wrBytes, dv.wrMs, dv.ioMs, dv.wIoMs = 0, 0, 0, 0, 0, 0, 0, 0
		dv.smart.powerCycles++
		dv.smart.unsafe++
		dv.qmul = 1
	}
}

// degrade advances a failing drive to progress p (0 at onset, 1 at
// failure). Media errors accumulate as M·p³ (accelerating, the shape of
// reallocation growth before failure), available spare falls with them
// from its value at the onset to final_spare (as p² when media_errors is
// 0), speed falls as 1 − (1 − final)·p² (retries and
// read-recovery), latency outliers occur with probability rate·p per tick,
// and temperature excursions become more frequent.
func (t *Twin) degrade(fs *faultState, p float64, now float64) {
	f := fs.f
	p = min(1, max(0, p))
	dv := &t.dev[fs.dev]
	sm := &dv.smart
	grow := f.MediaErrors * (p*p*p - fs.prog*fs.prog*fs.prog)
	if grow > 0 {
		inc := math.Floor(grow + fs.rng.Float64())
		sm.mediaErr += inc
		sm.errLog += inc + math.Floor(inc*0.25*fs.rng.Float64())
	}
	fs.prog = p
	// spare is consumed by the blocks the drive retires, which its media
	// errors stand for: from the spare it had at the onset down to
	// final_spare when the errors reach media_errors
	used := p * p
	if f.MediaErrors > 0 {
		used = min(1, (sm.mediaErr-fs.evBase.mediaErr)/f.MediaErrors)
	}
	if s0 := fs.evBase.spare; s0 > f.FinalSpare {
		sm.spare = math.Floor(s0 - (s0-f.FinalSpare)*used)
	}
	sm.wear = f.WearRise * p
	dv.health = 1 - (1-f.FinalSpeed)*p*p
	dv.outlier = 1
	if fs.rng.Float64() < f.OutlierRate*p {
		dv.outlier = math.Exp(math.Log(10) + fs.rng.Float64()*math.Log(10)) // 10×–100×
	}
	if now >= sm.excursionUntil {
		sm.excursion = 0
		if fs.rng.Float64() < t.dt*(0.0005+0.004*p) {
			sm.excursion = f.TempExcursC * (0.6 + 0.4*fs.rng.Float64())
			sm.excursionUntil = now + 120 + 480*fs.rng.Float64()
		}
	}
	sm.reliability = p >= 0.8
}

// tickSmart integrates one tick of temperature, busy time and power-on
// time into a drive's SMART values.
func (t *Twin) tickSmart(d int32, now float64) {
	dv := &t.dev[d]
	sm := &dv.smart
	if dv.failed {
		return
	}
	t.tickFleet(d, now)
	sm.tempC = t.ambient(now) + dv.fleet.tempOffC + loadHeatC*dv.utilEWMA + sm.excursion
	if sm.tempC >= warnTempC {
		sm.warnTempMin += t.dt / 60
	}
	if sm.tempC >= critTempC {
		sm.critTempMin += t.dt / 60
	}
	sm.busyMin += min(1, dv.util) * t.dt / 60
	sm.powerOnHours += t.dt / 3600
}

// criticalWarning returns the NVMe critical-warning byte of drive d.
func (t *Twin) criticalWarning(d int32) uint8 {
	dv := &t.dev[d]
	sm := &dv.smart
	var w uint8
	if sm.spare < spareThresh {
		w |= cwSpare
	}
	if sm.tempC >= warnTempC {
		w |= cwTemperature
	}
	if sm.reliability || dv.failed {
		w |= cwReliability
	}
	if dv.failed {
		w |= cwReadOnly
	}
	return w
}

// percentUsed is the NVMe "percentage used" estimate of drive d (may
// exceed 100, capped at 255 by the specification).
func (t *Twin) percentUsed(d int32) float64 {
	dv := &t.dev[d]
	written := dv.smart.bytesWritten - 0.3*dv.capBytes*dv.ageHours/24
	return min(255, math.Floor(dv.smart.pctUsedBase+100*written/dv.endurance+dv.smart.wear))
}

// addFaultFlows adds the background traffic of active faults: another
// tenant's cross traffic on a saturated port, and writes that fill a pool.
func (t *Twin) addFaultFlows() {
	for i := range t.faults {
		fs := &t.faults[i]
		if !fs.on {
			continue
		}
		switch fs.f.Kind {
		case FaultPortSaturation:
			b := fs.f.Gbps * 1e9 / 8 * t.dt
			for _, slot := range []int{slotPortIn, slotPortOut} {
				t.flows = append(t.flows, flow{src: srcCross, err: -1, owner: int32(i), stripe: -1, rec: -1, dev: -1, n: 1,
					res: [maxPath]int32{int32(fs.port + slot)}, want: b, demand: b, lim: -1, amp: 1})
			}
		case FaultCapacityPressure:
			devs := t.pools[fs.pool].devices
			// a spare brought online joins the pool after the fault began
			for len(fs.fillDev) < len(devs) {
				fs.fillDev = append(fs.fillDev, 0)
			}
			per := fs.f.MBps * 1e6 * t.dt / float64(len(devs))
			for k, d := range devs {
				dv := &t.dev[d]
				if !t.devAvailable(d) || dv.used >= dv.capBytes {
					continue
				}
				want := min(per, dv.capBytes-dv.used)
				db := t.dsBase + slotsPerHost*int(dv.ds)
				t.flows = append(t.flows, flow{src: srcFill, write: true, err: -1, owner: int32(i), stripe: int32(k), rec: -1, dev: d, n: 4,
					res:   [maxPath]int32{int32(db + slotPortOut), int32(db + slotNICRx), d, int32(t.spaceBase) + d},
					devAt: 1 << 2, devCoef: [2]float64{t.devCoef(d, 1<<20, true)}, want: want, demand: want, lim: -1, req: 1 << 20, amp: 1})
			}
		}
	}
}
