package actuator

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ballast-io/ballast/models"
)

// refHeat is the heat model's rule written plainly, every pending rate in
// one map: each fold, every known stripe moves alpha of the way to what
// arrived for it (0 when nothing did), a new stripe starts at its rate, a
// stripe unseen for ten half-lives is forgotten.
type refHeat struct {
	halfLife time.Duration
	pending  map[heatKey]float64
	pendCli  map[heatKey][]string
	entries  map[heatKey]*heatEntry
	last     time.Time
}

func (h *refHeat) observe(ds []models.StripeDelta) {
	for i := range ds {
		d := &ds[i]
		sec := d.Duration.Seconds()
		if sec <= 0 || d.DeviceID == "" {
			continue
		}
		k := heatKey{d.DeviceID, d.FileHandle}
		h.pending[k] += float64(d.Read.BytesCompleted+d.Write.BytesCompleted) / sec
		if d.Client != "" && !containsStr(h.pendCli[k], d.Client) {
			h.pendCli[k] = append(h.pendCli[k], d.Client)
		}
	}
}

func (h *refHeat) fold(now time.Time) {
	dt := 0.0
	if !h.last.IsZero() {
		dt = now.Sub(h.last).Seconds()
	}
	h.last = now
	alpha := 1.0
	if dt > 0 && h.halfLife > 0 {
		alpha = 1 - math.Pow(0.5, dt/h.halfLife.Seconds())
	}
	for k, e := range h.entries {
		r, ok := h.pending[k]
		e.rate += alpha * (r - e.rate)
		if ok {
			e.seen = now
		} else if now.Sub(e.seen) > 10*h.halfLife {
			delete(h.entries, k)
		}
	}
	for k, r := range h.pending {
		e := h.entries[k]
		if e == nil {
			e = &heatEntry{rate: r, seen: now}
			h.entries[k] = e
		}
		e.addClients(h.pendCli[k])
	}
	clear(h.pending)
	clear(h.pendCli)
}

// TestHeatFoldMatchesTheRule checks the heat model against refHeat over
// random deltas (stripes coming, going and coming back, several clients,
// more than maxHeatClients on some): after every fold both hold the same
// stripes with bit-identical rates, the same last-seen times and clients.
func TestHeatFoldMatchesTheRule(t *testing.T) {
	const halfLife = 30 * time.Second
	for seed := uint64(1); seed <= 10; seed++ {
		rng := rand.New(rand.NewPCG(seed, 3))
		h := newHeatModel(halfLife)
		ref := &refHeat{halfLife: halfLife, pending: map[heatKey]float64{}, pendCli: map[heatKey][]string{}, entries: map[heatKey]*heatEntry{}}
		now := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
		for tick := 0; tick < 300; tick++ {
			now = now.Add(time.Duration(1+rng.IntN(20)) * time.Second)
			for range rng.IntN(4) {
				var ds []models.StripeDelta
				// a few busy stripes, many that come and go
				hot := tick%100 < 50
				for range rng.IntN(40) {
					n := rng.IntN(8)
					if !hot || rng.IntN(2) == 0 {
						n = rng.IntN(200)
					}
					d := models.StripeDelta{Duration: time.Duration(rng.IntN(12)) * time.Second}
					d.DeviceID, d.FileHandle = fmt.Sprintf("d%d", n%5), fmt.Sprintf("fh%d", n)
					d.Client = fmt.Sprintf("c%d", rng.IntN(20))
					d.Read.BytesCompleted = uint64(rng.IntN(1 << 20))
					ds = append(ds, d)
				}
				h.observe(ds)
				ref.observe(ds)
			}
			h.fold(now)
			ref.fold(now)
			if len(h.entries) != len(ref.entries) {
				t.Fatalf("seed %d tick %d: %d stripes; want %d", seed, tick, len(h.entries), len(ref.entries))
			}
			for k, want := range ref.entries {
				got := h.entry(k)
				if got == nil {
					t.Fatalf("seed %d tick %d: stripe %v missing", seed, tick, k)
				}
				if math.Float64bits(got.rate) != math.Float64bits(want.rate) || !got.seen.Equal(want.seen) || !slices.Equal(got.clients, want.clients) {
					t.Fatalf("seed %d tick %d: stripe %v: got rate %v seen %v clients %v; want %v %v %v",
						seed, tick, k, got.rate, got.seen, got.clients, want.rate, want.seen, want.clients)
				}
			}
		}
	}
}
