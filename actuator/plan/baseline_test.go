package plan

import "testing"

func TestCountBalanceEqualisesStripeCountsBlindToLoad(t *testing.T) {
	var b builder
	for i := range 3 {
		b.dev(int32(i), 0, 0)
	}
	b.in.LoadFromHeat = true
	// d0 holds 20 cold stripes, d1 and d2 5 each, d1's very hot: the
	// count balancer moves cold stripes off d0 and leaves d1 alone.
	f := int32(0)
	for range 20 {
		b.stripe(0, f, 0, 10, 1)
		f++
	}
	for d := int32(1); d < 3; d++ {
		for range 5 {
			h := float32(1)
			if d == 1 {
				h = 100
			}
			b.stripe(d, f, 0, 10, h)
			f++
		}
	}
	r := CountBalance(&b.in, Options{Only: []int32{1}})
	// mean 10: d0 sheds stripes until it is CountDeviation above it
	if len(r.Moves) != 20-10-CountDeviation {
		t.Fatalf("got %d moves; want %d (d0 from 20 stripes to the mean + %d)", len(r.Moves), 20-10-CountDeviation, CountDeviation)
	}
	for _, m := range r.Moves {
		if m.From != 0 {
			t.Errorf("move %+v: want every move off d0, the device with the most stripes", m)
		}
	}
	if r.LowerBound <= 0 {
		t.Errorf("lower bound %d; want ballast's bound for the hot d1", r.LowerBound)
	}
}

func TestShareHottestDSMovesTheEvenningShare(t *testing.T) {
	var b builder
	// DS 0 (two devices) carries 300 B/s, DS 1 100, DS 2 50 (the coolest)
	b.dev(0, 0, 0)
	b.dev(0, 0, 0)
	b.dev(1, 0, 0)
	b.dev(2, 0, 0)
	b.in.LoadFromHeat = true
	f := int32(0)
	for range 10 {
		b.stripe(0, f, 0, 10, 15)
		f++
		b.stripe(1, f, 0, 10, 15)
		f++
	}
	for range 10 {
		b.stripe(2, f, 0, 10, 10)
		f++
	}
	for range 10 {
		b.stripe(3, f, 0, 10, 5)
		f++
	}
	r := ShareHottestDS(&b.in, Options{})
	// share (300 − 50) ÷ 2 ÷ 300 of DS 0's 200 bytes ≈ 83.3: 9 stripes
	if r.Bytes != 90 {
		t.Fatalf("moved %d bytes in %d moves; want 90 (the share of DS 0's 200 bytes that evens it with DS 2)", r.Bytes, len(r.Moves))
	}
	for _, m := range r.Moves {
		if b.in.Devices[m.From].DS != 0 || m.To != 3 {
			t.Errorf("move %+v: want from DS 0 to DS 2's device", m)
		}
	}
}
