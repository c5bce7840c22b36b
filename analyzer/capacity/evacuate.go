package capacity

import (
	"sort"
)

// Evacuation says whether a pool can absorb the data of some of its
// capacity: its largest data server (a DS loss or drain) or its at-risk
// drives. The data moves within the pool, so afterwards the pool holds the
// same used bytes on less capacity.
type Evacuation struct {
	Pool string `json:"pool"`
	// What is "largest DS <name>" or "at-risk drives".
	What    string   `json:"what"`
	Members []string `json:"members"`
	// Moved is the used bytes that must be copied; Removed the capacity
	// taken out of the pool.
	Moved   float64 `json:"moved_bytes"`
	Removed float64 `json:"removed_capacity_bytes"`
	// RatioAfter is the pool's used share of the remaining capacity.
	RatioAfter float64 `json:"ratio_after"`
	// Limit is the share the pool may reach (backfillfull by default: Ceph
	// refuses to backfill onto devices above it), Headroom = Limit·remaining
	// capacity − used (negative: short by that much).
	Limit    float64 `json:"limit"`
	Headroom float64 `json:"headroom_bytes"`
	OK       bool    `json:"ok"`
}

// EvacuationCheck checks, per pool, evacuating the pool's largest data
// server (by capacity, ties by name) and, when atRisk names any of the
// pool's devices, evacuating those. Used bytes are each device's latest
// reading. limit ≤ 0 means 0.90 (backfillfull).
func EvacuationCheck(devs []DeviceSeries, atRisk []string, limit float64) []Evacuation {
	if !(limit > 0) {
		limit = 0.90
	}
	risk := map[string]bool{}
	for _, d := range atRisk {
		risk[d] = true
	}
	type poolAgg struct {
		cap, used float64
		dsCap     map[string]float64
		dsUsed    map[string]float64
		dsDevs    map[string][]string
		riskDevs  []string
		riskCap   float64
		riskUsed  float64
	}
	pools := map[string]*poolAgg{}
	var names []string
	for _, d := range devs {
		p := pools[d.Pool]
		if p == nil {
			p = &poolAgg{dsCap: map[string]float64{}, dsUsed: map[string]float64{}, dsDevs: map[string][]string{}}
			pools[d.Pool] = p
			names = append(names, d.Pool)
		}
		used := 0.0
		if len(d.Used) > 0 {
			used = d.Used[len(d.Used)-1].V
		}
		p.cap += d.Capacity
		p.used += used
		p.dsCap[d.DS] += d.Capacity
		p.dsUsed[d.DS] += used
		p.dsDevs[d.DS] = append(p.dsDevs[d.DS], d.Device)
		if risk[d.Device] {
			p.riskDevs = append(p.riskDevs, d.Device)
			p.riskCap += d.Capacity
			p.riskUsed += used
		}
	}
	sort.Strings(names)
	var out []Evacuation
	mk := func(pool, what string, members []string, p *poolAgg, moved, removed float64) Evacuation {
		sort.Strings(members)
		e := Evacuation{Pool: pool, What: what, Members: members, Moved: moved, Removed: removed, Limit: limit}
		rest := p.cap - removed
		e.Headroom = limit*rest - p.used
		e.RatioAfter = 1
		if rest > 0 {
			e.RatioAfter = p.used / rest
		}
		e.OK = rest > 0 && e.Headroom >= 0
		return e
	}
	for _, name := range names {
		p := pools[name]
		var big string
		for ds, c := range p.dsCap {
			if big == "" || c > p.dsCap[big] || (c == p.dsCap[big] && ds < big) {
				big = ds
			}
		}
		what := "largest DS " + big
		if len(p.dsCap) == 1 {
			what += " (the pool's only DS)"
		}
		out = append(out, mk(name, what, append([]string(nil), p.dsDevs[big]...), p, p.dsUsed[big], p.dsCap[big]))
		if len(p.riskDevs) > 0 {
			out = append(out, mk(name, "at-risk drives", p.riskDevs, p, p.riskUsed, p.riskCap))
		}
	}
	return out
}
