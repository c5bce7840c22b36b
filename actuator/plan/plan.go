// Package plan computes stripe moves: load-aware rebalancing that brings
// the hottest devices and data servers back under a target max/mean load
// while moving the fewest bytes, and evacuation of a device. It is pure and
// deterministic like the analyzers: a cluster snapshot in, moves out, no
// I/O and no clock.
//
// The snapshot is columnar (one slice per stripe attribute) so that a
// cluster of 10 M stripes plans in well under a second on one core
// (BenchmarkRebalance10MStripes).
package plan

import (
	"container/heap"
	"fmt"
	"math"
	"sort"
)

// Device is one device in the snapshot.
type Device struct {
	// DS and Pool are indexes (data servers and pools are only compared).
	DS   int32
	Pool int32
	// Capacity and Used are bytes.
	Capacity float64
	Used     float64
	// Accepts says the device may take new data (online, not draining,
	// failed, retired or spare).
	Accepts bool
	// Load is the device's load, bytes/s; ignored when Input.LoadFromHeat.
	Load float64
	// Moving says copies of other plans read or write the device now: a
	// restripe, which writes to many devices at once, leaves it out (it
	// would wait for the device's copy budget).
	Moving bool
	// DSCapacity is what the device's data server can serve, bytes/s (its
	// NIC); 0 = unknown. A data server is balanced against its peers only
	// while it is busy (above DSBusy of it, or always when unknown):
	// spreading load over idle NICs moves bytes for nothing.
	DSCapacity float64
	// Saturated says the device was seen at its limit (utilization at
	// or above 0.9): requests queued on it and clients kept waiting, so
	// the heat of its stripes is what it served, a lower bound on what
	// they ask for (a restripe then sizes its width for more; see
	// restripe).
	Saturated bool
}

// DSBusy is the share of its capacity above which a data server's load is
// balanced against its peers.
const DSBusy = 0.5

// Input is a snapshot of a cluster: devices, and the stripes (components)
// the planner may look at, with the file each belongs to so that peers of
// a stripe (the file's other components and mirrors) can be avoided.
type Input struct {
	Devices []Device
	// One entry per stripe.
	StripeDevice []int32
	StripeFile   []int32
	StripeMirror []int8
	StripeBytes  []int64
	StripeHeat   []float32 // bytes/s
	// StripeBusy marks stripes that cannot move now (nil: none).
	StripeBusy []bool
	// LoadFromHeat sums device loads from stripe heat instead of
	// Device.Load (the stripes must then be every stripe with heat).
	LoadFromHeat bool
}

// Options steer the rebalancer.
type Options struct {
	// TargetMaxMean is the max/mean load to reach, per pool, for devices
	// and for data servers (default 1.05).
	TargetMaxMean float64
	// MinGain skips a device whose load the plan would lower by less than
	// this share (default 0.1).
	MinGain float64
	// Headroom is the share of a destination's capacity kept free.
	Headroom float64
	// Only limits the sources to these devices (the ones the hotspot
	// findings name) and their data servers; empty makes every device
	// above the target a source. Their pools' means set the targets.
	Only []int32
	// MaxMoves bounds the plan (0 = no bound).
	MaxMoves int
	// Restripe lets the plan rewrite a mirror whose components are each
	// hotter than the target over more devices (Result.Restripes); off,
	// such a device is only noted. MaxWidth bounds a restriped mirror's
	// components (0 = as many as the pool has legal devices).
	Restripe bool
	MaxWidth int
}

func (o *Options) defaults() {
	if o.TargetMaxMean < 1 {
		o.TargetMaxMean = 1.05
	}
	if o.MinGain < 0 {
		o.MinGain = 0
	}
}

// Move is one planned stripe move.
type Move struct {
	Stripe int32
	From   int32
	To     int32
	Bytes  int64
	Heat   float64
}

// Restripe is one planned restripe: one mirror of a file rewritten over
// To, more devices than it had, so that each device's share of the file's
// heat keeps it under the target.
type Restripe struct {
	// Stripes are the mirror's components; Hot is the one that made its
	// device a source.
	Stripes []int32
	Hot     int32
	To      []int32
	// Bytes is the mirror's bytes (a restripe rewrites all of them), Heat
	// its load, bytes/s, spread evenly over To.
	Bytes int64
	Heat  float64
	// LowerBound is the fewest bytes any plan must move to bring the
	// mirror's old devices under the target (see restripeBound).
	LowerBound int64
	// Censored says a device of the mirror was saturated, so Heat is a
	// lower bound and To is every legal device under the target.
	Censored bool
}

// Result is a plan.
type Result struct {
	Moves []Move
	// Restripes are the mirrors too hot for any one device, rewritten
	// wider; their bytes are in Bytes and their bounds in LowerBound.
	Restripes []Restripe
	Bytes     int64
	// LowerBound is the fewest bytes any plan must move to bring every
	// source device and data server to its attainable target; Bytes ÷
	// LowerBound is the plan's cost ratio.
	LowerBound int64
	// Max/mean device load over the planned pools, before and predicted
	// after, and the target.
	MaxMeanBefore, MaxMeanAfter, Target float64
	// Sources are the devices the plan relieves.
	Sources []int32
	Notes   []string
}

// CostRatio is Bytes ÷ LowerBound (0 without a bound).
func (r *Result) CostRatio() float64 {
	if r.LowerBound <= 0 {
		return 0
	}
	return float64(r.Bytes) / float64(r.LowerBound)
}

// state is the mutable view the planners work on.
type state struct {
	in      *Input
	opts    Options
	load    []float64 // per device
	used    []float64
	dsLoad  []float64
	byDev   [][]int32          // stripes per device, only for devices looked at
	peers   map[int32][]int32  // file → its stripes, only for files looked at
	meanDev map[int32]float64  // per pool
	meanDS  map[int32]float64  // per pool
	dsPool  map[int32]int32    // DS → pool (a DS serves one pool)
	dsCap   map[int32]float64  // DS → capacity, bytes/s (0 unknown)
	nDSPool map[int32]int      // data servers per pool
	moved   map[int32]struct{} // stripes already moved
}

func newState(in *Input, opts Options) *state {
	s := &state{in: in, opts: opts, moved: map[int32]struct{}{}}
	n := len(in.Devices)
	s.load = make([]float64, n)
	s.used = make([]float64, n)
	maxDS := int32(-1)
	for i := range in.Devices {
		d := &in.Devices[i]
		s.used[i] = d.Used
		if !in.LoadFromHeat {
			s.load[i] = d.Load
		}
		maxDS = max(maxDS, d.DS)
	}
	if in.LoadFromHeat {
		for k, d := range in.StripeDevice {
			s.load[d] += float64(in.StripeHeat[k])
		}
	}
	s.dsLoad = make([]float64, maxDS+1)
	s.dsPool, s.dsCap = map[int32]int32{}, map[int32]float64{}
	for i := range in.Devices {
		d := &in.Devices[i]
		s.dsLoad[d.DS] += s.load[i]
		s.dsPool[d.DS] = d.Pool
		s.dsCap[d.DS] = max(s.dsCap[d.DS], d.DSCapacity)
	}
	s.means()
	return s
}

// means computes the mean device and DS load of every pool, over the
// devices that hold or take data (spares and failed devices are not part
// of the pool's load).
func (s *state) means() {
	sumD, nD := map[int32]float64{}, map[int32]int{}
	ds := map[int32]bool{}
	for i := range s.in.Devices {
		d := &s.in.Devices[i]
		if !d.Accepts && s.load[i] == 0 {
			continue
		}
		sumD[d.Pool] += s.load[i]
		nD[d.Pool]++
		ds[d.DS] = true
	}
	s.meanDev, s.meanDS, s.nDSPool = map[int32]float64{}, map[int32]float64{}, map[int32]int{}
	// in data server order: a sum in map order differs in its last bits
	// between runs, and so would every comparison against the mean
	sumS := map[int32]float64{}
	for k := range s.dsLoad {
		if !ds[int32(k)] {
			continue
		}
		p := s.dsPool[int32(k)]
		sumS[p] += s.dsLoad[k]
		s.nDSPool[p]++
	}
	for p, n := range nD {
		s.meanDev[p] = sumD[p] / float64(n)
	}
	for p, n := range s.nDSPool {
		s.meanDS[p] = sumS[p] / float64(n)
	}
}

// indexDevices builds the per-device stripe lists of devs in one pass.
func (s *state) indexDevices(devs []int32) {
	want := make([]bool, len(s.in.Devices))
	for _, d := range devs {
		want[d] = true
	}
	if s.byDev == nil {
		s.byDev = make([][]int32, len(s.in.Devices))
	}
	for k, d := range s.in.StripeDevice {
		if want[d] {
			s.byDev[d] = append(s.byDev[d], int32(k))
		}
	}
}

// indexPeers lists the stripes of every file that has a stripe on one of
// devs, in one pass.
func (s *state) indexPeers(devs []int32) {
	// a bitmap over file numbers: one pass over every stripe, no map
	// lookup per stripe (10 M stripes, BenchmarkRebalance10MStripes)
	var files []uint64
	n := 0
	for _, d := range devs {
		for _, k := range s.byDev[d] {
			f := s.in.StripeFile[k]
			if w := int(f >> 6); w >= len(files) {
				files = append(files, make([]uint64, w+1-len(files))...)
			}
			if files[f>>6]&(1<<(f&63)) == 0 {
				n++
			}
			files[f>>6] |= 1 << (f & 63)
		}
	}
	s.peers = make(map[int32][]int32, n)
	for k, f := range s.in.StripeFile {
		if w := int(f >> 6); w < len(files) && files[w]&(1<<(f&63)) != 0 {
			s.peers[f] = append(s.peers[f], int32(k))
		}
	}
}

func (s *state) busy(k int32) bool {
	if s.in.StripeBusy != nil && s.in.StripeBusy[k] {
		return true
	}
	_, moved := s.moved[k]
	return moved
}

// fits reports whether stripe k may go to device x: x takes data, is in
// the same pool, holds no other component of k's file, is not on a data
// server that holds another mirror of it, and keeps its headroom.
func (s *state) fits(k, x int32) bool {
	in := s.in
	from := in.StripeDevice[k]
	dx := &in.Devices[x]
	if x == from || !dx.Accepts || dx.Pool != in.Devices[from].Pool {
		return false
	}
	if s.used[x]+float64(in.StripeBytes[k]) > (1-s.opts.Headroom)*dx.Capacity {
		return false
	}
	f, m := in.StripeFile[k], mirrorOf(in, k)
	for _, p := range s.peers[f] {
		if p == k {
			continue
		}
		pd := in.StripeDevice[p]
		if pd == x {
			return false
		}
		if mirrorOf(in, p) != m && in.Devices[pd].DS == dx.DS {
			return false
		}
	}
	return true
}

func mirrorOf(in *Input, k int32) int8 {
	if in.StripeMirror == nil {
		return 0
	}
	return in.StripeMirror[k]
}

// apply books a move.
func (s *state) apply(r *Result, k, to int32) {
	in := s.in
	from := in.StripeDevice[k]
	h, b := float64(in.StripeHeat[k]), in.StripeBytes[k]
	s.load[from] -= h
	s.load[to] += h
	s.dsLoad[in.Devices[from].DS] -= h
	s.dsLoad[in.Devices[to].DS] += h
	s.used[to] += float64(b)
	s.moved[k] = struct{}{}
	r.Moves = append(r.Moves, Move{Stripe: k, From: from, To: to, Bytes: b, Heat: h})
	r.Bytes += b
}

// coolHeap orders a pool's devices by load (then index, for determinism).
// pos tracks where each device sits, so that a move's two devices are
// re-placed with heap.Fix (O(log n)) instead of rebuilding the heap.
type coolHeap struct {
	dev  []int32
	load []float64
	pos  []int32 // per device index; -1 not in the heap
}

func newCoolHeap(load []float64, devs []int32) *coolHeap {
	h := &coolHeap{dev: devs, load: load, pos: make([]int32, len(load))}
	for i := range h.pos {
		h.pos[i] = -1
	}
	for i, d := range devs {
		h.pos[d] = int32(i)
	}
	heap.Init(h)
	return h
}

func (h *coolHeap) Len() int { return len(h.dev) }
func (h *coolHeap) Less(i, j int) bool {
	a, b := h.dev[i], h.dev[j]
	if h.load[a] != h.load[b] {
		return h.load[a] < h.load[b]
	}
	return a < b
}
func (h *coolHeap) Swap(i, j int) {
	h.dev[i], h.dev[j] = h.dev[j], h.dev[i]
	h.pos[h.dev[i]], h.pos[h.dev[j]] = int32(i), int32(j)
}
func (h *coolHeap) Push(x any) {
	d := x.(int32)
	h.pos[d] = int32(len(h.dev))
	h.dev = append(h.dev, d)
}
func (h *coolHeap) Pop() any {
	x := h.dev[len(h.dev)-1]
	h.dev = h.dev[:len(h.dev)-1]
	h.pos[x] = -1
	return x
}

// fix re-places devices whose load changed.
func (h *coolHeap) fix(devs ...int32) {
	for _, d := range devs {
		if i := h.pos[d]; i >= 0 {
			heap.Fix(h, int(i))
		}
	}
}

// pickCool returns the coolest device of the heap that stripe k fits and
// that stays within maxDev (device) and maxDS (its data server) after
// taking the stripe's heat, or -1. Devices it passes over go back.
func (s *state) pickCool(h *coolHeap, k int32, maxDev, maxDS float64, avoidDS int32) int32 {
	var skipped []int32
	pick := int32(-1)
	heat := float64(s.in.StripeHeat[k])
	for h.Len() > 0 {
		x := heap.Pop(h).(int32)
		skipped = append(skipped, x)
		if s.load[x]+heat > maxDev {
			break // every later device is hotter still
		}
		ds := s.in.Devices[x].DS
		if ds == avoidDS || s.dsLoad[ds]+heat > maxDS || !s.fits(k, x) {
			continue
		}
		pick = x
		break
	}
	for _, x := range skipped {
		heap.Push(h, x)
	}
	return pick
}

// coverBound is a lower bound on the bytes of any subset of stripes whose
// heat sums to at least need: the larger of the fractional knapsack bound
// (take stripes by heat per byte, the last one in part) and the bytes of
// the k smallest stripes, k the fewest stripes that can cover need (take
// the hottest first). Both are lower bounds, so their maximum is; for
// stripes of equal size the second is exact.
func coverBound(heat []float64, bytes []int64, need float64) float64 {
	if need <= 0 || len(heat) == 0 {
		return 0
	}
	idx := make([]int, len(heat))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool {
		da, db := heat[idx[a]]/float64(max(bytes[idx[a]], 1)), heat[idx[b]]/float64(max(bytes[idx[b]], 1))
		if da != db {
			return da > db
		}
		return idx[a] < idx[b]
	})
	frac, got := 0.0, 0.0
	for _, i := range idx {
		if heat[i] <= 0 {
			break
		}
		if got+heat[i] >= need {
			frac += float64(bytes[i]) * (need - got) / heat[i]
			got = need
			break
		}
		got += heat[i]
		frac += float64(bytes[i])
	}
	if got < need {
		return math.Inf(1)
	}
	hs := append([]float64(nil), heat...)
	sort.Sort(sort.Reverse(sort.Float64Slice(hs)))
	k, sum := 0, 0.0
	for _, h := range hs {
		k++
		sum += h
		if sum >= need {
			break
		}
	}
	// any cover has at least k stripes, so at least the k smallest's bytes
	bs := append([]int64(nil), bytes...)
	sort.Slice(bs, func(a, b int) bool { return bs[a] < bs[b] })
	smallest := 0.0
	for _, b := range bs[:k] {
		smallest += float64(b)
	}
	return math.Max(frac, smallest)
}

// maxMean is the largest max/mean device load over the pools in pools.
func (s *state) maxMean(pools map[int32]bool) float64 {
	mx := map[int32]float64{}
	for i := range s.in.Devices {
		p := s.in.Devices[i].Pool
		if pools[p] {
			mx[p] = max(mx[p], s.load[i])
		}
	}
	r := 0.0
	for p := range pools {
		if m := s.meanDev[p]; m > 0 {
			r = max(r, mx[p]/m)
		}
	}
	return r
}

// HotDevices returns the devices whose load is above target × their pool's
// mean, hottest first, and the devices of data servers above target × the
// pool's mean DS load: what Rebalance would look at, so that a caller can
// fetch only those devices' stripes.
func HotDevices(in *Input, opts Options) []int32 {
	opts.defaults()
	s := newState(in, opts)
	return s.sources()
}

// dsHot reports whether data server ds is above the target against its
// pool's peers and busy enough for that to matter.
func (s *state) dsHot(ds int32) bool {
	p := s.dsPool[ds]
	if s.nDSPool[p] <= 1 || s.dsLoad[ds] <= s.opts.TargetMaxMean*s.meanDS[p] {
		return false
	}
	c := s.dsCap[ds]
	return c <= 0 || s.dsLoad[ds] > DSBusy*c
}

func (s *state) sources() []int32 {
	seen := map[int32]bool{}
	var out []int32
	only, onlyDS := map[int32]bool{}, map[int32]bool{}
	for _, d := range s.opts.Only {
		only[d] = true
		onlyDS[s.in.Devices[d].DS] = true
	}
	for i := range s.in.Devices {
		d := &s.in.Devices[i]
		if len(only) > 0 && !only[int32(i)] {
			continue
		}
		if s.load[i] > s.opts.TargetMaxMean*s.meanDev[d.Pool] && s.load[i] > 0 {
			seen[int32(i)] = true
			out = append(out, int32(i))
		}
	}
	for i := range s.in.Devices {
		d := &s.in.Devices[i]
		if seen[int32(i)] || (len(only) > 0 && !onlyDS[d.DS]) || s.load[i] <= 0 {
			continue
		}
		if s.dsHot(d.DS) {
			out = append(out, int32(i))
		}
	}
	sort.Slice(out, func(a, b int) bool {
		if s.load[out[a]] != s.load[out[b]] {
			return s.load[out[a]] > s.load[out[b]]
		}
		return out[a] < out[b]
	})
	return out
}

// Rebalance plans moves that bring every device above TargetMaxMean × its
// pool's mean load (and every data server above the same multiple of the
// pool's mean DS load) down to it, choosing the stripes with the most heat
// per byte and sending each to the coolest device it fits that stays under
// the target. A stripe hotter than the target by itself cannot be placed
// anywhere without making its destination hot: its device's attainable
// target is that stripe's heat, and the notes say so.
func Rebalance(in *Input, opts Options) Result {
	opts.defaults()
	s := newState(in, opts)
	srcs := s.sources()
	r := Result{Sources: srcs}
	pools := map[int32]bool{}
	for _, d := range srcs {
		pools[in.Devices[d].Pool] = true
	}
	r.MaxMeanBefore = s.maxMean(pools)
	r.Target = opts.TargetMaxMean
	if len(srcs) == 0 {
		r.MaxMeanAfter = r.MaxMeanBefore
		return r
	}
	s.indexDevices(srcs)
	s.indexPeers(srcs)
	heaps := map[int32]*coolHeap{}
	for p := range pools {
		var devs []int32
		for i := range in.Devices {
			if in.Devices[i].Pool == p && in.Devices[i].Accepts {
				devs = append(devs, int32(i))
			}
		}
		heaps[p] = newCoolHeap(s.load, devs)
	}
	var lbDev float64
	for _, d := range srcs {
		p := in.Devices[d].Pool
		tDev := opts.TargetMaxMean * s.meanDev[p]
		tDS := opts.TargetMaxMean * s.meanDS[p]
		ds := in.Devices[d].DS
		if s.nDSPool[p] <= 1 {
			tDS = math.Inf(1)
		}
		// a stripe hotter than the target fits nowhere (its destination
		// would be hot in turn): its mirror is restriped over more devices
		if opts.Restripe {
			for _, k := range s.byDev[d] {
				if float64(in.StripeHeat[k]) <= tDev || s.busy(k) {
					continue
				}
				rs, why := s.restripe(k, tDev)
				if why != "" {
					r.Notes = append(r.Notes, fmt.Sprintf("device %d: cannot restripe the file of its stripe %d: %s", d, k, why))
					continue
				}
				s.applyRestripe(&r, rs, heaps[p])
				lbDev += float64(rs.LowerBound)
				if rs.Censored {
					r.Notes = append(r.Notes, fmt.Sprintf("device %d: a device of its file is saturated, so the file's %.3g B/s is a lower bound on what it is asked for: restriped over every legal device under the target (%d)", d, rs.Heat, len(rs.To)))
				}
				if after := s.restripedMax(rs); after > tDev && !rs.Censored {
					r.Notes = append(r.Notes, fmt.Sprintf("device %d: its file restriped over %d devices still leaves one at %.3g B/s, above the target %.3g (max_stripe_width or the pool's legal devices)", d, len(rs.To), after, tDev))
				}
			}
		}
		// candidates by heat per byte, stripes restriped away left out
		cand := make([]int32, 0, len(s.byDev[d]))
		hmax := 0.0
		for _, k := range s.byDev[d] {
			if _, gone := s.moved[k]; gone {
				continue
			}
			h := float64(in.StripeHeat[k])
			if h > 0 && h <= tDev && !s.busy(k) {
				cand = append(cand, k)
			}
			hmax = max(hmax, h)
		}
		att := max(tDev, hmax)
		need := s.load[d] - att
		if s.dsHot(ds) {
			// the DS's excess, shared: what earlier devices of the same DS
			// moved is already off s.dsLoad
			need = max(need, min(s.dsLoad[ds]-tDS, s.load[d]-hmax))
		}
		movable := 0.0
		for _, k := range cand {
			movable += float64(in.StripeHeat[k])
		}
		if need > movable {
			if need > 0 {
				r.Notes = append(r.Notes, fmt.Sprintf("device %d: only %.3g of the %.3g B/s above its target can move (the rest is busy or too hot to place)", d, movable, need))
			}
			need = movable
		}
		if hmax > tDev {
			fix := "it needs more mirrors or wider striping"
			if !opts.Restripe {
				fix += "; restriping is off (rebalance.restripe) or the driver cannot restripe"
			}
			r.Notes = append(r.Notes, fmt.Sprintf("device %d: one stripe carries %.3g B/s, %.2f× the pool's mean device load; moving it only moves the hot spot (%s)", d, hmax, hmax/max(s.meanDev[p], 1e-12), fix))
		}
		if need <= 0 || need < opts.MinGain*s.load[d] {
			if need > 0 {
				r.Notes = append(r.Notes, fmt.Sprintf("device %d: moves could lower its load by %.1f%% only (min_gain %.0f%%); not planned", d, 100*need/s.load[d], 100*opts.MinGain))
			}
			continue
		}
		hs, bs := make([]float64, len(cand)), make([]int64, len(cand))
		for i, k := range cand {
			hs[i], bs[i] = float64(in.StripeHeat[k]), in.StripeBytes[k]
		}
		lbDev += coverBound(hs, bs, need)
		sortByDensity(in, cand)
		removed := 0.0
		used := map[int32]bool{}
		first := len(r.Moves) // this source's moves are r.Moves[first:]
		for _, k := range cand {
			if removed >= need {
				break
			}
			if used[k] {
				continue
			}
			if opts.MaxMoves > 0 && len(r.Moves) >= opts.MaxMoves {
				r.Notes = append(r.Notes, fmt.Sprintf("stopped at %d moves (max_moves)", opts.MaxMoves))
				break
			}
			// what is left may be covered by a smaller stripe than this one
			if rest := need - removed; float64(in.StripeHeat[k]) > rest {
				k = s.smallestCovering(cand, used, k, rest)
			}
			to := s.pickCool(heaps[p], k, tDev, tDS, -1)
			if to < 0 {
				used[k] = true
				continue
			}
			used[k] = true
			removed += float64(in.StripeHeat[k])
			s.apply(&r, k, to)
			heaps[p].fix(to, d)
		}
		removed = s.prune(&r, first, removed, need, heaps[p])
		if removed < need*0.999 {
			r.Notes = append(r.Notes, fmt.Sprintf("device %d: found destinations for %.3g of the %.3g B/s to move (capacity headroom, placement rules or cool devices ran out)", d, removed, need))
		}
	}
	r.LowerBound = int64(math.Ceil(lbDev))
	r.MaxMeanAfter = s.maxMean(pools)
	return r
}

// prune drops moves of r.Moves[first:] that the others make unneeded,
// largest first: greedy selection by heat per byte can take a stripe early
// that a later, hotter one makes redundant (stripes of unequal size). A
// move is dropped while the rest still remove need; it returns what the
// kept moves remove.
func (s *state) prune(r *Result, first int, removed, need float64, h *coolHeap) float64 {
	mine := r.Moves[first:]
	order := make([]int, len(mine))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool {
		ma, mb := &mine[order[a]], &mine[order[b]]
		if ma.Bytes != mb.Bytes {
			return ma.Bytes > mb.Bytes
		}
		if ma.Heat != mb.Heat {
			return ma.Heat < mb.Heat
		}
		return ma.Stripe < mb.Stripe
	})
	drop := map[int]bool{}
	for _, i := range order {
		m := &mine[i]
		if removed-m.Heat < need {
			continue
		}
		removed -= m.Heat
		drop[i] = true
		// undo apply
		s.load[m.From] += m.Heat
		s.load[m.To] -= m.Heat
		s.dsLoad[s.in.Devices[m.From].DS] += m.Heat
		s.dsLoad[s.in.Devices[m.To].DS] -= m.Heat
		s.used[m.To] -= float64(m.Bytes)
		delete(s.moved, m.Stripe)
		r.Bytes -= m.Bytes
		h.fix(m.To, m.From)
	}
	if len(drop) > 0 {
		kept := r.Moves[:first]
		for i := range mine {
			if !drop[i] {
				kept = append(kept, mine[i])
			}
		}
		r.Moves = kept
	}
	return removed
}

// sortByDensity orders stripes ks by heat per byte, densest first (then
// index, for determinism).
func sortByDensity(in *Input, ks []int32) {
	sort.Slice(ks, func(a, b int) bool {
		ka, kb := ks[a], ks[b]
		da := float64(in.StripeHeat[ka]) / float64(max(in.StripeBytes[ka], 1))
		db := float64(in.StripeHeat[kb]) / float64(max(in.StripeBytes[kb], 1))
		if da != db {
			return da > db
		}
		return ka < kb
	})
}

// smallestCovering returns the stripe with the fewest bytes among the
// unused candidates whose heat still covers rest, or k: when what is left
// of a device's excess is small, a small stripe does.
func (s *state) smallestCovering(cand []int32, used map[int32]bool, k int32, rest float64) int32 {
	in := s.in
	best := k
	for _, c := range cand {
		if !used[c] && float64(in.StripeHeat[c]) >= rest && in.StripeBytes[c] < in.StripeBytes[best] {
			best = c
		}
	}
	return best
}

// Evacuate plans moves of every movable stripe off device dev, hottest
// first: to spare when spare ≥ 0 (a promoted spare of the same data
// server takes the device's place; the caller marks it Accepts in dev's
// pool), else each to the coolest device of the pool it fits. Stripes nothing can take are left, and the notes say how
// many bytes the pool could not absorb.
func Evacuate(in *Input, dev, spare int32, opts Options) Result {
	opts.defaults()
	s := newState(in, opts)
	s.indexDevices([]int32{dev})
	s.indexPeers([]int32{dev})
	r := Result{Sources: []int32{dev}}
	p := in.Devices[dev].Pool
	pools := map[int32]bool{p: true}
	r.MaxMeanBefore = s.maxMean(pools)
	cand := append([]int32(nil), s.byDev[dev]...)
	sort.Slice(cand, func(a, b int) bool {
		ka, kb := cand[a], cand[b]
		if in.StripeHeat[ka] != in.StripeHeat[kb] {
			return in.StripeHeat[ka] > in.StripeHeat[kb]
		}
		return ka < kb
	})
	var devs []int32
	for i := range in.Devices {
		if in.Devices[i].Pool == p && in.Devices[i].Accepts && int32(i) != dev {
			devs = append(devs, int32(i))
		}
	}
	h := newCoolHeap(s.load, devs)
	var left, leftBytes int64
	busy := 0
	for _, k := range cand {
		if s.in.StripeBusy != nil && s.in.StripeBusy[k] {
			busy++
			continue
		}
		to := int32(-1)
		if spare >= 0 && s.fits(k, spare) {
			to = spare
		}
		if to < 0 {
			to = s.pickCool(h, k, math.Inf(1), math.Inf(1), -1)
		}
		if to < 0 {
			left++
			leftBytes += in.StripeBytes[k]
			continue
		}
		s.apply(&r, k, to)
		h.fix(to)
	}
	r.LowerBound = r.Bytes
	if left > 0 {
		r.LowerBound += leftBytes
		r.Notes = append(r.Notes, fmt.Sprintf("the pool cannot absorb %d stripes (%d bytes): no device has the headroom or a legal place for them", left, leftBytes))
	}
	if busy > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d stripes are busy (being written) and will be planned again", busy))
	}
	r.MaxMeanAfter = s.maxMean(pools)
	return r
}
