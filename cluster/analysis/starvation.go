package analysis

import (
	"context"
	"math"
	"sort"
	"time"

	"github.com/ballast-io/ballast/analyzer/starvation"
	"github.com/ballast-io/ballast/models"
)

// gpuQuery reads every GPU's DCGM utilisation.
const gpuQuery = `ballast_gpu_utilization_ratio`

// pathMemory is how long a node's last read paths are kept when its client
// reports no I/O: a starved or hung client sends no LAYOUTSTATS for the
// layouts it is stuck on, and that is exactly when its paths matter.
const pathMemory = 3 * time.Minute

type nodePaths struct {
	paths []starvation.Path
	at    time.Time
}

// starvationStage feeds analyzer/starvation: GPU utilisation from DCGM,
// each node's read paths from the tick's stripe deltas (kept for a while
// when a node goes quiet), the health of stripes, devices and DSs from the
// LAYOUTSTATS series (latency; bytes not delivered = down) and the hotspot
// stage's findings, and the groups the checkpoint stage sees writing a
// burst. A GPU's job is its node's client group, the subject the
// checkpoint stage uses.
type starvationStage struct {
	a       *Analysis
	an      *starvation.Analyzer
	paths   map[string]nodePaths
	parents map[models.Subject]models.Subject
}

func newStarvationStage(a *Analysis) (*starvationStage, error) {
	an, err := starvation.New(starvation.Options{})
	if err != nil {
		return nil, err
	}
	return &starvationStage{a: a, an: an, paths: map[string]nodePaths{}, parents: map[models.Subject]models.Subject{}}, nil
}

func (s *starvationStage) Name() string { return "starvation" }

func (s *starvationStage) Run(ctx context.Context, now time.Time) ([]models.Finding, error) {
	series, err := s.a.q.Query(ctx, gpuQuery, now)
	if err != nil {
		return nil, err
	}
	var in starvation.Input
	seen := map[string]bool{}
	for i := range series {
		sr := &series[i]
		v, ok := lastValue(sr)
		node := sr.Label("node")
		if !ok || node == "" || math.IsNaN(v) {
			continue
		}
		id := node + "/" + sr.Label("gpu")
		if seen[id] {
			continue
		}
		seen[id] = true
		job := node
		if g, ok := groupOf(sr); ok {
			job = g.ID
		}
		in.GPUs = append(in.GPUs, starvation.GPU{ID: id, Node: node, Job: job, Util: min(max(v, 0), 1)})
	}

	paths, parents := starvation.PathsFromStripes(s.a.stripes.tick)
	for k, v := range parents {
		s.parents[k] = v
	}
	fresh := map[string][]starvation.Path{}
	for _, p := range paths {
		fresh[p.Node] = append(fresh[p.Node], p)
	}
	for n, ps := range fresh {
		s.paths[n] = nodePaths{paths: ps, at: now}
	}
	nodes := make([]string, 0, len(s.paths))
	for n, np := range s.paths {
		if now.Sub(np.at) > pathMemory {
			delete(s.paths, n)
			continue
		}
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	onPath := map[models.Subject]bool{}
	for _, n := range nodes {
		for _, p := range s.paths[n].paths {
			in.Paths = append(in.Paths, p)
			onPath[p.Subject] = true
		}
	}

	// Health: every device and DS with LAYOUTSTATS series, and every
	// stripe on a path (a stripe's only own state is hot).
	listed := map[models.Subject]bool{}
	for _, l := range s.a.hot.loads {
		h := starvation.Health{Subject: l.subject, Parent: s.parents[l.subject], Util: math.NaN(),
			Latency: l.latency(), Down: l.notDeliveredBytes > 0, Hot: s.a.hot.hot[l.subject]}
		if math.IsNaN(h.Latency) {
			h.Latency = -1
		}
		in.Health = append(in.Health, h)
		listed[l.subject] = true
	}
	stripes := make([]models.Subject, 0, len(onPath))
	for sub := range onPath {
		if !listed[sub] {
			stripes = append(stripes, sub)
		}
	}
	sort.Slice(stripes, func(i, j int) bool { return stripes[i].ID < stripes[j].ID })
	for _, sub := range stripes {
		in.Health = append(in.Health, starvation.Health{Subject: sub, Parent: s.parents[sub], Util: math.NaN(), Latency: -1, Hot: s.a.hot.hot[sub]})
		listed[sub] = true
	}
	// Parents a path walks through must be listed for the walk to reach
	// the root; add any the series did not cover.
	for i := 0; i < len(in.Health); i++ {
		p := in.Health[i].Parent
		if p.ID != "" && !listed[p] {
			listed[p] = true
			in.Health = append(in.Health, starvation.Health{Subject: p, Parent: s.parents[p], Util: math.NaN(), Latency: -1, Hot: s.a.hot.hot[p]})
		}
	}
	for g := range s.a.ckpt.active {
		in.Checkpointing = append(in.Checkpointing, g)
	}
	sort.Strings(in.Checkpointing)
	if err := s.an.Observe(now, in); err != nil {
		return nil, err
	}
	return s.an.Findings(now), nil
}
