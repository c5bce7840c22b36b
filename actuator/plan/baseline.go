package plan

import (
	"fmt"
	"sort"
)

// The baselines ballast's rebalancer is scored against (`ballast eval`,
// docs/evaluation.md). They plan from the same snapshot under the same
// placement rules (fits) and their moves go through the same engine,
// guards and mover; only the choice of moves differs. A real mds never
// runs them.

// CountDeviation is how far above the pool's mean stripe count a device
// may be before CountBalance moves stripes off it (Ceph's balancer
// upmap_max_deviation default, 5 placement groups).
const CountDeviation = 5

// CountMovesPerRound bounds one CountBalance plan (Ceph's
// upmap_max_optimizations default, 10 per round).
const CountMovesPerRound = 10

// poolOf is the pool the plan is for: that of the first device in
// opts.Only, else of the hottest device.
func poolOf(in *Input, opts Options, load []float64) int32 {
	if len(opts.Only) > 0 {
		return in.Devices[opts.Only[0]].Pool
	}
	best := int32(0)
	for i := range in.Devices {
		if load[i] > load[best] {
			best = int32(i)
		}
	}
	return in.Devices[best].Pool
}

// withBound fills the plan's lower bound and its max/mean figures from
// ballast's rebalancer on the same input: the bound is a property of the
// snapshot (the fewest bytes any plan must move), so every method's bytes
// are divided by the same number.
func withBound(in *Input, opts Options, s *state, r *Result, pool int32) {
	ref := Rebalance(in, opts)
	r.LowerBound = ref.LowerBound
	r.MaxMeanBefore = ref.MaxMeanBefore
	r.Target = opts.TargetMaxMean
	r.MaxMeanAfter = s.maxMean(map[int32]bool{pool: true})
}

// CountBalance is a Ceph-upmap-style balancer: it equalises the number of
// stripes per device of the pool, blind to load. While a device holds
// more than CountDeviation stripes above the pool's mean, it moves one of
// them (the lowest-numbered that may move) to the device with the fewest
// stripes that may take it, at most CountMovesPerRound moves per plan. The
// input must hold every stripe of the pool.
func CountBalance(in *Input, opts Options) Result {
	opts.defaults()
	s := newState(in, opts)
	pool := poolOf(in, opts, s.load)
	var devs []int32
	for i := range in.Devices {
		if in.Devices[i].Pool == pool && in.Devices[i].Accepts {
			devs = append(devs, int32(i))
		}
	}
	r := Result{}
	if len(devs) < 2 {
		withBound(in, opts, s, &r, pool)
		return r
	}
	s.indexDevices(devs)
	s.indexPeers(devs)
	count := map[int32]int{}
	total := 0
	for _, d := range devs {
		count[d] = len(s.byDev[d])
		total += count[d]
	}
	mean := float64(total) / float64(len(devs))
	for len(r.Moves) < CountMovesPerRound {
		sort.Slice(devs, func(a, b int) bool {
			if count[devs[a]] != count[devs[b]] {
				return count[devs[a]] > count[devs[b]]
			}
			return devs[a] < devs[b]
		})
		src := devs[0]
		if float64(count[src]) <= mean+CountDeviation {
			break
		}
		moved := false
		for _, k := range s.byDev[src] {
			if s.busy(k) {
				continue
			}
			for i := len(devs) - 1; i > 0; i-- {
				x := devs[i]
				if float64(count[x]) >= mean || !s.fits(k, x) {
					continue
				}
				s.apply(&r, k, x)
				count[src]--
				count[x]++
				moved = true
				break
			}
			if moved {
				break
			}
		}
		if !moved {
			r.Notes = append(r.Notes, fmt.Sprintf("device %d: %d stripes, %.0f above the mean, but none may move to a device below the mean", src, count[src], float64(count[src])-mean))
			break
		}
	}
	r.Sources = nil
	for _, m := range r.Moves {
		r.Sources = append(r.Sources, m.From)
	}
	withBound(in, opts, s, &r, pool)
	return r
}

// ShareHottestDS is the operator's rebalance of PEAK:AIO Lattice
// (`rebalance start SRC DST`): take the data server with the most load
// and the one with the least, and move the share of the hot one's bytes
// that would even the two out, (L_hot − L_cool) ÷ 2 ÷ L_hot, to the cool
// one. The operator sees load per data server, not per stripe, so the
// stripes go in the order the data server lists them (its devices in
// order, each device's stripes in order), to the cool server's devices in
// turn, skipping what may not move there. It acts only when the hot data
// server is above the target against the pool's mean. The input must hold
// the stripes of the pool's data servers.
func ShareHottestDS(in *Input, opts Options) Result {
	opts.defaults()
	s := newState(in, opts)
	pool := poolOf(in, opts, s.load)
	r := Result{}
	hot, cool := int32(-1), int32(-1)
	for ds := range s.dsLoad {
		d := int32(ds)
		if p, ok := s.dsPool[d]; !ok || p != pool {
			continue
		}
		if hot < 0 || s.dsLoad[d] > s.dsLoad[hot] {
			hot = d
		}
		if cool < 0 || s.dsLoad[d] < s.dsLoad[cool] {
			cool = d
		}
	}
	if hot < 0 || hot == cool || s.dsLoad[hot] <= opts.TargetMaxMean*s.meanDS[pool] {
		withBound(in, opts, s, &r, pool)
		return r
	}
	var src, dst []int32
	for i := range in.Devices {
		d := &in.Devices[i]
		switch {
		case d.DS == hot && d.Pool == pool:
			src = append(src, int32(i))
		case d.DS == cool && d.Pool == pool && d.Accepts:
			dst = append(dst, int32(i))
		}
	}
	s.indexDevices(src)
	s.indexPeers(src)
	share := (s.dsLoad[hot] - s.dsLoad[cool]) / 2 / s.dsLoad[hot]
	var have float64
	for _, d := range src {
		for _, k := range s.byDev[d] {
			have += float64(in.StripeBytes[k])
		}
	}
	want := share * have
	var got float64
	next := 0
	for _, d := range src {
		for _, k := range s.byDev[d] {
			if got >= want || len(dst) == 0 {
				break
			}
			if s.busy(k) {
				continue
			}
			for j := range dst {
				x := dst[(next+j)%len(dst)]
				if s.fits(k, x) {
					s.apply(&r, k, x)
					got += float64(in.StripeBytes[k])
					next = (next + j + 1) % len(dst)
					break
				}
			}
		}
	}
	r.Sources = src
	r.Notes = append(r.Notes, fmt.Sprintf("data server %d → %d: a %.0f%% share of its bytes", hot, cool, 100*share))
	withBound(in, opts, s, &r, pool)
	return r
}
