package main

// The "freshness" section (issue 17): time from the acknowledgement of a
// sample to the first /api/v1/query that finds it, for new series and for
// existing ones, on ballast mds and on VictoriaMetrics single-node
// v1.150.0 (built from the module cache), plus ingest throughput of the
// mds with refresh_interval 200ms and 0s (refresh on read: with nothing
// querying during those rounds, the two should not differ).
//
// Each target runs alone on the machine, fresh and empty, under the same
// background ingest (freshLoadSeries series every 200 ms). The probes
// start freshGap apart, alternating new and existing series; each posts
// one sample stamped with the wall clock to /api/v1/import/prometheus and,
// from its 204, queries /api/v1/query?query=SELECTOR without time (what a
// dashboard's "now" sends) until the answer carries the probe's value. The
// first query goes out at once: a query before the series is searchable
// is part of the measurement (it may cache an empty answer). Polls are
// 10 ms apart for the first 2 s and 500 ms after, so times above 2 s are
// 0.5 s coarse.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

const (
	freshProbes     = 200 // per target, half new series, half existing
	freshGap        = 50 * time.Millisecond
	freshTimeout    = 2 * time.Minute
	freshLoadSeries = 1000
	freshRounds     = 7 // ingest rounds per refresher setting
)

type freshTarget struct {
	name, cmd string
	base      string
	p         *proc
}

type freshResult struct {
	newS, oldS []time.Duration // per probe; freshTimeout+ when never seen
	missed     int
}

func freshnessSection(ballast string) (string, error) {
	defer killAll()
	tmp, err := os.MkdirTemp("", "benchfreshness-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	vm := filepath.Join(tmp, "victoria-metrics")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", vm, "github.com/VictoriaMetrics/VictoriaMetrics/app/victoria-metrics").CombinedOutput(); err != nil {
		return "", fmt.Errorf("cannot build VictoriaMetrics single-node: %v\n%s", err, out)
	}
	type spec struct {
		name, cmd string
		start     func(dir, listen string) (*proc, string, error)
	}
	specs := []spec{
		{"ballast mds (defaults: refresh_interval 200ms)", "ballast mds --data-dir DIR --listen ADDR",
			func(dir, listen string) (*proc, string, error) {
				p, err := startProc("ballast", ballast, "mds", "--listen", listen, "--data-dir", dir, "--log-level", "warn")
				return p, "/readyz", err
			}},
		{"VictoriaMetrics single-node (defaults)", "victoria-metrics -storageDataPath=DIR -httpListenAddr=ADDR",
			func(dir, listen string) (*proc, string, error) {
				p, err := startProc("victoria-metrics", vm, "-storageDataPath="+dir, "-httpListenAddr="+listen, "-loggerLevel=ERROR")
				return p, "/health", err
			}},
		{"VictoriaMetrics single-node, -search.latencyOffset=0s", "victoria-metrics -storageDataPath=DIR -httpListenAddr=ADDR -search.latencyOffset=0s",
			func(dir, listen string) (*proc, string, error) {
				p, err := startProc("victoria-metrics", vm, "-storageDataPath="+dir, "-httpListenAddr="+listen, "-loggerLevel=ERROR", "-search.latencyOffset=0s")
				return p, "/health", err
			}},
	}
	var names []string
	results := map[string]freshResult{}
	for i, s := range specs {
		dir := filepath.Join(tmp, fmt.Sprintf("data%d", i))
		port, err := freePort()
		if err != nil {
			return "", err
		}
		listen := fmt.Sprintf("127.0.0.1:%d", port)
		p, ready, err := s.start(dir, listen)
		if err != nil {
			return "", err
		}
		base := "http://" + listen
		if err := waitHTTP(base+ready, time.Minute); err != nil {
			p.stop()
			return "", err
		}
		fmt.Fprintf(os.Stderr, "benchsections: freshness: probing %s…\n", s.name)
		r, err := probeFreshness(base)
		p.stop()
		if err != nil {
			return "", fmt.Errorf("%s: %w", s.name, err)
		}
		names = append(names, s.name)
		results[s.name] = r
	}

	// Ingest with refresh on read on and off, nothing querying.
	bodies := render(durSeries, durSteps, time.Now().Add(-time.Hour))
	total := durSeries * durSteps
	settings := []string{"200ms", "0s"}
	runs := map[string][]durRun{}
	for r := 0; r < freshRounds; r++ {
		for _, set := range settings {
			cfg := filepath.Join(tmp, "refresh-"+set+".yaml")
			if err := os.WriteFile(cfg, []byte("storage:\n  refresh_interval: "+set+"\n"), 0o644); err != nil {
				return "", err
			}
			res, err := runIngest(ballast, []string{"--config", cfg}, bodies, total)
			if err != nil {
				return "", fmt.Errorf("refresh_interval %s: %w", set, err)
			}
			runs[set] = append(runs[set], res)
		}
	}
	med := map[string]durRun{}
	for _, set := range settings {
		rs := append([]durRun(nil), runs[set]...)
		sort.Slice(rs, func(i, j int) bool { return rs[i].rate < rs[j].rate })
		med[set] = rs[len(rs)/2]
	}

	var b strings.Builder
	b.WriteString("## Freshness: acknowledgement to first query hit (issue 17)\n\n")
	b.WriteString(header("make build && go run ./bench/cmd/benchsections -ballast bin/ballast -only freshness",
		"go build -o TMP/victoria-metrics github.com/VictoriaMetrics/VictoriaMetrics/app/victoria-metrics   # v1.150.0, go.mod"))
	fmt.Fprintf(&b, "Each server runs alone, fresh and empty, under the same background ingest (%d series every 200 ms through `/api/v1/import/prometheus`). %d probes start %s apart, alternating new and existing series (the existing ones were written a minute in the past and found before the probes start); each posts one sample stamped with the wall clock to `/api/v1/import/prometheus` and, from its 204, queries `/api/v1/query?query=SELECTOR` without `time` until the answer carries the probe's value. The first query goes out at once, before the sample can be searchable (it may cache an empty answer). ballast evaluates a query without `time` at the current millisecond, as Prometheus does; VictoriaMetrics at the current time rounded down to the second, minus `-search.latencyOffset` (30 s by default). Polls are 10 ms apart for the first 2 s and 500 ms after (coarser above 2 s); a probe not seen within %s counts as %s.\n\n",
		freshLoadSeries, freshProbes, freshGap, freshTimeout, freshTimeout)
	b.WriteString("| server | new series p50 | new p99 | new max | existing series p50 | existing p99 | existing max |\n|---|---|---|---|---|---|---|\n")
	for _, n := range names {
		r := results[n]
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", n,
			fmtDur(pct(r.newS, 0.5)), fmtDur(pct(r.newS, 0.99)), fmtDur(pct(r.newS, 1)),
			fmtDur(pct(r.oldS, 0.5)), fmtDur(pct(r.oldS, 0.99)), fmtDur(pct(r.oldS, 1)))
	}
	br := results[names[0]]
	p99 := max(pct(br.newS, 0.99), pct(br.oldS, 0.99))
	fmt.Fprintf(&b, "\nTarget: p99 from acknowledgement to first hit ≤ 1 s for new and existing series: %s (ballast %s new, %s existing; VictoriaMetrics single-node with its defaults %s and %s).\n\n",
		verdict(p99 <= time.Second), fmtDur(pct(br.newS, 0.99)), fmtDur(pct(br.oldS, 0.99)),
		fmtDur(pct(results[names[1]].newS, 0.99)), fmtDur(pct(results[names[1]].oldS, 0.99)))
	fmt.Fprintf(&b, "**Ingest with and without the refresh** (docs/storage.md#freshness): ingest through `/api/v1/write` of a fresh `ballast mds --config CFG` with `storage.refresh_interval` 200ms (the default) and 0s (off: VictoriaMetrics' own timers), %d bodies of %d series, %d concurrent clients, until the last 204; median of %d alternating rounds. Nothing queries during these rounds, so the refresh, which runs on read, should never run: the two rows differ by noise only. What it costs under reads shows in the fleet section, where the mds's analysis reads every tick.\n\n",
		durSteps, durSeries, durWriters, freshRounds)
	b.WriteString("| refresh_interval | samples/s (median) | each round | mds CPU µs/sample |\n|---|---|---|---|\n")
	for _, set := range settings {
		var each []string
		for _, r := range runs[set] {
			each = append(each, fmtNum(r.rate))
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %.2f |\n", set, fmtNum(med[set].rate), strings.Join(each, ", "), med[set].cpuUS)
	}
	fmt.Fprintf(&b, "\nThroughput with / without the refresh: **%.2f×**; mds CPU per sample %.2f×.\n",
		med["200ms"].rate/med["0s"].rate, med["200ms"].cpuUS/med["0s"].cpuUS)
	return b.String(), nil
}

// probeFreshness runs the background load and the probes against base.
func probeFreshness(base string) (freshResult, error) {
	imp := base + "/api/v1/import/prometheus"
	// The existing series: written a minute in the past (inside every
	// server's lookback, outside VictoriaMetrics' latency offset) and
	// waited for.
	var sb strings.Builder
	past := time.Now().Add(-time.Minute).UnixMilli()
	for i := range freshProbes / 2 {
		fmt.Fprintf(&sb, "bench_fresh_existing{probe=\"%d\"} 0 %d\n", i, past)
	}
	if err := postText(imp, sb.String()); err != nil {
		return freshResult{}, err
	}
	deadline := time.Now().Add(freshTimeout)
	for {
		v, _, err := queryValue(base, "count(bench_fresh_existing)")
		if err == nil && v == fmt.Sprint(freshProbes/2) {
			break
		}
		if time.Now().After(deadline) {
			return freshResult{}, fmt.Errorf("the existing series were not found within %s (last: %q, %v)", freshTimeout, v, err)
		}
		time.Sleep(250 * time.Millisecond)
	}

	stop := make(chan struct{})
	loadDone := make(chan error, 1)
	go func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				loadDone <- nil
				return
			case <-t.C:
			}
			var lb strings.Builder
			now := time.Now().UnixMilli()
			for i := range freshLoadSeries {
				fmt.Fprintf(&lb, "bench_fresh_load{series=\"%d\"} %d %d\n", i, now%1000000, now)
			}
			if err := postText(imp, lb.String()); err != nil {
				loadDone <- err
				return
			}
		}
	}()

	var mu sync.Mutex
	var res freshResult
	var firstErr error
	var wg sync.WaitGroup
	run := time.Now().UnixNano()
	for i := range freshProbes {
		time.Sleep(freshGap)
		wg.Add(1)
		go func() {
			defer wg.Done()
			isNew := i%2 == 0
			var sel string
			val := fmt.Sprint(1000 + i)
			if isNew {
				sel = fmt.Sprintf("bench_fresh_new{run=\"%d\",probe=\"%d\"}", run, i)
			} else {
				sel = fmt.Sprintf("bench_fresh_existing{probe=\"%d\"}", i/2)
			}
			err := postText(imp, fmt.Sprintf("%s %s %d\n", sel, val, time.Now().UnixMilli()))
			acked := time.Now()
			d := freshTimeout
			for err == nil && time.Since(acked) < freshTimeout {
				var v string
				var n int
				v, n, err = queryValue(base, sel)
				if err == nil && n == 1 && v == val {
					d = time.Since(acked)
					break
				}
				if time.Since(acked) < 2*time.Second {
					time.Sleep(10 * time.Millisecond)
				} else {
					time.Sleep(500 * time.Millisecond)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			if d >= freshTimeout {
				res.missed++
			}
			if isNew {
				res.newS = append(res.newS, d)
			} else {
				res.oldS = append(res.oldS, d)
			}
		}()
	}
	wg.Wait()
	close(stop)
	if err := <-loadDone; err != nil {
		return res, fmt.Errorf("background load: %w", err)
	}
	return res, firstErr
}

func postText(u, body string) error {
	resp, err := http.Post(u, "text/plain", strings.NewReader(body))
	if err != nil {
		return err
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %s %s", u, resp.Status, msg)
	}
	return nil
}

// queryValue runs an instant query without time and returns the first
// series' value and the number of series.
func queryValue(base, expr string) (string, int, error) {
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	var ans struct {
		Status string
		Error  string
		Data   struct {
			Result []struct {
				Value [2]any
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil {
		return "", 0, fmt.Errorf("query %s: %s: %w", expr, resp.Status, err)
	}
	if ans.Status != "success" {
		return "", 0, fmt.Errorf("query %s: %s %s", expr, resp.Status, ans.Error)
	}
	if len(ans.Data.Result) == 0 {
		return "", 0, nil
	}
	return fmt.Sprint(ans.Data.Result[0].Value[1]), len(ans.Data.Result), nil
}

// pct is the q-quantile (nearest rank) of ds.
func pct(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(q*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func fmtDur(d time.Duration) string {
	if d >= freshTimeout {
		return "> " + freshTimeout.String()
	}
	if d < 10*time.Second {
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}
