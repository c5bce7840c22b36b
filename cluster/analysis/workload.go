package analysis

import (
	"context"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ballast-io/ballast/analyzer/workload"
	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/storage"
)

// WindowLabel is the workload class of one client group over one window,
// recorded for per-window accuracy scoring.
type WindowLabel struct {
	Subject models.Subject `json:"subject"`
	Start   time.Time      `json:"start"`
	End     time.Time      `json:"end"`
	Class   string         `json:"class"`
	Score   float64        `json:"score"`
	// Held is set when a storage fault in the window kept the group's
	// confirmed class (workload.Label.Held).
	Held bool `json:"held,omitempty"`
}

// mountQuery reads the NFS client counters a window needs, from every
// client's mountstats, in one query.
const mountQuery = `last_over_time({__name__=~"ballast_nfs_client_(read_bytes|write_bytes|direct_read_bytes|direct_write_bytes|server_read_bytes)_total|ballast_nfs_client_operations_total|ballast_nfs_client_operation_execute_seconds_total|ballast_nfs_client_readahead_bytes", operation=~"|READ|WRITE"}[30s]) keep_metric_names`

// counters are one group's cumulative client counters.
type counters struct {
	read, write, serverRead, readOps, writeOps float64
	readExec                                   float64 // READ execute seconds (queue + round trip)
}

func (c counters) sub(p counters) counters {
	d := func(a, b float64) float64 {
		if a < b { // a counter reset: the new value is what happened since
			return a
		}
		return a - b
	}
	return counters{d(c.read, p.read), d(c.write, p.write), d(c.serverRead, p.serverRead), d(c.readOps, p.readOps), d(c.writeOps, p.writeOps), d(c.readExec, p.readExec)}
}

func (c *counters) add(d counters) {
	c.read += d.read
	c.write += d.write
	c.serverRead += d.serverRead
	c.readOps += d.readOps
	c.writeOps += d.writeOps
	c.readExec += d.readExec
}

type wlGroup struct {
	prev      counters
	prevT     time.Time
	winStart  time.Time
	sum       counters
	bandwidth []float64
	// fault is set when the group saw a storage fault at any tick of the
	// window so far (storageFaults)
	fault bool
}

// workloadStage cuts each client group's mountstats counters into windows
// and classifies them with analyzer/workload; the periodicity feature comes
// from the checkpoint stage's forecast of the same group. Sequentiality is
// not known from mountstats, so the read amplification (server ÷
// application read bytes) and the bytes per READ request stand in for it;
// READ execute time gives the requests in flight.
type workloadStage struct {
	a      *Analysis
	cl     *workload.Classifier
	groups map[models.Subject]*wlGroup

	mu     sync.Mutex
	labels []WindowLabel
}

func newWorkloadStage(a *Analysis) (*workloadStage, error) {
	cl, err := workload.New(workload.Options{})
	if err != nil {
		return nil, err
	}
	return &workloadStage{a: a, cl: cl, groups: map[models.Subject]*wlGroup{}}, nil
}

func (w *workloadStage) Name() string { return "workload" }

// readMountCounters sums each group's mountstats counters and takes the
// largest read-ahead window of its mounts (a gauge, apart: ra).
func readMountCounters(series []storage.Series) (out map[models.Subject]counters, ra map[models.Subject]float64) {
	out, ra = map[models.Subject]counters{}, map[models.Subject]float64{}
	for i := range series {
		s := &series[i]
		g, ok := groupOf(s)
		v, ok2 := lastValue(s)
		if !ok || !ok2 || math.IsNaN(v) {
			continue
		}
		if s.Name == models.MetricNFSReadahead {
			ra[g] = max(ra[g], v)
			continue
		}
		c := out[g]
		switch name := s.Name; {
		case name == "ballast_nfs_client_operations_total":
			switch s.Label("operation") {
			case "READ":
				c.readOps += v
			case "WRITE":
				c.writeOps += v
			}
		case name == "ballast_nfs_client_operation_execute_seconds_total":
			if s.Label("operation") == "READ" {
				c.readExec += v
			}
		case name == "ballast_nfs_client_server_read_bytes_total":
			c.serverRead += v
		case strings.HasSuffix(name, "read_bytes_total"):
			c.read += v
		case strings.HasSuffix(name, "write_bytes_total"):
			c.write += v
		}
		out[g] = c
	}
	return out, ra
}

func (w *workloadStage) Run(ctx context.Context, now time.Time) ([]models.Finding, error) {
	series, err := w.a.q.Query(ctx, mountQuery, now)
	if err != nil {
		return nil, err
	}
	cur, ra := readMountCounters(series)
	// groups whose nodes carry GPUs: a loader feeds them, a scan does not
	gpuSeries, err := w.a.q.Query(ctx, gpuQuery, now)
	if err != nil {
		return nil, err
	}
	gpuNode := map[models.Subject]bool{}
	for i := range gpuSeries {
		if g, ok := groupOf(&gpuSeries[i]); ok {
			gpuNode[g] = true
		}
	}
	faulted := storageFaults(w.a.stripes.tick, w.a.ids.AgentDown, nodeGroups(series, gpuSeries))
	subs := make([]models.Subject, 0, len(cur))
	for g := range cur {
		subs = append(subs, g)
	}
	sort.Slice(subs, func(i, j int) bool { return subs[i].String() < subs[j].String() })
	for _, s := range subs {
		c := cur[s]
		g := w.groups[s]
		if g == nil {
			w.groups[s] = &wlGroup{prev: c, prevT: now, winStart: now}
			continue
		}
		d := c.sub(g.prev)
		if dt := now.Sub(g.prevT).Seconds(); dt > 0 {
			g.bandwidth = append(g.bandwidth, (d.read+d.write)/dt)
		}
		g.sum.add(d)
		g.fault = g.fault || faulted[s]
		g.prev, g.prevT = c, now
		if now.Sub(g.winStart) < w.a.opts.WorkloadWindow {
			continue
		}
		win := workload.Window{
			Subject: s, Start: g.winStart, End: now,
			ReadBytes: g.sum.read, WriteBytes: g.sum.write, ReadOps: g.sum.readOps, WriteOps: g.sum.writeOps,
			Sequential: math.NaN(), ReadAmplification: math.NaN(), Bandwidth: g.bandwidth,
			GPUNode: gpuNode[s], StorageFault: g.fault, ReadAhead: ra[s],
		}
		if g.sum.read > 0 {
			win.ReadAmplification = g.sum.serverRead / g.sum.read
		}
		if sec := now.Sub(g.winStart).Seconds(); sec > 0 {
			win.ReadInFlight = g.sum.readExec / sec // Little's law
		}
		if p, ok := w.a.ckpt.det.Forecast(now, s); ok {
			win.Periodicity = p.Confidence
		}
		l, err := w.cl.Observe(now, win)
		if err != nil {
			return nil, err
		}
		w.mu.Lock()
		w.labels = append(w.labels, WindowLabel{Subject: s, Start: win.Start, End: win.End, Class: string(l.Class), Score: math.Round(l.Score*1000) / 1000, Held: l.Held})
		w.mu.Unlock()
		g.winStart, g.sum, g.bandwidth, g.fault = now, counters{}, nil, false
	}
	return w.cl.Findings(now), nil
}

// nodeGroups maps each node named in series to its group.
func nodeGroups(series ...[]storage.Series) map[string]models.Subject {
	out := map[string]models.Subject{}
	for _, ss := range series {
		for i := range ss {
			if n := ss[i].Label("node"); n != "" {
				if g, ok := groupOf(&ss[i]); ok {
					out[n] = g
				}
			}
		}
	}
	return out
}

// storageFaults returns the groups whose clients see a storage fault in
// this tick's LAYOUTSTATS: bytes not delivered on any of their streams
// (I/O errors, NXIO from a lost data server), or a stream on a data
// server whose agent failed its last scrape. A client's own streams are
// enough for its group: the ranks of a job wait on the one whose batch
// hangs.
func storageFaults(tick []models.StripeDelta, agentDown func(string) (bool, bool), groups map[string]models.Subject) map[models.Subject]bool {
	out := map[models.Subject]bool{}
	for i := range tick {
		d := &tick[i]
		g, ok := groups[d.Client]
		if !ok {
			g = models.Subject{Kind: models.SubjectClient, ID: d.Client}
		}
		if out[g] {
			continue
		}
		down, known := agentDown(d.DS)
		out[g] = d.Read.BytesNotDelivered > 0 || d.Write.BytesNotDelivered > 0 || (known && down)
	}
	return out
}

func (w *workloadStage) labelsCopy() []WindowLabel {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]WindowLabel(nil), w.labels...)
}
