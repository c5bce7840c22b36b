package twin

import (
	"math"
	"testing"
	"time"

	"github.com/ballast-io/ballast/models"
)

// TestLayoutStatsCountWholeOps feeds one direction of a layout 0.3 ops
// of 1 MiB a tick (2 ms each) and a failure now and then, as a stripe
// that gets a fraction of an op per tick does, and renders it every
// tick: a client counts an op with its bytes and its completion time, so
// in every interval the bytes completed are the ops completed × 1 MiB
// (never bytes without ops), every counter is monotonic, completed + not
// delivered = requested, and over the run the totals are the whole ops.
func TestLayoutStatsCountWholeOps(t *testing.T) {
	const size, rate, lat, dt = 1 << 20, 0.3, 2e-3, 10.0
	var s ioStat
	var prev models.FFIOLatency4
	for tick := int64(1); tick <= 10000; tick++ {
		s.complete(tick, dt, rate, rate*size, rate*lat)
		if tick%7 == 0 {
			s.fail(0.45, 0.45*size)
		}
		l := s.latency4(float64(tick) * dt)
		dOps, dBytes := l.OpsCompleted-prev.OpsCompleted, l.BytesCompleted-prev.BytesCompleted
		dFailed := (l.OpsRequested - l.OpsCompleted) - (prev.OpsRequested - prev.OpsCompleted)
		dND := l.BytesNotDelivered - prev.BytesNotDelivered
		if l.OpsCompleted < prev.OpsCompleted || l.BytesCompleted < prev.BytesCompleted || l.OpsRequested < prev.OpsRequested ||
			l.BytesRequested < prev.BytesRequested || l.BytesNotDelivered < prev.BytesNotDelivered ||
			l.TotalBusyTime.Duration() < prev.TotalBusyTime.Duration() || l.AggregateCompletionTime.Duration() < prev.AggregateCompletionTime.Duration() {
			t.Fatalf("tick %d: a counter went backwards: %+v after %+v", tick, l, prev)
		}
		if dBytes != dOps*size {
			t.Fatalf("tick %d: %d bytes completed with %d ops; want %d", tick, dBytes, dOps, dOps*size)
		}
		if dND != dFailed*size {
			t.Fatalf("tick %d: %d bytes not delivered with %d failed ops; want %d", tick, dND, dFailed, dFailed*size)
		}
		if l.BytesCompleted+l.BytesNotDelivered != l.BytesRequested {
			t.Fatalf("tick %d: completed %d + not delivered %d != requested %d", tick, l.BytesCompleted, l.BytesNotDelivered, l.BytesRequested)
		}
		want := time.Duration(float64(l.OpsCompleted) * lat * 1e9)
		if got := l.AggregateCompletionTime.Duration(); math.Abs(float64(got-want)) > 1e3 {
			t.Fatalf("tick %d: completion time %s for %d ops of %s; want %s", tick, got, l.OpsCompleted, time.Duration(lat*1e9), want)
		}
		prev = l
	}
	// 10,000 ticks × 0.3 = 3,000 ops (the float sum may sit a hair under)
	if prev.OpsCompleted < 2999 || prev.OpsCompleted > 3000 {
		t.Fatalf("ops completed %d over the run; want 3000 (or 2999 for rounding)", prev.OpsCompleted)
	}
	if failed := prev.OpsRequested - prev.OpsCompleted; failed < 642 || failed > 643 {
		t.Fatalf("ops failed %d over the run; want 1428 × 0.45 = 642.6, floored", failed)
	}
	if got := s.bytesDone - float64(prev.BytesCompleted); got < 0 || got >= size {
		t.Fatalf("%.0f bytes delivered but not counted at the end; want less than one op", got)
	}
}

// TestLayoutStatsNoBytesWithoutOps renders port-saturation's LAYOUTSTATS
// every 10 s from 12 to 14 min (seed 1: streams behind the saturated port
// get fractions of an op per tick on some stripes; before whole ops a
// report sent bytes without an op at 12:50) and
// checks every report: a client sends
// bytes (completed or not delivered) and completion time only with the
// whole ops that carried them, and io_info4 says what latency4 says.
func TestLayoutStatsNoBytesWithoutOps(t *testing.T) {
	tw, err := New(mustLoad(t, "port-saturation"), 1, epoch)
	if err != nil {
		t.Fatal(err)
	}
	tw.Run(12 * 60)
	type key struct{ client, stateid, dev string }
	prev := map[key][2]models.FFIOLatency4{}
	checked := 0
	for i := 0; i < 6*2; i++ {
		tw.Run(10)
		for _, b := range tw.LayoutStats() {
			for _, r := range b.Reports {
				k := key{b.ClientID, r.Stateid.Other, r.DeviceID}
				now := [2]models.FFIOLatency4{r.LayoutUpdate.Read, r.LayoutUpdate.Write}
				if r.Read.Count != now[0].OpsCompleted || r.Read.Bytes != now[0].BytesCompleted ||
					r.Write.Count != now[1].OpsCompleted || r.Write.Bytes != now[1].BytesCompleted {
					t.Fatalf("%s: io_info4 read %+v write %+v disagree with latency4 %+v %+v", b.ClientID, r.Read, r.Write, now[0], now[1])
				}
				p := prev[k]
				for d, dir := range [2]string{"read", "write"} {
					l, q := now[d], p[d]
					dOps := l.OpsCompleted - q.OpsCompleted
					dFailed := (l.OpsRequested - l.OpsCompleted) - (q.OpsRequested - q.OpsCompleted)
					if l.BytesCompleted != q.BytesCompleted && dOps == 0 {
						t.Fatalf("%s at %s, %s on %s: %d %s bytes completed with no op completed", b.ClientID, tw.Elapsed(), k.stateid, k.dev, l.BytesCompleted-q.BytesCompleted, dir)
					}
					if l.AggregateCompletionTime != q.AggregateCompletionTime && dOps == 0 {
						t.Fatalf("%s at %s, %s on %s: %s completion time with no %s op completed", b.ClientID, tw.Elapsed(), k.stateid, k.dev, l.AggregateCompletionTime.Duration()-q.AggregateCompletionTime.Duration(), dir)
					}
					if l.BytesNotDelivered != q.BytesNotDelivered && dFailed == 0 {
						t.Fatalf("%s at %s, %s on %s: %d %s bytes not delivered with no op failed", b.ClientID, tw.Elapsed(), k.stateid, k.dev, l.BytesNotDelivered-q.BytesNotDelivered, dir)
					}
					if dOps > 0 {
						checked++
					}
				}
				prev[k] = now
			}
		}
	}
	if checked == 0 {
		t.Fatal("no op completed in any report")
	}
}
