// Package heavyhitter implements the Space-Saving algorithm (Metwally,
// Agrawal, El Abbadi 2005) for weighted streams over uint64 keys: it keeps at
// most k counters, so its memory does not depend on the number of distinct
// keys, and every key whose true weight exceeds N/k (N the total weight seen)
// is guaranteed to be monitored, with a count that overestimates the truth by
// at most its recorded error.
//
// It is hand-written rather than taken from a library because ballast needs
// three properties the Go packages we know do not give together: weighted
// (bytes, not hits) updates, zero allocations per update, and exponential
// decay of all counters so heat reflects recent load. Counters live in a
// binary min-heap ordered by count; the key → heap slot index is an
// open-addressing hash table with linear probing and backward-shift deletion,
// so it never accumulates tombstones and never grows.
package heavyhitter

import (
	"fmt"
	"math"
	"sort"
)

// Entry is one monitored key. Count overestimates the key's true weight by at
// most Err: Count-Err ≤ true ≤ Count.
type Entry struct {
	Key   uint64
	Count float64
	Err   float64
}

// node is a heap element: the entry and the hash-table slot that points at it,
// so heap moves update the table without a lookup.
type node struct {
	Entry
	slot uint64
}

// Sketch is a Space-Saving summary with k counters. The zero value is not
// usable; call New. A Sketch is not safe for concurrent use.
type Sketch struct {
	heap  []node   // min-heap on Count; len ≤ cap
	slots []int32  // hash table: heap index + 1, 0 = empty
	keys  []uint64 // key stored at each slot (valid when slots[i] != 0)
	mask  uint64
	total float64
}

// New returns a sketch that monitors at most k keys. k must be at least 1.
func New(k int) (*Sketch, error) {
	if k < 1 || k > math.MaxInt32/4 {
		return nil, fmt.Errorf("cannot create heavy-hitter sketch with %d counters: want 1 to %d", k, math.MaxInt32/4)
	}
	// Table size: power of two ≥ 2k keeps the load factor ≤ 0.5 (k+1 keys
	// during a replacement), so linear probes stay short.
	n := 1
	for n < 2*k {
		n <<= 1
	}
	return &Sketch{
		heap:  make([]node, 0, k),
		slots: make([]int32, n),
		keys:  make([]uint64, n),
		mask:  uint64(n - 1),
	}, nil
}

// Capacity is the number of counters, k.
func (s *Sketch) Capacity() int { return cap(s.heap) }

// Len is the number of keys monitored now (≤ Capacity).
func (s *Sketch) Len() int { return len(s.heap) }

// Total is the total (decayed) weight added so far.
func (s *Sketch) Total() float64 { return s.total }

// MaxError is the bound on any count's overestimate, and the weight above
// which a key is guaranteed to be monitored: the smallest count when the
// sketch is full, zero before.
func (s *Sketch) MaxError() float64 {
	if len(s.heap) < cap(s.heap) || len(s.heap) == 0 {
		return 0
	}
	return s.heap[0].Count
}

// mix is the splitmix64 finaliser: keys may be sequential ids or already
// hashes, and either way the table needs well-spread bits.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// find returns the table slot holding key, or the empty slot where it would go
// and false.
func (s *Sketch) find(key uint64) (uint64, bool) {
	i := mix(key) & s.mask
	for {
		if s.slots[i] == 0 {
			return i, false
		}
		if s.keys[i] == key {
			return i, true
		}
		i = (i + 1) & s.mask
	}
}

// remove deletes the table slot i and shifts later probe-chain members back so
// lookups need no tombstones (Knuth's algorithm R).
func (s *Sketch) remove(i uint64) {
	for {
		s.slots[i] = 0
		j := i
		for {
			j = (j + 1) & s.mask
			if s.slots[j] == 0 {
				return
			}
			home := mix(s.keys[j]) & s.mask
			// Move j back to i unless its home lies cyclically in (i, j].
			if (i <= j && (i < home && home <= j)) || (i > j && (i < home || home <= j)) {
				continue
			}
			s.slots[i], s.keys[i] = s.slots[j], s.keys[j]
			s.heap[s.slots[i]-1].slot = i
			i = j
			break
		}
	}
}

// Add records weight w (> 0; others are ignored) for key.
func (s *Sketch) Add(key uint64, w float64) {
	if !(w > 0) || math.IsInf(w, 1) {
		return
	}
	s.total += w
	slot, ok := s.find(key)
	if ok {
		h := int(s.slots[slot] - 1)
		s.heap[h].Count += w
		s.down(h)
		return
	}
	if len(s.heap) < cap(s.heap) {
		h := len(s.heap)
		s.heap = append(s.heap, node{Entry: Entry{Key: key, Count: w}, slot: slot})
		s.slots[slot], s.keys[slot] = int32(h+1), key
		s.up(h)
		return
	}
	// Replace the minimum: the newcomer inherits its count as error. It is
	// inserted before the old key is removed (the table has room for k+1),
	// so the free slot found above stays valid; the removal's backward
	// shift may then move it, and updates its heap slot like any other.
	old := s.heap[0].slot
	m := s.heap[0].Count
	s.heap[0] = node{Entry: Entry{Key: key, Count: m + w, Err: m}, slot: slot}
	s.slots[slot], s.keys[slot] = 1, key
	s.remove(old)
	s.down(0)
}

// place puts n at heap index h and points its table slot there.
func (s *Sketch) place(n node, h int) {
	s.heap[h] = n
	s.slots[n.slot] = int32(h + 1)
}

func (s *Sketch) up(h int) {
	e := s.heap[h]
	for h > 0 {
		p := (h - 1) / 2
		if s.heap[p].Count <= e.Count {
			break
		}
		s.place(s.heap[p], h)
		h = p
	}
	s.place(e, h)
}

func (s *Sketch) down(h int) {
	n := len(s.heap)
	e := s.heap[h]
	moved := false
	for {
		c := 2*h + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && s.heap[r].Count < s.heap[c].Count {
			c = r
		}
		if s.heap[c].Count >= e.Count {
			break
		}
		s.place(s.heap[c], h)
		h = c
		moved = true
	}
	if moved {
		s.place(e, h)
	}
}

// Decay multiplies every count, error and the total by f in (0, 1], so heat
// reflects recent load (f = 2^(-dt/halfLife) for a half-life). Scaling keeps
// the heap order, so it costs one pass over k counters.
func (s *Sketch) Decay(f float64) {
	if !(f > 0) || f >= 1 {
		return
	}
	for i := range s.heap {
		s.heap[i].Count *= f
		s.heap[i].Err *= f
	}
	s.total *= f
}

// Get returns the entry for key and whether it is monitored.
func (s *Sketch) Get(key uint64) (Entry, bool) {
	slot, ok := s.find(key)
	if !ok {
		return Entry{}, false
	}
	return s.heap[s.slots[slot]-1].Entry, true
}

// Top appends the n entries with the largest counts to dst, largest first,
// ties broken by key so the order is deterministic, and returns it.
func (s *Sketch) Top(dst []Entry, n int) []Entry {
	start := len(dst)
	for _, n := range s.heap {
		dst = append(dst, n.Entry)
	}
	out := dst[start:]
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Key < out[j].Key
	})
	if n >= 0 && n < len(out) {
		dst = dst[:start+n]
	}
	return dst
}

// Each calls fn for every monitored entry, in heap order.
func (s *Sketch) Each(fn func(Entry)) {
	for _, n := range s.heap {
		fn(n.Entry)
	}
}

// Reset forgets every key, keeping the allocated memory.
func (s *Sketch) Reset() {
	s.heap = s.heap[:0]
	clear(s.slots)
	s.total = 0
}
