package twin

// PortStat is one switch port's cumulative byte counters, as an SNMP or
// gNMI poll of the switch would report them. No ballast agent runs on the
// simulated switch; the counters are here for scoring and dashboards of
// the simulation itself.
type PortStat struct {
	Name         string  // e.g. "sw/ds03"
	CapacityBps  float64 // bytes per second, each direction
	InBytes      float64 // from the host into the switch
	OutBytes     float64 // from the switch to the host
	LastInRatio  float64 // utilisation of the last tick, host → switch
	LastOutRatio float64 // utilisation of the last tick, switch → host
}

// Ports returns the counters of every switch port: data servers first,
// then clients. Cross traffic of other tenants counts.
func (t *Twin) Ports() []PortStat {
	out := make([]PortStat, 0, len(t.ds)+len(t.cli))
	add := func(name string, b int) {
		ps := PortStat{Name: portName(name), CapacityBps: t.resCap[b+slotPortIn] / t.dt,
			InBytes: t.resTotal[b+slotPortIn], OutBytes: t.resTotal[b+slotPortOut]}
		if c := t.resCap[b+slotPortIn]; c > 0 {
			ps.LastInRatio = t.resUsed[b+slotPortIn] / c
		}
		if c := t.resCap[b+slotPortOut]; c > 0 {
			ps.LastOutRatio = t.resUsed[b+slotPortOut] / c
		}
		out = append(out, ps)
	}
	for i := range t.ds {
		add(t.ds[i].name, t.dsBase+slotsPerHost*i)
	}
	for i := range t.cli {
		add(t.cli[i].name, t.cliBase+slotsPerHost*i)
	}
	return out
}
