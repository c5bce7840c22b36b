package analysis

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/ballast-io/ballast/models"
)

// tickIO is what gpu00 writes (bytes/s over the tick) and its GPUs'
// utilisation at one tick.
type tickIO struct{ write, util float64 }

// pauseRun feeds the hotspot, checkpoint and starvation stages 34 ticks of
// 10 s: gpu00 (4 GPUs, its own client group) reads from ds00, whose NIC
// is saturated throughout (another tenant's traffic), with its GPUs at
// full utilisation, and writes nothing but a checkpoint at ticks 20–22
// (10 GB/s, its GPUs stopped) and what ticks 30–32 say. It returns the
// GPU-seconds charged per cause.
func pauseRun(t *testing.T, ticks30 [3]tickIO) map[string]float64 {
	t.Helper()
	a, err := New(nil, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for s := range 34 {
		write, util := 0.0, 1.0
		switch {
		case s >= 20 && s <= 22:
			write, util = 10e9, 0
		case s >= 30 && s <= 32:
			write, util = ticks30[s-30].write, ticks30[s-30].util
		}
		q := exprQuerier{
			nicSpeedQuery:       {series("", 3.125e9, "node", "ds00", "device", "eth0")},
			a.st.nicRateQuery(): {series("", 0.98*3.125e9, "node", "ds00", "device", "eth0")},
			a.ckpt.query():      {series("", write, "node", "gpu00")},
		}
		for g := range 4 {
			q[gpuQuery] = append(q[gpuQuery], series("ballast_gpu_utilization_ratio", util, "node", "gpu00", "gpu", fmt.Sprint(g)))
		}
		a.q = q
		// 128 KiB reads of 0.2 ms each, over 10 s.
		d := delta("ds00/nvme0n1", "ds00", 10*time.Second, 1000, 1000<<17, 0, 0, 200*time.Millisecond)
		d.Write = models.StripeIO{}
		a.stripes.tick = []models.StripeDelta{d}
		now := t0.Add(time.Duration(s) * 10 * time.Second)
		if _, err := a.ident.Run(ctx, now); err != nil {
			t.Fatal(err)
		}
		if _, err := a.hot.Run(ctx, now); err != nil {
			t.Fatalf("tick %d: hotspot stage: %v", s, err)
		}
		if _, err := a.ckpt.Run(ctx, now); err != nil {
			t.Fatalf("tick %d: checkpoint stage: %v", s, err)
		}
		if _, err := a.st.Run(ctx, now); err != nil {
			t.Fatalf("tick %d: starvation stage: %v", s, err)
		}
	}
	return a.st.an.LostByCause()
}

// TestStarvationCheckpointPauseFromItsFirstTick: a synchronous checkpoint
// that began a second before tick 30 has a tenth of its rate in the tick's
// write sample, under the burst threshold (the burst is seen from tick
// 31), while its GPUs are already stopped. That tick is the checkpoint's,
// not the saturated ds00's that the GPUs read from. GPUs stopping together
// with no write (what a lost data server does too) stay storage's, and so
// do writes that rise while the GPUs keep some work, and the ticks after a
// rise that no burst followed.
func TestStarvationCheckpointPauseFromItsFirstTick(t *testing.T) {
	const tick = 4 * 10.0 // 4 GPUs losing a whole 10 s tick
	burst := tickIO{10e9, 0}
	for _, tc := range []struct {
		name          string
		ticks         [3]tickIO
		ckpt, storage float64
	}{
		{"pause starting", [3]tickIO{{1e9, 0}, burst, burst}, 6 * tick, 0},
		{"stopped, no writes", [3]tickIO{{0, 0}, burst, burst}, 5 * tick, tick},
		{"writes, GPUs working", [3]tickIO{{1e9, 0.5}, burst, burst}, 5 * tick, tick / 2},
		{"no burst after the rise", [3]tickIO{{1e9, 0}, {0, 0}, {0, 0}}, 4 * tick, 2 * tick},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lost := pauseRun(t, tc.ticks)
			if got := lost["checkpoint:gpu00"]; math.Abs(got-tc.ckpt) > 1e-6 {
				t.Errorf("checkpoint:gpu00 charged %v GPU-s; want %v: %v", got, tc.ckpt, lost)
			}
			if got := lost["ds:ds00"]; math.Abs(got-tc.storage) > 1e-6 {
				t.Errorf("ds:ds00 charged %v GPU-s; want %v: %v", got, tc.storage, lost)
			}
			if len(lost) > 2 {
				t.Errorf("lost %v; want only checkpoint:gpu00 and ds:ds00", lost)
			}
		})
	}
}

// TestCheckpointsWritingBeforeTheBurstFinding: the groups the actions
// engine pauses copies for (CheckpointsWriting) include one whose write
// rate rose clearly above idle at a tick that has no checkpoint_burst
// finding yet (a second burst that began a second before the tick: a
// tenth of the burst level the first one set), stay while the burst is
// found, and are empty while the group is idle.
func TestCheckpointsWritingBeforeTheBurstFinding(t *testing.T) {
	a, err := New(nil, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	gpu00 := models.Subject{Kind: models.SubjectClient, ID: "gpu00"}
	for s := range 30 {
		write := 0.0
		switch {
		case s >= 10 && s <= 12, s == 21 || s == 22:
			write = 10e9
		case s == 20:
			write = 1e9 // the burst's first second in the tick's rate
		}
		a.q = exprQuerier{a.ckpt.query(): {series("", write, "node", "gpu00")}}
		fs, err := a.ckpt.Run(ctx, t0.Add(time.Duration(s)*10*time.Second))
		if err != nil {
			t.Fatalf("tick %d: %v", s, err)
		}
		burst := false
		for _, f := range fs {
			burst = burst || f.Kind == "checkpoint_burst" && f.Active()
		}
		got := a.CheckpointsWriting()
		switch {
		case s == 20:
			if burst {
				t.Fatalf("tick 20 has an active checkpoint_burst finding; the test wants a burst's first seconds before it")
			}
			if len(got) != 1 || got[0] != gpu00 {
				t.Errorf("tick 20 (write rate rising, no finding yet): writing %v; want [%v]", got, gpu00)
			}
		case s == 21 || s == 22:
			if len(got) != 1 || got[0] != gpu00 {
				t.Errorf("tick %d (in the burst): writing %v; want [%v]", s, got, gpu00)
			}
		case s < 10 || s > 15 && s < 20 || s > 25:
			if len(got) != 0 {
				t.Errorf("tick %d (idle): writing %v; want none", s, got)
			}
		}
	}
}
