package hotspot

import (
	"fmt"
	"math"
	"time"

	"github.com/ballast-io/ballast/analyzer/internal/robust"
	"github.com/ballast-io/ballast/models"
)

// Network paths. A switch port or NIC that is full of traffic is seen by
// no agent when the traffic is another tenant's (the port) or when the
// switch is not scraped, but its effect is: every read through it waits in
// its queue. A data server whose network path is saturated answers every
// client slowly on every one of its devices while its drives are no busier
// than its peers' (the requests wait in front of the link, not the
// drives); a GPU node whose path is saturated sees the devices it reads
// slower than the other clients reading the same devices do. Both are
// judged on latency against peers, not on load: the traffic that fills the
// path is not in LAYOUTSTATS.

// EvidenceNetworkPath names the evidence (value 1) that marks a hotspot
// finding as a network path's rather than a load's.
const EvidenceNetworkPath = "network_path"

// PathLoad is what the pipeline knows of one host's network path at one
// tick. A negative or NaN measure is unknown.
type PathLoad struct {
	// Subject is the host: a DS (the path between the clients and it) or
	// a client node (the path between the storage and it).
	Subject models.Subject
	// Group is the peer group of a DS (its pool); DSs are compared with
	// the DSs of their group. Unused for clients.
	Group string
	// Latency is the read latency clients see through the path, seconds:
	// for a client its own latency on the devices it shares with other
	// clients. For a DS it is the median of DeviceLatencies when those are
	// given: a shared path slows every device behind it alike, a slow or
	// hot drive only itself.
	Latency float64
	// DeviceLatencies are the read latencies of a DS's devices, seconds.
	DeviceLatencies []float64
	// Expected is a client's latency at the other clients' latency on the
	// same devices. Unused for a DS (its peers' median is its expected).
	Expected float64
	// DriveUtil is a DS's drives' mean utilisation (busy time share).
	// Unknown: the DS is judged without it.
	DriveUtil float64
	// NICUtil is the host's NIC utilisation: a DS's busier direction, a
	// client's receive side. Evidence only, and names the NIC as the
	// likely cause when it is at SaturatedNIC or above.
	NICUtil float64
}

// NewPathLoad returns a PathLoad with every measure unknown.
func NewPathLoad(s models.Subject, group string) PathLoad {
	n := math.NaN()
	return PathLoad{Subject: s, Group: group, Latency: n, Expected: n, DriveUtil: n, NICUtil: n}
}

// pathEpisodeKey keeps a path's episode apart from a load hotspot on the
// same subject.
func pathEpisodeKey(s models.Subject) string { return "netpath|" + s.String() }

// pathInfo is what a path finding reports of its last slow tick.
type pathInfo struct {
	latency, expected    float64 // seconds
	driveUtil, peerDrive float64
	nicUtil              float64
	peers                int
}

// observePaths judges every path: slow when its latency is at least
// PathSlowFactor × what it should be (a DS: its group's median; a client:
// Expected) and at least PathMinLatency, and — for a DS whose drive
// utilisation is known — its drives are not what is slow: their
// utilisation is below PathDriveFactor × the group's median or below the
// utilisation floor.
func (d *Detector) observePaths(now time.Time, paths []PathLoad) {
	type group struct {
		lat, util []float64
	}
	groups := map[string]*group{}
	for i := range paths {
		p := &paths[i]
		if p.Subject.Kind != models.SubjectDS {
			continue
		}
		if len(p.DeviceLatencies) > 0 {
			p.Latency = robust.Median(p.DeviceLatencies)
		}
		g := groups[p.Group]
		if g == nil {
			g = &group{}
			groups[p.Group] = g
		}
		if p.Latency >= 0 {
			g.lat = append(g.lat, p.Latency)
		}
		if p.DriveUtil >= 0 {
			g.util = append(g.util, p.DriveUtil)
		}
	}
	medians := map[string][2]float64{}
	for name := range groups {
		g := groups[name]
		m := [2]float64{math.NaN(), math.NaN()}
		if len(g.lat) >= d.opts.MinPeers {
			m[0] = robust.Median(g.lat)
		}
		if len(g.util) >= d.opts.MinPeers {
			m[1] = robust.Median(g.util)
		}
		medians[name] = m
	}
	for i := range paths {
		p := &paths[i]
		inf := pathInfo{latency: p.Latency, expected: p.Expected, driveUtil: p.DriveUtil, peerDrive: math.NaN(), nicUtil: p.NICUtil}
		switch p.Subject.Kind {
		case models.SubjectDS:
			m := medians[p.Group]
			inf.expected, inf.peerDrive, inf.peers = m[0], m[1], len(groups[p.Group].lat)
		case models.SubjectClient:
		default:
			continue
		}
		if !(p.Latency >= 0) || !(inf.expected > 0) {
			continue // unknown: not slow (Finish steps it false)
		}
		enter := p.Latency >= d.opts.PathMinLatency && p.Latency >= d.opts.PathSlowFactor*inf.expected
		stay := p.Latency >= d.opts.PathMinLatency && p.Latency >= d.opts.PathExitFactor*inf.expected
		if p.Subject.Kind == models.SubjectDS && p.DriveUtil >= 0 && inf.peerDrive >= 0 &&
			p.DriveUtil >= d.opts.Floors[Utilization] && p.DriveUtil >= d.opts.PathDriveFactor*inf.peerDrive {
			// Its drives are busier than its peers': the latency may be
			// theirs (a slow or overloaded drive), which the load measures
			// and drivehealth judge; not a network path.
			enter, stay = false, false
		}
		if !stay {
			continue
		}
		key := pathEpisodeKey(p.Subject)
		if ep := d.tracker.Step(now, key, enter, stay); ep != nil {
			d.info[key] = &last{subject: p.Subject, path: &inf, score: p.Latency / inf.expected, ratio: p.Latency / inf.expected}
		}
	}
}

// pathSummary is the summary and evidence of a slow network path's
// finding, in the words an operator acts on: which host's path, what the
// clients see against what they should, and why it is not the drives.
func (d *Detector) pathSummary(inf *last) (string, []models.Evidence) {
	p := inf.path
	ms := func(s float64) string { return fmt.Sprintf("%.2f ms", 1000*s) }
	pct := func(u float64) string { return fmt.Sprintf("%.0f%%", 100*u) }
	where := "port or NIC"
	if p.nicUtil >= d.opts.SaturatedNIC {
		where = "NIC"
	}
	var summary string
	ev := []models.Evidence{
		{Name: EvidenceNetworkPath, Value: 1, Note: "the path between the clients and this host, not its drives: moving stripes between its drives does not relieve it"},
		{Name: "read_latency_seconds", Value: round6(p.latency), Unit: "s"},
		{Name: "expected_latency_seconds", Value: round6(p.expected), Unit: "s"},
		{Name: "ratio_to_expected", Value: round(inf.ratio)},
	}
	nic := ""
	if p.nicUtil >= 0 {
		nic = ", its NIC at " + pct(p.nicUtil) + " of its link"
		ev = append(ev, models.Evidence{Name: "nic_utilization", Value: round(p.nicUtil), Unit: "ratio"})
	}
	switch inf.subject.Kind {
	case models.SubjectDS:
		ev[2].Note = fmt.Sprintf("median of %d data servers of its pool", p.peers)
		drives := "its drives' utilisation unknown"
		if p.driveUtil >= 0 {
			drives = "its drives " + pct(p.driveUtil) + " busy"
			if p.peerDrive >= 0 {
				drives += " (its peers' " + pct(p.peerDrive) + ")"
				ev = append(ev, models.Evidence{Name: "peer_drive_utilization", Value: round(p.peerDrive), Unit: "ratio"})
			}
			ev = append(ev, models.Evidence{Name: "drive_utilization", Value: round(p.driveUtil), Unit: "ratio"})
		}
		summary = fmt.Sprintf("network path to %s (%s) saturated: clients see %s on its devices against %s on its peers', %s%s",
			inf.subject.ID, where, ms(p.latency), ms(p.expected), drives, nic)
	default:
		ev[2].Note = "what the other clients see on the same devices (times its peers' link speed over its own where its link is slower)"
		summary = fmt.Sprintf("network path to %s (%s) saturated: it sees %s on the devices it reads where other clients see %s%s",
			inf.subject.ID, where, ms(p.latency), ms(p.expected), nic)
	}
	return summary, ev
}

// round6 keeps latencies in seconds to the microsecond in evidence.
func round6(x float64) float64 {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return x
	}
	return math.Round(x*1e6) / 1e6
}
