package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ballast-io/ballast/storage"
)

// The crash test of issue 10 (acceptance 1): the real `ballast mds` is
// killed with SIGKILL mdsCrashKills times (mds_crash_kills_test.go: 10 in make
// test, 100 under the long tag) while writers push through every endpoint
// that acknowledges samples and a CPU hog competes for the cores. After
// each restart every acknowledged sample of every run so far must be there:
// all of them with --durability wal; with window, all those acknowledged
// more than storage.WindowLoss(flush interval) before their run's kill.

const (
	crashFlush         = time.Second
	crashSeriesPerBody = 20
)

type ackedReq struct {
	writer string // series set: crash_<writer>{s="0".."19"}
	ts     int64  // the one timestamp of every series in the request
	acked  time.Time
	run    int
}

type crashLedger struct {
	mu    sync.Mutex
	acked []ackedReq
	kills []time.Time // per run
}

func (l *crashLedger) add(a ackedReq) {
	l.mu.Lock()
	l.acked = append(l.acked, a)
	l.mu.Unlock()
}

func TestMDSCrashLosesNothingAcknowledged(t *testing.T) {
	for _, mode := range []string{storage.DurabilityWAL, storage.DurabilityWindow} {
		t.Run(mode, func(t *testing.T) { crashLoop(t, mode, mdsCrashKills) })
	}
}

func crashLoop(t *testing.T, mode string, kills int) {
	dir := t.TempDir()
	window := storage.WindowLoss(crashFlush)
	args := []string{"--flush-interval", crashFlush.String(), "--durability", mode}
	stopHog := cpuHog(runtime.NumCPU())
	defer stopHog()
	led := &crashLedger{}
	var tsClock atomic.Int64 // unique, increasing timestamps across runs
	tsClock.Store(time.Now().Add(-10 * time.Minute).UnixMilli())
	var total, lostInWindow int
	for run := 0; run < kills; run++ {
		p := startMDS(t, dir, args...)
		if run > 0 {
			// Every earlier run: the last one each time, all of them every
			// tenth restart and at the end.
			from := run - 1
			if run%10 == 0 {
				from = 0
			}
			lostInWindow += verifyCrash(t, p, led, mode, window, from, run)
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for _, w := range []func(*mdsProc, int, chan struct{}){
			func(p *mdsProc, run int, stop chan struct{}) { pushLoop(p, led, &tsClock, run, "text", stop) },
			func(p *mdsProc, run int, stop chan struct{}) { pushLoop(p, led, &tsClock, run, "text2", stop) },
			func(p *mdsProc, run int, stop chan struct{}) { pushLoop(p, led, &tsClock, run, "rw", stop) },
			func(p *mdsProc, run int, stop chan struct{}) { pushLoop(p, led, &tsClock, run, "rw2", stop) },
			func(p *mdsProc, run int, stop chan struct{}) { layoutStatsLoop(p, run, stop) },
		} {
			wg.Add(1)
			go func() { defer wg.Done(); w(p, run, stop) }()
		}
		// Every fourth run long enough that its first samples are outside
		// the window at the kill, so the window is tested within a run too.
		d := time.Duration(1000+rand.IntN(2000)) * time.Millisecond
		if run%4 == 3 {
			d = window + 1500*time.Millisecond
		}
		time.Sleep(d)
		led.mu.Lock()
		led.kills = append(led.kills, time.Now())
		led.mu.Unlock()
		if err := p.stop(t, syscall.SIGKILL); err == nil {
			t.Fatalf("run %d: SIGKILL: process exited cleanly; want killed", run)
		}
		close(stop)
		wg.Wait()
	}
	p := startMDS(t, dir, args...)
	lostInWindow += verifyCrash(t, p, led, mode, window, 0, kills)
	led.mu.Lock()
	total = len(led.acked) * crashSeriesPerBody
	led.mu.Unlock()
	t.Logf("%s: %d kills, %d acknowledged samples checked; %d acknowledged within the %s window before a kill were lost (allowed in window mode only)",
		mode, kills, total, lostInWindow, window)
	if mode == storage.DurabilityWAL && lostInWindow > 0 {
		t.Errorf("wal: %d acknowledged samples lost", lostInWindow)
	}
	if mode == storage.DurabilityWAL {
		// The replayed segments are removed after two forced flushes; the
		// WAL does not grow without bound.
		deadline := time.Now().Add(20 * time.Second)
		for {
			m := httpGet(t, p.url("/metrics"))
			segs := grepLines(m, "ballast_storage_wal_segments ")
			replayed := grepLines(m, "ballast_storage_wal_replayed_rows_total ")
			if segs == "ballast_storage_wal_segments 1" && replayed != "" && replayed != "ballast_storage_wal_replayed_rows_total 0" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("WAL after restart: %q, %q; want the replayed segments removed (1 segment left) and rows replayed", segs, replayed)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
}

// cpuHog keeps n goroutines spinning until stopped.
func cpuHog(n int) func() {
	var stop atomic.Bool
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := 0
			for !stop.Load() {
				for j := 0; j < 1e5; j++ {
					x += j * j
				}
			}
			_ = x
		}()
	}
	return func() { stop.Store(true); wg.Wait() }
}

// pushLoop pushes requests of crashSeriesPerBody samples, one timestamp
// each, until stop; the acknowledged (204) ones go into the ledger.
// crashBody is one push of crashSeriesPerBody series crash_WRITER{s} at ts
// (value ts): remote write when rw, else the text import.
func crashBody(p *mdsProc, writer string, ts int64, rw bool) *http.Request {
	var req *http.Request
	if rw {
		series := make([][]string, crashSeriesPerBody)
		for i := range series {
			series[i] = []string{"__name__", "crash_" + writer, "s", fmt.Sprint(i)}
		}
		req, _ = http.NewRequest(http.MethodPost, p.url("/api/v1/write"), strings.NewReader(string(rwBody(series, ts, float64(ts)))))
		req.Header.Set("Content-Type", "application/x-protobuf")
		req.Header.Set("Content-Encoding", "snappy")
		req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
		return req
	}
	var b strings.Builder
	for i := 0; i < crashSeriesPerBody; i++ {
		fmt.Fprintf(&b, "crash_%s{s=\"%d\"} %d %d\n", writer, i, ts, ts)
	}
	req, _ = http.NewRequest(http.MethodPost, p.url("/api/v1/import/prometheus"), strings.NewReader(b.String()))
	req.Header.Set("Content-Type", "text/plain")
	return req
}

func pushLoop(p *mdsProc, led *crashLedger, clock *atomic.Int64, run int, writer string, stop chan struct{}) {
	client := &http.Client{Timeout: 10 * time.Second}
	for {
		select {
		case <-stop:
			return
		default:
		}
		ts := clock.Add(1)
		req := crashBody(p, writer, ts, strings.HasPrefix(writer, "rw"))
		resp, err := client.Do(req)
		if err != nil {
			time.Sleep(10 * time.Millisecond) // killed: wait for stop
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusNoContent {
			led.add(ackedReq{writer: writer, ts: ts, acked: time.Now(), run: run})
		}
	}
}

// layoutStatsLoop posts LAYOUTSTATS reports (the third push endpoint):
// load on the same store, not checked sample by sample (the mds derives
// its series from pairs of cumulative reports).
func layoutStatsLoop(p *mdsProc, run int, stop chan struct{}) {
	client := &http.Client{Timeout: 10 * time.Second}
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		body := layoutStatsBody(fmt.Sprintf("crash-%d-%d", run, i), time.Now().Add(-time.Duration(i%50)*time.Second))
		resp, err := client.Post(p.url("/api/v1/layoutstats"), "application/json", strings.NewReader(body))
		if err != nil {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// verifyCrash checks the acknowledged samples of runs [from, to) and
// returns how many acknowledged within the window before their run's kill
// are missing (a failure in wal mode, allowed in window mode). It polls
// until every sample that must be there is, for at most 30 s: rows
// replayed at the start become searchable within about 2 s.
func verifyCrash(t *testing.T, p *mdsProc, led *crashLedger, mode string, window time.Duration, from, to int) int {
	t.Helper()
	led.mu.Lock()
	var reqs []ackedReq
	for _, a := range led.acked {
		if a.run >= from && a.run < to {
			reqs = append(reqs, a)
		}
	}
	kills := append([]time.Time(nil), led.kills...)
	led.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for {
		have := exportTimestamps(t, p)
		var missing []string
		inWindow := 0
		for _, a := range reqs {
			for s := 0; s < crashSeriesPerBody; s++ {
				if have[fmt.Sprintf("crash_%s/%d", a.writer, s)][a.ts] {
					continue
				}
				age := kills[a.run].Sub(a.acked)
				if mode == storage.DurabilityWindow && age <= window {
					if a.run == to-1 {
						inWindow++
					}
					continue
				}
				if len(missing) < 5 {
					missing = append(missing, fmt.Sprintf("crash_%s{s=%d} @%d (run %d, acknowledged %s before the kill)", a.writer, s, a.ts, a.run, age.Round(time.Millisecond)))
				}
				if mode == storage.DurabilityWAL {
					inWindow++
				}
			}
		}
		if len(missing) == 0 {
			return inWindow
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: after %d kills, acknowledged samples lost (checked runs %d–%d), e.g. %s\nlogs of the last start:\n%s",
				mode, to, from, to-1, strings.Join(missing, "; "), p.logs)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// exportTimestamps reads every crash_* sample through /api/v1/export:
// series "crash_WRITER/S" → timestamps.
func exportTimestamps(t *testing.T, p *mdsProc) map[string]map[int64]bool {
	t.Helper()
	q := url.Values{"match[]": {`{__name__=~"crash_.*"}`}, "start": {"0"}}
	resp, err := http.Get(p.url("/api/v1/export?" + q.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("export: %d %s", resp.StatusCode, b)
	}
	out := map[string]map[int64]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 256<<20)
	for sc.Scan() {
		var line struct {
			Metric     map[string]string `json:"metric"`
			Timestamps []int64           `json:"timestamps"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("export line: %v", err)
		}
		k := line.Metric["__name__"] + "/" + line.Metric["s"]
		m := out[k]
		if m == nil {
			m = map[int64]bool{}
			out[k] = m
		}
		for _, ts := range line.Timestamps {
			m[ts] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
