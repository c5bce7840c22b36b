package analysis

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ballast-io/ballast/analyzer/checkpoint"
	"github.com/ballast-io/ballast/cluster/identity"
	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/storage"
)

// scriptQuerier answers each expression through a function of the time.
type scriptQuerier map[string]func(at time.Time) []storage.Series

func (f scriptQuerier) Query(_ context.Context, expr string, at time.Time) ([]storage.Series, error) {
	if fn := f[expr]; fn != nil {
		return fn(at), nil
	}
	return nil, nil
}

// TestCheckpointStageReportsAFailedCheckpoint: a client group writes a
// burst every 10 minutes; write errors its client reports during the third
// burst make one checkpoint_failed finding naming the device and its DS;
// errors between bursts fail nothing; the counter written again in the
// fifth burst at the value it had (the ingest forgot it and it started
// over) counts as new errors and fails that burst.
func TestCheckpointStageReportsAFailedCheckpoint(t *testing.T) {
	const dev = "62616c6c617374000000000000000005"
	ids := identity.New([]identity.Device{{ID: dev, DS: "ds05", Drive: "nvme1n1"}}, nil)
	inBurst := func(at time.Time) bool {
		s := at.Sub(t0) % (10 * time.Minute)
		return s >= 5*time.Minute && s < 6*time.Minute
	}
	// errors: (time written, value) of the one counter
	type pt struct {
		at time.Time
		v  float64
	}
	writes := []pt{{t0.Add(25*time.Minute + 40*time.Second), 7}, {t0.Add(41 * time.Minute), 9}, {t0.Add(45*time.Minute + 30*time.Second), 9}}
	latest := func(at time.Time) (pt, bool) {
		var p pt
		ok := false
		for _, w := range writes {
			if !w.at.After(at) {
				p, ok = w, true
			}
		}
		return p, ok
	}
	errLabels := []string{"client", "gpu00", "deviceid", dev, "status", "NFS4ERR_NXIO"}
	q := scriptQuerier{
		(&checkpointStage{a: &Analysis{opts: Options{}.withDefaults()}}).query(): func(at time.Time) []storage.Series {
			v := 1e6
			if inBurst(at) {
				v = 8e9
			}
			return []storage.Series{series("", v, "node", "gpu00")}
		},
		writeErrorsQuery: func(at time.Time) []storage.Series {
			if p, ok := latest(at); ok {
				return []storage.Series{series("", p.v, errLabels...)}
			}
			return nil
		},
		writeErrorsTimeQuery: func(at time.Time) []storage.Series {
			if p, ok := latest(at); ok {
				return []storage.Series{series("", float64(p.at.Unix()), errLabels...)}
			}
			return nil
		},
	}
	a, err := New(q, nil, Options{Identity: ids})
	if err != nil {
		t.Fatal(err)
	}
	var failed []models.Finding
	for now := t0; now.Before(t0.Add(50 * time.Minute)); now = now.Add(10 * time.Second) {
		fs, err := a.ckpt.Run(context.Background(), now)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fs {
			if f.Kind == checkpoint.KindFailed {
				failed = append(failed, f)
			}
		}
	}
	last := map[string]models.Finding{}
	var order []string
	for _, f := range failed {
		if _, ok := last[f.ID]; !ok {
			order = append(order, f.ID)
		}
		last[f.ID] = f
	}
	if len(order) != 2 {
		t.Fatalf("got findings %v; want two checkpoint_failed", order)
	}
	f := last[order[0]]
	if f.Subject != (models.Subject{Kind: models.SubjectClient, ID: "gpu00"}) || f.Active() || f.Start.Before(t0.Add(24*time.Minute)) || f.Start.After(t0.Add(26*time.Minute)) {
		t.Errorf("got %+v; want client gpu00's burst at 25 min, ended", f)
	}
	if !strings.Contains(f.Summary, "ds05/nvme1n1 (DS ds05)") || f.Severity != models.SeverityCritical {
		t.Errorf("summary %q severity %s; want the device and its DS named, critical", f.Summary, f.Severity)
	}
	if v, _ := f.EvidenceValue("write_errors"); v != 7 {
		t.Errorf("write_errors %v; want 7 (the write at 41 min is outside any burst)", v)
	}
	g := last[order[1]]
	if v, _ := g.EvidenceValue("write_errors"); v != 9 || g.Start.Before(t0.Add(44*time.Minute)) {
		t.Errorf("second finding %+v; want the burst at 45 min with 9 errors", g)
	}
}
