package twin

import (
	"fmt"
	"math/rand/v2"
)

// logStream is the seed stream of the log files' placement and writeback
// phases, apart from the workloads' so that logs change no other draw.
const logStream = 0x6c6f6773

// logFileSize bounds a log file: an append never reaches it.
const logFileSize = 1e15

// buildLogs gives every node of every training job that logs
// (Workload.LogKBps > 0) a log file of one component on a drive of the
// job's dataset pool, drawn at random, and a writer stream that appends
// to it (docs/scenarios.md, step 2). A node's writeback runs every
// LogFlush from a random phase, as each node's kernel flusher does.
// Called after the jobs and faults are built, so that the log files and
// streams come after every other and leave their indices as they were.
func (t *Twin) buildLogs(poolIdx map[string]int32) {
	rng := rand.New(rand.NewPCG(t.seed, logStream))
	for ji := range t.jobs {
		j := &t.jobs[ji]
		w := j.w
		if j.kind != KindTraining || w.LogKBps == nil || *w.LogKBps <= 0 {
			continue
		}
		rate := *w.LogKBps * 1e3
		flush := w.LogFlush.Seconds()
		pl := &t.pools[poolIdx[poolOfDataset(t.sc, w.Dataset)]]
		j.logWriter = int32(len(t.streams))
		for _, ci := range j.clients {
			f := t.addFile(fmt.Sprintf("%s/logs/%s.log", w.Name, t.cli[ci].name), -1, logFileSize,
				Layout{StripeUnitKB: 1024, StripeCount: 1, Placement: PlaceRandom})
			st := &t.stripes[t.files[f].first]
			st.dev = pl.devices[rng.IntN(len(pl.devices))]
			st.gen++
			t.files[f].gen++
			t.streams = append(t.streams, stream{kind: streamWrite, bg: true, client: ci, gpu: -1, job: int32(ji), file: f,
				appReq: max(4096, rate*flush), depth: 1})
			j.logPending = append(j.logPending, 0)
			j.logNext = append(j.logNext, flush*rng.Float64())
		}
	}
}

// logWants sets what job j's log writers write back this tick: all a
// node has appended since its last writeback, when its flusher runs now.
func (t *Twin) logWants(j *job) {
	if j.logWriter < 0 {
		return
	}
	now := float64(t.tick) * t.dt
	rate := *j.w.LogKBps * 1e3
	for k := range j.logPending {
		st := &t.streams[j.logWriter+int32(k)]
		st.active = true
		j.logPending[k] += rate * t.dt
		st.want = 0
		if now >= j.logNext[k] {
			st.want = j.logPending[k]
			for j.logNext[k] <= now {
				j.logNext[k] += j.w.LogFlush.Seconds()
			}
		}
	}
}

// settleLogs takes what the log writers wrote this tick off what their
// nodes still hold; what a lost or full drive refused stays dirty for
// the next writeback, as the page cache keeps it.
func (t *Twin) settleLogs(j *job) {
	if j.logWriter < 0 {
		return
	}
	for k := range j.logPending {
		st := &t.streams[j.logWriter+int32(k)]
		j.logPending[k] = max(0, j.logPending[k]-st.got)
	}
}

// stopLogs ends job j's log writers (the job stopped).
func (t *Twin) stopLogs(j *job) {
	if j.logWriter < 0 {
		return
	}
	for k := range j.logPending {
		st := &t.streams[j.logWriter+int32(k)]
		st.active, st.want = false, 0
		j.logPending[k] = 0
	}
}
