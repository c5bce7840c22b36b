package score

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ballast-io/ballast/cluster/analysis"
	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/sim/twin"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(min float64) time.Time { return t0.Add(time.Duration(min * float64(time.Minute))) }

func subj(k models.SubjectKind, id string) models.Subject { return models.Subject{Kind: k, ID: id} }

func finding(kind string, s models.Subject, start, end float64) models.Finding {
	f := models.Finding{ID: kind + ":" + s.String() + ":" + at(start).Format(time.RFC3339), Kind: kind, Subject: s, Start: at(start), LastSeen: at(start)}
	if end > 0 {
		f.End = at(end)
		f.LastSeen = at(end)
	}
	return f
}

func truth(kind string, s models.Subject, start, end float64, params map[string]any) twin.TruthRecord {
	r := twin.TruthRecord{Kind: kind, Subject: s, Start: at(start), Params: params}
	if end > 0 {
		r.End = at(end)
	}
	return r
}

// names maps the ids of this test's "mds" (dev-N hex stand-ins, addresses)
// to twin names the way the harness does.
func names() Names {
	devs := map[string]string{"d4": "ds04/nvme4n1", "d5": "ds05/nvme4n1", "d1": "ds01/nvme0n1"}
	return Names{
		Device: func(id string) string { return devs[id] },
		Stripe: func(fh string) string {
			if fh == "fh17" {
				return "imagenet/shard-00017#0"
			}
			return ""
		},
		DS: map[string]string{"10.0.0.4:2049": "ds04", "10.0.0.3:2049": "ds03"},
	}
}

func TestHotspotMatchingAndDelay(t *testing.T) {
	in := Input{
		Truth: []twin.TruthRecord{
			truth("hot_shard", subj("stripe", "imagenet/shard-00017#0"), 10, 70, map[string]any{"device": "ds04/nvme4n1", "ds": "ds04"}),
			truth("hot_shard", subj("stripe", "imagenet/shard-00017#1"), 10, 70, map[string]any{"device": "ds05/nvme4n1", "ds": "ds05"}),
			truth("port_saturation", subj("port", "sw/ds03"), 20, 0, nil), // ongoing at the end
			truth("device_saturated", subj("device", "ds01/nvme0n1"), 80, 85, nil),
		},
		Findings: []models.Finding{
			finding("hotspot", subj("device", "d4"), 9.8, 71),       // device of stripe #0: a hit
			finding("hotspot", subj("stripe", "d4/fh17"), 10.5, 70), // the stripe itself: a hit
			finding("hotspot", subj("ds", "10.0.0.3:2049"), 25, 0),  // DS behind the port: a hit
			finding("hotspot", subj("device", "d1"), 84, 90),        // explained by device_saturated
			finding("hotspot", subj("device", "d5"), 200, 210),      // the right device at the wrong time
			finding("hotspot", subj("ds", "10.0.0.4:2049"), 80, 90), // the hot stripe's DS, after the fault
		},
		Start: at(0),
		End:   at(100),
	}
	in.FirstReported = map[string]time.Time{
		in.Findings[0].ID: at(10.5), // reported 30 s after the onset although Start is backdated
		in.Findings[1].ID: at(11),
		in.Findings[2].ID: at(25.5),
	}
	in.Names = names()
	r := Score(in)
	hs := r.Kinds["hotspot"]
	if hs.Findings != 6 || hs.TruePositives != 4 {
		t.Errorf("findings %d, true positives %d; want 6, 4", hs.Findings, hs.TruePositives)
	}
	if hs.Targets != 3 || hs.Detected != 2 {
		t.Errorf("targets %d, detected %d; want 3, 2 (missed: %v)", hs.Targets, hs.Detected, hs.Missed)
	}
	if len(hs.Missed) != 1 || !strings.Contains(hs.Missed[0], "shard-00017#1") {
		t.Errorf("missed %v; want the stripe on ds05", hs.Missed)
	}
	// Delays: 30 s for the shard (first report of the device finding),
	// 330 s for the port (first report 25.5 min, onset 20 min).
	if float64(hs.MedianDelay) != 180 || math.Abs(float64(hs.P95Delay)-315) > 1e-9 {
		t.Errorf("delays median %v p95 %v; want 180, 315", hs.MedianDelay, hs.P95Delay)
	}
	if float64(hs.Precision) != 4.0/6 || float64(hs.Recall) != 2.0/3 {
		t.Errorf("precision %v recall %v; want 0.667 0.667", hs.Precision, hs.Recall)
	}
	// Two false findings in 100 simulated minutes.
	if math.Abs(float64(hs.FalsePerHour)-1.2) > 1e-9 {
		t.Errorf("false findings per hour %v; want 1.2", hs.FalsePerHour)
	}
}

// TestHotspotOnAClientMatchesItsPort: a saturated GPU-side switch port is
// found by a hotspot finding on the client node behind it (the mds names
// no switch port; it sees the node's reads slow down); a finding on
// another node is false.
func TestHotspotOnAClientMatchesItsPort(t *testing.T) {
	in := Input{
		Truth: []twin.TruthRecord{truth("port_saturation", subj("port", "sw/gpu03"), 10, 40, nil)},
		Findings: []models.Finding{
			finding("hotspot", subj("client", "gpu03"), 10.5, 40),
			finding("hotspot", subj("client", "gpu04"), 10.5, 40),
		},
		Start: at(0),
		End:   at(60),
		Names: names(),
	}
	hs := Score(in).Kinds["hotspot"]
	if hs.Detected != 1 || hs.TruePositives != 1 || hs.Findings != 2 {
		t.Errorf("detected %d, true positives %d of %d findings; want 1, 1 of 2 (missed %v)", hs.Detected, hs.TruePositives, hs.Findings, hs.Missed)
	}
}

func TestDriveAndNodeLossContainment(t *testing.T) {
	in := Input{
		Truth: []twin.TruthRecord{
			truth("failing_drive", subj("device", "ds03/nvme2n1"), 10, 360, nil),
			truth("node_loss", subj("ds", "ds01"), 95, 100, nil),
			truth("gpu_idle", subj("ds", "ds01"), 95, 96, map[string]any{"cause": "node_down", "gpu_seconds": 60.0}),
		},
		Findings: []models.Finding{
			finding("drive_failure_risk", subj("device", "ds03/nvme2"), 100, 0), // SMART controller name
			finding("gpu_starvation", subj("device", "d1"), 95, 96.5),           // a device of the lost DS
		},
		Blame: []analysis.BlameRecord{{Minute: at(95), Cause: "device:d1", Seconds: 60}},
		Names: names(),
		End:   at(400),
	}
	r := Score(in)
	if d := r.Kinds["drive_failure_risk"]; d.Detected != 1 || d.TruePositives != 1 || float64(d.MedianDelay) != 90*60 {
		t.Errorf("drive: detected %d tp %d delay %v; want 1 1 5400", d.Detected, d.TruePositives, d.MedianDelay)
	}
	if g := r.Kinds["gpu_starvation"]; g.Detected != 1 || g.TruePositives != 1 {
		t.Errorf("starvation: detected %d tp %d; want 1 1", g.Detected, g.TruePositives)
	}
	if a := r.Attribution; float64(a.StorageIdleSeconds) != 60 || float64(a.Share) != 1 {
		t.Errorf("attribution %+v; want 60 s, all charged to a device of the lost DS", a)
	}
}

func TestAttributionShares(t *testing.T) {
	in := Input{
		Truth: []twin.TruthRecord{
			truth("gpu_idle", subj("device", "ds04/nvme4n1"), 10, 11, map[string]any{"cause": "device", "gpu_seconds": 100.0}),
			truth("gpu_idle", subj("device", "ds04/nvme4n1"), 11, 12, map[string]any{"cause": "device", "gpu_seconds": 100.0}),
			truth("gpu_idle", subj("port", "sw/ds03"), 10, 11, map[string]any{"cause": "port", "gpu_seconds": 50.0}),
			truth("gpu_idle", subj("job", "train"), 20, 21, map[string]any{"cause": "loader", "gpu_seconds": 40.0}),
			truth("gpu_idle", subj("job", "train"), 30, 31, map[string]any{"cause": "checkpoint", "gpu_seconds": 500.0}),
		},
		Blame: []analysis.BlameRecord{
			// minute 10: the hot stripe on ds04's drive is the right subject
			// for the drive's 100 s; its extra 30 s cannot pay for the port
			{Minute: at(10), Cause: "stripe:d4/fh17", Seconds: 130},
			// minute 10: the DS behind the saturated port, 20 of its 50 s
			{Minute: at(10), Cause: "ds:10.0.0.3:2049", Seconds: 20},
			// minute 11: a wrong device
			{Minute: at(11), Cause: "device:d5", Seconds: 100},
			// minute 20: storage blamed during loader idle: 25 of 40 s
			{Minute: at(20), Cause: "device:d5", Seconds: 25},
			// minute 30: the checkpoint pause blamed right, not storage
			{Minute: at(30), Cause: "checkpoint:gpu00", Seconds: 500},
			{Minute: at(30), Cause: "not-storage", Seconds: 3},
		},
		Names: names(),
		End:   at(60),
	}
	a := Score(in).Attribution
	if float64(a.StorageIdleSeconds) != 250 || float64(a.Attributed) != 120 {
		t.Errorf("storage idle %v attributed %v; want 250, 120", a.StorageIdleSeconds, a.Attributed)
	}
	if float64(a.HealthyIdleSeconds) != 540 || float64(a.BlamedOnStorage) != 25 {
		t.Errorf("healthy idle %v blamed %v; want 540, 25", a.HealthyIdleSeconds, a.BlamedOnStorage)
	}
	if got := a.ByCause["port"]; got != [2]float64{50, 20} {
		t.Errorf("port cause %v; want [50 20]", got)
	}
	// Two minute records of one subject merge into one episode; the port's
	// 50 GPU-seconds are below one GPU-minute and no target.
	in.Findings = []models.Finding{finding("gpu_starvation", subj("stripe", "d4/fh17"), 10, 11.5)}
	if g := Score(in).Kinds["gpu_starvation"]; g.Targets != 1 || g.Detected != 1 {
		t.Errorf("storage idle episodes %d, detected %d; want 1, 1 (the device)", g.Targets, g.Detected)
	}
}

// TestAttributionToPeersInTheSameFault: the twin blames one of the four
// equally saturated drives of a hot shard; charges to another of them count.
func TestAttributionToPeersInTheSameFault(t *testing.T) {
	in := Input{
		Truth: []twin.TruthRecord{
			truth("device_saturated", subj("device", "ds04/nvme4n1"), 9, 0, nil),
			truth("device_saturated", subj("device", "ds05/nvme4n1"), 9, 0, nil),
			truth("gpu_idle", subj("device", "ds04/nvme4n1"), 10, 11, map[string]any{"cause": "device", "gpu_seconds": 100.0}),
			truth("gpu_idle", subj("ds", "ds03"), 10, 11, map[string]any{"cause": "ds_nic", "gpu_seconds": 100.0}),
		},
		Blame: []analysis.BlameRecord{
			{Minute: at(10), Cause: "device:d5", Seconds: 60}, // saturated peer of ds04/nvme4n1
			{Minute: at(10), Cause: "device:d1", Seconds: 60}, // not saturated, not ds03: nobody's
		},
		Names: names(),
		End:   at(20),
	}
	if a := Score(in).Attribution; float64(a.Attributed) != 60 {
		t.Errorf("attributed %v; want 60 (the saturated peer only)", a.Attributed)
	}
}

func TestCheckpointBurstsByNodeAndForecastErrors(t *testing.T) {
	var tr []twin.TruthRecord
	for i := range 6 { // bursts every 20 min from minute 20, 1 min long
		s := 20 + 20*float64(i)
		tr = append(tr, truth("checkpoint_burst", subj("job", "train"), s, s+1, nil))
	}
	tr = append(tr, truth("workload_phase", subj("job", "train"), 0, 0, map[string]any{"class": "training"}))
	in := Input{
		Truth: tr,
		Findings: []models.Finding{
			finding("checkpoint_burst", subj("client", "gpu00"), 20.1, 21),
			finding("checkpoint_burst", subj("client", "gpu01"), 40.1, 41),
			finding("checkpoint_burst", subj("client", "gpu09"), 40.1, 41), // not a node of the job
		},
		Forecasts: []analysis.ForecastRecord{
			{At: at(50), Subject: subj("client", "gpu00"), Period: 21 * time.Minute, NextStart: at(61)},   // 2 bursts seen: not scored
			{At: at(70), Subject: subj("client", "gpu00"), Period: 19 * time.Minute, NextStart: at(82)},   // next truth 80: 2/20
			{At: at(105), Subject: subj("client", "gpu01"), Period: 20 * time.Minute, NextStart: at(121)}, // next 120: 1/20
			{At: at(125), Subject: subj("client", "gpu01"), Period: 20 * time.Minute, NextStart: at(140)}, // no truth after: not scored
		},
		JobNodes: map[string][]string{"train": {"gpu00", "gpu01"}},
		End:      at(130),
	}
	r := Score(in)
	cb := r.Kinds["checkpoint_burst"]
	if cb.TruePositives != 2 || cb.Detected != 2 || cb.Targets != 6 {
		t.Errorf("bursts: tp %d detected %d targets %d; want 2 2 6", cb.TruePositives, cb.Detected, cb.Targets)
	}
	f := r.Forecast
	if f.Predictions != 2 || math.Abs(float64(f.PeriodErrorMedian)-0.025) > 1e-9 || math.Abs(float64(f.NextStartErrorMedian)-0.075) > 1e-9 {
		t.Errorf("forecast %+v; want 2 predictions, period error 0.025, next-start error 0.075", f)
	}
}

func TestWorkloadLabels(t *testing.T) {
	in := Input{
		Truth: []twin.TruthRecord{
			truth("workload_phase", subj("job", "train"), 0, 0, map[string]any{"class": "training"}),
			truth("workload_phase", subj("job", "serve"), 0, 30, map[string]any{"class": "inference"}),
			truth("checkpoint_burst", subj("job", "train"), 10.5, 10.7, nil),
		},
		Labels: []analysis.WindowLabel{
			{Subject: subj("client", "gpu00"), Start: at(9), End: at(10), Class: "training-read"},
			{Subject: subj("client", "gpu00"), Start: at(10), End: at(11), Class: "checkpoint"},     // burst inside
			{Subject: subj("client", "gpu00"), Start: at(11), End: at(12), Class: "inference"},      // wrong
			{Subject: subj("client", "gpu08"), Start: at(20), End: at(21), Class: "inference"},      // right
			{Subject: subj("client", "gpu08"), Start: at(40), End: at(41), Class: "analytics-scan"}, // job over: idle expected
		},
		JobNodes: map[string][]string{"train": {"gpu00"}, "serve": {"gpu08"}},
		End:      at(60),
	}
	w := Score(in).Workload
	if w.Windows != 5 || w.Correct != 3 {
		t.Errorf("windows %d correct %d; want 5, 3 (%v)", w.Windows, w.Correct, w.Confused)
	}
	if w.Confused["training-read→inference"] != 1 || w.Confused["idle→analytics-scan"] != 1 {
		t.Errorf("confusions %v", w.Confused)
	}
}

func TestUndefinedScoresEncodeAsNull(t *testing.T) {
	r := Score(Input{End: at(1)})
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"precision":null`) {
		t.Errorf("got %s; want precision null for a kind with no findings", b)
	}
}

// TestHotspotHitNeedsTheHotDeviceOrDS: a hotspot finding on another drive
// of the hot shard's DS neither detects the hot shard nor is explained by
// it (it once counted through the DS that contains both); a DS finding on
// that DS still does.
func TestHotspotHitNeedsTheHotDeviceOrDS(t *testing.T) {
	in := Input{
		Truth: []twin.TruthRecord{
			truth("hot_shard", subj("stripe", "imagenet/shard-00017#0"), 10, 70, map[string]any{"device": "ds04/nvme4n1", "ds": "ds04"}),
		},
		Findings: []models.Finding{finding("hotspot", subj("device", "ds04/nvme1n1"), 12, 60)},
		Names:    names(),
		End:      at(100),
	}
	if hs := Score(in).Kinds["hotspot"]; hs.TruePositives != 0 || hs.Detected != 0 {
		t.Errorf("another drive of the DS: %d true positives, %d detected; want 0, 0", hs.TruePositives, hs.Detected)
	}
	in.Findings = []models.Finding{finding("hotspot", subj("ds", "10.0.0.4:2049"), 12, 60)}
	if hs := Score(in).Kinds["hotspot"]; hs.TruePositives != 1 || hs.Detected != 1 {
		t.Errorf("the DS itself: %d true positives, %d detected; want 1, 1", hs.TruePositives, hs.Detected)
	}
}

// TestWorkloadShiftIsExplainedOnlyByAPhaseChange: a workload_shift
// finding in the middle of a job's phase is a false flip-flop (once any
// shift during a job counted as explained); one within the tolerance of
// the phase's start or end is the job changing.
func TestWorkloadShiftIsExplainedOnlyByAPhaseChange(t *testing.T) {
	in := Input{
		Truth:    []twin.TruthRecord{truth("workload_phase", subj("job", "scan"), 30, 90, map[string]any{"class": "analytics"})},
		Findings: []models.Finding{finding("workload_shift", subj("job", "scan"), 30.5, 31), finding("workload_shift", subj("job", "scan"), 60, 61), finding("workload_shift", subj("job", "scan"), 90.5, 91)},
		Start:    at(0),
		End:      at(120),
	}
	ws := Score(in).Kinds["workload_shift"]
	if ws.TruePositives != 2 || float64(ws.FalsePerHour) != 0.5 {
		t.Errorf("%d explained, %v false per hour; want the shifts at the phase's start and end explained, 0.5 false per hour", ws.TruePositives, ws.FalsePerHour)
	}
}

// TestColimitedIdleIsATarget: a stall split over eight equally saturated
// DS NICs gives each DS 10 GPU-s of a minute in which the GPUs lost 80;
// each DS's episode is a gpu_starvation target (the GPUs lost a
// GPU-minute), while a lone 10 GPU-s episode stays minor.
func TestColimitedIdleIsATarget(t *testing.T) {
	in := Input{End: at(30), Names: names()}
	for d := range 8 {
		id := "ds0" + string(rune('0'+d))
		in.Truth = append(in.Truth, truth("gpu_idle", subj("ds", id), 10, 11,
			map[string]any{"cause": "ds_nic", "gpu_seconds": 10.0, "gpu_seconds_colimited": 80.0}))
	}
	in.Truth = append(in.Truth, truth("gpu_idle", subj("port", "sw/ds03"), 20, 21, map[string]any{"cause": "port", "gpu_seconds": 10.0}))
	r := Score(in)
	if g := r.Kinds["gpu_starvation"]; g.Targets != 8 {
		t.Errorf("gpu_starvation targets %d; want 8 (one per co-limiting DS, not the lone 10 GPU-s port episode)", g.Targets)
	}
}

// TestCheckpointFailedScoring: checkpoint_failed is scored against the
// checkpoint_burst truth records that failed; a finding on a checkpoint
// that succeeded is false, and checkpoint_burst's own score is unchanged.
func TestCheckpointFailedScoring(t *testing.T) {
	job := subj(models.SubjectJob, "train-a")
	in := Input{
		Truth: []twin.TruthRecord{
			truth("checkpoint_burst", job, 10, 11, map[string]any{"failed": "io_error"}),
			truth("checkpoint_burst", job, 30, 31, nil),
			truth("checkpoint_burst", job, 50, 51, map[string]any{"failed": "enospc"}),
		},
		Findings: []models.Finding{
			finding("checkpoint_burst", subj(models.SubjectClient, "gpu00"), 10, 11),
			finding("checkpoint_failed", subj(models.SubjectClient, "gpu00"), 10, 12),
			finding("checkpoint_failed", subj(models.SubjectClient, "gpu01"), 30, 31),
		},
		JobNodes: map[string][]string{"train-a": {"gpu00", "gpu01"}},
		End:      at(60),
	}
	in.FirstReported = map[string]time.Time{in.Findings[1].ID: at(11)}
	r := Score(in)
	k := r.Kinds["checkpoint_failed"]
	if k == nil || k.Targets != 2 || k.Detected != 1 || k.Findings != 2 || k.TruePositives != 1 || float64(k.MedianDelay) != 60 {
		t.Fatalf("checkpoint_failed %+v; want 2 targets, 1 detected 60 s after onset, 1 of 2 findings right", k)
	}
	if len(k.Missed) != 1 || !strings.Contains(k.Missed[0], "job:train-a") {
		t.Errorf("missed %v; want the enospc checkpoint", k.Missed)
	}
	if b := r.Kinds["checkpoint_burst"]; b.Targets != 3 || b.Detected != 1 {
		t.Errorf("checkpoint_burst %+v; want 3 targets, 1 detected", b)
	}
	if r.TruthCounts["checkpoint_failed"] != 2 || r.TruthCounts["checkpoint_burst"] != 3 {
		t.Errorf("truth counts %v; want 2 failed of 3 bursts", r.TruthCounts)
	}
}

// TestDelayAfterEvidence: drive_failure_risk reports, beside the delay
// from the onset, the median delay after each target's first evidence and
// first error (the twin's evidence_after_onset_s, error_after_onset_s);
// without those times the fields are absent, not 0.
func TestDelayAfterEvidence(t *testing.T) {
	in := Input{
		Truth: []twin.TruthRecord{
			truth("failing_drive", subj("device", "ds04/nvme4n1"), 10, 0, map[string]any{"evidence_after_onset_s": 60.0, "error_after_onset_s": 600.0}),
			truth("failing_drive", subj("device", "ds05/nvme4n1"), 10, 0, map[string]any{"evidence_after_onset_s": 120.0, "error_after_onset_s": 900.0}),
		},
		Findings: []models.Finding{
			finding("drive_failure_risk", subj("device", "ds04/nvme4n1"), 25, 0), // 15 min after the onset
			finding("drive_failure_risk", subj("device", "ds05/nvme4n1"), 30, 0), // 20 min after
		},
		Start: at(0),
		End:   at(60),
	}
	k := Score(in).Kinds["drive_failure_risk"]
	if k.Detected != 2 || float64(k.MedianDelay) != 1050 {
		t.Fatalf("detected %d, median delay %v; want 2, 1050", k.Detected, k.MedianDelay)
	}
	// after evidence: 900 − 60 = 840 and 1200 − 120 = 1080; after the
	// first error: 300 and 300
	if k.MedianEvidenceDelay == nil || float64(*k.MedianEvidenceDelay) != 960 {
		t.Errorf("median delay after evidence %v; want 960", k.MedianEvidenceDelay)
	}
	if k.MedianErrorDelay == nil || float64(*k.MedianErrorDelay) != 300 {
		t.Errorf("median delay after the first error %v; want 300", k.MedianErrorDelay)
	}
	for i := range in.Truth {
		in.Truth[i].Params = map[string]any{}
	}
	k = Score(in).Kinds["drive_failure_risk"]
	js, err := json.Marshal(k)
	if err != nil {
		t.Fatal(err)
	}
	if k.MedianEvidenceDelay != nil || k.MedianErrorDelay != nil || strings.Contains(string(js), "after_") {
		t.Errorf("without evidence times: %s; want no delay-after fields", js)
	}
	if float64(k.MedianDelay) != 1050 {
		t.Errorf("median delay %v without evidence times; want 1050 still", k.MedianDelay)
	}
}
