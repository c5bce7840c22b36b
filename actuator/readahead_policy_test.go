package actuator

import (
	"strings"
	"testing"
	"time"

	"github.com/ballast-io/ballast/models"
)

func TestReadAheadPolicyDecisions(t *testing.T) {
	p := defaultReadAheadPolicy()
	bounds := models.ReadAheadBounds{MinKB: 64, MaxKB: 16384, MaxStepKB: 8192}
	starved := raSignals{Class: classTraining, AppBytes: 3e9, ServerBytes: 3e9, GPUUtil: 0.6, HasGPU: true, DSUtil: 0.1, HasDSUtil: true, CurrentKB: 128, Bounds: bounds}
	with := func(f func(*raSignals)) raSignals {
		s := starved
		f(&s)
		return s
	}
	cases := []struct {
		name    string
		s       raSignals
		kb      int64
		dir     string
		whyPart string
	}{
		{"starved sequential doubles", starved, 256, "raise", "starved sequential"},
		{"badly starved quadruples", with(func(s *raSignals) { s.GPUUtil = 0.4 }), 512, "raise", "×4"},
		{"scan counts as sequential", with(func(s *raSignals) { s.Class = classScan }), 256, "raise", ""},
		{"a starvation finding on the node is starvation", with(func(s *raSignals) { s.HasGPU = false; s.StarvedFinding = true }), 256, "raise", ""},
		{"ceiling from the agent's bounds", with(func(s *raSignals) { s.CurrentKB = 12288 }), 16384, "raise", ""},
		{"at the ceiling", with(func(s *raSignals) { s.CurrentKB = 16384 }), 0, "", "ceiling"},
		{"GPUs busy", with(func(s *raSignals) { s.GPUUtil = 0.97 }), 0, "", "not starved"},
		{"no GPUs and no finding", with(func(s *raSignals) { s.HasGPU = false }), 0, "", "not starved"},
		{"unknown class is left alone", with(func(s *raSignals) { s.Class = "" }), 0, "", "neither"},
		{"writing as much as reading", with(func(s *raSignals) { s.WriteBytes = 4e9 }), 0, "", "checkpointed"},
		{"checkpointed within the window", with(func(s *raSignals) { s.Checkpointed = true }), 0, "", "checkpointed"},
		{"storage path blamed", with(func(s *raSignals) { s.PathBlamed = "device:d1" }), 0, "", "storage path"},
		{"no DS headroom", with(func(s *raSignals) { s.DSUtil = 0.9 }), 0, "", "headroom"},
		{"a raise did not help before", with(func(s *raSignals) { s.HeldUp = true }), 0, "", "held"},
		{"amplified training is not sequential", with(func(s *raSignals) { s.ServerBytes = 4e9 }), 0, "", "not reading sequentially"},
		{"nothing read", with(func(s *raSignals) { s.AppBytes, s.ServerBytes = 0, 0 }), 0, "", "reads nothing"},
		{"random reader wasting read-ahead halves", raSignals{Class: classInference, AppBytes: 4e8, ServerBytes: 8e8, CurrentKB: 128, Bounds: bounds}, 64, "lower", "wasting"},
		{"amplified reader of unknown class is random", raSignals{AppBytes: 4e8, ServerBytes: 1.6e9, CurrentKB: 512, Bounds: bounds}, 256, "lower", ""},
		{"random pread without waste is left alone", raSignals{Class: classInference, AppBytes: 4e8, ServerBytes: 4.1e8, CurrentKB: 2048, Bounds: bounds}, 0, "", "without waste"},
		{"random at the floor", raSignals{Class: classInference, AppBytes: 4e8, ServerBytes: 8e8, CurrentKB: 64, Bounds: bounds}, 0, "", "floor"},
		{"a lower did not help before", raSignals{Class: classInference, AppBytes: 4e8, ServerBytes: 8e8, CurrentKB: 128, Bounds: bounds, HeldDown: true}, 0, "", "held"},
		{"never below the agent's floor", raSignals{Class: classInference, AppBytes: 4e8, ServerBytes: 8e8, CurrentKB: 160, Bounds: models.ReadAheadBounds{MinKB: 128, MaxKB: 16384}}, 128, "lower", ""},
	}
	for _, c := range cases {
		got := decideReadAhead(p, c.s)
		if got.KB != c.kb || got.Direction != c.dir || !strings.Contains(got.Why, c.whyPart) {
			t.Errorf("%s: got %d KiB %q (%s); want %d KiB %q with %q", c.name, got.KB, got.Direction, got.Why, c.kb, c.dir, c.whyPart)
		}
	}
}

// TestReadAheadPolicyClosedLoop drives the engine with a node agent's
// reports and the mount's numbers: the loop raises a starved training
// mount, keeps the raise that helped, rolls back the one that did not,
// and does not try that direction on the mount again.
func TestReadAheadPolicyClosedLoop(t *testing.T) {
	cfg := testConfig(models.ModeAuto)
	r := newRig(t, cluster4(), cfg, "")
	cur := int64(128)
	appRate := func(kb int64) float64 { // helps up to 256 KiB, not beyond
		return 1e9 * float64(min(kb, 256)) / 128
	}
	r.measure = func(expr string, _ time.Time) (float64, bool) {
		switch {
		case strings.Contains(expr, models.MetricNFSClientServerReadBytes), strings.Contains(expr, models.MetricNFSClientReadBytes):
			return appRate(cur), true
		case strings.Contains(expr, models.MetricGPUUtilization):
			if cur < 256 {
				return 0.6, true
			}
			return 0.8, true
		case strings.Contains(expr, models.MetricNFSClientWriteBytes):
			return 0, true
		case strings.Contains(expr, `operation="READ"`):
			return 0.001, true
		}
		return 0, false
	}
	profile := models.Finding{ID: "workload_profile:client:gpu01:1", Kind: findingProfile, Subject: models.Subject{Kind: models.SubjectClient, ID: "gpu01"},
		Severity: models.SeverityInfo, Start: t0, LastSeen: t0, Summary: "client gpu01 runs workload class training-read"}
	sync := func() {
		rep := models.ReadAheadReport{Node: "gpu01", Bounds: models.ReadAheadBounds{MinKB: 64, MaxKB: 16384, MaxStepKB: 8192},
			Mounts: []models.ReadAheadMount{{MountPoint: "/mnt/train", BDI: "0:52", FSType: "nfs4", CurrentKB: cur, OriginalKB: 128}}}
		want, err := r.e.SyncReadAhead(rep, r.now)
		if err != nil {
			t.Fatal(err)
		}
		cur = 128
		for _, tg := range want.Targets {
			if tg.MountPoint == "/mnt/train" && !tg.DryRun {
				cur = tg.KB
			}
		}
	}
	for range 60 { // 10 minutes
		sync()
		profile.LastSeen = r.now
		r.tick(profile)
	}
	as := r.e.List(func(a *models.Action) bool { return a.Kind == models.ActionSetReadAhead })
	if len(as) != 2 {
		t.Fatalf("%d set_read_ahead actions, want 2 (a raise that helped, one that did not): %+v", len(as), as)
	}
	first, second := as[0], as[1]
	if first.Created.After(second.Created) {
		first, second = second, first
	}
	if first.Params[ParamReadAheadKB] != "256" || first.State != models.ActionSucceeded || first.Effect == nil || first.Effect.Verdict != models.VerdictEffective {
		t.Errorf("first change: %s KiB, %s, effect %+v; want 256 KiB succeeded and effective", first.Params[ParamReadAheadKB], first.State, first.Effect)
	}
	if first.Params[ParamPolicy] != policyName || first.Params[ParamDirection] != "raise" || !strings.Contains(first.Reason, "GPU utilisation 0.600") {
		t.Errorf("first change does not explain itself: params %v, reason %q", first.Params, first.Reason)
	}
	if second.Params[ParamReadAheadKB] != "512" || second.State != models.ActionRolledBack {
		t.Errorf("second change: %s KiB, %s; want 512 KiB rolled back (it did not help)", second.Params[ParamReadAheadKB], second.State)
	}
	if cur != 256 {
		t.Errorf("the mount is at %d KiB, want 256 (the change that helped kept, the other rolled back)", cur)
	}
}

// TestReadAheadPolicyHoldsAfterStorageBlame: a starved training mount is
// not raised while a starvation finding blames a storage subject, nor for
// a verify window after it ended (the GPUs catch up on their own), and is
// raised after that.
func TestReadAheadPolicyHoldsAfterStorageBlame(t *testing.T) {
	r := newRig(t, cluster4(), testConfig(models.ModeAuto), "")
	r.measure = func(expr string, _ time.Time) (float64, bool) {
		switch {
		case strings.Contains(expr, models.MetricGPUUtilization):
			return 0.6, true
		case strings.Contains(expr, models.MetricNFSClientWriteBytes):
			return 0, true
		case strings.Contains(expr, "read_bytes"):
			return 1e9, true
		}
		return 0, false
	}
	profile := models.Finding{ID: "workload_profile:client:gpu01:1", Kind: findingProfile, Subject: models.Subject{Kind: models.SubjectClient, ID: "gpu01"},
		Severity: models.SeverityInfo, Start: t0, LastSeen: t0, Summary: "client gpu01 runs workload class training-read"}
	blame := models.Finding{ID: "gpu_starvation:device:d1:1", Kind: findingStarvation, Subject: models.Subject{Kind: models.SubjectDevice, ID: "d1"},
		Severity: models.SeverityWarning, Start: t0, LastSeen: t0}
	raised := func() bool {
		return len(r.e.List(func(a *models.Action) bool { return a.Kind == models.ActionSetReadAhead })) > 0
	}
	step := func(fs ...models.Finding) {
		rep := models.ReadAheadReport{Node: "gpu01", Bounds: models.ReadAheadBounds{MinKB: 64, MaxKB: 16384, MaxStepKB: 8192},
			Mounts: []models.ReadAheadMount{{MountPoint: "/mnt/train", BDI: "0:52", FSType: "nfs4", CurrentKB: 128, OriginalKB: 128}}}
		if _, err := r.e.SyncReadAhead(rep, r.now); err != nil {
			t.Fatal(err)
		}
		profile.LastSeen = r.now
		r.tick(append(fs, profile)...)
	}
	for range 6 { // a minute with the device blamed
		blame.LastSeen = r.now
		step(blame)
	}
	if raised() {
		t.Fatal("raised while storage was blamed for the starvation")
	}
	blame.End = r.now
	step(blame)
	step() // within the 30 s verify window after the blame ended
	if raised() {
		t.Fatal("raised within the verify window after storage was blamed")
	}
	for range 6 {
		step()
	}
	if !raised() {
		t.Fatal("not raised once storage was no longer blamed")
	}
}
