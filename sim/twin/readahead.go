package twin

import (
	"fmt"
	"math"
)

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

// ReadAheadKB returns node's mount's read-ahead in KiB (what its
// read_ahead_kb file would hold) and the mount's backing device number.
func (t *Twin) ReadAheadKB(node string) (kb int64, bdi string, err error) {
	c := t.findClient(node)
	if c < 0 {
		return 0, "", fmt.Errorf("no client %q", node)
	}
	return int64(math.Round(t.cli[c].ra / 1024)), fmt.Sprintf("0:%d", 50+c), nil
}

// SetReadAhead sets node's mount's read-ahead, as one write of its
// read_ahead_kb file does; the next tick's requests use it.
func (t *Twin) SetReadAhead(node string, kb int64) error {
	c := t.findClient(node)
	if c < 0 {
		return fmt.Errorf("no client %q", node)
	}
	if kb < 4 || kb > 1<<20 {
		return fmt.Errorf("read_ahead_kb %d is not between 4 and 1048576", kb)
	}
	t.cli[c].ra = float64(kb) * 1024
	return nil
}

// ClientRead is one client's cumulative read counters (ground truth, the
// same numbers its mountstats show).
type ClientRead struct {
	Name string
	// AppBytes is what applications read; ServerBytes what the servers
	// sent for it (read-ahead included); Ops the READ requests and RTTms
	// their summed round-trip time in milliseconds.
	AppBytes, ServerBytes, Ops, RTTms float64
	ReadAheadKB, RsizeKB              float64
}

// ClientReads returns every client's read counters, in node order.
func (t *Twin) ClientReads() []ClientRead {
	out := make([]ClientRead, len(t.cli))
	for i := range t.cli {
		c := &t.cli[i]
		out[i] = ClientRead{Name: c.name, AppBytes: c.readGood, ServerBytes: c.readBytes, Ops: c.readOps, RTTms: c.readRTTms, ReadAheadKB: c.ra / 1024, RsizeKB: c.rsize / 1024}
	}
	return out
}
