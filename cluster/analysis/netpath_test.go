package analysis

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/storage"
)

// TestHotspotFindsSaturatedNetworkPaths: eight DSs of one pool, four
// drives each, read evenly by four GPU nodes. Every client sees ds03's
// devices at 8 ms against 1 ms everywhere else while ds03's drives are as
// busy as their peers' (another tenant's traffic fills its switch port:
// nothing in LAYOUTSTATS or diskstats carries it); gpu02 sees every device
// six times slower than the other clients do (its own port); edge00 five
// times slower, behind a link 16 times slower than theirs (its link's
// speed, nothing saturated). One drive of
// ds05 is slow (10 ms), and ds06's drives are all slow and twice as busy
// as their peers': a drive's latency, not a path's. The hotspot stage
// reports the network paths to ds03 and gpu02 and nothing else; before,
// it judged loads only and reported nothing.
func TestHotspotFindsSaturatedNetworkPaths(t *testing.T) {
	var up, util []storage.Series
	var tick []models.StripeDelta
	for i := range 8 {
		ds := fmt.Sprintf("ds%02d", i)
		up = append(up, series("up", 1, "node", ds, "pool", "fast"))
		for k := range 4 {
			dev := fmt.Sprintf("%s/nvme%dn1", ds, k)
			lat, u := time.Millisecond, 0.25
			switch {
			case i == 3:
				lat, u = 8*time.Millisecond, 0.22
			case i == 5 && k == 0:
				lat, u = 10*time.Millisecond, 0.6
			case i == 6:
				lat, u = 4*time.Millisecond, 0.55
			}
			util = append(util, series("", u, "node", ds, "device", fmt.Sprintf("nvme%dn1", k)))
			for c := range 5 {
				client, l := fmt.Sprintf("gpu%02d", c), lat
				switch c {
				case 2:
					l *= 6
				case 4:
					client, l = "edge00", l*5
				}
				tick = append(tick, read(client, dev, ds, 500, 1<<20, l))
			}
		}
	}
	a, err := New(nil, nil, Options{ScrapeInterval: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	q := exprQuerier{upQuery: up, utilQuery(a.hot.utilWindow()): util}
	for _, node := range []string{"gpu00", "gpu01", "gpu02", "gpu03", "edge00"} {
		speed := 50e9 // 400 GbE
		if node == "edge00" {
			speed = 3.125e9 // 25 GbE
		}
		q[nicSpeedQuery] = append(q[nicSpeedQuery], series("", speed, "node", node, "device", "eth0"))
		q[a.st.nicRateQuery()] = append(q[a.st.nicRateQuery()], series("", 0.3*speed, "node", node, "device", "eth0"))
		q[a.st.nicReceiveQuery()] = append(q[a.st.nicReceiveQuery()], series("", 0.3*speed, "node", node, "device", "eth0"))
	}
	var hot []string
	var summaries []string
	for s := range 5 {
		hot, summaries = hot[:0], summaries[:0]
		for _, f := range hotspotTick(t, a, s, q, tick) {
			if f.Active() {
				hot = append(hot, f.Subject.String())
				summaries = append(summaries, f.Summary)
			}
		}
	}
	if want := []string{"client:gpu02", "ds:ds03"}; !slices.Equal(hot, want) {
		t.Fatalf("hot subjects %v; want %v (%q)", hot, want, summaries)
	}
	for i, want := range []string{
		"network path to gpu02 (port or NIC) saturated: it sees 15.19 ms on the devices it reads where other clients see 5.06 ms",
		"network path to ds03 (port or NIC) saturated: clients see 8.00 ms on its devices against 1.00 ms on its peers', its drives 22% busy (its peers' 25%)",
	} {
		if !strings.HasPrefix(summaries[i], want) {
			t.Errorf("summary %q; want it to start %q", summaries[i], want)
		}
	}
}

// TestAFewReadsDoNotMakeAPathSlow: eight DSs of one pool, four drives
// each, read evenly by four GPU nodes at 1 ms. For one tick reads pause
// (a synchronous checkpoint stopped the job) and only ds00's drives
// complete one read each, at 8 ms behind the checkpoint's writes; then
// reads go on at 1 ms everywhere. The smoothed latency weighs reads, so
// those four reads do not make ds00's devices slow, and the hotspot stage
// reports no network path. Before, the tick moved the average like any
// other (to 2.98 ms, then 2.42 ms), against peers whose average had no
// such tick, and ds00's path was reported from two ticks later.
func TestAFewReadsDoNotMakeAPathSlow(t *testing.T) {
	up, normal := evenPool(func(int) time.Duration { return time.Millisecond })
	var blip []models.StripeDelta
	for k := range 4 {
		blip = append(blip, read("gpu00", fmt.Sprintf("ds00/nvme%dn1", k), "ds00", 1, 1<<20, 8*time.Millisecond))
	}
	a, err := New(nil, nil, Options{ScrapeInterval: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	q := exprQuerier{upQuery: up}
	for s := range 9 {
		tick := normal
		if s == 4 {
			tick = blip
		}
		for _, f := range hotspotTick(t, a, s, q, tick) {
			if f.Active() {
				t.Errorf("tick %d: %s %q; want no hotspot", s, f.Subject, f.Summary)
			}
		}
		if s == 4 {
			dev := models.Subject{Kind: models.SubjectDevice, ID: "ds00/nvme0n1"}
			if got := a.st.latency[dev]; got > 1.2e-3 {
				t.Errorf("ds00/nvme0n1's smoothed latency after one read at 8 ms among 2,000 a tick at 1 ms: %.2f ms; want under 1.2 ms", got*1e3)
			}
		}
	}
}

// TestLatencyAverageWeighsReads: a device reading 2,000 times a 10 s tick
// at 1 ms. A tick of 4 reads at 8 ms hardly moves its average; a slow
// path's first tick, 1,500 reads at 8 ms (fewer reads, more read time),
// moves it as a 30 s time average does; so does the first tick after a
// fault, 2,500 reads at 1 ms (more reads, less read time).
func TestLatencyAverageWeighsReads(t *testing.T) {
	const dt = 10.0
	w := 1 - math.Exp(-dt/latencySmoothing.Seconds())
	var steady latencyAvg
	ok := false
	for range 10 {
		steady, ok = steady.add(ok, 1e-3, 2000, dt, w), true
	}
	if got := steady.add(true, 8e-3, 4, dt, w).mean; got > 1.05e-3 {
		t.Errorf("after 4 reads at 8 ms: %.3f ms; want under 1.05 ms", got*1e3)
	}
	slow := steady.add(true, 8e-3, 1500, dt, w)
	if want := 1e-3 + w*7e-3; math.Abs(slow.mean-want) > 1e-9 {
		t.Errorf("after 1,500 reads at 8 ms: %.3f ms; want %.3f ms, as a time average", slow.mean*1e3, want*1e3)
	}
	for range 20 {
		slow = slow.add(true, 8e-3, 1500, dt, w)
	}
	back := slow.add(true, 1e-3, 2500, dt, w)
	if want := slow.mean + w*(1e-3-slow.mean); math.Abs(back.mean-want) > 1e-9 {
		t.Errorf("after 2,500 reads at 1 ms: %.3f ms; want %.3f ms, as a time average", back.mean*1e3, want*1e3)
	}
	if got := (latencyAvg{}).add(false, math.NaN(), 0, dt, w); !math.IsNaN(got.mean) {
		t.Errorf("no reads ever: mean %v; want NaN", got.mean)
	}
}

// hotspotTick runs the identity, hotspot and starvation stages for the
// s-th 10 s tick on q's answers and the tick's stripe deltas, and returns
// the hotspot stage's findings.
func hotspotTick(t *testing.T, a *Analysis, s int, q Querier, tick []models.StripeDelta) []models.Finding {
	t.Helper()
	now := t0.Add(time.Duration(s) * 10 * time.Second)
	a.q = q
	a.stripes.tick = slices.Clone(tick)
	if _, err := a.ident.Run(context.Background(), now); err != nil {
		t.Fatal(err)
	}
	fs, err := a.hot.Run(context.Background(), now)
	if err != nil {
		t.Fatalf("tick %d: hotspot stage: %v", s, err)
	}
	if _, err := a.st.Run(context.Background(), now); err != nil {
		t.Fatalf("tick %d: starvation stage: %v", s, err)
	}
	return fs
}

// TestNetworkPathJudgedOnThisTick: eight DSs of one pool read evenly at
// 1 ms; from the fourth tick every read of ds03 takes 8 ms (its port
// filled by traffic the mds does not see). The hotspot stage judges the
// path on the tick's smoothed latency, so ds03's finding is confirmed at
// the fifth tick (EnterAfter 10 s: the second slow tick). Before, the
// paths read the starvation stage's latency of the previous tick, which
// runs after the hotspot stage, and the finding came a tick later.
func TestNetworkPathJudgedOnThisTick(t *testing.T) {
	up, normal := evenPool(func(int) time.Duration { return time.Millisecond })
	_, slow := evenPool(func(ds int) time.Duration {
		if ds == 3 {
			return 8 * time.Millisecond
		}
		return time.Millisecond
	})
	a, err := New(nil, nil, Options{ScrapeInterval: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	q := exprQuerier{upQuery: up}
	first := -1
	for s := range 8 {
		tick := normal
		if s >= 3 {
			tick = slow
		}
		for _, f := range hotspotTick(t, a, s, q, tick) {
			if f.Active() && f.Subject.String() == "ds:ds03" && first < 0 {
				first = s
			}
		}
	}
	if first != 4 {
		t.Errorf("ds03's network path first reported at tick %d; want 4 (slow from tick 3, confirmed on the second slow tick)", first)
	}
}

// evenPool is eight DSs of pool fast (their up series), four drives each,
// and a tick in which each of four GPU nodes completes 500 reads of 1 MiB
// on every drive, those of DS i taking lat(i) each.
func evenPool(lat func(ds int) time.Duration) ([]storage.Series, []models.StripeDelta) {
	var up []storage.Series
	var tick []models.StripeDelta
	for i := range 8 {
		ds := fmt.Sprintf("ds%02d", i)
		up = append(up, series("up", 1, "node", ds, "pool", "fast"))
		for k := range 4 {
			dev := fmt.Sprintf("%s/nvme%dn1", ds, k)
			for c := range 4 {
				tick = append(tick, read(fmt.Sprintf("gpu%02d", c), dev, ds, 500, 1<<20, lat(i)))
			}
		}
	}
	return up, tick
}
