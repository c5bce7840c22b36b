package analysis

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/ballast-io/ballast/analyzer/hotspot"
	"github.com/ballast-io/ballast/models"
)

// subjectLoad is what the tick's LAYOUTSTATS deltas say about one device
// or DS.
type subjectLoad struct {
	subject           models.Subject
	pool              string     // the pool of its DS, "" when unknown
	ops, bytes        float64    // completed, per second, both directions
	dirOps, dirBytes  [2]float64 // the same, read and write apart
	completion        float64    // Σ completion time of reads, seconds
	opsDone           float64    // Σ completed reads
	notDeliveredBytes float64    // per second
}

// latency is the mean completion time of the tick's reads; NaN when none
// completed. Reads only: a checkpoint's large writes take longer per
// operation without anything being slow, and starving GPUs wait on reads.
func (l *subjectLoad) latency() float64 {
	if l.opsDone <= 0 {
		return math.NaN()
	}
	return l.completion / l.opsDone
}

// loadTracker sums the tick's stripe deltas per device and per DS: the
// same quantities as the ingest's ballast_layoutstats_{device,ds}_* series
// (Σ over stripe keys of delta ÷ its interval), but from this tick's
// reports only, so a change shows at the next tick instead of after the
// series' emit interval, and without a query. Devices and DSs seen before
// and silent now are listed with zero load: idle peers belong in the fair
// share.
type loadTracker struct {
	known map[models.Subject]string // subject → its pool ("" unknown)
}

func (t *loadTracker) loads(deltas []models.StripeDelta, pools map[string]string) []*subjectLoad {
	if t.known == nil {
		t.known = map[models.Subject]string{}
	}
	by := map[models.Subject]*subjectLoad{}
	get := func(s models.Subject) *subjectLoad {
		l := by[s]
		if l == nil {
			l = &subjectLoad{subject: s}
			by[s] = l
		}
		return l
	}
	for i := range deltas {
		d := &deltas[i]
		sec := d.Duration.Seconds()
		if sec <= 0 {
			continue
		}
		subs := [2]models.Subject{{Kind: models.SubjectDevice, ID: d.DeviceID}, {Kind: models.SubjectDS, ID: d.DS}}
		for _, s := range subs {
			if s.ID == "" {
				continue
			}
			l := get(s)
			if p := pools[d.DS]; p != "" {
				l.pool = p
			}
			for dir, io := range [2]*models.StripeIO{&d.Read, &d.Write} {
				ops, b := float64(io.OpsCompleted)/sec, float64(io.BytesCompleted)/sec
				l.ops += ops
				l.bytes += b
				l.dirOps[dir] += ops
				l.dirBytes[dir] += b
				l.notDeliveredBytes += float64(io.BytesNotDelivered) / sec
			}
			l.completion += d.Read.CompletionTime.Seconds()
			l.opsDone += float64(d.Read.OpsCompleted)
		}
	}
	for s, l := range by {
		if l.pool != "" || t.known[s] == "" {
			t.known[s] = l.pool
		}
	}
	for s, pool := range t.known {
		if l := get(s); l.pool == "" {
			l.pool = pool
		}
	}
	out := make([]*subjectLoad, 0, len(by))
	for _, l := range by {
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].subject.String() < out[j].subject.String() })
	return out
}

// peerGroup is the set of subjects compared with each other: one kind in
// one pool (tier). Devices of a capacity tier that only take checkpoints
// are not the peers of the fast tier's drives that serve reads.
type peerGroup struct {
	kind models.SubjectKind
	pool string
}

// readQuorum reports, per peer group, whether at least half of its known
// subjects served reads in the tick. A fair share needs a busy group: while
// most devices are idle the peer median is near zero and any device still
// serving is "∞× its peers". Such ticks are not judged on reads. The
// quorum counts any device that read at all, so while a lost DS stalls
// most streams a group can keep its quorum with a collapsed median; the
// drives' utilisation (driveUtil), where the DS agents export it, is what
// then keeps an unbusy device from being hot.
func readQuorum(loads []*subjectLoad) map[peerGroup]bool {
	total, active := map[peerGroup]int{}, map[peerGroup]int{}
	for _, l := range loads {
		g := peerGroup{l.subject.Kind, l.pool}
		total[g]++
		if l.dirBytes[0] > 0 {
			active[g]++
		}
	}
	out := map[peerGroup]bool{}
	for g, n := range total {
		out[g] = 2*active[g] >= n
	}
	return out
}

// hotspotStage feeds analyzer/hotspot with device and DS loads summed from
// the tick's stripe deltas, and the deltas themselves. Device and DS loads
// use the names the deltas carry (the identity stage renamed them: the
// drive, the DS), so device and DS findings name their hot stripes. Switch
// ports are not judged as such (no agent scrapes the switch), but the
// network path of each DS and client node is (netPaths): a saturated port
// is found through the host behind it, from the latency its clients see.
//
// A device's utilisation is its drive's busy time (driveUtil), joined to
// the device by the drive name the identity stage gave it; it is unknown
// for a device whose drive has no series (no DS agent, a DS the table
// cannot name yet) and the device is judged on LAYOUTSTATS alone.
//
// Stripe findings are passed on only while the stripe's device is itself
// hot. The analyzer also drops stripes of a device whose utilisation is
// known and below StripeDeviceUtil, but the utilisation is unknown on a
// cluster without DS agents, and the gate predates it: without it every
// popular stripe of an idle device would be reported there. It stays until
// the evaluation shows stripes judged on utilisation alone do as well. A
// stripe finding already passed on is closed when its device cools.
type hotspotStage struct {
	a       *Analysis
	tracker loadTracker
	det     *hotspot.Detector
	loads   []*subjectLoad
	hot     map[models.Subject]bool // subjects of the tick's active findings
	// hotNow are the subjects of active findings whose condition held at
	// this tick (LastSeen = now), stripes only on devices hot now: what
	// the starvation stage calls hot. A finding stays open for the
	// detector's ExitAfter once its subject has cooled, so that a load
	// dipping for a tick keeps one episode for people; in those ticks the
	// subject is no longer above its fair share and slows nobody's reads.
	hotNow  map[models.Subject]bool
	stripes closer // stripe findings passed on and still open
	// utilFailing is set while the utilisation query fails, so the
	// failure is logged once, not every tick.
	utilFailing bool
}

// utilQuery is every DS drive's utilisation: the rate of its busy time
// (diskstats io_ticks: time with at least one I/O in flight, so 1 s/s at
// most) over window, per node and kernel device name.
func utilQuery(window time.Duration) string {
	return fmt.Sprintf(`max by (node, device) (rate(%s{role="ds"}[%ds]))`, models.MetricDiskIOTime, int(window.Seconds()))
}

// utilWindow spans two scrapes of the agents (MetricsQL's rate also uses
// the sample just before the window), and at least RateWindow.
func (h *hotspotStage) utilWindow() time.Duration {
	return max(h.a.opts.RateWindow, 2*h.a.opts.ScrapeInterval)
}

// driveUtil returns the utilisation of each drive, by drive name
// (identity.Table.DriveName: "ds04/nvme4n1"), from one query. A failed
// query is logged once (until one succeeds again) and yields none: the
// tick is judged without utilisation rather than not at all.
func (h *hotspotStage) driveUtil(ctx context.Context, now time.Time) map[string]float64 {
	q := utilQuery(h.utilWindow())
	series, err := h.a.q.Query(ctx, q, now)
	if err != nil {
		if !h.utilFailing {
			h.a.opts.Logger.Warn("hotspot: cannot read drive utilisation; devices are judged without it until the query works again", "query", q, "err", err)
		}
		h.utilFailing = true
		return nil
	}
	h.utilFailing = false
	out := make(map[string]float64, len(series))
	for i := range series {
		s := &series[i]
		v, ok := lastValue(s)
		if !ok || !(v >= 0) || s.Label("node") == "" || s.Label("device") == "" {
			continue
		}
		out[h.a.ids.DriveName(s.Label("node"), s.Label("device"))] = min(v, 1)
	}
	return out
}

func newHotspotStage(a *Analysis) (*hotspotStage, error) {
	det, err := hotspot.New(hotspot.Options{})
	if err != nil {
		return nil, err
	}
	return &hotspotStage{a: a, det: det, hot: map[models.Subject]bool{}, hotNow: map[models.Subject]bool{}}, nil
}

func (h *hotspotStage) Name() string { return "hotspot" }

func (h *hotspotStage) Run(ctx context.Context, now time.Time) ([]models.Finding, error) {
	h.loads = h.tracker.loads(h.a.stripes.tick, h.a.ident.Pools())
	util := h.driveUtil(ctx, now)
	in := hotspot.Input{Stripes: h.a.stripes.tick, Loads: make([]hotspot.Load, 0, len(h.loads))}
	reads := readQuorum(h.loads)
	for _, l := range h.loads {
		// Peers are the same kind in the same pool, each direction
		// compared with the same direction: reads with reads (while half
		// the group serves reads), writes with the writes of the peers
		// that write (zero is unknown, not an idle peer: a checkpoint
		// writes some devices of a pool and none of the others; the
		// detector leaves out, alike, peers that write less than its
		// floor, such as the trickle of the nodes' logs), so a
		// checkpoint into one tier never makes its devices hot against
		// another tier's readers.
		ld := hotspot.NewLoad(l.subject, l.pool)
		if reads[peerGroup{l.subject.Kind, l.pool}] {
			ld.Values[hotspot.ReadIOPS] = l.dirOps[0]
			ld.Values[hotspot.ReadBytesPerSec] = l.dirBytes[0]
			ld.Values[hotspot.Latency] = l.latency()
		}
		if l.dirBytes[1] > 0 {
			ld.Values[hotspot.WriteIOPS] = l.dirOps[1]
			ld.Values[hotspot.WriteBytesPerSec] = l.dirBytes[1]
		}
		// Utilisation only gates (analyzer/hotspot: a subject whose
		// utilisation is known and below its floor is never hot); it opens
		// nothing by itself. A device serving its share while its peers
		// stall (a lost DS) is far above a collapsed median in IOPS but
		// not busy, and that is not a hotspot.
		if u, ok := util[l.subject.ID]; ok && l.subject.Kind == models.SubjectDevice {
			ld.Values[hotspot.Utilization] = u
		}
		in.Loads = append(in.Loads, ld)
	}
	if h.a.st != nil {
		h.a.st.observeLatency(now) // this tick's latencies for the paths
	}
	in.Paths = h.netPaths(util, reads)
	if err := h.det.Observe(now, in); err != nil {
		return nil, err
	}
	all := h.det.Findings(now)
	clear(h.hot)
	clear(h.hotNow)
	for i := range all {
		if all[i].Active() && all[i].Subject.Kind != models.SubjectStripe {
			h.hot[all[i].Subject] = true
			if all[i].LastSeen.Equal(now) {
				h.hotNow[all[i].Subject] = true
			}
		}
	}
	fs := all[:0]
	var stripes []models.Finding
	for _, f := range all {
		if f.Subject.Kind != models.SubjectStripe {
			fs = append(fs, f)
			continue
		}
		dev := hotspot.StripeDevice(f.Subject.ID)
		_, open := h.stripes.active[f.ID]
		switch {
		case !f.Active() && open:
			stripes = append(stripes, f)
		case f.Active() && h.hot[models.Subject{Kind: models.SubjectDevice, ID: dev}]:
			h.hot[f.Subject] = true
			if f.LastSeen.Equal(now) && h.hotNow[models.Subject{Kind: models.SubjectDevice, ID: dev}] {
				h.hotNow[f.Subject] = true
			}
			stripes = append(stripes, f)
		}
	}
	// Stripe findings not passed on this tick that were open end now.
	return append(fs, h.stripes.update(now, stripes)...), nil
}
