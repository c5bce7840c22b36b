package analysis

import (
	"maps"
	"slices"
	"sort"

	"github.com/ballast-io/ballast/analyzer/hotspot"
	"github.com/ballast-io/ballast/models"
)

// netPaths builds the hotspot analyzer's network paths (analyzer/hotspot
// netpath.go) from the evidence the starvation stage already keeps: the
// smoothed read latency of every device and DS with the reads of clients
// slow on their own side left out, each client's latency against the
// other clients' on the same devices, the DS-to-device topology and the
// agents' NIC utilisation. The starvation stage runs after this one (it
// needs this stage's findings); the hotspot stage has it update the
// latencies for this tick first (observeLatency), while the topology and
// NIC utilisation are as of the previous tick. Added here: the tick's
// drive utilisation (the hotspot stage's query) and which subjects read
// at all this tick, so a DS or client gone quiet is not judged on its
// last latency.
//
// A DS's latency is the median over its devices that completed reads this
// tick: a network path slows every device behind it alike, a slow or hot
// drive only itself. DSs are judged only while their pool has its read
// quorum (readQuorum): a few reads on a quiet pool are no fair share.
func (h *hotspotStage) netPaths(util map[string]float64, reads map[peerGroup]bool) []hotspot.PathLoad {
	st := h.a.st
	type dsAcc struct {
		lat          []float64
		util         float64
		utilN        int
		pool         string
		readThisTick bool
	}
	byDS := map[string]*dsAcc{}
	acc := func(ds string) *dsAcc {
		a := byDS[ds]
		if a == nil {
			a = &dsAcc{}
			byDS[ds] = a
		}
		return a
	}
	for _, l := range h.loads {
		switch l.subject.Kind {
		case models.SubjectDS:
			a := acc(l.subject.ID)
			a.pool, a.readThisTick = l.pool, l.opsDone > 0
		case models.SubjectDevice:
			ds := st.parents[l.subject]
			if ds.Kind != models.SubjectDS {
				continue
			}
			a := acc(ds.ID)
			if lat, ok := st.latency[l.subject]; ok && l.opsDone > 0 && lat >= 0 {
				a.lat = append(a.lat, lat)
			}
			if u, ok := util[l.subject.ID]; ok {
				a.util += u
				a.utilN++
			}
		}
	}
	var out []hotspot.PathLoad
	for _, ds := range slices.Sorted(maps.Keys(byDS)) {
		a := byDS[ds]
		if !a.readThisTick || !reads[peerGroup{models.SubjectDS, a.pool}] || len(a.lat) == 0 {
			continue
		}
		p := hotspot.NewPathLoad(models.Subject{Kind: models.SubjectDS, ID: ds}, a.pool)
		p.DeviceLatencies = a.lat
		if a.utilN > 0 {
			p.DriveUtil = a.util / float64(a.utilN)
		}
		if u, ok := st.nics.busier[ds]; ok {
			p.NICUtil = u
		}
		out = append(out, p)
	}
	// Clients that completed reads this tick and share devices with
	// other clients (clientLatencies).
	reading := map[string]bool{}
	for i := range h.a.stripes.tick {
		if d := &h.a.stripes.tick[i]; d.Read.OpsCompleted > 0 && d.Client != "" {
			reading[d.Client] = true
		}
	}
	clients := make([]string, 0, len(reading))
	for c := range reading {
		if _, ok := st.clientLat[c]; ok {
			clients = append(clients, c)
		}
	}
	sort.Strings(clients)
	// A read's latency includes its transfer over the client's link, which
	// takes k times as long on a link k times slower than its peers' with
	// nothing saturated (the readahead scenario's node behind 25 GbE beside
	// 400 GbE ones). A client whose link is slower than the median of the
	// judged clients' has its expected latency scaled by that ratio: an
	// upper bound (only the transfer part scales), so such a node is
	// reported only when it is slower than its link alone explains.
	var speeds []float64
	for _, c := range clients {
		if v, ok := st.nics.speed[c]; ok {
			speeds = append(speeds, v)
		}
	}
	sort.Float64s(speeds)
	peerSpeed := 0.0
	if n := len(speeds); n > 0 {
		peerSpeed = (speeds[(n-1)/2] + speeds[n/2]) / 2
	}
	for _, c := range clients {
		l := st.clientLat[c]
		p := hotspot.NewPathLoad(models.Subject{Kind: models.SubjectClient, ID: c}, "")
		p.Latency, p.Expected = l.own, l.expected
		if v := st.nics.speed[c]; v > 0 && v < peerSpeed {
			p.Expected *= peerSpeed / v
		}
		if u, ok := st.nics.receive[c]; ok {
			p.NICUtil = u
		}
		out = append(out, p)
	}
	return out
}
