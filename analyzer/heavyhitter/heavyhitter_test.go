package heavyhitter

import (
	"math/rand/v2"
	"runtime"
	"sort"
	"testing"
)

// checkHeap verifies the heap order and that every table slot points at the
// heap entry holding its key and back.
func checkHeap(t *testing.T, s *Sketch) {
	t.Helper()
	for i := 1; i < len(s.heap); i++ {
		if p := (i - 1) / 2; s.heap[p].Count > s.heap[i].Count {
			t.Fatalf("heap order broken at %d: parent %v > child %v", i, s.heap[p].Count, s.heap[i].Count)
		}
	}
	used := 0
	for i, v := range s.slots {
		if v == 0 {
			continue
		}
		used++
		n := s.heap[v-1]
		if n.Key != s.keys[i] || n.slot != uint64(i) {
			t.Fatalf("slot %d holds key %d → heap %d with key %d slot %d", i, s.keys[i], v-1, n.Key, n.slot)
		}
	}
	if used != len(s.heap) {
		t.Fatalf("table holds %d keys; heap %d", used, len(s.heap))
	}
}

func TestNewRejectsBadCapacity(t *testing.T) {
	for _, k := range []int{0, -1} {
		if _, err := New(k); err == nil {
			t.Errorf("New(%d): got nil error; want one", k)
		}
	}
}

func TestExactWhileNotFull(t *testing.T) {
	s, _ := New(8)
	s.Add(1, 5)
	s.Add(2, 3)
	s.Add(1, 2)
	s.Add(3, 0)  // ignored
	s.Add(3, -1) // ignored
	if e, ok := s.Get(1); !ok || e.Count != 7 || e.Err != 0 {
		t.Fatalf("Get(1) = %+v, %v; want count 7 err 0", e, ok)
	}
	if _, ok := s.Get(3); ok {
		t.Fatalf("Get(3): key with no positive weight is monitored")
	}
	if s.Total() != 10 || s.MaxError() != 0 {
		t.Fatalf("total %v max error %v; want 10 and 0", s.Total(), s.MaxError())
	}
	top := s.Top(nil, 5)
	if len(top) != 2 || top[0].Key != 1 || top[1].Key != 2 {
		t.Fatalf("Top = %+v; want keys 1, 2", top)
	}
}

// TestGuarantees checks the Space-Saving bounds against an exact count on a
// skewed stream with many more distinct keys than counters.
func TestGuarantees(t *testing.T) {
	const k = 64
	s, _ := New(k)
	r := rand.New(rand.NewPCG(1, 2))
	z := rand.NewZipf(r, 1.3, 1, 5000)
	exact := map[uint64]float64{}
	total := 0.0
	for i := range 50000 {
		key := z.Uint64()
		w := float64(1 + r.IntN(4))
		s.Add(key, w)
		exact[key] += w
		total += w
		if i%9973 == 0 {
			checkHeap(t, s)
		}
	}
	checkHeap(t, s)
	if s.Len() != k {
		t.Fatalf("len %d; want %d", s.Len(), k)
	}
	for _, e := range s.Top(nil, -1) {
		tr := exact[e.Key]
		if e.Count < tr-1e-9 || e.Count-e.Err > tr+1e-9 {
			t.Errorf("key %d: count %v err %v; true %v outside [count-err, count]", e.Key, e.Count, e.Err, tr)
		}
	}
	for key, tr := range exact {
		if tr > total/k {
			if _, ok := s.Get(key); !ok {
				t.Errorf("key %d with weight %v > N/k = %v is not monitored", key, tr, total/k)
			}
		}
	}
}

func TestRemoveKeepsProbeChains(t *testing.T) {
	// A tiny table forces long probe chains and wrap-around shifts.
	s, _ := New(3)
	r := rand.New(rand.NewPCG(7, 7))
	for range 20000 {
		s.Add(r.Uint64N(50), 1)
	}
	checkHeap(t, s)
	for _, e := range s.Top(nil, -1) {
		if got, ok := s.Get(e.Key); !ok || got != e {
			t.Fatalf("Get(%d) = %+v, %v; want %+v", e.Key, got, ok, e)
		}
	}
}

func TestDecay(t *testing.T) {
	s, _ := New(4)
	s.Add(1, 8)
	s.Add(2, 4)
	s.Decay(0.5)
	if e, _ := s.Get(1); e.Count != 4 {
		t.Fatalf("count after decay %v; want 4", e.Count)
	}
	if s.Total() != 6 {
		t.Fatalf("total after decay %v; want 6", s.Total())
	}
	s.Decay(1.5) // ignored: not a decay
	if s.Total() != 6 {
		t.Fatalf("Decay(1.5) changed the total to %v", s.Total())
	}
	s.Reset()
	if s.Len() != 0 || s.Total() != 0 {
		t.Fatalf("after Reset len %d total %v; want 0, 0", s.Len(), s.Total())
	}
}

// Parameters shared by the recall test and the benchmarks, so the numbers
// reported are for the configuration whose accuracy is tested.
const (
	benchDistinct = 10_000_000
	benchK        = 4096
	zipfS         = 1.1
)

// stripeKey spreads stripe index i over uint64 like a hashed stripe id.
func stripeKey(i uint64) uint64 { return mix(i + 0x9e3779b97f4a7c15) }

func zipfStream(n int, seed uint64) []uint64 {
	r := rand.New(rand.NewPCG(seed, seed^0xabcdef))
	z := rand.NewZipf(r, zipfS, 1, benchDistinct-1)
	out := make([]uint64, n)
	for i := range out {
		out[i] = stripeKey(z.Uint64())
	}
	return out
}

func uniformStream(n int, seed uint64) []uint64 {
	r := rand.New(rand.NewPCG(seed, seed^0x12345))
	out := make([]uint64, n)
	for i := range out {
		out[i] = stripeKey(r.Uint64N(benchDistinct))
	}
	return out
}

// TestTop100Recall compares the sketch's top 100 with an exact count of a
// Zipf stream over 10M possible stripes. Target: recall ≥ 0.99.
func TestTop100Recall(t *testing.T) {
	n := 3_000_000
	if testing.Short() {
		n = 500_000
	}
	stream := zipfStream(n, 42)
	s, _ := New(benchK)
	exact := make(map[uint64]float64, 1<<20)
	for i, key := range stream {
		w := float64(int(4096) << (i % 4)) // request sizes 4 KiB..32 KiB
		s.Add(key, w)
		exact[key] += w
	}
	type kv struct {
		k uint64
		v float64
	}
	all := make([]kv, 0, len(exact))
	for k, v := range exact {
		all = append(all, kv{k, v})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].v != all[j].v {
			return all[i].v > all[j].v
		}
		return all[i].k < all[j].k
	})
	truth := map[uint64]bool{}
	for _, e := range all[:100] {
		truth[e.k] = true
	}
	hit := 0
	for _, e := range s.Top(nil, 100) {
		if truth[e.Key] {
			hit++
		}
	}
	recall := float64(hit) / 100
	t.Logf("top-100 recall %.3f over %d updates, %d distinct stripes seen, k=%d", recall, n, len(exact), benchK)
	if recall < 0.99 {
		t.Fatalf("top-100 recall %.3f; want ≥ 0.99", recall)
	}
}

func TestAddDoesNotAllocate(t *testing.T) {
	s, _ := New(256)
	stream := uniformStream(10000, 3)
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		s.Add(stream[i%len(stream)], 1)
		i++
	})
	if allocs != 0 {
		t.Fatalf("Add allocates %v times per call; want 0", allocs)
	}
}

func benchAdd(b *testing.B, stream []uint64) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s, err := New(benchK)
	if err != nil {
		b.Fatal(err)
	}
	// Warm the sketch so the measured updates run in the steady state.
	for _, key := range stream[:len(stream)/4] {
		s.Add(key, 1)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportAllocs()
	b.ResetTimer()
	mask := len(stream) - 1
	for i := 0; b.Loop(); i++ {
		s.Add(stream[i&mask], 1)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "updates/s")
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "sketch-MiB")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/(1<<20), "alloc-MiB")
	runtime.KeepAlive(s)
}

// BenchmarkAddZipf: updates/s on a Zipf(1.1) stream over 10M distinct stripes.
func BenchmarkAddZipf(b *testing.B) { benchAdd(b, zipfStream(1<<22, 9)) }

// BenchmarkAddUniform: updates/s on a uniform stream over 10M distinct
// stripes, the worst case (almost every update replaces the minimum).
func BenchmarkAddUniform(b *testing.B) { benchAdd(b, uniformStream(1<<22, 9)) }
