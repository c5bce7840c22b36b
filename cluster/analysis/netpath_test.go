package analysis

import (
	"context"
	"fmt"
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
		hot, summaries = hot[:0], summaries[:0]
		for _, f := range fs {
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
