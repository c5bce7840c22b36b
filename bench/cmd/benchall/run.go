package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"runtime"
	"runtime/debug"
	"time"
)

// Paths measured per dataset, in report order.
const (
	pathRaw           = "raw AddRows"
	pathBallastImport = "ballast import"
	pathBallastRW     = "ballast remote write"
	pathVMImport      = "VM import"
	pathVMRW          = "VM remote write"
)

var ingestPaths = []string{pathRaw, pathBallastImport, pathBallastRW, pathVMImport, pathVMRW}

// system is a server kind under test.
type system struct {
	Name  string
	start func(ctx context.Context, dataDir string) (*server, error)
}

func (h *harness) systems() []system {
	return []system{
		{"ballast", func(ctx context.Context, dir string) (*server, error) { return startBallast(ctx, h.ballast, dir) }},
		{"VM", func(ctx context.Context, dir string) (*server, error) { return startVM(ctx, h.vm, dir) }},
	}
}

// datasetResult is every ingest path on one dataset.
type datasetResult struct {
	D       *dataset
	Render  time.Duration
	TextMB  float64 // Prometheus text bytes, all bodies
	RWMB    float64 // snappy remote-write bytes, all bodies
	Results map[string]*ingestResult
}

// storedTimeout bounds the wait for acknowledged rows to become searchable.
const storedTimeout = 2 * time.Minute

// runDataset renders d once and pushes it through every path, each into a
// fresh, empty store, so every path creates the same new series.
func (h *harness) runDataset(ctx context.Context, d *dataset) *datasetResult {
	dr := &datasetResult{D: d, Results: map[string]*ingestResult{}}
	progress("%s: rendering %d samples", d.Name, d.Samples())
	t := time.Now()
	p, err := d.render()
	dr.Render = time.Since(t)
	if err != nil {
		for _, k := range ingestPaths {
			dr.Results[k] = &ingestResult{Err: err, Stored: -1}
		}
		return dr
	}
	for _, b := range p.text {
		dr.TextMB += float64(len(b)) / 1e6
	}
	for _, b := range p.rw {
		dr.RWMB += float64(len(b)) / 1e6
	}
	samples := d.BatchSamples()

	if h.selected(pathRaw) {
		progress("%s: %s", d.Name, pathRaw)
		dir := h.newDir("raw")
		r := runRaw(ctx, d, p, dir, h.writers)
		dr.Results[pathRaw] = &r
		os.RemoveAll(dir)
		progress("%s: %s: %.2f M samples/s, %s CPU per sample", d.Name, pathRaw, r.Rate()/1e6, r.CPUPerSample())
	}
	p.namesRaw = nil
	runtime.GC()

	for _, sys := range h.systems() {
		for _, f := range []format{formatImport, formatRemoteWrite} {
			if ctx.Err() != nil {
				return dr
			}
			key := sys.Name + " " + f.Name
			if !h.selected(key) {
				continue
			}
			bodies := p.text
			if f.Name == formatRemoteWrite.Name {
				bodies = p.rw
			}
			progress("%s: %s", d.Name, key)
			res := h.runHTTP(ctx, sys, f, d, bodies, samples)
			dr.Results[key] = res
			if res.Err != nil {
				progress("%s: %s failed: %v", d.Name, key, res.Err)
			} else {
				progress("%s: %s: %.2f M samples/s, %s CPU per sample, %d of %d stored", d.Name, key, res.Rate()/1e6, res.CPUPerSample(), res.Stored, res.Samples)
			}
		}
	}
	return dr
}

func (h *harness) newDir(name string) string {
	dir, err := os.MkdirTemp(h.tmp, name+"-")
	if err != nil {
		// The parent exists and is ours; this only fails when the disk does.
		panic(fmt.Sprintf("cannot create a directory under %s: %v", h.tmp, err))
	}
	return dir
}

// runHTTP starts a fresh server, pushes every body to it through f, waits
// until the rows are searchable and counts them.
func (h *harness) runHTTP(ctx context.Context, sys system, f format, d *dataset, bodies [][]byte, samples []int) *ingestResult {
	res := &ingestResult{Samples: d.Samples(), Stored: -1}
	dir := h.newDir(sys.Name)
	defer os.RemoveAll(dir)
	srv, err := sys.start(ctx, dir)
	if err != nil {
		res.Err = err
		return res
	}
	defer func() {
		if err := srv.stop(); err != nil && res.Err == nil {
			res.Note = joinNote(res.Note, err.Error())
		}
	}()

	hdr, note, err := h.probe(ctx, srv, f, d)
	if err != nil {
		res.Err = err
		return res
	}
	res.Note = note
	u := srv.base + f.Path
	cpu0, cerr := srv.cpuTime()
	var throttled int
	res.Acked, res.Elapsed, throttled, err = pushAll(ctx, h.client, u, hdr, bodies, samples, h.writers)
	res.Note = joinNote(res.Note, throttledNote(throttled))
	if cpu1, cerr2 := srv.cpuTime(); cerr == nil && cerr2 == nil {
		res.CPU = cpu1 - cpu0
	}
	if err != nil {
		res.Err = fmt.Errorf("%s %s: %w", sys.Name, f.Name, err)
		return res
	}
	t := time.Now()
	res.Stored, err = waitStored(ctx, h.client, srv.base, d, storedTimeout)
	res.Searched = time.Since(t)
	if err != nil {
		res.Err = fmt.Errorf("cannot count stored rows on %s: %w", sys.Name, err)
	}
	if res.PeakRSS, err = srv.peakRSS(); err != nil {
		res.Note = joinNote(res.Note, err.Error())
	}
	return res
}

// probe sends one sample of another metric with the headers a real sender
// uses and returns the headers to measure with. When the server refuses the
// standard remote-write Content-Encoding header but accepts the same body
// without it, the measurement goes on without it and the note says so: the
// number is still worth having, and the refusal is a finding.
func (h *harness) probe(ctx context.Context, srv *server, f format, d *dataset) (map[string]string, string, error) {
	pd := *d
	pd.Metric, pd.Series, pd.Points, pd.BatchSeries, pd.BatchPoints = "bench_probe", 1, 1, 1, 1
	ls := pd.labels()
	body := pd.textBodies(ls)[0]
	if f.Name == formatRemoteWrite.Name {
		rw, err := pd.remoteWriteBodies(ls)
		if err != nil {
			return nil, "", err
		}
		body = rw[0]
	}
	u := srv.base + f.Path
	err := post(ctx, h.client, u, f.Headers, body)
	if err == nil {
		return f.Headers, "", nil
	}
	if _, ok := f.Headers["Content-Encoding"]; !ok {
		return nil, "", fmt.Errorf("%s refused a one-sample %s probe: %w", srv.kind, f.Name, err)
	}
	hdr := maps.Clone(f.Headers)
	delete(hdr, "Content-Encoding")
	if err2 := post(ctx, h.client, u, hdr, body); err2 != nil {
		return nil, "", fmt.Errorf("%s refused a one-sample %s probe: %w", srv.kind, f.Name, err)
	}
	return hdr, fmt.Sprintf("%s refused the standard header Content-Encoding: %s (%v); measured without that header",
		srv.kind, f.Headers["Content-Encoding"], err), nil
}

func joinNote(a, b string) string {
	if a == "" || b == "" {
		return a + b
	}
	return a + "; " + b
}

// querySpec is one timed query_range expression.
type querySpec struct {
	Name       string
	Expr       string
	WantSeries int // series the answer must have; -1: all of the dataset
	N          int
	Budget     time.Duration
	Note       string
}

// queryResult is one query on both servers.
type queryResult struct {
	Spec   querySpec
	Result map[string]*latency // by system name
	Err    map[string]error
}

// queryRun is the query phase: its dataset, ingest into each server, and
// latencies.
type queryRun struct {
	D       *dataset
	Ingest  map[string]*ingestResult // by system name, import path
	Queries []*queryResult
}

// runQueries loads d into a fresh server of each kind through the import
// path, waits until all of it is searchable, then times each query. One
// server runs at a time so that neither competes with the other's
// background merges.
func (h *harness) runQueries(ctx context.Context, d *dataset, specs []querySpec) *queryRun {
	qr := &queryRun{D: d, Ingest: map[string]*ingestResult{}}
	for _, s := range specs {
		qr.Queries = append(qr.Queries, &queryResult{Spec: s, Result: map[string]*latency{}, Err: map[string]error{}})
	}
	progress("query: rendering %s", d.Name)
	ls := d.labels()
	bodies := d.textBodies(ls)
	samples := d.BatchSamples()
	for _, sys := range h.systems() {
		if ctx.Err() != nil {
			break
		}
		progress("query: loading %s into %s", d.Name, sys.Name)
		res, srv, cleanup := h.loadForQueries(ctx, sys, d, bodies, samples)
		qr.Ingest[sys.Name] = res
		if res.Err != nil || res.Stored != int64(d.Samples()) {
			err := res.Err
			if err == nil {
				err = fmt.Errorf("only %d of %d samples became searchable within %s", res.Stored, d.Samples(), storedTimeout)
			}
			for _, q := range qr.Queries {
				q.Err[sys.Name] = err
			}
			cleanup()
			continue
		}
		for _, q := range qr.Queries {
			want := q.Spec.WantSeries
			if want < 0 {
				want = d.Series
			}
			progress("query: %s on %s", q.Spec.Name, sys.Name)
			l, err := timeQueryRange(ctx, h.client, srv.base, q.Spec.Expr, d.Start/1000, d.Last()/1000, q.Spec.N, q.Spec.Budget)
			switch {
			case err != nil:
				q.Err[sys.Name] = err
			case l.Series != want || l.Points != want*d.Points:
				q.Err[sys.Name] = fmt.Errorf("query %s answered %d series and %d points; want %d and %d", q.Spec.Expr, l.Series, l.Points, want, want*d.Points)
			default:
				q.Result[sys.Name] = l
				progress("query: %s on %s: median %s, p99 %s over %d", q.Spec.Name, sys.Name, l.Median(), l.P99(), len(l.Samples))
			}
		}
		if rss, err := srv.peakRSS(); err == nil {
			res.PeakRSS = rss
		}
		cleanup()
	}
	return qr
}

// loadForQueries starts a server of sys, imports bodies and waits until d is
// searchable. The caller runs cleanup, which stops the server and removes
// its data.
func (h *harness) loadForQueries(ctx context.Context, sys system, d *dataset, bodies [][]byte, samples []int) (*ingestResult, *server, func()) {
	res := &ingestResult{Samples: d.Samples(), Stored: -1}
	dir := h.newDir(sys.Name + "-query")
	srv, err := sys.start(ctx, dir)
	if err != nil {
		res.Err = err
		return res, nil, func() { os.RemoveAll(dir) }
	}
	cleanup := func() {
		if err := srv.stop(); err != nil {
			res.Note = joinNote(res.Note, err.Error())
		}
		os.RemoveAll(dir)
	}
	var throttled int
	res.Acked, res.Elapsed, throttled, err = pushAll(ctx, h.client, srv.base+formatImport.Path, formatImport.Headers, bodies, samples, h.writers)
	res.Note = joinNote(res.Note, throttledNote(throttled))
	if err != nil {
		res.Err = err
		return res, srv, cleanup
	}
	t := time.Now()
	res.Stored, res.Err = waitStored(ctx, h.client, srv.base, d, storedTimeout)
	res.Searched = time.Since(t)
	// Let the merges that follow a burst of ingest settle before timing.
	select {
	case <-ctx.Done():
	case <-time.After(2 * time.Second):
	}
	return res, srv, cleanup
}

// vmModuleVersion is the VictoriaMetrics module version this program (and
// so the in-process lib/storage and the built single-node) uses.
func vmModuleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == "github.com/VictoriaMetrics/VictoriaMetrics" {
				return m.Version
			}
		}
	}
	return "unknown"
}

// errors lists every failed measurement.
func (r *report) errors() []error {
	var out []error
	for _, dr := range r.Datasets {
		for _, k := range ingestPaths {
			res := dr.Results[k]
			switch {
			case res == nil:
			case res.Err != nil:
				out = append(out, fmt.Errorf("%s, %s: %w", dr.D.Name, k, res.Err))
			case res.Stored != int64(res.Acked):
				out = append(out, fmt.Errorf("%s, %s: acknowledged %d samples but %d are stored", dr.D.Name, k, res.Acked, res.Stored))
			}
		}
	}
	if r.Query != nil {
		for _, q := range r.Query.Queries {
			for sys, err := range q.Err {
				out = append(out, fmt.Errorf("query %s on %s: %w", q.Spec.Name, sys, err))
			}
		}
	}
	return out
}
