package starvation

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ballast-io/ballast/analyzer/internal/golden"
	"github.com/ballast-io/ballast/models"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func subj(k models.SubjectKind, id string) models.Subject { return models.Subject{Kind: k, ID: id} }

// cluster: ports p0 (ds0, ds1) and p1 (ds2, ds3); 4 devices per DS, 3
// stripes per device; node nK reads every stripe of dsK evenly and runs job
// jK on 8 GPUs.
type cluster struct {
	health map[models.Subject]*Health
	order  []models.Subject
	util   map[string]float64 // per node
	ckpt   []string
	// lost is a DS that is down: its stripes report nothing, so they drop
	// out of the health list and of the paths of the nodes reading them.
	lost string
}

func newCluster() *cluster {
	c := &cluster{health: map[models.Subject]*Health{}, util: map[string]float64{}}
	add := func(s, parent models.Subject, util, lat float64) {
		c.health[s] = &Health{Subject: s, Parent: parent, Util: util, Latency: lat}
		c.order = append(c.order, s)
	}
	for p := range 2 {
		port := subj(models.SubjectPort, fmt.Sprintf("p%d", p))
		add(port, models.Subject{}, 0.4, math.NaN())
		for d := 2 * p; d < 2*p+2; d++ {
			ds := subj(models.SubjectDS, fmt.Sprintf("ds%d", d))
			add(ds, port, 0.4, 0.001)
			for v := range 4 {
				dev := subj(models.SubjectDevice, fmt.Sprintf("ds%d/nvme%d", d, v))
				add(dev, ds, 0.4, 0.0008)
				for s := range 3 {
					add(subj(models.SubjectStripe, fmt.Sprintf("ds%d/nvme%d/fh%d", d, v, s)), dev, math.NaN(), math.NaN())
				}
			}
		}
	}
	for n := range 4 {
		c.util[fmt.Sprintf("n%d", n)] = 0.9
	}
	return c
}

func (c *cluster) input() Input {
	var in Input
	for _, s := range c.order {
		if c.lost != "" && s.Kind == models.SubjectStripe && strings.HasPrefix(s.ID, c.lost+"/") {
			continue
		}
		in.Health = append(in.Health, *c.health[s])
	}
	for n := range 4 {
		node := fmt.Sprintf("n%d", n)
		for v := range 4 {
			if c.lost == fmt.Sprintf("ds%d", n) {
				break
			}
			for s := range 3 {
				in.Paths = append(in.Paths, Path{Node: node, Subject: subj(models.SubjectStripe, fmt.Sprintf("ds%d/nvme%d/fh%d", n, v, s)), Share: 1.0 / 12})
			}
		}
		for g := range 8 {
			in.GPUs = append(in.GPUs, GPU{ID: fmt.Sprintf("%s/gpu%d", node, g), Node: node, Job: fmt.Sprintf("j%d", n), Util: c.util[node]})
		}
	}
	in.Checkpointing = c.ckpt
	return in
}

// phase scripts ten 10-second ticks of one fault and the subject truly
// responsible ("" = not storage).
type phase struct {
	name  string
	truth string
	apply func(c *cluster)
}

var phases = []phase{
	{"healthy", "", func(c *cluster) {}},
	{"saturated device", "device:ds0/nvme1", func(c *cluster) {
		h := c.health[subj(models.SubjectDevice, "ds0/nvme1")]
		h.Util, h.Latency = 0.97, 0.006
		c.health[subj(models.SubjectDS, "ds0")].Latency = 0.0025
		c.util["n0"] = 0.5
	}},
	{"hot stripe", "stripe:ds1/nvme2/fh1", func(c *cluster) {
		c.health[subj(models.SubjectStripe, "ds1/nvme2/fh1")].Hot = true
		h := c.health[subj(models.SubjectDevice, "ds1/nvme2")]
		h.Util, h.Latency = 0.95, 0.004
		c.util["n1"] = 0.4
	}},
	{"DS lost", "ds:ds2", func(c *cluster) {
		c.lost = "ds2"
		c.health[subj(models.SubjectDS, "ds2")].Down = true
		for v := range 4 {
			c.health[subj(models.SubjectDevice, fmt.Sprintf("ds2/nvme%d", v))].Down = true
		}
		c.util["n2"] = 0.1
	}},
	{"saturated port", "port:p1", func(c *cluster) {
		c.health[subj(models.SubjectPort, "p1")].Util = 0.99
		c.health[subj(models.SubjectDS, "ds3")].Latency = 0.005
		c.util["n3"] = 0.55
	}},
	{"slow degraded device", "device:ds3/nvme0", func(c *cluster) {
		c.health[subj(models.SubjectDevice, "ds3/nvme0")].Latency = 0.01
		c.health[subj(models.SubjectDS, "ds3")].Latency = 0.003
		c.util["n3"] = 0.6
	}},
	{"idle, storage healthy", "", func(c *cluster) {
		c.util["n0"] = 0.2
		c.util["n2"] = 0.3
	}},
	{"checkpoint pause", "checkpoint:j1", func(c *cluster) {
		c.ckpt = []string{"j1"}
		c.util["n1"] = 0.3
	}},
}

// TestAttribution runs the phases in order, each for ten ticks and each
// followed by ten healthy ticks, and checks where the lost GPU-seconds went.
func TestAttribution(t *testing.T) {
	a, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]models.Finding{}
	tick := 0
	run := func(ph phase, n int) map[string]float64 {
		before := a.LostByCause()
		for range n {
			c := newCluster()
			ph.apply(c)
			now := t0.Add(time.Duration(tick) * 10 * time.Second)
			tick++
			if err := a.Observe(now, c.input()); err != nil {
				t.Fatal(err)
			}
			for _, f := range a.Findings(now) {
				if err := f.Validate(); err != nil {
					t.Fatal(err)
				}
				seen[f.ID] = f
			}
		}
		delta := map[string]float64{}
		for k, v := range a.LostByCause() {
			if d := v - before[k]; d > 1e-9 {
				delta[k] = d
			}
		}
		return delta
	}
	run(phases[0], 10)
	for _, ph := range phases[1:] {
		lost := run(ph, 10)
		total := 0.0
		for _, v := range lost {
			total += v
		}
		if total == 0 {
			t.Fatalf("phase %q: no idle GPU-seconds counted", ph.name)
		}
		if ph.truth == "" {
			if lost[NotStorage] < 0.99*total {
				t.Errorf("phase %q: %.0f of %.0f idle GPU-seconds blamed on storage (%v); want none", ph.name, total-lost[NotStorage], total, lost)
			}
		} else if share := lost[ph.truth] / total; share < 0.9 {
			t.Errorf("phase %q: %.0f%% of idle GPU-seconds on %s (%v); want ≥ 90%%", ph.name, 100*share, ph.truth, lost)
		}
		t.Logf("phase %-22s lost %6.0f GPU-s: %v", ph.name, total, lost)
		run(phases[0], 10)
	}
	out := make([]models.Finding, 0, len(seen))
	for _, f := range seen {
		out = append(out, f)
		if f.Active() {
			t.Errorf("finding %s still active after healthy ticks", f.ID)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	golden.Check(t, "attribution.json", out)
	subjects := map[string]bool{}
	for _, f := range out {
		subjects[f.Subject.String()] = true
	}
	for _, want := range []string{"device:ds0/nvme1", "stripe:ds1/nvme2/fh1", "ds:ds2", "port:p1", "device:ds3/nvme0", "job:j1"} {
		if !subjects[want] {
			t.Errorf("no gpu_starvation finding for %s; got %v", want, subjects)
		}
	}
	if len(out) != 6 {
		t.Errorf("got %d findings; want 6, one per phase with a cause", len(out))
	}
}

func TestRejectsBadInput(t *testing.T) {
	a, _ := New(Options{})
	bad := []Input{
		{GPUs: []GPU{{ID: "g", Util: math.NaN()}}},
		{GPUs: []GPU{{ID: "g", Util: 0.5}, {ID: "g", Util: 0.5}}},
		{GPUs: []GPU{{ID: "g", Util: 0.5, Before: -1}}},
		{Paths: []Path{{Node: "n", Subject: subj(models.SubjectDevice, "d"), Share: 2}}},
		{Health: []Health{{Subject: subj(models.SubjectDevice, "d")}, {Subject: subj(models.SubjectDevice, "d")}}},
	}
	for i, in := range bad {
		if err := a.Observe(t0.Add(time.Duration(i)*time.Second), in); err == nil {
			t.Errorf("input %d: got nil error; want one", i)
		}
	}
	if err := a.Observe(t0.Add(time.Hour), Input{}); err != nil {
		t.Fatal(err)
	}
	if err := a.Observe(t0, Input{}); err == nil {
		t.Error("Observe back in time: got nil error; want one")
	}
}

// TestFindingsForPeople: a sustained loss of a quarter of the GPU time is
// critical once it has lasted CriticalAfter; short episodes of one cause
// share one recurring info finding with their GPU-hours, published once
// they cost a GPU-minute together; Episodes still lists every episode on
// its own.
func TestFindingsForPeople(t *testing.T) {
	a, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	tick := 0
	step := func(ph func(c *cluster)) []models.Finding {
		c := newCluster()
		if ph != nil {
			ph(c)
		}
		now := t0.Add(time.Duration(tick) * 10 * time.Second)
		tick++
		if err := a.Observe(now, c.input()); err != nil {
			t.Fatal(err)
		}
		return a.Findings(now)
	}
	for range 5 {
		step(nil)
	}
	// DS lost: n2's 8 GPUs of 32 at 10 % for 3 minutes: 22 % of the GPU
	// time.
	lost := func(c *cluster) {
		c.lost = "ds2"
		c.health[subj(models.SubjectDS, "ds2")].Down = true
		c.util["n2"] = 0.1
	}
	var sev []models.Severity
	for range 18 {
		for _, f := range step(lost) {
			sev = append(sev, f.Severity)
		}
	}
	if len(sev) != 18 || sev[0] != models.SeverityWarning || sev[len(sev)-1] != models.SeverityCritical {
		t.Errorf("severities of the DS-loss finding %v; want warning at first, critical after 2 minutes", sev)
	}
	for range 10 {
		step(nil)
	}
	// Four one-tick blips on a slow device, a minute and a half apart:
	// 8 GPUs × 0.2 × 10 s = 16 GPU-s each, below MinEpisodeGPUSeconds.
	blip := func(c *cluster) {
		c.health[subj(models.SubjectDevice, "ds3/nvme0")].Latency = 0.01
		c.health[subj(models.SubjectDS, "ds3")].Latency = 0.003
		c.util["n3"] = 0.7
	}
	// blipThenQuiet returns the findings on ds3/nvme0 of one blip and the
	// eight quiet ticks after it.
	blipThenQuiet := func() []models.Finding {
		var on []models.Finding
		for i := range 9 {
			ph := blip
			if i > 0 {
				ph = nil
			}
			for _, f := range step(ph) {
				if f.Subject.ID == "ds3/nvme0" {
					on = append(on, f)
				}
			}
		}
		return on
	}
	var rec []models.Finding
	for range 4 {
		rec = append(rec, blipThenQuiet()...)
	}
	// Published once the four together cost a GPU-minute (64 GPU-s).
	if len(rec) != 1 {
		t.Fatalf("findings on ds3/nvme0: %d; want one, once the blips cost MinEpisodeGPUSeconds together", len(rec))
	}
	last := rec[0]
	if !strings.HasSuffix(last.ID, ":recurring") || last.Severity != models.SeverityInfo || last.Active() {
		t.Errorf("recurring finding %s severity %s active %v; want an id ending :recurring, info, ended", last.ID, last.Severity, last.Active())
	}
	if !strings.HasPrefix(last.Summary, "4 short starvation episodes blamed on device ds3/nvme0 (slow): 0.018 GPU-hours lost") {
		t.Errorf("summary %q; want 4 episodes and 0.018 GPU-hours (64 GPU-s)", last.Summary)
	}
	var eps []Episode
	for _, e := range a.Episodes() {
		if e.Finding.Subject.ID == "ds3/nvme0" {
			eps = append(eps, e)
		}
	}
	if len(eps) != 4 || eps[0].Reported.IsZero() || strings.HasSuffix(eps[0].Finding.ID, ":recurring") {
		t.Errorf("episodes on ds3/nvme0: %+v; want 4, each with its own id and a report time", eps)
	}

	// A fifth blip, now that the recurring finding is published, makes it
	// active again at the blip's own tick (not once the blip is over); it
	// ends again when the episode closes, and the episode counts as
	// reported at that tick.
	at := t0.Add(time.Duration(tick) * 10 * time.Second)
	seen := blipThenQuiet()
	if len(seen) < 2 || seen[0].ID != last.ID || !seen[0].Active() || !seen[0].LastSeen.Equal(at) {
		t.Fatalf("findings on ds3/nvme0 after a fifth blip: %+v; want %s active from %s, then ended", seen, last.ID, at)
	}
	end := seen[len(seen)-1]
	if end.ID != last.ID || end.Active() || !strings.HasPrefix(end.Summary, "5 short starvation episodes") {
		t.Errorf("last finding on ds3/nvme0 %s active %v %q; want the recurring one ended with 5 episodes", end.ID, end.Active(), end.Summary)
	}
	for _, f := range seen[:len(seen)-1] {
		if f.ID != last.ID || !f.Active() {
			t.Errorf("finding %s active %v while the fifth blip's episode is open; want the recurring one, active", f.ID, f.Active())
		}
	}
	eps = eps[:0]
	for _, e := range a.Episodes() {
		if e.Finding.Subject.ID == "ds3/nvme0" {
			eps = append(eps, e)
		}
	}
	if len(eps) != 1 || !eps[0].Reported.Equal(at) {
		t.Errorf("episodes on ds3/nvme0 after the fifth blip: %+v; want one, reported at %s", eps, at)
	}
}

// stripedLoss runs a node n0 (8 GPUs) reading a file striped evenly over
// four DSs ds0..ds3, roots or under a healthy port p0, two devices each:
// five healthy ticks, then ten with util and latency set by fault, GPUs at
// half their level. It returns the GPU-seconds lost per cause in the
// fault ticks.
func stripedLoss(t *testing.T, withPort bool, fault func(ds int) (util, lat float64)) map[string]float64 {
	t.Helper()
	a, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	port := subj(models.SubjectPort, "p0")
	in := func(faulty bool) Input {
		var in Input
		if withPort {
			in.Health = append(in.Health, Health{Subject: port, Util: 0.5, Latency: math.NaN()})
		}
		for d := range 4 {
			ds := subj(models.SubjectDS, fmt.Sprintf("ds%d", d))
			util, lat := 0.5, 0.001
			if faulty {
				util, lat = fault(d)
			}
			h := Health{Subject: ds, Util: util, Latency: lat}
			if withPort {
				h.Parent = port
			}
			in.Health = append(in.Health, h)
			for v := range 2 {
				dev := subj(models.SubjectDevice, fmt.Sprintf("ds%d/nvme%d", d, v))
				// A device's latency follows its DS's: the requests queue at
				// the DS's NIC.
				in.Health = append(in.Health, Health{Subject: dev, Parent: ds, Util: 0.3, Latency: lat * 0.8})
				in.Paths = append(in.Paths, Path{Node: "n0", Subject: dev, Share: 1.0 / 8})
			}
		}
		util := 0.9
		if faulty {
			util = 0.45
		}
		for g := range 8 {
			in.GPUs = append(in.GPUs, GPU{ID: fmt.Sprintf("n0/gpu%d", g), Node: "n0", Job: "j0", Util: util})
		}
		return in
	}
	for i := range 15 {
		if err := a.Observe(t0.Add(time.Duration(i)*10*time.Second), in(i >= 5)); err != nil {
			t.Fatal(err)
		}
	}
	return a.LostByCause()
}

// TestSaturatedSiblingExplainsSlowOnes: a node reading across four DSs,
// one saturated (its NIC full) and three merely slow, loses its GPU time
// to the saturated one alone, whether the DSs are roots or share a
// healthy port; with no DS saturated, every slow one keeps its share.
func TestSaturatedSiblingExplainsSlowOnes(t *testing.T) {
	for _, withPort := range []bool{false, true} {
		lost := stripedLoss(t, withPort, func(ds int) (float64, float64) {
			if ds == 0 {
				return 0.97, 0.008
			}
			return 0.6, 0.004 // slow: 4× the learned latency, not saturated
		})
		total := 0.0
		for _, v := range lost {
			total += v
		}
		if total == 0 || lost["ds:ds0"] < 0.99*total {
			t.Errorf("port %v: lost %v; want all on ds:ds0, the saturated DS", withPort, lost)
		}

		lost = stripedLoss(t, withPort, func(ds int) (float64, float64) {
			if ds == 0 {
				return 0.6, 0.008
			}
			return 0.6, 0.004
		})
		for d := range 4 {
			if k := fmt.Sprintf("ds:ds%d", d); lost[k] <= 0 {
				t.Errorf("port %v, none saturated: nothing on %s (%v); want every slow DS blamed", withPort, k, lost)
			}
		}
	}
}

// TestSlowestSiblingExplainsMildlySlowOnes: with no DS saturated, a node
// reading across four DSs waits for the slowest piece. One DS at 8× its
// healthy latency (behind an oversubscribed switch port the mds cannot
// see) and three at 2.5× (a checkpoint's writes draining): the three
// answer in under half the slowest's time, so the loss is the slow one's
// alone. At 4× (half the slowest's time) they stay blamed, as above.
func TestSlowestSiblingExplainsMildlySlowOnes(t *testing.T) {
	for _, withPort := range []bool{false, true} {
		lost := stripedLoss(t, withPort, func(ds int) (float64, float64) {
			if ds == 0 {
				return 0.6, 0.008
			}
			return 0.6, 0.0025
		})
		total := 0.0
		for _, v := range lost {
			total += v
		}
		if total == 0 || lost["ds:ds0"] < 0.99*total {
			t.Errorf("port %v: lost %v; want all on ds:ds0, the slowest DS", withPort, lost)
		}
	}
	if _, err := New(Options{DominantLatency: 1.5}); err == nil || !strings.Contains(err.Error(), "DominantLatency 1.5") {
		t.Errorf("DominantLatency 1.5: %v; want an error naming it", err)
	}
}

// TestHotOffPathDoesNotHideSlowDevice: a hot device the node does not
// read makes its DS no bottleneck of that node, so the slow device the
// node does read on another DS keeps the blame.
func TestHotOffPathDoesNotHideSlowDevice(t *testing.T) {
	a, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	ds0, ds1 := subj(models.SubjectDS, "ds0"), subj(models.SubjectDS, "ds1")
	hotDev, read0, slowDev := subj(models.SubjectDevice, "ds0/nvme0"), subj(models.SubjectDevice, "ds0/nvme1"), subj(models.SubjectDevice, "ds1/nvme0")
	for i := range 15 {
		faulty := i >= 5
		lat, util := 0.001, 0.9
		if faulty {
			lat, util = 0.01, 0.45
		}
		in := Input{
			Health: []Health{
				{Subject: ds0, Util: 0.5, Latency: 0.001},
				{Subject: hotDev, Parent: ds0, Util: 0.5, Latency: 0.001, Hot: faulty},
				{Subject: read0, Parent: ds0, Util: 0.3, Latency: 0.001},
				{Subject: ds1, Util: 0.5, Latency: 0.001},
				{Subject: slowDev, Parent: ds1, Util: 0.3, Latency: lat},
			},
			Paths: []Path{{Node: "n0", Subject: read0, Share: 0.5}, {Node: "n0", Subject: slowDev, Share: 0.5}},
		}
		for g := range 8 {
			in.GPUs = append(in.GPUs, GPU{ID: fmt.Sprintf("n0/gpu%d", g), Node: "n0", Job: "j0", Util: util})
		}
		if err := a.Observe(t0.Add(time.Duration(i)*10*time.Second), in); err != nil {
			t.Fatal(err)
		}
	}
	lost := a.LostByCause()
	total := 0.0
	for _, v := range lost {
		total += v
	}
	if total == 0 || lost["device:ds1/nvme0"] < 0.99*total {
		t.Errorf("lost %v; want all on device:ds1/nvme0, the slow device n0 reads", lost)
	}
}

// TestSharedLossCostsAGPUMinute: a checkpoint-like burst saturates all
// eight DSs a node reads evenly, so each DS's share of the GPUs' loss is
// an eighth. The GPUs lose a GPU-minute at the first tick (8 GPUs × 0.8 ×
// 10 s = 64 GPU-s), so every DS gets a finding of its own then, not once
// its own eighth reaches a GPU-minute (eight ticks later).
func TestSharedLossCostsAGPUMinute(t *testing.T) {
	a, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	var dss []models.Subject
	for d := range 8 {
		dss = append(dss, subj(models.SubjectDS, fmt.Sprintf("ds%d", d)))
	}
	var own map[string]models.Finding
	for i := range 3 {
		burst := i >= 1
		in := Input{}
		for _, ds := range dss {
			u := 0.5
			if burst {
				u = 0.97
			}
			dev := subj(models.SubjectDevice, ds.ID+"/nvme0")
			in.Health = append(in.Health, Health{Subject: ds, Util: u, Latency: 0.001}, Health{Subject: dev, Parent: ds, Util: 0.3, Latency: 0.001})
			in.Paths = append(in.Paths, Path{Node: "n0", Subject: dev, Share: 1.0 / 8})
		}
		util := 0.9
		if burst {
			util = 0.1
		}
		for g := range 8 {
			in.GPUs = append(in.GPUs, GPU{ID: fmt.Sprintf("n0/gpu%d", g), Node: "n0", Job: "j0", Util: util})
		}
		now := t0.Add(time.Duration(i) * 10 * time.Second)
		if err := a.Observe(now, in); err != nil {
			t.Fatal(err)
		}
		own = map[string]models.Finding{}
		for _, f := range a.Findings(now) {
			if !strings.HasSuffix(f.ID, ":recurring") {
				own[f.Subject.ID] = f
			}
		}
		if i == 1 && len(own) != len(dss) {
			t.Fatalf("findings at the burst's first tick: %v; want one of its own per DS (the GPUs lost 64 GPU-s)", own)
		}
	}
	for _, ds := range dss {
		f, ok := own[ds.ID]
		if !ok || !f.Active() {
			t.Fatalf("no active finding on %s: %v", ds, own)
		}
		// Its score stays its own share: 2 ticks × 64 GPU-s / 8.
		if want := math.Round(2*64.0/8/3600*1e4) / 1e4; f.Score != want {
			t.Errorf("%s score %v; want its share %v GPU-hours", ds, f.Score, want)
		}
	}
}

// TestHotCauseShownAtOnce: n3's 8 GPUs drop from 0.9 to 0.7 for one
// tick, 16 GPU-s, well under MinEpisodeGPUSeconds. Blamed on a device
// that is only slow, the episode waits (it may be a one-tick flap); blamed
// on a device a hotspot finding names (Hot), the fault is confirmed and
// the episode gets its own finding at that first tick.
func TestHotCauseShownAtOnce(t *testing.T) {
	dev := subj(models.SubjectDevice, "ds3/nvme0")
	for _, hot := range []bool{false, true} {
		a, err := New(Options{})
		if err != nil {
			t.Fatal(err)
		}
		var own []models.Finding
		for i := range 4 {
			c := newCluster()
			if i == 2 {
				h := c.health[dev]
				h.Latency = 0.01
				h.Hot = hot
				c.util["n3"] = 0.7
			}
			now := t0.Add(time.Duration(i) * 10 * time.Second)
			if err := a.Observe(now, c.input()); err != nil {
				t.Fatal(err)
			}
			for _, f := range a.Findings(now) {
				if f.Subject == dev && !strings.HasSuffix(f.ID, ":recurring") && i == 2 {
					own = append(own, f)
				}
			}
		}
		if hot && (len(own) != 1 || !own[0].Active() || own[0].Severity != models.SeverityWarning) {
			t.Errorf("hot device: findings of its own at the blip's tick %+v; want one, active, warning", own)
		}
		if !hot && len(own) != 0 {
			t.Errorf("slow device: findings of its own at the blip's tick %+v; want none (16 GPU-s is under MinEpisodeGPUSeconds)", own)
		}
		// The episode is still open (ExitAfter has not passed): reported
		// at its first tick when hot, not yet when only slow.
		var reported []time.Time
		for _, e := range a.Episodes() {
			if e.Finding.Subject == dev && !e.Reported.IsZero() {
				reported = append(reported, e.Reported)
			}
		}
		if hot && (len(reported) != 1 || !reported[0].Equal(t0.Add(20*time.Second))) {
			t.Errorf("hot device: episode reported at %v; want once, at its first tick %v", reported, t0.Add(20*time.Second))
		}
		if !hot && len(reported) != 0 {
			t.Errorf("slow device: episode reported at %v; want not yet", reported)
		}
	}
}

// TestPauseLastsWhileGPUsStayStopped: job j2's synchronous checkpoint
// hangs on ds2, lost mid-burst. The burst detector stops listing the job
// after two ticks (its write rate collapsed), but all its GPUs stay at 0
// for three more: that is still the checkpoint's pause, not ds2's. When
// the GPUs come back part way (0.5) while ds2 is still lost, their idle
// is ds2's. A job whose GPUs do not stop together (0.3, as in the
// "checkpoint pause" phase above) is not held in a pause once its burst
// is over.
func TestPauseLastsWhileGPUsStayStopped(t *testing.T) {
	a, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := newCluster()
	tick := 0
	step := func(n int) {
		t.Helper()
		observe(t, a, c, &tick, n)
	}
	step(5)
	c.ckpt, c.util["n2"] = []string{"j2"}, 0
	step(1)
	c.lost = "ds2"
	c.health[subj(models.SubjectDS, "ds2")].Down = true
	step(1)
	c.ckpt = nil // the detector no longer sees the burst
	step(3)
	lost := a.LostByCause()
	if lost["checkpoint:j2"] != 8*0.9*10*5 || lost["ds:ds2"] != 0 {
		t.Errorf("hung checkpoint: lost %v; want 360 GPU-s on checkpoint:j2 and none on ds:ds2", lost)
	}
	c.util["n2"] = 0.5
	step(2)
	lost = a.LostByCause()
	if lost["checkpoint:j2"] != 360 || math.Abs(lost["ds:ds2"]-8*0.4*10*2) > 1e-9 {
		t.Errorf("GPUs back part way: lost %v; want checkpoint:j2 still 360 and 64 GPU-s on ds:ds2", lost)
	}

	// Not stopped together: the pause ends with the burst.
	b, _ := New(Options{})
	c = newCluster()
	tick = 0
	a = b
	step(5)
	c.ckpt, c.util["n1"] = []string{"j1"}, 0.3
	step(2)
	c.ckpt = nil
	c.health[subj(models.SubjectDevice, "ds1/nvme2")].Util = 0.97
	step(2)
	if lost := a.LostByCause(); lost["device:ds1/nvme2"] == 0 {
		t.Errorf("GPUs at 0.3 after the burst: lost %v; want the saturated device blamed", lost)
	}
}

// TestPauseEndsWhenGPUsResume: job j1's synchronous checkpoint stops its
// GPUs for two ticks; the burst detector, whose rate window still holds
// the last writes, lists the burst for three more. At the first the GPUs
// are part-way back (0.5: the pause ended within the sample's second),
// which is still the pause; at the second they are back at their level
// (0.9), so the pause is over; at the third, and the tick after the
// burst, they starve at 0.5 behind a device saturated by another job,
// and that loss is the device's. GPUs that never stopped together in a
// burst (the "checkpoint pause" phase of TestAttribution, at 0.3) keep
// their loss on the checkpoint.
func TestPauseEndsWhenGPUsResume(t *testing.T) {
	a, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := newCluster()
	dev := c.health[subj(models.SubjectDevice, "ds1/nvme2")]
	tick := 0
	observe(t, a, c, &tick, 3)
	c.ckpt, c.util["n1"] = []string{"j1"}, 0
	observe(t, a, c, &tick, 2)
	c.util["n1"], dev.Util = 0.5, 0.97
	observe(t, a, c, &tick, 1)
	c.util["n1"], dev.Util = 0.9, 0.4
	observe(t, a, c, &tick, 1)
	c.util["n1"], dev.Util = 0.5, 0.97
	observe(t, a, c, &tick, 1)
	c.ckpt = nil
	observe(t, a, c, &tick, 1)
	lost := a.LostByCause()
	// 8 GPUs: two stopped ticks losing 0.9 of 10 s and one part-way back
	// losing 0.4 on the checkpoint; two starved ticks losing 0.4 on the
	// device.
	if math.Abs(lost["checkpoint:j1"]-176) > 1e-6 || math.Abs(lost["device:ds1/nvme2"]-64) > 1e-6 {
		t.Errorf("lost %v; want 176 GPU-s on checkpoint:j1 (its stopped ticks and the one part-way back) and 64 on device:ds1/nvme2", lost)
	}
}

// TestLevelFromBefore: the analyzer starts while a device saturated by a
// hot shard already starves n0's GPUs (at 0.5) and n1's GPUs are idle
// for a reason that is not storage (at 0.2). With the GPUs' earlier
// utilisation (0.9, from stored history) their loss is counted from the
// second tick, n0's on the device; without it n1 takes its utilisation
// for its level (its path is healthy: nothing is counted), and n0, on a
// path unhealthy since its first sight, is counted against a whole GPU
// (TestStarvedSinceFirstSight). A GPU seen before ignores Before, and a
// Before below the utilisation changes nothing.
func TestLevelFromBefore(t *testing.T) {
	run := func(before float64) map[string]float64 {
		t.Helper()
		a, err := New(Options{})
		if err != nil {
			t.Fatal(err)
		}
		c := newCluster()
		h := c.health[subj(models.SubjectDevice, "ds0/nvme1")]
		h.Util, h.Latency = 0.97, 0.006
		c.util["n0"], c.util["n1"] = 0.5, 0.2
		for i := range 4 {
			in := c.input()
			for k := range in.GPUs {
				in.GPUs[k].Before = before
				if i > 0 {
					in.GPUs[k].Before = 1 // seen before: ignored
				}
			}
			if err := a.Observe(t0.Add(time.Duration(i)*10*time.Second), in); err != nil {
				t.Fatal(err)
			}
		}
		return a.LostByCause()
	}
	lost := run(0.9)
	// Three ticks of 8 GPUs losing 0.4 of 10 s: 96 GPU-seconds.
	if got := lost["device:ds0/nvme1"]; math.Abs(got-96) > 1e-6 {
		t.Errorf("with earlier utilisation 0.9: device:ds0/nvme1 blamed for %v GPU-s; want 96: %v", got, lost)
	}
	// n1 loses 0.7, its level sinking a little (LevelTau) while the
	// loss is not storage's; n2 and n3 run at their 0.9.
	if got := lost[NotStorage]; got < 166 || got > 168 {
		t.Errorf("with earlier utilisation 0.9: not-storage %v GPU-s; want just under 168 (n1): %v", got, lost)
	}
	if len(lost) != 2 {
		t.Errorf("with earlier utilisation 0.9: lost %v; want the device and not-storage only", lost)
	}
	for _, before := range []float64{0, math.NaN(), 0.1} {
		lost := run(before)
		// Three ticks of 8 GPUs losing 0.5 of 10 s against a whole GPU.
		if math.Abs(lost["device:ds0/nvme1"]-120) > 1e-6 || lost[NotStorage] != 0 {
			t.Errorf("earlier utilisation %v: lost %v; want 120 GPU-s on device:ds0/nvme1 (n0, unproven) and no not-storage (n1's level is its first utilisation)", before, lost)
		}
	}
}

// TestStarvedSinceFirstSight: n0's GPUs run at 0.4 from their first
// reading behind a device that is saturated all along (a node behind a
// link too slow for its job, an mds started during a fault with no
// history); n1's run at 0.3 on a healthy path (a job held by its own
// loader). n0's loss is counted against a whole GPU and blamed on the
// device from the second tick; n1's never counts. Once n0's path is
// healthy for a tick its level is its own (0.4): the device saturated
// again with the GPUs where they were costs nothing more, and neither
// does a first reading on a healthy path (n1) when its path turns bad.
func TestStarvedSinceFirstSight(t *testing.T) {
	a, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := newCluster()
	dev := c.health[subj(models.SubjectDevice, "ds0/nvme1")]
	c.util["n0"], c.util["n1"] = 0.4, 0.3
	tick := 0
	step := func(n int) {
		t.Helper()
		observe(t, a, c, &tick, n)
	}
	dev.Util = 0.97
	step(4)
	lost := a.LostByCause()
	// Three ticks of 8 GPUs losing 0.6 of 10 s.
	if got := lost["device:ds0/nvme1"]; math.Abs(got-144) > 1e-6 {
		t.Errorf("starved since first sight: device:ds0/nvme1 blamed for %v GPU-s; want 144: %v", got, lost)
	}
	if len(lost) != 1 {
		t.Errorf("starved since first sight: lost %v; want the device only (n1's path is healthy)", lost)
	}
	dev.Util = 0.4
	step(1)
	dev.Util = 0.97
	c.health[subj(models.SubjectDevice, "ds1/nvme0")].Util = 0.97
	step(3)
	if got := a.LostByCause(); len(got) != 1 || got["device:ds0/nvme1"] != lost["device:ds0/nvme1"] {
		t.Errorf("after a healthy tick: lost %v; want nothing more (the levels are the GPUs' own)", got)
	}
}

// observe feeds a with c's input for n ticks 10 s apart, from *tick on.
func observe(t *testing.T, a *Analyzer, c *cluster, tick *int, n int) {
	t.Helper()
	for range n {
		if err := a.Observe(t0.Add(time.Duration(*tick)*10*time.Second), c.input()); err != nil {
			t.Fatal(err)
		}
		*tick++
	}
}

// TestLevelIsTheMeanOfNoisyReadings: a fed GPU's utilisation varies from
// sample to sample (the host's gaps between steps); its level is the mean
// of those readings, not their highest, so a storage fault is charged what
// it took from the GPU's typical utilisation. n0 reads 0.99, 0.93, … (mean
// 0.95) for 20 minutes, then half of that behind a saturated device.
func TestLevelIsTheMeanOfNoisyReadings(t *testing.T) {
	a, err := New(Options{LevelTau: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	c := newCluster()
	noise := []float64{0.99, 0.93, 0.96, 0.92, 0.98, 0.94, 0.95, 0.93} // mean 0.95
	tick := 0
	for i := range 120 {
		c.util["n0"] = noise[i%len(noise)]
		observe(t, a, c, &tick, 1)
	}
	if got := a.LostByCause(); len(got) != 0 {
		t.Fatalf("healthy noisy readings charged %v", got)
	}
	dev := c.health[subj(models.SubjectDevice, "ds0/nvme1")]
	dev.Util, dev.Latency = 0.97, 0.006
	want := 0.0
	for i := range 16 {
		c.util["n0"] = 0.5 * noise[i%len(noise)]
		want += 8 * 10 * (0.95 - c.util["n0"])
		observe(t, a, c, &tick, 1)
	}
	// 16 ticks of 8 GPUs losing 0.475 of 10 s on average: 608 GPU-s; the
	// highest reading (0.99) as the level would make it 659.
	if got := a.LostByCause()["device:ds0/nvme1"]; math.Abs(got-want) > 0.01*want {
		t.Errorf("device:ds0/nvme1 blamed for %.1f GPU-s; want %.1f (against the mean level 0.95): %v", got, want, a.LostByCause())
	}
}

// TestUnprovenAgainstFedPeers: a GPU starved since first sight is counted
// against what its fed peers show (0.98: the host's gaps keep a fed GPU
// under 1), not against a whole GPU; with no fed peer (TestStarvedSinceFirstSight:
// peers at 0.9) against 1.
func TestUnprovenAgainstFedPeers(t *testing.T) {
	a, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := newCluster()
	for _, n := range []string{"n1", "n2", "n3"} {
		c.util[n] = 0.98
	}
	c.util["n0"] = 0.4
	c.health[subj(models.SubjectDevice, "ds0/nvme1")].Util = 0.97
	tick := 0
	observe(t, a, c, &tick, 4)
	// Three ticks of 8 GPUs losing 0.58 of 10 s (the first tick is
	// first sight, when no peer is proven yet).
	if got := a.LostByCause()["device:ds0/nvme1"]; math.Abs(got-139.2) > 1e-6 {
		t.Errorf("unproven n0: device:ds0/nvme1 blamed for %v GPU-s; want 139.2 (against the fed peers' 0.98): %v", got, a.LostByCause())
	}
}

// TestHotDSBlamesItsSlowDrive: ds0 is flagged hot (its hotspot finding came
// a tick before its drive's) while one of its four drives is slow, not yet
// saturated or hot: the drive is the cause; a hot DS slows nothing by
// itself.
func TestHotDSBlamesItsSlowDrive(t *testing.T) {
	a, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := newCluster()
	tick := 0
	observe(t, a, c, &tick, 3)
	ds := c.health[subj(models.SubjectDS, "ds0")]
	ds.Hot, ds.Latency = true, 0.0025
	dev := c.health[subj(models.SubjectDevice, "ds0/nvme1")]
	dev.Util, dev.Latency = 0.7, 0.006
	c.util["n0"] = 0.5
	observe(t, a, c, &tick, 3)
	lost := a.LostByCause()
	// Three ticks of 8 GPUs losing 0.4 of 10 s.
	if got := lost["device:ds0/nvme1"]; math.Abs(got-96) > 1e-6 || len(lost) != 1 {
		t.Errorf("hot ds0 with slow ds0/nvme1: lost %v; want 96 GPU-s on device:ds0/nvme1 only", lost)
	}
}
