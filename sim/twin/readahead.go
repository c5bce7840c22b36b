package twin

// raWasteFactor is the read-ahead, as a multiple of a random reader's
// request size, from which the truth records the mount as wasting reads:
// at 2× at least half of every fetch is bytes nobody asked for.
const raWasteFactor = 2.0

// trackReadAheadWaste keeps one read_ahead_waste truth record open per
// client while a random reader on it fetches a read-ahead window of at
// least raWasteFactor times its request size; a set_read_ahead action (or
// the reader stopping) closes it.
func (t *Twin) trackReadAheadWaste(now float64) {
	for c := range t.cli {
		cl := &t.cli[c]
		switch {
		case cl.raWaste > 0 && cl.raRec < 0:
			cl.raRec = t.openTruth("read_ahead_waste", t.subjectOf(causeReadAhead, t.cliBase+slotsPerHost*c+slotNICRx), now, map[string]any{
				"read_ahead_kb": cl.ra / 1024, "read_kb": cl.raWaste / 1024, "amplification": cl.ra / cl.raWaste,
			})
		case cl.raWaste == 0 && cl.raRec >= 0:
			t.closeTruth(cl.raRec, now)
			cl.raRec = -1
		}
		cl.raWaste = 0
	}
}
