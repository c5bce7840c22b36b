package twin

// Saturation episodes in the ground truth: a device, NIC or switch port
// whose utilisation stayed at or above satHigh for satHold seconds is
// saturated from the start of that run until its utilisation has stayed
// below satLow for satHold seconds. This is the physical condition a
// hotspot analyzer should find, whatever caused it (a hot shard, a scan, a
// checkpoint, a degraded drive, cross traffic).
const (
	satHigh = 0.9
	satLow  = 0.7
	satHold = 30.0
	// satSmooth is the time constant of the utilisation the thresholds
	// apply to: a saturated closed loop dips below 0.9 for single ticks.
	satSmooth = 10.0
)

// satState is one resource's episode tracker.
type satState struct {
	ewma         float64 // utilisation smoothed over satSmooth seconds
	above, below float64 // length of the current run above satHigh / below satLow, s
	runStart     float64 // start of the current run above satHigh
	lowStart     float64 // start of the current run below satLow
	rec          int     // open truth record, -1 none
	peak         float64
}

// satSubjects are the resources tracked: every device, then per DS its NIC
// and port, then per client its NIC and port; each entry is the resource
// index of the first of its directions (tx/in) and the truth kind.
func (t *Twin) initSaturation() {
	n := len(t.dev) + 2*len(t.ds) + 2*len(t.cli)
	t.sat = make([]satState, n)
	for i := range t.sat {
		t.sat[i].rec = -1
	}
}

func (t *Twin) trackSaturation(now float64) {
	end := now + t.dt
	k := 0
	for d := range t.dev {
		u := 0.0
		if c := t.resCap[d]; c > 0 {
			u = t.resUsed[d] / c
		}
		t.satStep(k, d, "device_saturated", u, now, end)
		k++
	}
	hosts := func(base, n int, nicKind string) {
		for h := 0; h < n; h++ {
			b := base + slotsPerHost*h
			t.satStep(k, b+slotNICTx, nicKind, max(t.ratio(b+slotNICTx), t.ratio(b+slotNICRx)), now, end)
			k++
			t.satStep(k, b+slotPortIn, "port_saturated", max(t.ratio(b+slotPortIn), t.ratio(b+slotPortOut)), now, end)
			k++
		}
	}
	hosts(t.dsBase, len(t.ds), "ds_nic_saturated")
	hosts(t.cliBase, len(t.cli), "client_nic_saturated")
}

func (t *Twin) ratio(r int) float64 {
	if c := t.resCap[r]; c > 0 {
		return t.resUsed[r] / c
	}
	return 0
}

// satStep advances tracker k of resource r (which names the subject) by a
// tick of utilisation u spanning [now, end).
func (t *Twin) satStep(k, r int, kind string, u, now, end float64) {
	s := &t.sat[k]
	s.ewma += (u - s.ewma) * min(1, t.dt/satSmooth)
	u = s.ewma
	if u >= satHigh {
		if s.above == 0 {
			s.runStart = now
		}
		s.above += t.dt
		s.peak = max(s.peak, u)
	} else {
		s.above = 0
	}
	if u < satLow {
		if s.below == 0 {
			s.lowStart = now
		}
		s.below += t.dt
	} else {
		s.below = 0
	}
	switch {
	case s.rec < 0 && s.above >= satHold:
		s.peak = u
		s.rec = t.openTruth(kind, t.subjectOf(int(t.causeOfRes(int32(r))), r), s.runStart, map[string]any{"threshold": satHigh})
	case s.rec >= 0 && s.below >= satHold:
		t.truth[s.rec].Params["peak_utilisation"] = roundTo(s.peak, 3)
		t.closeTruth(s.rec, s.lowStart)
		s.rec, s.peak = -1, 0
	}
}

func roundTo(v float64, digits int) float64 {
	p := 1.0
	for i := 0; i < digits; i++ {
		p *= 10
	}
	return float64(int64(v*p+0.5)) / p
}
