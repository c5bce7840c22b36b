package main

// The "remote" section (issue 16): ballast's remote backend against a
// VictoriaMetrics cluster on 127.0.0.1.
//
//   - direct: the same pre-rendered remote-write bodies posted straight to
//     vminsert, as vmagent or Prometheus would (the vmagent-style path);
//   - through ballast: posted to `ballast mds --store remote=…`'s
//     /api/v1/write, which validates them, queues them on disk and forwards
//     them to the same kind of cluster;
//   - the queue while the remote is down: vminsert stopped, 1M samples
//     pushed through ballast, the queue's size on disk, then the catch-up.
//
// Each path gets a fresh cluster (two vmstorage, vminsert
// -replicationFactor=2, vmselect with dedup). CPU is user+system time from
// /proc/PID/stat of the server processes (the client's CPU is the same for
// both paths and is left out).

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/prompb"
	"github.com/golang/snappy"
)

// Sizes of the remote section's runs.
const (
	remoteSeries    = 10000 // series per body, one sample each
	remoteSteps     = 200   // bodies, timestamps 10 s apart
	remoteWriters   = 2     // client goroutines
	remoteDownSteps = 100   // bodies pushed while vminsert is stopped
	// remoteRounds: each path runs this many times, alternating, each on a
	// fresh cluster; the section reports medians (on the shared 2-core
	// machine single runs of the direct path gave 3.7 to 5.5 µs of CPU
	// per sample).
	remoteRounds = 3
)

func remoteSection(ballast string) (string, error) {
	dir := findCluster()
	if dir == "" {
		return "", fmt.Errorf("no VictoriaMetrics cluster binaries: set BALLAST_VM_CLUSTER_DIR or put them in shared/tools/victoriametrics-cluster beside the project")
	}
	defer killAll()
	bodies := render(remoteSeries, remoteSteps, time.Now().Add(-time.Minute))
	total := remoteSeries * remoteSteps
	var directs, vias []result
	var down downResult
	for round := range remoteRounds {
		direct, err := runDirect(dir, bodies)
		if err != nil {
			return "", fmt.Errorf("direct: %w", err)
		}
		via, d, err := runBallast(ballast, dir, bodies, total, round == remoteRounds-1)
		if err != nil {
			return "", fmt.Errorf("through ballast: %w", err)
		}
		directs, vias, down = append(directs, direct), append(vias, via), d
	}
	return report(directs, vias, down, total), nil
}

// median returns the median of f over rs (the lower middle for an even count).
func median(rs []result, f func(result) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	sort.Float64s(v)
	return v[(len(v)-1)/2]
}

// result is one path's measurement.
type result struct {
	wall                time.Duration
	clusterCPU, ballCPU time.Duration
	stored              int
}

func (r result) rate(total int) float64 { return float64(total) / r.wall.Seconds() }
func (r result) cpuPerSample(total int, withBallast bool) float64 {
	c := r.clusterCPU
	if withBallast {
		c += r.ballCPU
	}
	return float64(c.Microseconds()) / float64(total)
}

type downResult struct {
	samples          int
	queueFile, queue int64
	drain            time.Duration
}

func runDirect(dir string, bodies [][]byte) (result, error) {
	c, err := startCluster(dir)
	if err != nil {
		return result{}, err
	}
	defer c.stop()
	cpu0 := c.cpu()
	start := time.Now()
	if err := post(c.insert+"/insert/0/prometheus/api/v1/write", bodies); err != nil {
		return result{}, err
	}
	wall := time.Since(start)
	time.Sleep(3 * time.Second) // vminsert's buffers and vmstorage's flush
	r := result{wall: wall, clusterCPU: c.cpu() - cpu0}
	r.stored, err = c.count(c.selectURL+"/select/0/prometheus", len(bodies)*remoteSeries)
	return r, err
}

// runBallast measures the path through ballast and, with withDown, then
// the queue while vminsert is down.
func runBallast(ballast, dir string, bodies [][]byte, total int, withDown bool) (result, downResult, error) {
	c, err := startCluster(dir)
	if err != nil {
		return result{}, downResult{}, err
	}
	defer c.stop()
	base, b, data, err := startBallast(ballast, c)
	if err != nil {
		return result{}, downResult{}, err
	}
	defer os.RemoveAll(data)
	defer b.stop()
	cpu0, bcpu0 := c.cpu(), b.cpu()
	start := time.Now()
	if err := post(base+"/api/v1/write", bodies); err != nil {
		return result{}, downResult{}, err
	}
	if err := waitMetric(base, "ballast_remote_samples_sent_total", float64(total), 5*time.Minute); err != nil {
		return result{}, downResult{}, err
	}
	wall := time.Since(start)
	time.Sleep(3 * time.Second)
	r := result{wall: wall, clusterCPU: c.cpu() - cpu0, ballCPU: b.cpu() - bcpu0}
	if r.stored, err = c.count(base, total); err != nil {
		return r, downResult{}, err
	}
	if !withDown {
		return r, downResult{}, nil
	}

	// The remote down: a fresh mds (an empty queue: a bbolt file stays at
	// its high-water mark, which the run above may have set), vminsert
	// stopped, push, measure the queue, restart vminsert.
	b.stop()
	base, b2, data2, err := startBallast(ballast, c)
	if err != nil {
		return r, downResult{}, err
	}
	defer os.RemoveAll(data2)
	defer b2.stop()
	c.procs[0].stop()
	downBodies := render(remoteSeries, remoteDownSteps, time.Now().Add(-30*time.Second).Add(-time.Duration(remoteSteps)*10*time.Second))
	if err := post(base+"/api/v1/write", downBodies); err != nil {
		return r, downResult{}, err
	}
	time.Sleep(2 * time.Second) // past block_interval: everything on disk
	d := downResult{samples: remoteSeries * remoteDownSteps}
	d.queue = int64(metric(base, "ballast_remote_queue_bytes"))
	if fi, err := os.Stat(filepath.Join(data2, "remote-write-queue.db")); err == nil {
		d.queueFile = fi.Size()
	}
	restart := time.Now()
	if err := c.procs[0].start(); err != nil {
		return r, d, err
	}
	if err := waitMetric(base, "ballast_remote_samples_sent_total", float64(d.samples), 5*time.Minute); err != nil {
		return r, d, err
	}
	d.drain = time.Since(restart)
	return r, d, nil
}

// startBallast starts `ballast mds --store remote=…` on c with a fresh data
// dir and waits until it is ready.
func startBallast(ballast string, c *cluster) (base string, p *proc, data string, err error) {
	data, err = os.MkdirTemp("", "benchremote-ballast-")
	if err != nil {
		return "", nil, "", err
	}
	port, err := freePort()
	if err != nil {
		return "", nil, data, err
	}
	base = fmt.Sprintf("http://127.0.0.1:%d", port)
	p, err = startProc("ballast", ballast, "mds", "--listen", base[len("http://"):], "--data-dir", data, "--log-level", "warn",
		"--store", "remote="+c.insert+"/insert/0/prometheus/api/v1/write,"+c.selectURL+"/select/0/prometheus")
	if err != nil {
		return "", nil, data, err
	}
	if err := waitHTTP(base+"/readyz", time.Minute); err != nil {
		p.stop()
		return "", nil, data, err
	}
	return base, p, data, nil
}

// render builds remote-write bodies: steps timestamps 10 s apart ending at
// end, each body one timestamp of n series.
func render(n, steps int, end time.Time) [][]byte {
	out := make([][]byte, 0, steps)
	for s := range steps {
		ts := end.Add(-time.Duration(steps-1-s) * 10 * time.Second).UnixMilli()
		wr := prompb.WriteRequest{Timeseries: make([]prompb.TimeSeries, n)}
		for i := range n {
			wr.Timeseries[i] = prompb.TimeSeries{
				Labels: []prompb.Label{{Name: "__name__", Value: "bench_remote_bytes_total"}, {Name: "job", Value: "ballast-agents"},
					{Name: "instance", Value: fmt.Sprintf("ds%03d:9751", i/24)}, {Name: "device", Value: fmt.Sprintf("nvme%dn1", i%24)}},
				Samples: []prompb.Sample{{Value: float64(s*1000 + i%977), Timestamp: ts}},
			}
		}
		out = append(out, snappy.Encode(nil, wr.MarshalProtobuf(nil)))
	}
	return out
}

// post sends bodies with remoteWriters goroutines, each body once, in order per
// goroutine.
func post(u string, bodies [][]byte) error { return postN(u, bodies, remoteWriters) }

// postN is post with writers goroutines.
func postN(u string, bodies [][]byte, writers int) error {
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	next := make(chan []byte)
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range next {
				req, _ := http.NewRequest(http.MethodPost, u, bytes.NewReader(b))
				req.Header.Set("Content-Encoding", "snappy")
				req.Header.Set("Content-Type", "application/x-protobuf")
				req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					errs <- err
					return
				}
				msg, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode/100 != 2 {
					errs <- fmt.Errorf("POST %s: %s %s", u, resp.Status, msg)
					return
				}
			}
		}()
	}
	for _, b := range bodies {
		select {
		case next <- b:
		case err := <-errs:
			close(next)
			wg.Wait()
			return err
		}
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// cluster is the VictoriaMetrics cluster of one path.
type cluster struct {
	procs             []*proc // vminsert, vmselect, vmstorage × 2
	insert, selectURL string
	flush             []string
	dirs              []string
}

func startCluster(dir string) (*cluster, error) {
	c := &cluster{}
	var ins, sel []string
	for i := range 2 {
		ports, err := freePorts(3)
		if err != nil {
			return nil, err
		}
		d, err := os.MkdirTemp("", "benchremote-vmstorage-")
		if err != nil {
			return nil, err
		}
		c.dirs = append(c.dirs, d)
		p, err := startProc(fmt.Sprintf("vmstorage%d", i), filepath.Join(dir, "vmstorage"), "-storageDataPath="+d,
			fmt.Sprintf("-httpListenAddr=127.0.0.1:%d", ports[0]), fmt.Sprintf("-vminsertAddr=127.0.0.1:%d", ports[1]),
			fmt.Sprintf("-vmselectAddr=127.0.0.1:%d", ports[2]), "-retentionPeriod=1y", "-loggerLevel=WARN")
		if err != nil {
			return nil, err
		}
		c.procs = append(c.procs, p)
		ins = append(ins, fmt.Sprintf("127.0.0.1:%d", ports[1]))
		sel = append(sel, fmt.Sprintf("127.0.0.1:%d", ports[2]))
		c.flush = append(c.flush, fmt.Sprintf("http://127.0.0.1:%d", ports[0]))
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	c.insert = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	c.selectURL = fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	pi, err := startProc("vminsert", filepath.Join(dir, "vminsert"), "-httpListenAddr="+c.insert[7:], "-storageNode="+strings.Join(ins, ","),
		"-replicationFactor=2", "-loggerLevel=WARN")
	if err != nil {
		return nil, err
	}
	ps, err := startProc("vmselect", filepath.Join(dir, "vmselect"), "-httpListenAddr="+c.selectURL[7:], "-storageNode="+strings.Join(sel, ","),
		"-dedup.minScrapeInterval=1ms", "-replicationFactor=2", "-loggerLevel=WARN", "-cacheDataPath="+c.dirs[0]+"-select-cache")
	if err != nil {
		return nil, err
	}
	c.procs = append([]*proc{pi, ps}, c.procs...)
	for _, u := range append([]string{c.insert, c.selectURL}, c.flush...) {
		if err := waitHTTP(u+"/health", time.Minute); err != nil {
			return nil, err
		}
	}
	time.Sleep(time.Second) // vminsert dials every vmstorage
	return c, nil
}

// cpu is the CPU time of vminsert and both vmstorage (vmselect is idle).
func (c *cluster) cpu() time.Duration {
	return c.procs[0].cpu() + c.procs[2].cpu() + c.procs[3].cpu()
}

// count returns how many samples of the benchmark series a Prometheus API
// root holds, after making them searchable.
// count counts the stored samples through the query API at root, asking
// again (up to 30 s) while fewer than want show: on a loaded machine
// vminsert's buffers and vmstorage's flush can take longer than one force
// flush and a second.
func (c *cluster) count(root string, want int) (int, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, f := range c.flush {
			if resp, err := http.Get(f + "/internal/force_flush"); err == nil {
				resp.Body.Close()
			}
		}
		time.Sleep(time.Second)
		q := url.Values{"query": {"sum(count_over_time(bench_remote_bytes_total[1d]))"}, "nocache": {"1"}}
		resp, err := http.Get(root + "/api/v1/query?" + q.Encode())
		if err != nil {
			return 0, err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		m := regexp.MustCompile(`"value":\[[0-9.]+,"([0-9]+)"\]`).FindSubmatch(b)
		if m == nil {
			return 0, fmt.Errorf("cannot count stored samples: %s", b)
		}
		n, err := strconv.Atoi(string(m[1]))
		if err != nil || n >= want || time.Now().After(deadline) {
			return n, err
		}
	}
}

func (c *cluster) stop() {
	for _, p := range c.procs {
		p.stop()
	}
	for _, d := range c.dirs {
		os.RemoveAll(d)
		os.RemoveAll(d + "-select-cache")
	}
}

// proc is a started server process.
type proc struct {
	name string
	bin  string
	args []string
	cmd  *exec.Cmd
}

var (
	procsMu sync.Mutex
	procs   []*proc
)

func startProc(name, bin string, args ...string) (*proc, error) {
	p := &proc{name: name, bin: bin, args: args}
	procsMu.Lock()
	procs = append(procs, p)
	procsMu.Unlock()
	return p, p.start()
}

func (p *proc) start() error {
	cmd := exec.Command(p.bin, p.args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("cannot start %s: %w", p.name, err)
	}
	p.cmd = cmd
	return nil
}

// cpu reads utime+stime from /proc/PID/stat.
func (p *proc) cpu() time.Duration {
	if p.cmd == nil {
		return 0
	}
	return statCPU(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
}

func (p *proc) stop() {
	if p.cmd == nil {
		return
	}
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
	p.cmd = nil
}

func killAll() {
	procsMu.Lock()
	defer procsMu.Unlock()
	for _, p := range procs {
		if p.cmd != nil {
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
	}
}

func freePorts(n int) ([]int, error) {
	var out []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

func freePort() (int, error) {
	p, err := freePorts(1)
	if err != nil {
		return 0, err
	}
	return p[0], nil
}

func waitHTTP(u string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(u); err == nil {
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready within %s", u, timeout)
}

// metric reads one unlabelled series from base/metrics (NaN when absent).
func metric(base, name string) float64 {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return math.NaN()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return math.NaN()
}

func waitMetric(base, name string, want float64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if metric(base, name) >= want {
			return nil
		}
		// Each poll is a /metrics scrape of the mds, whose CPU counts
		// as ballast's: at 50 polls a second they were ~10 % of the
		// mds's CPU in a profile of this section.
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s did not reach %.0f within %s (at %.0f)", name, want, timeout, metric(base, name))
}

func findCluster() string {
	if d := os.Getenv("BALLAST_VM_CLUSTER_DIR"); d != "" {
		return d
	}
	wd, _ := os.Getwd()
	for d := wd; ; d = filepath.Dir(d) {
		c := filepath.Join(d, "shared", "tools", "victoriametrics-cluster")
		if _, err := os.Stat(filepath.Join(c, "vminsert")); err == nil {
			return c
		}
		if filepath.Dir(d) == d {
			return ""
		}
	}
}

func report(directs, vias []result, down downResult, total int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Remote store: through ballast into a VictoriaMetrics cluster (issue 16)\n\n")
	b.WriteString(header("go run ./bench/cmd/benchsections -ballast bin/ballast -only remote"))
	fmt.Fprintf(&b, "Both paths get the same %d snappy-compressed remote-write bodies (%d series × one sample each, %d samples in all) from %d client goroutines, "+
		"each into a fresh VictoriaMetrics v1.150.0 cluster on 127.0.0.1 (two vmstorage, vminsert `-replicationFactor=2`, vmselect `-dedup.minScrapeInterval=1ms`). "+
		"**direct** posts them to vminsert (`/insert/0/prometheus/api/v1/write`), as vmagent or Prometheus would; **through ballast** posts them to "+
		"`ballast mds --store remote=…` (`/api/v1/write`), which validates every sample, queues blocks on disk and forwards them to vminsert "+
		"(these bodies are valid as they are, so each is queued and forwarded as received: docs/storage.md). "+
		"Time runs from the first post to the last sample acknowledged by vminsert (through ballast: `ballast_remote_samples_sent_total`, polled every 100 ms, reached the total). "+
		"CPU is user+system of the server processes (vminsert, both vmstorage, and ballast) from `/proc/PID/stat`, up to 3 s after the end; the client's CPU is the same for both and left out. "+
		"The two paths run %d times each, alternating, each time on a fresh cluster; the table gives the medians.\n\n",
		remoteSteps, remoteSeries, total, remoteWriters, remoteRounds)
	rate := func(r result) float64 { return r.rate(total) }
	dcpu := func(r result) float64 { return r.cpuPerSample(total, false) }
	vcpu := func(r result) float64 { return r.cpuPerSample(total, true) }
	bcpu := func(r result) float64 { return float64(r.ballCPU.Microseconds()) / float64(total) }
	dc, vc, bc := median(directs, dcpu), median(vias, vcpu), median(vias, bcpu)
	fmt.Fprintf(&b, "| path | samples/s | CPU µs per sample | of which ballast | stored (read back, dedup) |\n|---|---|---|---|---|\n")
	fmt.Fprintf(&b, "| direct to vminsert | %.0f | %.2f | – | %d |\n", median(directs, rate), dc, directs[len(directs)-1].stored)
	fmt.Fprintf(&b, "| through ballast | %.0f | %.2f | %.2f | %d |\n\n", median(vias, rate), vc, bc, vias[len(vias)-1].stored)
	ratio := vc / dc
	fmt.Fprintf(&b, "CPU per sample through ballast ÷ direct: **%.2f×** (target ≤ 1.2×: %s). ", ratio, verdict(ratio <= 1.2))
	fmt.Fprintf(&b, "ballast's own CPU per sample ÷ the direct path's: %.2f×. Per round (direct, through ballast, of which ballast, µs per sample):", bc/dc)
	for i := range directs {
		fmt.Fprintf(&b, " %.2f / %.2f / %.2f", dcpu(directs[i]), vcpu(vias[i]), bcpu(vias[i]))
		if i < len(directs)-1 {
			b.WriteString(";")
		}
	}
	b.WriteString(".\n\n")
	perM := func(n int64) float64 { return float64(n) / (float64(down.samples) / 1e6) / (1 << 20) }
	fmt.Fprintf(&b, "**Queue while the remote is down** (after the last round, a fresh mds): vminsert stopped, %d samples (%d bodies) pushed through ballast: the queue file "+
		"(`remote-write-queue.db`) took %.1f MiB, **%.1f MiB per million samples** (payload %.1f MiB per million: snappy-compressed remote-write blocks; "+
		"the rest is bbolt's pages). After vminsert restarted the queue drained in %.1f s (%.0f samples/s).\n",
		down.samples, remoteDownSteps, float64(down.queueFile)/(1<<20), perM(down.queueFile), perM(down.queue), down.drain.Seconds(), float64(down.samples)/down.drain.Seconds())
	return b.String()
}
