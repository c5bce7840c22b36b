package analysis

import (
	"context"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/ballast-io/ballast/analyzer/hotspot"
	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/storage"
)

// layoutQuery reads every per-device and per-DS LAYOUTSTATS series the load
// measures need in one instant query (the ingest writes them at most every
// 15 s; the instant lookback keeps the latest).
const layoutQuery = `{__name__=~"ballast_layoutstats_(device|ds)_(ops_per_second|bytes_per_second|bytes_not_delivered_per_second|latency_seconds|utilization_ratio)"}`

// subjectLoad is what the LAYOUTSTATS series say about one device or DS.
type subjectLoad struct {
	subject           models.Subject
	ops, bytes        float64
	latencyOps        float64 // Σ latency × ops, for the ops-weighted mean
	util              float64 // max over directions; NaN unknown
	notDeliveredBytes float64
}

func (l *subjectLoad) latency() float64 {
	if l.ops <= 0 {
		return math.NaN()
	}
	return l.latencyOps / l.ops
}

// readLayoutLoads turns the result of layoutQuery into loads, sorted by
// subject. Latency series are matched to the ops series of the same
// subject and direction.
func readLayoutLoads(series []storage.Series) []*subjectLoad {
	type dirKey struct {
		s  models.Subject
		op string
	}
	loads := map[models.Subject]*subjectLoad{}
	lat := map[dirKey]float64{}
	ops := map[dirKey]float64{}
	get := func(s models.Subject) *subjectLoad {
		l := loads[s]
		if l == nil {
			l = &subjectLoad{subject: s, util: math.NaN()}
			loads[s] = l
		}
		return l
	}
	for i := range series {
		s := &series[i]
		v, ok := lastValue(s)
		if !ok || math.IsNaN(v) {
			continue
		}
		var subj models.Subject
		rest := ""
		switch {
		case strings.HasPrefix(s.Name, "ballast_layoutstats_device_"):
			subj = models.Subject{Kind: models.SubjectDevice, ID: s.Label("deviceid")}
			rest = strings.TrimPrefix(s.Name, "ballast_layoutstats_device_")
		case strings.HasPrefix(s.Name, "ballast_layoutstats_ds_"):
			subj = models.Subject{Kind: models.SubjectDS, ID: s.Label("ds")}
			rest = strings.TrimPrefix(s.Name, "ballast_layoutstats_ds_")
		default:
			continue
		}
		if subj.ID == "" {
			continue
		}
		l := get(subj)
		k := dirKey{subj, s.Label("op")}
		switch rest {
		case "ops_per_second":
			l.ops += v
			ops[k] += v
		case "bytes_per_second":
			l.bytes += v
		case "bytes_not_delivered_per_second":
			l.notDeliveredBytes += v
		case "latency_seconds":
			lat[k] = v
		case "utilization_ratio":
			if math.IsNaN(l.util) || v > l.util {
				l.util = v
			}
		}
	}
	for k, v := range lat {
		if l := loads[k.s]; l != nil {
			l.latencyOps += v * ops[k]
		}
	}
	out := make([]*subjectLoad, 0, len(loads))
	for _, l := range loads {
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].subject.String() < out[j].subject.String() })
	return out
}

// hotspotStage feeds analyzer/hotspot with device and DS loads from the
// LAYOUTSTATS-derived series and the tick's stripe deltas. Device loads use
// the pNFS device id and DS loads the DS address, the ids the stripe deltas
// carry, so device and DS findings name their hot stripes. Switch ports are
// not judged: no agent scrapes the switch.
//
// Stripe findings are passed on only while the stripe's device is itself
// hot. The analyzer gates stripes on their device's utilisation, which the
// mds cannot give it here (diskstats name drives by kernel name, LAYOUTSTATS
// by pNFS device id, and nothing a real cluster exposes joins the two), so
// without this gate every popular stripe of an idle device would be
// reported. A stripe finding already passed on is closed when its device
// cools.
type hotspotStage struct {
	a       *Analysis
	det     *hotspot.Detector
	loads   []*subjectLoad
	hot     map[models.Subject]bool // subjects of the tick's active findings
	stripes closer                  // stripe findings passed on and still open
}

func newHotspotStage(a *Analysis) (*hotspotStage, error) {
	det, err := hotspot.New(hotspot.Options{})
	if err != nil {
		return nil, err
	}
	return &hotspotStage{a: a, det: det, hot: map[models.Subject]bool{}}, nil
}

func (h *hotspotStage) Name() string { return "hotspot" }

func (h *hotspotStage) Run(ctx context.Context, now time.Time) ([]models.Finding, error) {
	series, err := h.a.q.Query(ctx, layoutQuery, now)
	if err != nil {
		return nil, err
	}
	h.loads = readLayoutLoads(series)
	in := hotspot.Input{Stripes: h.a.stripes.tick, Loads: make([]hotspot.Load, 0, len(h.loads))}
	for _, l := range h.loads {
		ld := hotspot.NewLoad(l.subject, "")
		ld.Values[hotspot.IOPS] = l.ops
		ld.Values[hotspot.BytesPerSec] = l.bytes
		ld.Values[hotspot.Latency] = l.latency()
		in.Loads = append(in.Loads, ld)
	}
	if err := h.det.Observe(now, in); err != nil {
		return nil, err
	}
	all := h.det.Findings(now)
	clear(h.hot)
	for i := range all {
		if all[i].Active() && all[i].Subject.Kind != models.SubjectStripe {
			h.hot[all[i].Subject] = true
		}
	}
	fs := all[:0]
	var stripes []models.Finding
	for _, f := range all {
		if f.Subject.Kind != models.SubjectStripe {
			fs = append(fs, f)
			continue
		}
		dev, _, _ := strings.Cut(f.Subject.ID, "/")
		_, open := h.stripes.active[f.ID]
		switch {
		case !f.Active() && open:
			stripes = append(stripes, f)
		case f.Active() && h.hot[models.Subject{Kind: models.SubjectDevice, ID: dev}]:
			h.hot[f.Subject] = true
			stripes = append(stripes, f)
		}
	}
	// Stripe findings not passed on this tick that were open end now.
	return append(fs, h.stripes.update(now, stripes)...), nil
}
