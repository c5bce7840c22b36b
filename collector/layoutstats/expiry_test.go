package layoutstats

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ballast-io/ballast/models"
)

// TestSweepFindsWhatAFullScanFinds drives an ingester with random batches,
// rollbacks, ticks and a clock that sometimes steps back, and checks every
// sweep against a scan of every key: the keys it forgets are exactly the
// idle ones, the intervals it drops exactly the stale ones, and nothing due
// is left behind.
func TestSweepFindsWhatAFullScanFinds(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		in := newIngester(t, Options{IdleTimeout: 60 * time.Second, FirstSightMaxDuration: 30 * time.Second,
			StaleAfter: 20 * time.Second, SweepInterval: 5 * time.Second, EmitInterval: time.Nanosecond})
		type keyGen struct {
			rd  ctr
			dur time.Duration
		}
		gens := map[[2]int]keyGen{}
		now := t0
		sweeps := 0
		for step := 0; step < 400; step++ {
			if rng.IntN(25) == 0 {
				now = now.Add(-time.Duration(rng.IntN(20)) * time.Second)
			} else {
				now = now.Add(time.Duration(rng.IntN(8)) * time.Second)
			}
			// What a full scan finds due, if this call sweeps.
			sweeping := now.Sub(in.lastSweep) >= in.opts.SweepInterval
			idle, stale := map[models.StripeKey]bool{}, map[models.StripeKey]bool{}
			for k, st := range in.keys {
				if now.Sub(st.lastSeen) > in.opts.IdleTimeout {
					idle[k] = true
				} else if !st.contribAt.IsZero() && now.Sub(st.contribAt) > in.opts.StaleAfter {
					stale[k] = true
				}
			}
			var tx *Txn
			next := map[[2]int]keyGen{}
			client := rng.IntN(3)
			if rng.IntN(4) == 0 {
				tx = in.Tick(now)
			} else {
				// A client reports a few of its keys; a key it stops
				// reporting goes stale, then idle.
				var rs []models.FFIOStats4
				for _, n := range rng.Perm(12)[:1+rng.IntN(4)] {
					g := gens[[2]int{client, n}]
					g.dur += time.Duration(1+rng.IntN(10)) * time.Second
					g.rd.ops += uint64(rng.IntN(3))
					g.rd.bytes += uint64(rng.IntN(3)) << 12
					next[[2]int{client, n}] = g
					rs = append(rs, rep(n, g.dur, g.rd, ctr{}))
				}
				var err error
				tx, err = in.Begin(now, batch([]string{"c0", "c1", "c2"}[client], rs...))
				if err != nil {
					t.Fatalf("seed %d step %d: Begin: %v", seed, step, err)
				}
			}
			if sweeping {
				sweeps++
				// A due key the batch itself reported is not due
				// any more when the sweep runs (its lastSeen is now).
				gone := 0
				for k := range idle {
					switch st := in.keys[k]; {
					case st == nil:
						gone++
					case !st.lastSeen.Equal(now):
						t.Fatalf("seed %d step %d: idle key %v kept", seed, step, k)
					}
				}
				if tx.Result.Evicted != gone || gone != len(idle)-reported(in, idle, now) {
					t.Fatalf("seed %d step %d: sweep forgot %d keys; want %d", seed, step, tx.Result.Evicted, gone)
				}
				for k := range stale {
					if st := in.keys[k]; !st.lastSeen.Equal(now) && !st.contribAt.IsZero() {
						t.Fatalf("seed %d step %d: stale interval of %v kept", seed, step, k)
					}
				}
				for k, st := range in.keys {
					if now.Sub(st.lastSeen) > in.opts.IdleTimeout || !st.contribAt.IsZero() && now.Sub(st.contribAt) > in.opts.StaleAfter {
						t.Fatalf("seed %d step %d: key %v still due after the sweep", seed, step, k)
					}
				}
			}
			if rng.IntN(6) == 0 {
				tx.Rollback()
				continue
			}
			tx.Commit()
			for k, g := range next {
				gens[k] = g
			}
		}
		if sweeps < 20 {
			t.Fatalf("seed %d: %d sweeps; the test wants more", seed, sweeps)
		}
	}
}

// reported counts the keys of due that are still there with lastSeen now.
func reported(in *Ingester, due map[models.StripeKey]bool, now time.Time) int {
	n := 0
	for k := range due {
		if st := in.keys[k]; st != nil && st.lastSeen.Equal(now) {
			n++
		}
	}
	return n
}
