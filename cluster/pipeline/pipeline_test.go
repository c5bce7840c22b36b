package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ballast-io/ballast/models"
)

type recordingAppender struct {
	mu      sync.Mutex
	batches [][]models.Sample
}

func (a *recordingAppender) Append(_ context.Context, s []models.Sample) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.batches = append(a.batches, s)
	return nil
}

// countingSource emits one sample stamped with the simulated now.
type countingSource struct {
	name  string
	runs  []time.Time
	fail  bool
	block bool
}

func (s *countingSource) Name() string { return s.name }
func (s *countingSource) Collect(ctx context.Context, now time.Time) ([]models.Sample, error) {
	s.runs = append(s.runs, now)
	if s.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if s.fail {
		return nil, errors.New("device vanished")
	}
	return []models.Sample{{Name: "x_" + s.name, Timestamp: now.UnixMilli(), Value: 1}}, nil
}

type stageFunc struct {
	name string
	f    func(now time.Time) ([]models.Finding, error)
}

func (s stageFunc) Name() string { return s.name }
func (s stageFunc) Run(_ context.Context, now time.Time) ([]models.Finding, error) {
	return s.f(now)
}

type recordingActuator struct{ got [][]models.Finding }

func (a *recordingActuator) Name() string { return "rec" }
func (a *recordingActuator) Reconcile(_ context.Context, _ time.Time, fs []models.Finding) error {
	a.got = append(a.got, fs)
	return nil
}

func TestPipelineRunsOnSimulatedClock(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fast := &countingSource{name: "fast"}
	slow := &countingSource{name: "slow"}
	broken := &countingSource{name: "broken", fail: true}
	stuck := &countingSource{name: "stuck", block: true}
	app := &recordingAppender{}
	act := &recordingActuator{}
	var stageNows []time.Time
	p, err := NewPipeline(PipelineOptions{
		Sources: []SourceSpec{
			{Source: fast, Interval: 10 * time.Second},
			{Source: slow, Interval: 60 * time.Second},
			{Source: broken, Interval: 10 * time.Second},
			{Source: stuck, Interval: 10 * time.Second, Timeout: 20 * time.Millisecond},
		},
		Appender: app,
		Jitter:   -1, // negative: no jitter, exact schedule for this test
		Stages: []Stage{stageFunc{"hot", func(now time.Time) ([]models.Finding, error) {
			stageNows = append(stageNows, now)
			return []models.Finding{{ID: "f-" + now.Format("150405"), Kind: "hotspot"}}, nil
		}}, stageFunc{"failing", func(time.Time) ([]models.Finding, error) { return nil, errors.New("boom") }}},
		Actuators: []Actuator{act},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var errs int
	for i := 0; i <= 120; i += 10 {
		res := p.Tick(ctx, t0.Add(time.Duration(i)*time.Second))
		errs += len(res.Errors)
	}
	if got := len(fast.runs); got != 13 {
		t.Errorf("fast source ran %d times in 120 s at 10 s; want 13", got)
	}
	if got := len(slow.runs); got != 3 {
		t.Errorf("slow source ran %d times in 120 s at 60 s; want 3 (at 0, 60, 120)", got)
	}
	for i, r := range slow.runs {
		if want := t0.Add(time.Duration(i) * time.Minute); !r.Equal(want) {
			t.Errorf("slow run %d at %v; want %v (the simulated now)", i, r, want)
		}
	}
	// broken, stuck and the failing stage each fail on every tick they run,
	// and none stops the others.
	if want := 13 + 13 + 13; errs != want {
		t.Errorf("got %d errors; want %d", errs, want)
	}
	if len(app.batches) != 13+3 {
		t.Errorf("appender got %d batches; want 16", len(app.batches))
	}
	if len(stageNows) != 13 || !stageNows[12].Equal(t0.Add(120*time.Second)) {
		t.Errorf("stage saw nows %v; want 13 ticks ending at +120s", stageNows)
	}
	if len(act.got) != 13 || len(act.got[0]) != 1 || act.got[0][0].ID != "f-000000" {
		t.Errorf("actuator got %v; want the stage's finding every tick", act.got)
	}
}

func TestPipelineJitterIsDeterministic(t *testing.T) {
	run := func() []time.Time {
		s := &countingSource{name: "s"}
		p, err := NewPipeline(PipelineOptions{Sources: []SourceSpec{{Source: s, Interval: 10 * time.Second}}, Appender: &recordingAppender{}, Jitter: 0.5, Seed: 7})
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Unix(0, 0)
		for i := 0; i < 600; i++ {
			p.Tick(context.Background(), t0.Add(time.Duration(i)*time.Second))
		}
		return s.runs
	}
	a, b := run(), run()
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("same seed gave different schedules:\n%v\n%v", a, b)
	}
	if len(a) < 50 || len(a) > 70 {
		t.Errorf("ran %d times in 600 s at 10 s ± 25%%; want about 60", len(a))
	}
	spread := false
	for i := 1; i < len(a); i++ {
		if d := a[i].Sub(a[i-1]); d != 10*time.Second {
			spread = true
		}
	}
	if !spread {
		t.Errorf("jitter 0.5 gave an exact 10 s schedule; want spread")
	}
}

func TestPipelineStartStopIsIdempotent(t *testing.T) {
	s := &countingSource{name: "s"}
	p, err := NewPipeline(PipelineOptions{Sources: []SourceSpec{{Source: s, Interval: time.Hour}}, Appender: &recordingAppender{}, Tick: time.Hour, Jitter: -1})
	if err != nil {
		t.Fatal(err)
	}
	p.Start()
	p.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}
