package plan

import (
	"math"
	"sort"
)

// A stripe hotter than the target by itself cannot be moved anywhere
// without making its destination hot: its file is too popular for the
// width it was striped at. The flex-files stripe unit spreads a file's
// bytes round-robin over the components of a mirror, so that a reader's
// byte ranges land on every component alike and each device carries the
// mirror's heat ÷ its width, whichever mirror the client reads. The
// remedy is a restripe: the mirror rewritten over more components, on
// more devices.

// restripe plans the restripe of the mirror that stripe k belongs to: the
// fewest components, each on its own device of the pool, such that every
// chosen device stays under tDev with its share of the mirror's heat
// (its load without the mirror's old component, plus heat ÷ width). The
// devices are the coolest legal ones: accepting data, without copies of
// other plans under way (Device.Moving), in the pool, with
// the headroom for a new component, holding no component of the file's
// other mirrors and on no data server that holds one. Without a width
// that reaches tDev (max width, or too few legal devices) it takes the
// width whose hottest device ends coolest. why says why there is none.
//
// When a device of the mirror is saturated its heat is censored: the
// device served what it could, the demand beyond it is not seen, and the
// smoothed heat still lags a hot spot that has just begun. A width sized
// from that lower bound is too narrow once the file is served (its share
// lands on the chosen devices and the ones left out read well under the
// mean; docs/actions.md), and a wider one costs no more bytes (every byte
// of the mirror is rewritten at any width), so the mirror goes to every
// legal device whose load without it is under tDev (max width bounding
// it): a device above the target already is hot, and the share would
// make it hotter.
func (s *state) restripe(k int32, tDev float64) (Restripe, string) {
	in := s.in
	f, m := in.StripeFile[k], mirrorOf(in, k)
	rs := Restripe{Hot: k}
	old := map[int32]float64{} // device → the mirror's heat on it
	otherDev, otherDS := map[int32]bool{}, map[int32]bool{}
	for _, p := range s.peers[f] {
		d := in.StripeDevice[p]
		if mirrorOf(in, p) != m {
			otherDev[d] = true
			otherDS[in.Devices[d].DS] = true
			continue
		}
		if in.StripeBusy != nil && in.StripeBusy[p] {
			return rs, "a component is busy (being written)"
		}
		if _, moved := s.moved[p]; moved {
			return rs, "a component is already planned to move"
		}
		rs.Stripes = append(rs.Stripes, p)
		rs.Censored = rs.Censored || in.Devices[d].Saturated
		rs.Heat += float64(in.StripeHeat[p])
		rs.Bytes += in.StripeBytes[p]
		old[d] += float64(in.StripeHeat[p])
	}
	w0 := len(rs.Stripes)
	pool := in.Devices[in.StripeDevice[k]].Pool
	// the smallest new component sets the headroom every device needs
	perBytes := float64(rs.Bytes) / float64(w0+1)
	type cand struct {
		x    int32
		base float64
	}
	var cs []cand
	for i := range in.Devices {
		x := int32(i)
		dx := &in.Devices[i]
		if !dx.Accepts || dx.Moving || dx.Pool != pool || otherDev[x] || otherDS[dx.DS] {
			continue
		}
		if _, was := old[x]; !was && s.used[x]+perBytes > (1-s.opts.Headroom)*dx.Capacity {
			continue
		}
		cs = append(cs, cand{x, s.load[x] - old[x]})
	}
	sort.Slice(cs, func(a, b int) bool {
		if cs[a].base != cs[b].base {
			return cs[a].base < cs[b].base
		}
		return cs[a].x < cs[b].x
	})
	maxW := len(cs)
	if s.opts.MaxWidth > 0 {
		maxW = min(maxW, s.opts.MaxWidth)
	}
	if maxW <= w0 {
		return rs, "the pool has no more legal devices for it (or max_stripe_width is its width)"
	}
	// the w coolest devices: the w-th is the hottest of them
	best, bestMax := 0, math.Inf(1)
	for w := w0 + 1; w <= maxW; w++ {
		top := cs[w-1].base + rs.Heat/float64(w)
		if top < bestMax {
			best, bestMax = w, top
		}
		if top <= tDev {
			break
		}
	}
	if rs.Censored {
		// every legal device under the target (cs is coolest first)
		wide := sort.Search(maxW, func(i int) bool { return cs[i].base > tDev })
		if wide > best {
			best, bestMax = wide, cs[wide-1].base+rs.Heat/float64(wide)
		}
	}
	if bestMax >= s.load[in.StripeDevice[k]] {
		return rs, "no width lowers its hottest device"
	}
	for _, c := range cs[:best] {
		rs.To = append(rs.To, c.x)
	}
	sort.Slice(rs.To, func(a, b int) bool { return rs.To[a] < rs.To[b] })
	rs.LowerBound = int64(math.Ceil(s.restripeBound(&rs, old, tDev)))
	return rs, ""
}

// restripeBound is a lower bound on the bytes any plan must move to bring
// the mirror's old devices under tDev. With the heat of a striped file
// proportional to its bytes, an old device x can keep at most c_x of the
// mirror's heat, and the heat not kept (H − Σ c_x) needs at least that
// share of the mirror's bytes written elsewhere. c_x starts at the room x
// has (tDev − its load without the mirror, at least 0) and grows, up to
// tDev, only by moving x's other stripes off, which pays when they carry
// more heat per byte than the mirror (fractionally, densest first); what
// x is over tDev without the mirror must move anyway and is counted the
// same way. Every relaxation (fractional stripes, a mirror that keeps any
// share in place) only lowers it, so it is a bound.
func (s *state) restripeBound(rs *Restripe, old map[int32]float64, tDev float64) float64 {
	in := s.in
	if rs.Heat <= 0 {
		return 0
	}
	mine := map[int32]bool{}
	for _, p := range rs.Stripes {
		mine[p] = true
	}
	density := rs.Heat / float64(max(rs.Bytes, 1))
	devs := make([]int32, 0, len(old))
	for d := range old {
		devs = append(devs, d)
	}
	sort.Slice(devs, func(a, b int) bool { return devs[a] < devs[b] })
	kept, cost := 0.0, 0.0
	for _, x := range devs {
		base := s.load[x] - old[x]
		var others []int32
		indexed := s.byDev != nil && s.byDev[x] != nil
		if indexed {
			for _, p := range s.byDev[x] {
				if _, gone := s.moved[p]; !mine[p] && !gone && in.StripeHeat[p] > 0 {
					others = append(others, p)
				}
			}
		}
		if !indexed {
			// x's stripes are unknown: any of them might be the cheapest
			// to move, so x may keep up to tDev
			kept += tDev
			continue
		}
		sortByDensity(in, others)
		over := max(0, base-tDev) // must move whatever the mirror does
		c := max(0, tDev-base)
		for _, p := range others {
			h, b := float64(in.StripeHeat[p]), float64(in.StripeBytes[p])
			if over > 0 {
				take := min(h, over)
				cost += b * take / h
				over -= take
				h -= take
				if h <= 0 {
					continue
				}
			}
			if c >= tDev || h/b <= density {
				break
			}
			take := min(h, tDev-c)
			c += take
			cost += b * take / float64(in.StripeHeat[p])
		}
		kept += min(c, tDev)
	}
	return cost + float64(rs.Bytes)*max(0, rs.Heat-kept)/rs.Heat
}

// applyRestripe books a restripe: the mirror's heat leaves its old
// devices and spreads evenly over the new ones, which take its bytes.
func (s *state) applyRestripe(r *Result, rs Restripe, h *coolHeap) {
	in := s.in
	for _, p := range rs.Stripes {
		d := in.StripeDevice[p]
		ht := float64(in.StripeHeat[p])
		s.load[d] -= ht
		s.dsLoad[in.Devices[d].DS] -= ht
		s.moved[p] = struct{}{}
		h.fix(d)
	}
	per, perBytes := rs.Heat/float64(len(rs.To)), float64(rs.Bytes)/float64(len(rs.To))
	for _, x := range rs.To {
		s.load[x] += per
		s.dsLoad[in.Devices[x].DS] += per
		s.used[x] += perBytes
		h.fix(x)
	}
	r.Restripes = append(r.Restripes, rs)
	r.Bytes += rs.Bytes
}

// restripedMax is the load of the hottest new device of rs after it.
func (s *state) restripedMax(rs Restripe) float64 {
	m := 0.0
	for _, x := range rs.To {
		m = max(m, s.load[x])
	}
	return m
}
