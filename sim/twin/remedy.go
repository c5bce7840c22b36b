package twin

// Ground truth for scoring remediation (sim/score): what the GPUs of each
// job did, the user I/O each device carried, the bytes copies moved while
// a checkpoint burst was on, and the data a failed drive took with it.
// Counters only: reading them changes nothing, and ballast never sees them.

// JobGPU is one job's GPU-seconds since the start.
type JobGPU struct {
	Name string
	// Allocated counts a GPU-second while the job runs; Paused the
	// allocated seconds a synchronous checkpoint stopped the GPUs; Busy
	// the seconds they computed.
	Allocated, Busy, Paused float64
}

// JobGPUSeconds returns every workload's GPU-seconds so far, in scenario
// order (jobs without GPUs read zero).
func (t *Twin) JobGPUSeconds() []JobGPU {
	out := make([]JobGPU, len(t.jobs))
	for i := range t.jobs {
		j := &t.jobs[i]
		out[i] = JobGPU{Name: j.w.Name, Allocated: j.allocSec, Busy: j.busySec, Paused: j.pauseSec}
	}
	return out
}

// DeviceLoad is one device's user I/O since the start.
type DeviceLoad struct {
	Name, Pool string
	// Active: online in its pool (not a spare, failed, retired or on a
	// data server that is down).
	Active bool
	// UserBytes is what reads and writes of jobs moved on the device
	// (copies and read-backs of moves not included).
	UserBytes float64
}

// DeviceLoads returns every device's user I/O so far, in device order.
func (t *Twin) DeviceLoads() []DeviceLoad {
	out := make([]DeviceLoad, len(t.dev))
	for d := range t.dev {
		dv := &t.dev[d]
		out[d] = DeviceLoad{Name: dv.name, Pool: t.pools[dv.pool].name, UserBytes: dv.userBytes,
			Active: !dv.spare && !dv.failed && !dv.retired && !t.ds[dv.ds].down}
	}
	return out
}

// checkpointing reports whether any job's checkpoint burst is on.
func (t *Twin) checkpointing() bool {
	for i := range t.jobs {
		if t.jobs[i].ckOn {
			return true
		}
	}
	return false
}

// MigrationBytesInCheckpoints returns the bytes copies and read-backs
// moved while some job's checkpoint burst was on (its truth
// checkpoint_burst record open), for urgent actions and the others.
func (t *Twin) MigrationBytesInCheckpoints() (urgent, other float64) {
	return t.migInCk[1], t.migInCk[0]
}

// LostAtFailure returns the components with data, and their bytes, that
// were on drives when they failed (the twin models no redundancy to
// rebuild them from).
func (t *Twin) LostAtFailure() (stripes int, bytes float64) { return t.lostStripes, t.lostBytes }
