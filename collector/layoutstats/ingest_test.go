package layoutstats

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ballast-io/ballast/models"
)

func TestDifferencing(t *testing.T) {
	in := newIngester(t, Options{})
	r1 := rep(0, 60*time.Second, ctr{ops: 100, bytes: 100 << 20, busy: 30 * time.Second, completion: 2 * time.Second}, ctr{})
	res := mustIngest(t, in, t0, batch("c1", r1))
	if len(res.Deltas) != 1 || !res.Deltas[0].Reset || res.Deltas[0].Duration != 60*time.Second {
		t.Fatalf("first report: got %+v; want one reset delta over 60s", res.Deltas)
	}
	r2 := rep(0, 120*time.Second, ctr{ops: 400, bytes: 400 << 20, notDelivered: 4096, busy: 75 * time.Second, completion: 8 * time.Second}, ctr{ops: 10, bytes: 10 << 12, busy: time.Second, completion: time.Second})
	res = mustIngest(t, in, t0.Add(time.Minute), batch("c1", r2))
	if len(res.Deltas) != 1 {
		t.Fatalf("got %d deltas; want 1", len(res.Deltas))
	}
	d := res.Deltas[0]
	want := models.StripeIO{Count: 300, Bytes: 300 << 20, OpsRequested: 300, BytesRequested: 300<<20 + 4096,
		OpsCompleted: 300, BytesCompleted: 300 << 20, BytesNotDelivered: 4096, BusyTime: 45 * time.Second, CompletionTime: 6 * time.Second}
	if d.Read != want {
		t.Errorf("read delta: got %+v; want %+v", d.Read, want)
	}
	if d.Reset || d.Duration != 60*time.Second || !d.End.Equal(t0.Add(time.Minute)) {
		t.Errorf("got reset=%v duration=%s end=%s; want false 1m0s %s", d.Reset, d.Duration, d.End, t0.Add(time.Minute))
	}
	if d.DS != "192.0.2.10:2049" || d.DeviceID != "000000000000000000000000000000d0" {
		t.Errorf("got DS %q device %q; want 192.0.2.10:2049 and ...d0", d.DS, d.DeviceID)
	}
	if d.Write.OpsCompleted != 10 || d.Write.BusyTime != time.Second {
		t.Errorf("write delta: got %+v; want 10 ops, 1s busy", d.Write)
	}
	// The derived series: 300 ops in 60 s, 6 s of completion time over
	// 300 ops, 45 s busy of 60 s.
	checks := []struct {
		name string
		want float64
	}{
		{models.MetricLayoutStatsDeviceOps, 5},
		{models.MetricLayoutStatsDeviceBytes, float64(300<<20) / 60},
		{models.MetricLayoutStatsDeviceNotDelivered, 4096.0 / 60},
		{models.MetricLayoutStatsDeviceLatency, 0.02},
		{models.MetricLayoutStatsDeviceUtilization, 0.75},
		{models.MetricLayoutStatsDeviceBusyStreams, 0.75},
	}
	for _, c := range checks {
		got, ok := sampleValue(t, res.Samples, c.name, d.DeviceID, "read")
		if !ok || math.Abs(got-c.want) > 1e-3*math.Max(1, c.want) {
			t.Errorf("%s: got %v (present %v); want %v", c.name, got, ok, c.want)
		}
	}
	if got, _ := sampleValue(t, res.Samples, models.MetricLayoutStatsDSOps, "192.0.2.10:2049", "write"); math.Abs(got-10.0/60) > 1e-3 {
		t.Errorf("DS write ops/s: got %v; want %v", got, 10.0/60)
	}
	if got, _ := sampleValue(t, res.Samples, models.MetricLayoutStatsDeviceStreams, d.DeviceID, ""); got != 1 {
		t.Errorf("streams: got %v; want 1", got)
	}
	for _, s := range res.Samples {
		if err := s.Validate(); err != nil {
			t.Errorf("sample %s: %v", s.SeriesKey(), err)
		}
		if s.Timestamp != t0.Add(time.Minute).UnixMilli() {
			t.Errorf("sample %s at %d; want %d", s.SeriesKey(), s.Timestamp, t0.Add(time.Minute).UnixMilli())
		}
	}
}

func TestAggregatesSumStreams(t *testing.T) {
	in := newIngester(t, Options{EmitInterval: time.Nanosecond})
	// Stripes 0 and 4 share device d0 and DS .10; two clients report them.
	a := rep(0, 30*time.Second, ctr{ops: 300, busy: 15 * time.Second, completion: 3 * time.Second}, ctr{})
	b := rep(4, 60*time.Second, ctr{ops: 120, busy: 60 * time.Second, completion: 12 * time.Second}, ctr{})
	mustIngest(t, in, t0, batch("c1", a))
	res := mustIngest(t, in, t0.Add(time.Second), batch("c2", b))
	dev := "000000000000000000000000000000d0"
	// 300/30 + 120/60 = 12 ops/s; latency (3+12)/(300+120); util mean(0.5, 1).
	for _, c := range []struct {
		name string
		want float64
	}{
		{models.MetricLayoutStatsDeviceOps, 12},
		{models.MetricLayoutStatsDeviceLatency, 15.0 / 420},
		{models.MetricLayoutStatsDeviceUtilization, 0.75},
		{models.MetricLayoutStatsDeviceBusyStreams, 1.5},
	} {
		if got, _ := sampleValue(t, res.Samples, c.name, dev, "read"); math.Abs(got-c.want) > 1e-6 {
			t.Errorf("%s: got %v; want %v", c.name, got, c.want)
		}
	}
	if got, _ := sampleValue(t, res.Samples, models.MetricLayoutStatsDeviceStreams, dev, ""); got != 2 {
		t.Errorf("streams: got %v; want 2", got)
	}
	// A new interval of client 1 replaces its old one instead of adding.
	a2 := rep(0, 60*time.Second, ctr{ops: 330, busy: 15 * time.Second, completion: 3300 * time.Millisecond}, ctr{})
	res = mustIngest(t, in, t0.Add(2*time.Second), batch("c1", a2))
	if got, _ := sampleValue(t, res.Samples, models.MetricLayoutStatsDeviceOps, dev, "read"); math.Abs(got-3) > 1e-6 {
		t.Errorf("ops/s after the second interval: got %v; want 1 + 2 = 3", got)
	}
	if got, ok := sampleValue(t, res.Samples, models.MetricLayoutStatsDeviceLatency, dev, "write"); ok {
		t.Errorf("write latency with no completed writes: got %v; want no sample", got)
	}
}

func TestReset(t *testing.T) {
	cases := []struct {
		name         string
		next         models.FFIOStats4
		wantOps      uint64
		wantDuration time.Duration
	}{
		{"duration restarted", rep(0, 20*time.Second, ctr{ops: 7, busy: time.Second}, ctr{}), 7, 20 * time.Second},
		{"all counters dropped", rep(0, 180*time.Second, ctr{ops: 7, busy: time.Second}, ctr{}), 7, 60 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := newIngester(t, Options{})
			mustIngest(t, in, t0, batch("c", rep(0, 120*time.Second, ctr{ops: 500, bytes: 1 << 20, busy: 10 * time.Second}, ctr{})))
			res := mustIngest(t, in, t0.Add(time.Minute), batch("c", c.next))
			if res.Baselines != 1 && len(res.Deltas) == 0 {
				t.Fatal("no delta")
			}
			d := res.Deltas[0]
			if !d.Reset || d.Read.OpsCompleted != c.wantOps || d.Duration != c.wantDuration || res.Resets != 1 {
				t.Errorf("got reset=%v ops=%d duration=%s resets=%d; want true %d %s 1", d.Reset, d.Read.OpsCompleted, d.Duration, res.Resets, c.wantOps, c.wantDuration)
			}
		})
	}
}

func TestBackwardsIsRefused(t *testing.T) {
	in := newIngester(t, Options{})
	// 120 s is beyond FirstSightMaxDuration: a baseline.
	mustIngest(t, in, t0, batch("c", rep(0, 120*time.Second, ctr{ops: 500, bytes: 1 << 20, busy: 10 * time.Second}, ctr{})))
	// Ops dropped, bytes grew, duration advanced: not a reset.
	_, err := in.Ingest(t0.Add(time.Minute), batch("c", rep(0, 180*time.Second, ctr{ops: 400, bytes: 2 << 20, busy: 10 * time.Second}, ctr{})))
	var ce *ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v; want a *ConflictError", err)
	}
	if want := "reports[0].ffis_read.ii_count"; ce.Path != want || !strings.Contains(ce.Reason, "went backwards from 500 to 400") {
		t.Errorf("got %q; want path %s and 'went backwards from 500 to 400'", err, want)
	}
	// Changed counters with the duration standing still.
	_, err = in.Ingest(t0.Add(time.Minute), batch("c", rep(0, 120*time.Second, ctr{ops: 501, bytes: 1 << 20, busy: 10 * time.Second}, ctr{})))
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "while ffis_layoutupdate.ffl_duration stayed at 2m0s") {
		t.Errorf("got %v; want a conflict about the duration standing still", err)
	}
	// Busy time growing faster than the duration.
	_, err = in.Ingest(t0.Add(time.Minute), batch("c", rep(0, 130*time.Second, ctr{ops: 501, bytes: 1 << 20, busy: 25 * time.Second}, ctr{})))
	if !errors.As(err, &ce) || ce.Path != "reports[0].ffis_layoutupdate.ffl_read.ffil_total_busy_time" {
		t.Errorf("got %v; want a conflict on ffl_read.ffil_total_busy_time", err)
	}
}

func TestDuplicateIsNoop(t *testing.T) {
	in := newIngester(t, Options{EmitInterval: time.Nanosecond})
	r := rep(1, 60*time.Second, ctr{ops: 10, busy: time.Second}, ctr{ops: 5, bytes: 5, busy: time.Second})
	first := mustIngest(t, in, t0, batch("c", r))
	again := mustIngest(t, in, t0.Add(time.Second), batch("c", r))
	if len(again.Deltas) != 0 || again.Duplicates != 1 {
		t.Fatalf("re-sent report: got %d deltas, %d duplicates; want 0, 1", len(again.Deltas), again.Duplicates)
	}
	// The aggregates still count the first interval once.
	dev := first.Deltas[0].DeviceID
	next := mustIngest(t, in, t0.Add(2*time.Second), batch("c", rep(1, 120*time.Second, ctr{ops: 70, busy: 2 * time.Second}, ctr{ops: 5, bytes: 5, busy: time.Second})))
	if got, _ := sampleValue(t, next.Samples, models.MetricLayoutStatsDeviceOps, dev, "read"); got != 1 {
		t.Errorf("ops/s: got %v; want (70-10)/60 = 1", got)
	}
}

func TestSameKeyTwiceInOneBatch(t *testing.T) {
	in := newIngester(t, Options{})
	res := mustIngest(t, in, t0, batch("c",
		rep(2, 30*time.Second, ctr{ops: 30, busy: time.Second}, ctr{}),
		rep(2, 60*time.Second, ctr{ops: 90, busy: time.Second}, ctr{})))
	if len(res.Deltas) != 2 || res.Deltas[1].Read.OpsCompleted != 60 || res.Deltas[1].Reset {
		t.Fatalf("got %+v; want a reset delta then a 60-op delta", res.Deltas)
	}
	if got, _ := sampleValue(t, res.Samples, models.MetricLayoutStatsDeviceOps, res.Deltas[0].DeviceID, "read"); got != 2 {
		t.Errorf("ops/s: got %v; want the latest interval's 60/30 = 2", got)
	}
}

func TestFirstSight(t *testing.T) {
	in := newIngester(t, Options{FirstSightMaxDuration: time.Minute})
	res := mustIngest(t, in, t0, batch("c",
		rep(0, 50*time.Second, ctr{ops: 5, busy: time.Second}, ctr{}),
		rep(1, 10*time.Hour, ctr{ops: 5e6, busy: time.Hour}, ctr{})))
	if len(res.Deltas) != 1 || res.Baselines != 1 || res.Deltas[0].Stateid != "000000000000000000000000" {
		t.Fatalf("got %d deltas %d baselines; want 1 delta (the young key) and 1 baseline", len(res.Deltas), res.Baselines)
	}
	res = mustIngest(t, in, t0.Add(time.Minute), batch("c", rep(1, 10*time.Hour+time.Minute, ctr{ops: 5e6 + 60, busy: time.Hour}, ctr{})))
	if len(res.Deltas) != 1 || res.Deltas[0].Read.OpsCompleted != 60 {
		t.Errorf("after a baseline: got %+v; want a 60-op delta", res.Deltas)
	}
}

func TestEvictionAndStaleness(t *testing.T) {
	in := newIngester(t, Options{IdleTimeout: 10 * time.Minute, FirstSightMaxDuration: 5 * time.Minute, StaleAfter: 2 * time.Minute, SweepInterval: time.Second})
	mustIngest(t, in, t0, batch("c", rep(0, time.Minute, ctr{ops: 60, busy: time.Second}, ctr{}), rep(1, time.Minute, ctr{ops: 60, busy: time.Second}, ctr{})))
	dev1 := rep(1, 0, ctr{}, ctr{}).DeviceID
	// Key 0 keeps reporting; key 1 goes quiet.
	res := mustIngest(t, in, t0.Add(3*time.Minute), batch("c", rep(0, 4*time.Minute, ctr{ops: 240, busy: time.Second}, ctr{})))
	if in.Keys() != 2 {
		t.Fatalf("after 3m: %d keys; want 2 (none idle yet)", in.Keys())
	}
	if got, ok := sampleValue(t, res.Samples, models.MetricLayoutStatsDeviceStreams, dev1, ""); !ok || got != 0 {
		t.Errorf("device of the quiet key after StaleAfter: streams %v (present %v); want 0", got, ok)
	}
	if got, _ := sampleValue(t, res.Samples, models.MetricLayoutStatsDeviceOps, dev1, "read"); got != 0 {
		t.Errorf("device of the quiet key after StaleAfter: ops/s %v; want 0", got)
	}
	res = mustIngest(t, in, t0.Add(11*time.Minute), batch("c", rep(0, 12*time.Minute, ctr{ops: 720, busy: time.Second}, ctr{})))
	if in.Keys() != 1 || res.Evicted != 1 {
		t.Fatalf("after 11m: %d keys, %d evicted; want 1, 1", in.Keys(), res.Evicted)
	}
	// The forgotten key comes back with old counters: a baseline, so its
	// I/O is not counted twice.
	res = mustIngest(t, in, t0.Add(12*time.Minute), batch("c", rep(1, 13*time.Minute, ctr{ops: 780, busy: time.Second}, ctr{})))
	if len(res.Deltas) != 0 || res.Baselines != 1 {
		t.Errorf("returning key: got %d deltas, %d baselines; want 0, 1", len(res.Deltas), res.Baselines)
	}
}

// A batch that fails half way must leave the ingester exactly as it was:
// the same later batch gives the same result as on an untouched ingester.
func TestFailedBatchChangesNothing(t *testing.T) {
	setup := batch("c", rep(0, 60*time.Second, ctr{ops: 60, busy: time.Second}, ctr{}), rep(1, 60*time.Second, ctr{ops: 60, busy: time.Second}, ctr{}))
	a, b := newIngester(t, Options{SweepInterval: time.Second}), newIngester(t, Options{SweepInterval: time.Second})
	mustIngest(t, a, t0, setup)
	mustIngest(t, b, t0, setup)
	bad := batch("c",
		rep(0, 120*time.Second, ctr{ops: 120, busy: 2 * time.Second}, ctr{}), // fine
		rep(5, 30*time.Second, ctr{ops: 3, busy: time.Second}, ctr{}),        // new key, new device
		rep(1, 120*time.Second, ctr{ops: 10, busy: time.Second}, ctr{}))      // ops backwards, busy time not
	if _, err := a.Ingest(t0.Add(10*time.Minute), bad); err == nil {
		t.Fatal("bad batch accepted")
	}
	if a.Keys() != 2 || len(a.devices) != 2 {
		t.Fatalf("after rollback: %d keys, %d devices; want 2, 2", a.Keys(), len(a.devices))
	}
	next := batch("c", rep(0, 180*time.Second, ctr{ops: 240, busy: 3 * time.Second}, ctr{}), rep(1, 180*time.Second, ctr{ops: 90, busy: time.Second}, ctr{}))
	ra := mustIngest(t, a, t0.Add(2*time.Minute), next)
	rb := mustIngest(t, b, t0.Add(2*time.Minute), next)
	if !reflect.DeepEqual(ra, rb) {
		t.Errorf("after a rolled-back batch:\n got %+v\nwant %+v", ra, rb)
	}
}

func TestEmitInterval(t *testing.T) {
	in := newIngester(t, Options{EmitInterval: 10 * time.Second})
	dev := rep(0, 0, ctr{}, ctr{}).DeviceID
	res := mustIngest(t, in, t0, batch("c", rep(0, time.Minute, ctr{ops: 60, busy: time.Second}, ctr{})))
	if _, ok := sampleValue(t, res.Samples, models.MetricLayoutStatsDeviceOps, dev, "read"); !ok {
		t.Fatal("first batch: no sample for a new device")
	}
	// Another client changes the device 4 s later: held back.
	res = mustIngest(t, in, t0.Add(4*time.Second), batch("c2", rep(4, time.Minute, ctr{ops: 120, busy: time.Second}, ctr{})))
	if len(res.Samples) != 0 {
		t.Fatalf("4s later: got %d samples; want none within EmitInterval", len(res.Samples))
	}
	// A tick after the interval writes the held-back change.
	tx := in.Tick(t0.Add(11 * time.Second))
	tx.Commit()
	if got, _ := sampleValue(t, tx.Result.Samples, models.MetricLayoutStatsDeviceOps, dev, "read"); got != 3 {
		t.Errorf("tick: ops/s %v; want 1 + 2 = 3", got)
	}
	if ts := tx.Result.Samples[0].Timestamp; ts != t0.Add(11*time.Second).UnixMilli() {
		t.Errorf("tick samples at %d; want the tick's now", ts)
	}
	// Nothing changed since: the next tick writes nothing.
	tx = in.Tick(t0.Add(30 * time.Second))
	tx.Commit()
	if len(tx.Result.Samples) != 0 {
		t.Errorf("idle tick: got %d samples; want none", len(tx.Result.Samples))
	}
}

func TestDeterministic(t *testing.T) {
	run := func() Result {
		in := newIngester(t, Options{SweepInterval: time.Second})
		var last Result
		for step := 1; step <= 5; step++ {
			var rs []models.FFIOStats4
			for n := 0; n < 40; n++ {
				k := uint64(step * (n + 1))
				rs = append(rs, rep(n, time.Duration(step)*time.Minute, ctr{ops: 7 * k, bytes: 4096 * k, busy: time.Duration(k) * time.Millisecond, completion: time.Duration(k) * time.Millisecond}, ctr{ops: k, bytes: k}))
			}
			last = mustIngest(t, in, t0.Add(time.Duration(step)*time.Minute), batch("c", rs...))
		}
		return last
	}
	if a, b := run(), run(); !reflect.DeepEqual(a.Samples, b.Samples) {
		t.Error("the same reports gave different samples")
	}
}

func TestReportTime(t *testing.T) {
	in := newIngester(t, Options{})
	b := batch("c", rep(0, time.Minute, ctr{ops: 1, busy: time.Second}, ctr{}))
	b.ReportTime = t0.Add(-30 * time.Second)
	res := mustIngest(t, in, t0, b)
	if !res.Deltas[0].End.Equal(b.ReportTime) || res.Samples[0].Timestamp != b.ReportTime.UnixMilli() {
		t.Errorf("got end %s; want the report time %s", res.Deltas[0].End, b.ReportTime)
	}
	b.ReportTime = t0.Add(time.Hour)
	_, err := in.Ingest(t0, b)
	var fe *models.FieldError
	if !errors.As(err, &fe) || fe.Path != "report_time" {
		t.Errorf("report_time an hour ahead: got %v; want a report_time field error", err)
	}
}

func TestOptionsValidated(t *testing.T) {
	for _, o := range []Options{{IdleTimeout: -time.Second}, {IdleTimeout: time.Minute, FirstSightMaxDuration: 2 * time.Minute}} {
		if _, err := NewIngester(o); err == nil {
			t.Errorf("NewIngester(%+v): got no error", o)
		}
	}
}

func TestMaxKeys(t *testing.T) {
	in := newIngester(t, Options{MaxKeys: 2})
	mustIngest(t, in, t0, batch("c", rep(0, time.Minute, ctr{}, ctr{}), rep(1, time.Minute, ctr{}, ctr{})))
	_, err := in.Ingest(t0.Add(time.Minute), batch("c", rep(0, 2*time.Minute, ctr{}, ctr{}), rep(2, time.Minute, ctr{}, ctr{})))
	var ce *CapacityError
	if !errors.As(err, &ce) || ce.Path != "reports[1]" {
		t.Fatalf("third key: got %v; want a *CapacityError for reports[1]", err)
	}
	// Known keys still go through, and the refused batch left no trace.
	res := mustIngest(t, in, t0.Add(time.Minute), batch("c", rep(0, 2*time.Minute, ctr{}, ctr{})))
	if len(res.Deltas) != 1 || res.Deltas[0].Duration != time.Minute || in.Keys() != 2 {
		t.Errorf("got %+v with %d keys; want one 1m delta and 2 keys", res.Deltas, in.Keys())
	}
}

// TestBusyRoundingIsClamped: a delta whose busy time exceeds its interval
// by a rounding nanosecond keeps the client's whole batch (the busy time
// clamped to the interval, counted), while a real contradiction is still
// refused.
func TestBusyRoundingIsClamped(t *testing.T) {
	in := newIngester(t, Options{EmitInterval: time.Nanosecond})
	t0 := time.Unix(1_700_000_000, 0)
	mustIngest(t, in, t0, batch("c",
		rep(0, 10*time.Second, ctr{ops: 100, bytes: 1 << 20, busy: 4 * time.Second}, ctr{}),
		rep(1, 10*time.Second, ctr{ops: 100, bytes: 1 << 20, busy: 4 * time.Second}, ctr{})))
	// Report 0: busy advanced 10 s + 1 ns in 10 s; report 1 is ordinary.
	res, err := in.Ingest(t0.Add(10*time.Second), batch("c",
		rep(0, 20*time.Second, ctr{ops: 200, bytes: 2 << 20, busy: 14*time.Second + time.Nanosecond}, ctr{}),
		rep(1, 20*time.Second, ctr{ops: 150, bytes: 2 << 20, busy: 6 * time.Second}, ctr{})))
	if err != nil {
		t.Fatalf("got %v; want the batch accepted with the busy time clamped", err)
	}
	if res.BusyClamped != 1 || len(res.Deltas) != 2 {
		t.Fatalf("got %d clamped, %d deltas; want 1 clamped, 2 deltas", res.BusyClamped, len(res.Deltas))
	}
	if got := res.Deltas[0].Read.BusyTime; got != 10*time.Second {
		t.Errorf("got busy %s; want it clamped to the 10s interval", got)
	}
	// 2 s too much in a 10 s interval is not rounding.
	_, err = in.Ingest(t0.Add(20*time.Second), batch("c",
		rep(0, 30*time.Second, ctr{ops: 300, bytes: 3 << 20, busy: 26 * time.Second}, ctr{})))
	var ce *ConflictError
	if !errors.As(err, &ce) || !strings.Contains(ce.Reason, "allowed for rounding") {
		t.Errorf("got %v; want a conflict on the busy time", err)
	}
}

// TestRateHold: a key that stops reporting (a component a layout change
// retired) keeps its rate in its device's series for at most RateHold,
// and for StaleAfter at least, when the ingest ticks every 10 s.
func TestRateHold(t *testing.T) {
	in := newIngester(t, Options{})
	if got, want := in.RateHold(), DefaultStaleAfter+DefaultSweepInterval+DefaultEmitInterval; got != want {
		t.Fatalf("RateHold %s; want %s", got, want)
	}
	dev := rep(1, 0, ctr{}, ctr{}).DeviceID
	res := mustIngest(t, in, t0, batch("c", rep(1, time.Minute, ctr{ops: 60, bytes: 6000, busy: time.Second}, ctr{})))
	if got, _ := sampleValue(t, res.Samples, models.MetricLayoutStatsDeviceBytes, dev, "read"); got != 100 {
		t.Fatalf("first report: %v B/s; want 100", got)
	}
	var zeroAt time.Time
	for now := t0.Add(10 * time.Second); now.Before(t0.Add(10*time.Minute)) && zeroAt.IsZero(); now = now.Add(10 * time.Second) {
		tx := in.Tick(now)
		tx.Commit()
		if v, ok := sampleValue(t, tx.Result.Samples, models.MetricLayoutStatsDeviceBytes, dev, "read"); ok && v == 0 {
			zeroAt = now
		}
	}
	if zeroAt.IsZero() || zeroAt.Sub(t0) > in.RateHold() || zeroAt.Sub(t0) <= DefaultStaleAfter {
		t.Errorf("the quiet key's rate left its device's series at %s after its last report; want after %s and within %s", zeroAt.Sub(t0), DefaultStaleAfter, in.RateHold())
	}
}
