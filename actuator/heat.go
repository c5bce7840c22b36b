package actuator

import (
	"math"
	"sort"
	"sync"
	"time"

	"github.com/ballast-io/ballast/models"
)

// heatKey is one stripe as LAYOUTSTATS names it: the device and the
// component's file handle on its data server.
type heatKey struct{ dev, fh string }

type heatEntry struct {
	key     heatKey
	rate    float64 // bytes/s, exponentially smoothed
	seen    time.Time
	clients []string // clients that read or wrote it lately (at most maxHeatClients)
	// What arrived for it since the last fold (pending and pendCli hold
	// only the stripes that have no entry yet).
	pend    float64
	pendOK  bool
	pendCli []string
}

const maxHeatClients = 16

// heatModel turns the StripeHub's per-stripe deltas into a smoothed load
// per stripe (bytes/s read and written): the LAYOUTSTATS heat the planner
// weighs stripes by. Deltas arrive between ticks; fold, once per tick,
// folds them in with the half-life. Stripes idle for ten half-lives are
// forgotten, so memory follows the stripes in use.
//
// What arrives for a stripe that has an entry is summed in the entry
// itself, so that fold, which visits every entry, does not look each one
// up in pending: that lookup was most of its cost with hundreds of
// thousands of stripes and a few thousand reporting per tick. Entries are
// created and deleted only by fold, so between folds a stripe's deltas
// all go to the same place. The entries lie in one slice, in no order,
// with a map from key to position: fold walks them in memory order
// rather than chasing a pointer per map entry.
type heatModel struct {
	halfLife time.Duration

	mu      sync.Mutex
	pending map[heatKey]float64
	pendCli map[heatKey][]string
	entries []heatEntry
	index   map[heatKey]int // position in entries
	last    time.Time
}

func newHeatModel(halfLife time.Duration) *heatModel {
	return &heatModel{halfLife: halfLife, pending: map[heatKey]float64{}, pendCli: map[heatKey][]string{}, index: map[heatKey]int{}}
}

// entry is the entry of stripe k, nil if none.
func (h *heatModel) entry(k heatKey) *heatEntry {
	if i, ok := h.index[k]; ok {
		return &h.entries[i]
	}
	return nil
}

// observe implements the StripeHub subscription.
func (h *heatModel) observe(ds []models.StripeDelta) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range ds {
		d := &ds[i]
		sec := d.Duration.Seconds()
		if sec <= 0 || d.DeviceID == "" {
			continue
		}
		k := heatKey{d.DeviceID, d.FileHandle}
		v := float64(d.Read.BytesCompleted+d.Write.BytesCompleted) / sec
		if e := h.entry(k); e != nil {
			e.pend += v
			e.pendOK = true
			if d.Client != "" && !containsStr(e.pendCli, d.Client) {
				e.pendCli = append(e.pendCli, d.Client)
			}
			continue
		}
		h.pending[k] += v
		if d.Client != "" && !containsStr(h.pendCli[k], d.Client) {
			h.pendCli[k] = append(h.pendCli[k], d.Client)
		}
	}
}

func containsStr(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// fold advances the smoothed rates to now with what arrived since the
// last fold.
func (h *heatModel) fold(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	dt := 0.0
	if !h.last.IsZero() {
		dt = now.Sub(h.last).Seconds()
	}
	h.last = now
	alpha := 1.0
	if dt > 0 && h.halfLife > 0 {
		alpha = 1 - math.Pow(0.5, dt/h.halfLife.Seconds())
	}
	// downwards, so that a forgotten entry's place takes the last one,
	// already folded
	for i := len(h.entries) - 1; i >= 0; i-- {
		e := &h.entries[i]
		e.rate += alpha * (e.pend - e.rate)
		if e.pendOK {
			e.seen = now
			e.addClients(e.pendCli)
			e.pend, e.pendOK, e.pendCli = 0, false, e.pendCli[:0]
		} else if now.Sub(e.seen) > 10*h.halfLife {
			delete(h.index, e.key)
			last := len(h.entries) - 1
			if i != last {
				h.entries[i] = h.entries[last]
				h.index[h.entries[i].key] = i
			}
			h.entries[last] = heatEntry{}
			h.entries = h.entries[:last]
		}
	}
	for k, r := range h.pending {
		// a stripe seen for the first time starts at its rate: smoothing
		// from zero would hide a new hot spot for a half-life
		h.index[k] = len(h.entries)
		h.entries = append(h.entries, heatEntry{key: k, rate: r, seen: now})
		h.entries[len(h.entries)-1].addClients(h.pendCli[k])
	}
	clear(h.pending)
	clear(h.pendCli)
}

// addClients adds the clients cs to e's, dropping the oldest beyond
// maxHeatClients.
func (e *heatEntry) addClients(cs []string) {
	for _, c := range cs {
		if !containsStr(e.clients, c) {
			if len(e.clients) >= maxHeatClients {
				e.clients = e.clients[1:]
			}
			e.clients = append(e.clients, c)
		}
	}
}

// stripe returns the smoothed rate of one stripe and its clients.
func (h *heatModel) stripe(dev, fh string) (float64, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.entry(heatKey{dev, fh}); e != nil {
		return e.rate, append([]string(nil), e.clients...)
	}
	return 0, nil
}

// deviceLoads sums the smoothed rates per device, in the order of the
// stripes' keys: a floating-point sum depends on its order, and a sum in
// map order differs in its last bits from one run to the next. Devices
// the twin loads alike would then swap places in the planner's orders
// (hottest first, coolest destination first) at random, and two runs of
// one seed would plan different moves.
func (h *heatModel) deviceLoads() map[string]float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	keys := make([]heatKey, 0, len(h.entries))
	for i := range h.entries {
		keys = append(keys, h.entries[i].key)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].dev != keys[j].dev {
			return keys[i].dev < keys[j].dev
		}
		return keys[i].fh < keys[j].fh
	})
	out := map[string]float64{}
	for _, k := range keys {
		out[k.dev] += h.entry(k).rate
	}
	return out
}
