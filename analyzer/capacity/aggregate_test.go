package capacity

import (
	"math"
	"testing"
	"time"

	"github.com/ballast-io/ballast/models"
)

func TestPredictLinearMatchesPromQL(t *testing.T) {
	// y = 100 + 2·(t − now) seconds, readings every 60 s over 3 days; the
	// 2-day range is left-open, so the reading exactly 2 days back is out.
	now := t0.Add(3 * day)
	var pts []Point
	for ts := t0; !ts.After(now); ts = ts.Add(time.Minute) {
		pts = append(pts, Point{T: ts, V: 100 + 2*ts.Sub(now).Seconds()})
	}
	at, slope, ok := PredictLinear(pts, now, 2*day)
	if !ok || math.Abs(at-100) > 1e-6 || math.Abs(slope-2) > 1e-9 {
		t.Errorf("predict_linear = %v, %v, %v; want 100, 2, true", at, slope, ok)
	}
	// Two readings: the line through them.
	two := []Point{{T: now.Add(-time.Hour), V: 10}, {T: now, V: 20}}
	if at, slope, _ := PredictLinear(two, now, 2*day); at != 20 || math.Abs(slope-10.0/3600) > 1e-12 {
		t.Errorf("two readings: %v, %v; want 20, %v", at, slope, 10.0/3600)
	}
	if _, _, ok := PredictLinear(two[:1], now, 2*day); ok {
		t.Error("one reading: ok; want not ok")
	}
	if d := LinearDays(20, 10.0/3600, 20+240); math.Abs(float64(d)-1) > 1e-12 {
		t.Errorf("LinearDays = %v; want 1", d)
	}
	if d := LinearDays(20, -1, 30); d.Finite() {
		t.Errorf("LinearDays with a falling line = %v; want +Inf", d)
	}
}

func TestAggregateCarriesForward(t *testing.T) {
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	devs := []DeviceSeries{
		{Device: "ds2/nvme0n1", DS: "ds2", Pool: "fast", Capacity: 10, Used: []Point{{at(0), 1}, {at(2), 2}}},
		{Device: "ds1/nvme0n1", DS: "ds1", Pool: "fast", Capacity: 10, Used: []Point{{at(1), 5}, {at(2), 6}, {at(3), 7}}},
		{Device: "scr1/nvme0n1", DS: "scr1", Pool: "scratch", Capacity: 4, Used: []Point{{at(0), 3}}},
	}
	got := Aggregate(devs)
	var ids []string
	for _, s := range got {
		ids = append(ids, s.Subject.String())
	}
	want := []string{"device:ds1/nvme0n1", "device:ds2/nvme0n1", "device:scr1/nvme0n1", "ds:ds1", "ds:ds2", "ds:scr1", "pool:fast", "pool:scratch", "cluster:cluster"}
	if len(ids) != len(want) {
		t.Fatalf("subjects %v; want %v", ids, want)
	}
	for i := range want {
		if ids[i] != want[i] {
			t.Fatalf("subjects %v; want %v", ids, want)
		}
	}
	fast := got[6]
	// From minute 1 (when ds1 first reports): 1+5, 2+6, 2+7.
	wantPts := []Point{{at(1), 6}, {at(2), 8}, {at(3), 9}}
	if fast.Capacity != 20 || fast.Members != 2 || len(fast.Used) != 3 {
		t.Fatalf("pool fast = %+v; want capacity 20, 2 members, 3 points", fast)
	}
	for i, p := range wantPts {
		if !fast.Used[i].T.Equal(p.T) || fast.Used[i].V != p.V {
			t.Errorf("pool fast point %d = %+v; want %+v", i, fast.Used[i], p)
		}
	}
	if c := got[8]; c.Capacity != 24 || c.Subject.Kind != models.SubjectCluster || c.Used[len(c.Used)-1].V != 12 {
		t.Errorf("cluster = %+v; want capacity 24 ending at 12", c)
	}
}

func TestEvacuationCheck(t *testing.T) {
	dev := func(name, ds string, capacity, used float64) DeviceSeries {
		return DeviceSeries{Device: name, DS: ds, Pool: "fast", Capacity: capacity, Used: []Point{{t0, used}}}
	}
	devs := []DeviceSeries{
		dev("a/0", "a", 100, 60), dev("a/1", "a", 100, 60),
		dev("b/0", "b", 100, 60), dev("b/1", "b", 100, 60),
		dev("c/0", "c", 100, 60), dev("c/1", "c", 100, 60),
	}
	got := EvacuationCheck(devs, []string{"b/1"}, 0)
	if len(got) != 2 {
		t.Fatalf("%d checks; want 2", len(got))
	}
	// Largest DS (tie → "a"): 360 used on 400 left = 0.9 → exactly at the
	// limit, headroom 0.
	ds := got[0]
	if ds.What != "largest DS a" || ds.Moved != 120 || ds.Removed != 200 || math.Abs(ds.RatioAfter-0.9) > 1e-12 || math.Abs(ds.Headroom) > 1e-9 || !ds.OK {
		t.Errorf("largest DS check %+v; want a, moved 120, removed 200, ratio 0.9, headroom 0, ok", ds)
	}
	r := got[1]
	if r.What != "at-risk drives" || r.Moved != 60 || math.Abs(r.Headroom-(0.9*500-360)) > 1e-9 || !r.OK {
		t.Errorf("at-risk check %+v; want moved 60, headroom 90", r)
	}
	devs[0].Used[0].V = 100
	if got := EvacuationCheck(devs, nil, 0); len(got) != 1 || got[0].OK {
		t.Errorf("with 400 used, evacuating a DS leaves %+v; want not ok", got)
	}
}
