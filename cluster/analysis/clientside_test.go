package analysis

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/ballast-io/ballast/analyzer/starvation"
	"github.com/ballast-io/ballast/models"
)

// read is one client's completed reads of a device in a 10 s tick: ops
// requests of size bytes, each taking lat.
func read(client, dev, ds string, ops int, size uint64, lat time.Duration) models.StripeDelta {
	d := delta(dev, ds, 10*time.Second, uint64(ops), uint64(ops)*size, 0, 0, time.Duration(ops)*lat)
	d.Client = client
	d.StripeKey.FileHandle = "fh-" + client + "-" + dev
	return d
}

// TestClientLatencies: who is slow on its own side. The slow client sees
// both devices five times slower than its two peers do; a device slow for
// every reader makes no client slow; a client reading in 64 KiB requests
// is faster per operation and slower per byte than peers reading 1 MiB,
// and one reading 1 MiB beside 64 KiB readers the other way round: neither
// is slow for its request size alone; a client alone on its device is not
// compared.
func TestClientLatencies(t *testing.T) {
	const mib = 1 << 20
	tick := []models.StripeDelta{
		read("slow", "d1", "ds0", 100, mib, 6*time.Millisecond),
		read("slow", "d2", "ds0", 100, mib, 6*time.Millisecond),
		read("peer1", "d1", "ds0", 500, mib, 1200*time.Microsecond),
		read("peer1", "d2", "ds0", 500, mib, 1200*time.Microsecond),
		read("peer2", "d1", "ds0", 500, mib, 1200*time.Microsecond),
		// d3 is slow for everyone.
		read("peer1", "d3", "ds1", 500, mib, 10*time.Millisecond),
		read("peer2", "d3", "ds1", 500, mib, 10*time.Millisecond),
		// small and large requests on d4.
		read("small", "d4", "ds1", 2000, 64<<10, 1100*time.Microsecond),
		read("large", "d4", "ds1", 500, mib, 1300*time.Microsecond),
		// alone on d5.
		read("alone", "d5", "ds1", 100, mib, 50*time.Millisecond),
	}
	got := clientLatencies(clientReads(tick))
	want := map[string]bool{"slow": true, "peer1": false, "peer2": false, "small": false, "large": false}
	for c, slow := range want {
		l, ok := got[c]
		if !ok {
			t.Errorf("%s: not compared; want compared", c)
			continue
		}
		if l.slowSide() != slow {
			t.Errorf("%s: own %.2f ms, expected %.2f ms, slow on its own side %v; want %v", c, l.own*1e3, l.expected*1e3, l.slowSide(), slow)
		}
	}
	if l := got["slow"]; math.Abs(l.own-0.006) > 1e-9 || math.Abs(l.expected-0.0012) > 1e-9 {
		t.Errorf("slow: own %v, expected %v; want 6 ms against its peers' 1.2 ms", l.own, l.expected)
	}
	if _, ok := got["alone"]; ok {
		t.Errorf("alone compared (%+v); it shares no device with another client", got["alone"])
	}
}

// TestStarvationBlamesAClientSlowOnItsOwnSide: gpu00 sees every device
// five times slower than gpu01 does (its link, not the storage: no NIC
// speed is known, so only the comparison tells), and both nodes' GPUs
// drop to half. gpu00's loss is blamed on client:gpu00, not on the devices
// its slow reads would make look slow; gpu01's is not storage.
func TestStarvationBlamesAClientSlowOnItsOwnSide(t *testing.T) {
	a, err := New(nil, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tickAt := func(slowLat time.Duration) []models.StripeDelta {
		var tick []models.StripeDelta
		for k := range 4 {
			dev := fmt.Sprintf("ds0%d/nvme0n1", k)
			tick = append(tick, read("gpu00", dev, fmt.Sprintf("ds0%d", k), 200, 1<<20, slowLat),
				read("gpu01", dev, fmt.Sprintf("ds0%d", k), 200, 1<<20, time.Millisecond))
		}
		return tick
	}
	gpus := func(util float64) exprQuerier {
		q := exprQuerier{}
		for _, node := range []string{"gpu00", "gpu01"} {
			for g := range 4 {
				q[gpuQuery] = append(q[gpuQuery], series("ballast_gpu_utilization_ratio", util, "node", node, "gpu", fmt.Sprint(g)))
			}
		}
		return q
	}
	steps := []struct {
		util float64
		lat  time.Duration
	}{{1, time.Millisecond}, {1, time.Millisecond}, {1, time.Millisecond}, {0.5, 5 * time.Millisecond}, {0.5, 5 * time.Millisecond}, {0.5, 5 * time.Millisecond}}
	for s, st := range steps {
		starvationTick(t, a, s, gpus(st.util), tickAt(st.lat))
	}
	lost := a.st.an.LostByCause()
	if lost["client:gpu00"] < 40 {
		t.Errorf("client:gpu00 blamed for %v GPU-s; want most of gpu00's 60 (3 ticks × 4 GPUs × 5 s): %v", lost["client:gpu00"], lost)
	}
	for cause, v := range lost {
		if cause != "client:gpu00" && cause != starvation.NotStorage {
			t.Errorf("%s blamed for %v GPU-s; want only client:gpu00 (the devices are as fast as ever for gpu01)", cause, v)
		}
	}
	if lost[starvation.NotStorage] < 55 {
		t.Errorf("not-storage %v GPU-s; want about gpu01's 60 and what gpu00 lost before its side was judged slow", lost[starvation.NotStorage])
	}
}

// starvationTick runs the identity, load and starvation stages for the
// s-th 10 s tick on q's answers and the tick's stripe deltas.
func starvationTick(t *testing.T, a *Analysis, s int, q Querier, tick []models.StripeDelta) {
	t.Helper()
	now := t0.Add(time.Duration(s) * 10 * time.Second)
	a.q = q
	a.stripes.tick = slices.Clone(tick)
	if _, err := a.ident.Run(context.Background(), now); err != nil {
		t.Fatal(err)
	}
	a.hot.loads = a.hot.tracker.loads(a.stripes.tick, a.ident.Pools())
	if _, err := a.st.Run(context.Background(), now); err != nil {
		t.Fatalf("tick %d: %v", s, err)
	}
}
