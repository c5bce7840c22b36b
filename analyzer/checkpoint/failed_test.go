package checkpoint

import (
	"strings"
	"testing"
	"time"

	"github.com/ballast-io/ballast/models"
)

var fail0 = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)

func at(s int) time.Time { return fail0.Add(time.Duration(s) * time.Second) }

func TestFailedCheckpoint(t *testing.T) {
	job := models.Subject{Kind: models.SubjectJob, ID: "train-a"}
	burst := func(start, end int, open bool) TrackedBurst {
		return TrackedBurst{ID: KindBurst + ":" + job.String() + ":1", Burst: Burst{Start: at(start), End: at(end), Open: open, Bytes: 5e11}}
	}
	nxio := func(s int, dev string) WriteError {
		return WriteError{At: at(s), Device: dev, DS: "ds05", Status: "NFS4ERR_NXIO", Count: 40}
	}

	t.Run("errors during the burst fail it", func(t *testing.T) {
		fl := NewFailures(FailureOptions{})
		fl.Observe(job, nxio(70, "ds05/nvme0n1"))
		fl.Observe(job, nxio(70, "ds05/nvme1n1"))
		fs := fl.Findings(at(70), job, []TrackedBurst{burst(0, 70, true)})
		if len(fs) != 1 {
			t.Fatalf("got %d findings; want 1", len(fs))
		}
		f := fs[0]
		if f.Kind != KindFailed || f.Severity != models.SeverityCritical || f.Subject != job || !f.Start.Equal(at(0)) || !f.Active() {
			t.Errorf("got %+v; want an active critical checkpoint_failed of job train-a from the burst's start", f)
		}
		for _, want := range []string{"ds05/nvme0n1", "ds05/nvme1n1", "DS ds05", "data server unreachable", "80 write errors"} {
			if !strings.Contains(f.Summary, want) {
				t.Errorf("summary %q lacks %q", f.Summary, want)
			}
		}
		if v, _ := f.EvidenceValue("write_errors"); v != 80 {
			t.Errorf("write_errors %v; want 80", v)
		}
		// The burst closes; once the grace passed the finding ends, once.
		fs = fl.Findings(at(100), job, []TrackedBurst{burst(0, 90, false)})
		if len(fs) != 1 || !fs[0].Active() {
			t.Fatalf("within the grace: %+v; want the finding still open", fs)
		}
		fs = fl.Findings(at(90+181), job, []TrackedBurst{burst(0, 90, false)})
		if len(fs) != 1 || fs[0].Active() || fs[0].ID != f.ID {
			t.Fatalf("after the grace: %+v; want the same finding, ended", fs)
		}
		if fs = fl.Findings(at(300), job, []TrackedBurst{burst(0, 90, false)}); len(fs) != 0 {
			t.Errorf("after it ended: %+v; want nothing more", fs)
		}
	})

	t.Run("a burst without errors did not fail", func(t *testing.T) {
		fl := NewFailures(FailureOptions{})
		other := models.Subject{Kind: models.SubjectJob, ID: "train-b"}
		fl.Observe(other, nxio(30, "ds05/nvme0n1")) // another group's errors
		if fs := fl.Findings(at(60), job, []TrackedBurst{burst(0, 60, true)}); len(fs) != 0 {
			t.Errorf("got %+v; want none", fs)
		}
	})

	t.Run("errors outside any burst fail nothing", func(t *testing.T) {
		fl := NewFailures(FailureOptions{})
		fl.Observe(job, nxio(-30, "ds05/nvme0n1"))    // before the burst
		fl.Observe(job, nxio(90+200, "ds05/nvme0n1")) // after its grace
		if fs := fl.Findings(at(90+200), job, []TrackedBurst{burst(0, 90, false)}); len(fs) != 0 {
			t.Errorf("got %+v; want none", fs)
		}
		if fs := fl.Findings(at(90+200), job, nil); len(fs) != 0 {
			t.Errorf("without bursts: got %+v; want none", fs)
		}
	})

	t.Run("an error counts against the latest burst before it", func(t *testing.T) {
		fl := NewFailures(FailureOptions{})
		fl.Observe(job, WriteError{At: at(1000), Device: "scr00/nvme0n1", Status: "NFS4ERR_NOSPC", Count: 1})
		b2 := TrackedBurst{ID: KindBurst + ":" + job.String() + ":2", Burst: Burst{Start: at(990), End: at(1010)}}
		fs := fl.Findings(at(1010), job, []TrackedBurst{b2, burst(0, 900, false)})
		if len(fs) != 1 || fs[0].ID != KindFailed+":"+job.String()+":2" || !strings.Contains(fs[0].Summary, "no space") {
			t.Errorf("got %+v; want one finding on the second burst, no space", fs)
		}
	})
}

// TestFailedBeforeABurst: errors that no burst explains but that fell in
// the group's forecast window fail that window once they settled; errors
// without a window, or explained by a burst, do not.
func TestFailedBeforeABurst(t *testing.T) {
	job := models.Subject{Kind: models.SubjectJob, ID: "train-a"}
	nospc := func(s int, expected bool) WriteError {
		e := WriteError{At: at(s), Device: "scr00/nvme0n1", DS: "scr00", Status: "NFS4ERR_NOSPC", Count: 3}
		if expected {
			e.ExpectedStart, e.ExpectedEnd = at(0), at(70)
		}
		return e
	}
	fl := NewFailures(FailureOptions{})
	fl.Observe(job, nospc(10, true))
	fl.Observe(job, nospc(20, true))
	if fs := fl.Findings(at(30), job, nil); len(fs) != 0 {
		t.Fatalf("before the errors settled: %+v; want none", fs)
	}
	fs := fl.Findings(at(80), job, nil)
	if len(fs) != 1 || !fs[0].Start.Equal(at(0)) || !strings.Contains(fs[0].Summary, "failed before it wrote a burst") || !strings.Contains(fs[0].Summary, "no space") {
		t.Fatalf("got %+v; want one finding on the expected window, no space", fs)
	}
	if v, _ := fs[0].EvidenceValue("write_errors"); v != 6 {
		t.Errorf("write_errors %v; want 6", v)
	}
	if fs = fl.Findings(at(70+181), job, nil); len(fs) != 1 || fs[0].Active() {
		t.Errorf("after the grace: %+v; want it ended", fs)
	}

	other := NewFailures(FailureOptions{})
	other.Observe(job, nospc(10, false))
	if fs := other.Findings(at(200), job, nil); len(fs) != 0 {
		t.Errorf("without a forecast window: %+v; want none", fs)
	}
	// Explained by a burst: one finding, on the burst.
	burst := TrackedBurst{ID: KindBurst + ":" + job.String() + ":5", Burst: Burst{Start: at(5), End: at(60)}}
	both := NewFailures(FailureOptions{})
	both.Observe(job, nospc(10, true))
	if fs := both.Findings(at(100), job, []TrackedBurst{burst}); len(fs) != 1 || fs[0].ID != KindFailed+":"+job.String()+":5" {
		t.Errorf("errors in a burst inside the window: %+v; want the burst's finding only", fs)
	}
}
