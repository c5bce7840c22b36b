package hotspot

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ballast-io/ballast/analyzer/internal/golden"
	"github.com/ballast-io/ballast/models"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// scenario is a scripted cluster: 4 DS × 5 devices, 8 ports, 20 stripes per
// device, ticks every 10 s. Hooks change one tick's loads.
type scenario struct {
	ticks int
	hook  func(tick int, loads []Load, stripes []models.StripeDelta) []models.StripeDelta
}

func devID(ds, dev int) string { return fmt.Sprintf("ds%02d/nvme%d", ds, dev) }

func (sc scenario) run(t *testing.T, d *Detector) map[string]models.Finding {
	t.Helper()
	r := rand.New(rand.NewPCG(11, 12))
	noise := func() float64 { return 0.9 + 0.2*r.Float64() }
	seen := map[string]models.Finding{}
	for tick := range sc.ticks {
		now := t0.Add(time.Duration(tick) * 10 * time.Second)
		var loads []Load
		var stripes []models.StripeDelta
		for ds := range 4 {
			dsl := NewLoad(models.Subject{Kind: models.SubjectDS, ID: fmt.Sprintf("ds%02d", ds)}, "")
			dsl.Values[IOPS] = 0
			dsl.Values[BytesPerSec] = 0
			for dev := range 5 {
				l := NewLoad(models.Subject{Kind: models.SubjectDevice, ID: devID(ds, dev)}, "nvme")
				l.Values[IOPS] = 2000 * noise()
				l.Values[BytesPerSec] = 200e6 * noise()
				l.Values[Utilization] = 0.4 * noise()
				l.Values[Latency] = 0.0005 * noise()
				loads = append(loads, l)
				dsl.Values[IOPS] += l.Values[IOPS]
				dsl.Values[BytesPerSec] += l.Values[BytesPerSec]
				for s := range 20 {
					stripes = append(stripes, models.StripeDelta{
						StripeKey: models.StripeKey{Client: "gpu01", DeviceID: devID(ds, dev), FileHandle: fmt.Sprintf("fh%02d", s)},
						DS:        fmt.Sprintf("ds%02d", ds), End: now, Duration: 10 * time.Second,
						Read: models.StripeIO{BytesCompleted: uint64(1e8 * noise())},
					})
				}
			}
			loads = append(loads, dsl)
		}
		for p := range 8 {
			l := NewLoad(models.Subject{Kind: models.SubjectPort, ID: fmt.Sprintf("sw1/p%d", p)}, "")
			l.Values[BytesPerSec] = 1e9 * noise()
			l.Values[Utilization] = 0.4 * noise()
			loads = append(loads, l)
		}
		if sc.hook != nil {
			stripes = sc.hook(tick, loads, stripes)
		}
		if err := d.Observe(now, Input{Loads: loads, Stripes: stripes}); err != nil {
			t.Fatal(err)
		}
		for _, f := range d.Findings(now) {
			if err := f.Validate(); err != nil {
				t.Fatalf("tick %d: invalid finding: %v", tick, err)
			}
			seen[f.ID] = f
		}
	}
	return seen
}

func findLoad(loads []Load, id string) *Load {
	for i := range loads {
		if loads[i].Subject.ID == id {
			return &loads[i]
		}
	}
	panic("no load " + id)
}

func sorted(m map[string]models.Finding) []models.Finding {
	out := make([]models.Finding, 0, len(m))
	for _, f := range m {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// TestHotDeviceAndStripe: ds01/nvme3 runs at 3× from tick 12 to 30 because
// stripe fh07 on it takes 20× its share; a one-tick spike on ds02/nvme1 at
// tick 40, a 1.3× device (above the mean, inside the band) and a degrading
// drive with 10× latency but ordinary load (ds02/nvme4) must not fire.
func TestHotDeviceAndStripe(t *testing.T) {
	d, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	hot := devID(1, 3)
	sc := scenario{ticks: 60, hook: func(tick int, loads []Load, stripes []models.StripeDelta) []models.StripeDelta {
		findLoad(loads, devID(3, 0)).Values[IOPS] *= 1.3
		findLoad(loads, devID(2, 4)).Values[Latency] *= 10
		if tick >= 12 && tick <= 30 {
			l := findLoad(loads, hot)
			l.Values[IOPS] *= 3
			l.Values[BytesPerSec] *= 3
			l.Values[Utilization] = 0.95
			for i := range stripes {
				if stripes[i].DeviceID == hot && stripes[i].FileHandle == "fh07" {
					stripes[i].Read.BytesCompleted *= 20
				}
			}
		}
		if tick == 40 {
			findLoad(loads, devID(2, 1)).Values[IOPS] *= 5
		}
		return stripes
	}}
	got := sc.run(t, d)
	golden.Check(t, "hot_device_and_stripe.json", sorted(got))

	var devF, stripeF []models.Finding
	for _, f := range got {
		switch f.Subject {
		case models.Subject{Kind: models.SubjectDevice, ID: hot}:
			devF = append(devF, f)
		case models.Subject{Kind: models.SubjectStripe, ID: hot + "/fh07"}:
			stripeF = append(stripeF, f)
		default:
			t.Errorf("unexpected finding %s: %s", f.ID, f.Summary)
		}
	}
	if len(devF) != 1 {
		t.Fatalf("got %d findings for the hot device; want exactly 1 (no flapping)", len(devF))
	}
	f := devF[0]
	if want := t0.Add(120 * time.Second); !f.Start.Equal(want) {
		t.Errorf("device finding starts %s; want the onset %s", f.Start, want)
	}
	if f.Active() || f.End.Before(t0.Add(300*time.Second)) {
		t.Errorf("device finding end %s; want it closed after the load fell at 300 s", f.End)
	}
	named := false
	for _, e := range f.Evidence {
		if e.Name == "stripe_share" && e.Series == hot+"/fh07" && e.Value > 0.4 {
			named = true
		}
	}
	if !named {
		t.Errorf("device finding does not name stripe fh07 with its share: %+v", f.Evidence)
	}
	if len(stripeF) != 1 {
		t.Errorf("got %d findings for the hot stripe; want 1", len(stripeF))
	}
}

// TestNoFlapping: a device alternating between 1.6× and 1.3× its peers
// (above enter, then between exit and enter) keeps one finding.
func TestNoFlapping(t *testing.T) {
	d, _ := New(Options{})
	sc := scenario{ticks: 40, hook: func(tick int, loads []Load, stripes []models.StripeDelta) []models.StripeDelta {
		l := findLoad(loads, devID(0, 0))
		l.Values[IOPS] = 2000 * 2.0
		if tick%2 == 1 && tick > 6 {
			l.Values[IOPS] = 2000 * 1.4
		}
		return stripes
	}}
	got := sc.run(t, d)
	if len(got) != 1 {
		var ids []string
		for id := range got {
			ids = append(ids, id)
		}
		t.Fatalf("got findings %s; want exactly one", strings.Join(ids, ", "))
	}
	for _, f := range got {
		if !f.Active() {
			t.Errorf("finding %s ended while the device stayed above the exit band", f.ID)
		}
	}
}

func TestObserveRejectsTimeGoingBack(t *testing.T) {
	d, _ := New(Options{})
	if err := d.Observe(t0, Input{}); err != nil {
		t.Fatal(err)
	}
	if err := d.Observe(t0.Add(-time.Second), Input{}); err == nil {
		t.Fatal("Observe with an earlier time: got nil error; want one")
	}
}

func TestOptionsValidated(t *testing.T) {
	if _, err := New(Options{EnterScore: 2, ExitScore: 3}); err == nil {
		t.Fatal("New with ExitScore above EnterScore: got nil error; want one")
	}
}

// TestNotHotspots: a checkpoint writing eight stripes at 40× the read rate
// of the dataset stripes (writes are compared with writes), a device with 3×
// its peers' IOPS but 5 % utilisation (below the floor), a device at its
// share of IOPS whose drive is 98 % busy against peers at 60 % (utilisation
// gates, it opens nothing) and a popular stripe on a device with room to
// spare are not hotspots.
func TestNotHotspots(t *testing.T) {
	d, _ := New(Options{})
	sc := scenario{ticks: 30, hook: func(tick int, loads []Load, stripes []models.StripeDelta) []models.StripeDelta {
		for i := range 8 {
			stripes = append(stripes, models.StripeDelta{
				StripeKey: models.StripeKey{Client: "gpu01", DeviceID: devID(i%4, i%5), FileHandle: fmt.Sprintf("ckpt%d", i)},
				DS:        fmt.Sprintf("ds%02d", i%4), Duration: 10 * time.Second,
				Write: models.StripeIO{BytesCompleted: 4e9},
			})
		}
		// Devices are busy (so only comparing writes with writes keeps the
		// checkpoint's stripes from being hot) except two quiet ones.
		for i := range loads {
			if loads[i].Subject.Kind == models.SubjectDevice {
				loads[i].Values[Utilization] = 0.6
			}
		}
		findLoad(loads, devID(0, 2)).Values[Utilization] = 0.05
		findLoad(loads, devID(0, 2)).Values[IOPS] *= 3
		findLoad(loads, devID(3, 4)).Values[Utilization] = 0.05
		findLoad(loads, devID(1, 1)).Values[Utilization] = 0.98
		for i := range stripes {
			if stripes[i].DeviceID == devID(3, 4) && stripes[i].FileHandle == "fh03" {
				stripes[i].Read.BytesCompleted *= 20
			}
		}
		return stripes
	}}
	for _, f := range sc.run(t, d) {
		t.Errorf("unexpected finding %s: %s", f.ID, f.Summary)
	}
}

// TestCheckpointStripesBesideLogs: every device also holds a node's log
// file, written at 16 KB/s (a training job's logs, as the twin writes them).
// Eight checkpoint stripes written at 400 MB/s each are not hot against
// that trickle (a log stripe is no writing peer), and one checkpoint stripe
// written at 10× the other seven still is.
func TestCheckpointStripesBesideLogs(t *testing.T) {
	run := func(hot bool) []models.Finding {
		d, _ := New(Options{})
		sc := scenario{ticks: 30, hook: func(tick int, loads []Load, stripes []models.StripeDelta) []models.StripeDelta {
			for i := range loads {
				if loads[i].Subject.Kind == models.SubjectDevice {
					loads[i].Values[Utilization] = 0.6
				}
			}
			for ds := range 4 {
				for dev := range 5 {
					stripes = append(stripes, models.StripeDelta{
						StripeKey: models.StripeKey{Client: "gpu01", DeviceID: devID(ds, dev), FileHandle: "log"},
						DS:        fmt.Sprintf("ds%02d", ds), Duration: 10 * time.Second,
						Write: models.StripeIO{BytesCompleted: 160e3},
					})
				}
			}
			for i := range 8 {
				b := uint64(4e9)
				if hot && i == 5 {
					b *= 10
				}
				stripes = append(stripes, models.StripeDelta{
					StripeKey: models.StripeKey{Client: "gpu01", DeviceID: devID(i%4, i%5), FileHandle: fmt.Sprintf("ckpt%d", i)},
					DS:        fmt.Sprintf("ds%02d", i%4), Duration: 10 * time.Second,
					Write: models.StripeIO{BytesCompleted: b},
				})
			}
			return stripes
		}}
		return sorted(sc.run(t, d))
	}
	for _, f := range run(false) {
		t.Errorf("checkpoint beside log trickles: unexpected finding %s: %s", f.ID, f.Summary)
	}
	want := models.Subject{Kind: models.SubjectStripe, ID: devID(1, 0) + "/ckpt5"}
	fs := run(true)
	if len(fs) != 1 || fs[0].Subject != want {
		t.Errorf("one checkpoint stripe at 10× the others: got %v; want one finding on %s", fs, want)
	}
}

// TestNetworkPaths: six DSs of a pool whose devices answer in 0.2 ms.
// ds03's devices all answer in 2 ms while its drives are barely busy (its
// port full of another tenant's traffic); ds04 has one 5 ms drive (a
// drive, not a path); ds05's devices are all slow but its drives twice as
// busy as their peers' (the drives, not the path). Client gpu03 sees 3 ms
// where the other clients see 0.5 ms on the same devices; gpu01 sees 0.6
// ms (within SlowFactor). Only ds03 and gpu03 are reported, after
// EnterAfter, as network paths (their own id, beside any load finding on
// the same subject), naming the NIC when it is saturated; they close
// ExitAfter after the latency recovers.
func TestNetworkPaths(t *testing.T) {
	d, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	paths := func(slow bool) []PathLoad {
		var out []PathLoad
		for i := range 6 {
			p := NewPathLoad(models.Subject{Kind: models.SubjectDS, ID: fmt.Sprintf("ds%02d", i)}, "fast")
			p.DriveUtil, p.NICUtil = 0.2, 0.3
			for k := range 4 {
				lat := 0.0002
				switch {
				case slow && i == 3:
					lat = 0.002
					p.DriveUtil = 0.05
				case i == 4 && k == 0:
					lat = 0.005
				case i == 5:
					lat, p.DriveUtil = 0.001, 0.45
				}
				p.DeviceLatencies = append(p.DeviceLatencies, lat)
			}
			out = append(out, p)
		}
		for c, own := range []float64{0.0005, 0.0006, 0.0005, 0.003} {
			p := NewPathLoad(models.Subject{Kind: models.SubjectClient, ID: fmt.Sprintf("gpu%02d", c)}, "")
			if !slow && c == 3 {
				own = 0.0005
			}
			p.Latency, p.Expected, p.NICUtil = own, 0.0005, 0.2
			if c == 3 {
				p.NICUtil = 0.95
			}
			out = append(out, p)
		}
		return out
	}
	active := func(now time.Time) (subjects, summaries []string) {
		for _, f := range d.Findings(now) {
			if f.Active() {
				subjects = append(subjects, f.Subject.String())
				summaries = append(summaries, f.ID+" "+f.Summary)
			}
		}
		return
	}
	var subjects, summaries, first []string
	for tick := range 10 {
		now := t0.Add(time.Duration(tick) * 10 * time.Second)
		if err := d.Observe(now, Input{Paths: paths(tick < 4)}); err != nil {
			t.Fatal(err)
		}
		subjects, summaries = active(now)
		switch tick {
		case 0:
			if len(subjects) != 0 {
				t.Errorf("tick 0: active %v; want none before EnterAfter", subjects)
			}
		case 1, 5:
			if want := []string{"client:gpu03", "ds:ds03"}; !slices.Equal(subjects, want) {
				t.Fatalf("tick %d: active %v; want %v (%q)", tick, subjects, want, summaries)
			}
			if tick == 1 {
				first = slices.Clone(summaries)
			}
		}
	}
	if len(subjects) != 0 {
		t.Errorf("60 s after the last slow tick: active %v; want none (ExitAfter)", subjects)
	}
	for i, want := range []string{
		"hotspot:client:gpu03:network:1767225600000 network path to gpu03 (NIC) saturated: it sees 3.00 ms on the devices it reads where other clients see 0.50 ms, its NIC at 95% of its link",
		"hotspot:ds:ds03:network:1767225600000 network path to ds03 (port or NIC) saturated: clients see 2.00 ms on its devices against 0.20 ms on its peers', its drives 5% busy (its peers' 20%), its NIC at 30% of its link",
	} {
		if first[i] != want {
			t.Errorf("finding %q; want %q", first[i], want)
		}
	}
}

// TestWritesAgainstWritingPeers: a checkpoint writes 4 of the 20 devices
// at 800 MB/s while the other 16 take a log trickle (50 KB/s, one write
// per 5 s); nothing is hot, since the trickle is no writing peer. Among 20
// devices that all take 100 MB/s of writes, one at 1 GB/s is hot.
func TestWritesAgainstWritingPeers(t *testing.T) {
	run := func(write func(ds, dev int) (ops, bytes float64)) []models.Finding {
		d, _ := New(Options{})
		sc := scenario{ticks: 12, hook: func(tick int, loads []Load, stripes []models.StripeDelta) []models.StripeDelta {
			for ds := range 4 {
				for dev := range 5 {
					l := findLoad(loads, devID(ds, dev))
					l.Values[WriteIOPS], l.Values[WriteBytesPerSec] = write(ds, dev)
				}
			}
			return stripes
		}}
		return sorted(sc.run(t, d))
	}
	for _, f := range run(func(ds, dev int) (float64, float64) {
		if ds == 0 && dev < 4 {
			return 800, 800e6
		}
		return 0.2, 50e3
	}) {
		t.Errorf("checkpoint beside a log trickle: unexpected finding %s: %s", f.ID, f.Summary)
	}
	fs := run(func(ds, dev int) (float64, float64) {
		if ds == 2 && dev == 3 {
			return 1000, 1e9
		}
		return 100, 100e6
	})
	if len(fs) != 1 || fs[0].Subject.ID != devID(2, 3) {
		t.Errorf("one device writing 10× its writing peers: got %v; want one finding on %s", fs, devID(2, 3))
	}
}
