package plan

import (
	"math"
	"strings"
	"testing"
)

// hotFile builds n devices (one per data server) in pool 0, each with a
// cold stripe of otherHeat B/s and otherBytes bytes, and a hot file whose
// mirror 0 has one component of heat 100 and 100 bytes on d0 and on d1.
func hotFile(n int, otherHeat float32, otherBytes int64) *builder {
	var b builder
	b.in.LoadFromHeat = true
	for i := range n {
		b.dev(int32(i), 0, 0)
	}
	b.stripe(0, 0, 0, 100, 100)
	b.stripe(1, 0, 0, 100, 100)
	for i := range n {
		b.stripe(int32(i), int32(10+i), 0, otherBytes, otherHeat)
	}
	return &b
}

func TestRestripeWidthPlacementAndBound(t *testing.T) {
	// 8 devices at 20 B/s of their own; the hot file adds 100 to d0 and
	// d1. Mean 45, target 47.25: each device can take 27.25 of the file's
	// 200 B/s, so its mirror needs ceil(200 / 27.25) = 8 components, one
	// per device; every device ends at 45.
	b := hotFile(8, 20, 100)
	r := Rebalance(&b.in, Options{Restripe: true})
	if len(r.Restripes) != 1 || len(r.Moves) != 0 {
		t.Fatalf("got %d restripes, %d moves (notes %q); want one restripe and no move", len(r.Restripes), len(r.Moves), r.Notes)
	}
	rs := r.Restripes[0]
	if len(rs.To) != 8 || rs.Bytes != 200 || r.Bytes != 200 || len(rs.Stripes) != 2 {
		t.Fatalf("restripe %+v, plan bytes %d; want 8 devices, 200 bytes of 2 components", rs, r.Bytes)
	}
	seen := map[int32]bool{}
	for _, x := range rs.To {
		if seen[x] {
			t.Fatalf("device %d holds two components: %v", x, rs.To)
		}
		seen[x] = true
	}
	if r.MaxMeanAfter > 1.05 {
		t.Errorf("max/mean after %.3f; want at most 1.05", r.MaxMeanAfter)
	}
	// the other stripes carry less heat per byte (0.2) than the file (1):
	// d0 and d1 keep at most 27.25 each, the rest (145.5 of 200 B/s) needs
	// 145.5 of the file's bytes elsewhere
	if r.LowerBound != 146 {
		t.Errorf("lower bound %d; want 146", r.LowerBound)
	}
	if c := r.CostRatio(); c < 1 || c > 1.4 {
		t.Errorf("cost ratio %.3f; want in [1, 1.4]", c)
	}
}

func TestRestripeBoundCountsDenserStripes(t *testing.T) {
	// the same with the other stripes at 20 B/s in 10 bytes (2 B/s per
	// byte, denser than the file): moving one off d0 lets d0 keep 20 more
	// of the file's heat for 10 bytes; the bound is 2 × 10 + 200 ×
	// (200 − 2 × 47.25) ÷ 200 = 125.5
	b := hotFile(8, 20, 10)
	r := Rebalance(&b.in, Options{Restripe: true})
	if len(r.Restripes) != 1 {
		t.Fatalf("got %d restripes (notes %q); want 1", len(r.Restripes), r.Notes)
	}
	if r.LowerBound != 126 {
		t.Errorf("lower bound %d; want 126", r.LowerBound)
	}
}

func TestRestripeNarrowestWidthThatReachesTarget(t *testing.T) {
	// 16 devices at 20 B/s: mean (16 × 20 + 200) / 16 = 32.5, target
	// 34.125; each device takes 14.125, so 15 components (200 / 15 =
	// 13.3), not 16
	b := hotFile(16, 20, 100)
	r := Rebalance(&b.in, Options{Restripe: true})
	if len(r.Restripes) != 1 || len(r.Restripes[0].To) != 15 {
		t.Fatalf("got %+v (notes %q); want one restripe over 15 devices", r.Restripes, r.Notes)
	}
	// bounded width: 4 components, the target out of reach, noted
	r = Rebalance(&b.in, Options{Restripe: true, MaxWidth: 4})
	if len(r.Restripes) != 1 || len(r.Restripes[0].To) != 4 {
		t.Fatalf("got %+v; want one restripe over 4 devices", r.Restripes)
	}
	if !strings.Contains(strings.Join(r.Notes, ";"), "still leaves one at") {
		t.Errorf("notes %q; want one saying the target is out of reach", r.Notes)
	}
}

func TestRestripeRespectsMirrorsPoolsAndBusyDevices(t *testing.T) {
	var b builder
	b.in.LoadFromHeat = true
	// pool 0: d0..d5 on ds0..ds5, d6 on ds2 (beside d2); pool 1: d7
	for _, ds := range []int32{0, 1, 2, 3, 4, 5, 2} {
		b.dev(ds, 0, 0)
	}
	b.dev(6, 1, 0)
	// file 0: mirror 0 hot on d0, d1; mirror 1 on d2 (ds2, so d6 too is
	// out); every device has 10 B/s of its own
	b.stripe(0, 0, 0, 100, 100)
	b.stripe(1, 0, 0, 100, 100)
	b.stripe(2, 0, 1, 200, 0)
	for i := range 8 {
		b.stripe(int32(i), int32(10+i), 0, 100, 10)
	}
	b.in.Devices[4].Moving = true // another plan's copies are under way there
	r := Rebalance(&b.in, Options{Restripe: true})
	if len(r.Restripes) != 1 {
		t.Fatalf("got %d restripes (notes %q); want 1", len(r.Restripes), r.Notes)
	}
	for _, x := range r.Restripes[0].To {
		if x == 2 || x == 6 || x == 7 || x == 4 {
			t.Errorf("restripe onto d%d (to %v): the other mirror's device, its data server, another pool or a device with copies under way", x, r.Restripes[0].To)
		}
	}
	if len(r.Restripes[0].Stripes) != 2 {
		t.Errorf("restriped components %v; want mirror 0's two", r.Restripes[0].Stripes)
	}
}

func TestRestripeOffOnlyNotes(t *testing.T) {
	b := hotFile(8, 20, 100)
	r := Rebalance(&b.in, Options{})
	if len(r.Restripes) != 0 {
		t.Fatalf("got %+v; want no restripe", r.Restripes)
	}
	if r.MaxMeanAfter <= 1.05 || math.IsNaN(r.MaxMeanAfter) {
		t.Errorf("max/mean after %.3f without a restripe; want the hot spot left", r.MaxMeanAfter)
	}
	if !strings.Contains(strings.Join(r.Notes, ";"), "wider striping") {
		t.Errorf("notes %q; want the hot stripe noted", r.Notes)
	}
}

func TestRestripeSkipsBusyMirror(t *testing.T) {
	b := hotFile(8, 20, 100)
	b.in.StripeBusy = make([]bool, len(b.in.StripeDevice))
	b.in.StripeBusy[1] = true
	r := Rebalance(&b.in, Options{Restripe: true})
	if len(r.Restripes) != 0 || !strings.Contains(strings.Join(r.Notes, ";"), "busy") {
		t.Fatalf("got %+v, notes %q; want no restripe and a note that it is busy", r.Restripes, r.Notes)
	}
}

func TestRestripeCensoredHeatTakesEveryDeviceUnderTarget(t *testing.T) {
	// 16 devices at 20 B/s of their own but d14 at 24 and d15 at 40; the
	// hot file adds 100 to d0 and d1 (the finding's devices): mean 34,
	// target 35.7. From the heat, the narrowest width that keeps a device
	// at 20 under it is 13 (200 ÷ 13 = 15.4).
	b := hotFile(16, 20, 100)
	b.in.StripeHeat[2+14] = 24
	b.in.StripeHeat[2+15] = 40
	opts := Options{Restripe: true, Only: []int32{0, 1}}
	r := Rebalance(&b.in, opts)
	if len(r.Restripes) != 1 || len(r.Restripes[0].To) != 13 || r.Restripes[0].Censored {
		t.Fatalf("got %+v (notes %q); want one restripe over 13 devices from the heat", r.Restripes, r.Notes)
	}
	want := r.Bytes
	// the same with d0 saturated: the 200 B/s are what d0 and d1 served,
	// so the mirror goes to every device whose own load is under the
	// target: all but d15 (40 B/s of its own)
	b.in.Devices[0].Saturated = true
	r = Rebalance(&b.in, opts)
	if len(r.Restripes) != 1 || len(r.Restripes[0].To) != 15 || !r.Restripes[0].Censored {
		t.Fatalf("got %+v (notes %q); want one censored restripe over 15 devices", r.Restripes, r.Notes)
	}
	for _, x := range r.Restripes[0].To {
		if x == 15 {
			t.Errorf("restripe onto d15 (to %v), above the target without the file", r.Restripes[0].To)
		}
	}
	if !strings.Contains(strings.Join(r.Notes, ";"), "lower bound on what it is asked for") {
		t.Errorf("notes %q; want one saying the heat is a lower bound", r.Notes)
	}
	// every byte of the mirror is rewritten at any width
	if r.Bytes != want || r.Bytes != 200 {
		t.Errorf("bytes %d; want the mirror's 200 as at width 13 (%d)", r.Bytes, want)
	}
	// max_stripe_width still bounds it
	opts.MaxWidth = 6
	r = Rebalance(&b.in, opts)
	if len(r.Restripes) != 1 || len(r.Restripes[0].To) != 6 {
		t.Fatalf("got %+v; want one restripe over 6 devices (max width)", r.Restripes)
	}
}
