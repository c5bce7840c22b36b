package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/VictoriaMetrics/VictoriaMetrics/app/vmselect/promql"
	"github.com/VictoriaMetrics/VictoriaMetrics/app/vmselect/searchutil"

	"github.com/ballast-io/ballast/models"
)

// Query evaluates expr at one instant with the MetricsQL engine.
func (e *Embedded) Query(ctx context.Context, expr string, at time.Time) ([]Series, error) {
	ms := at.UnixMilli()
	return e.exec(ctx, expr, ms, ms, 5*60*1000, true)
}

// QueryRange evaluates expr at every step from start to end inclusive.
func (e *Embedded) QueryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]Series, error) {
	if step <= 0 {
		return nil, fmt.Errorf("cannot run query %q: step %s is not positive", expr, step)
	}
	if end.Before(start) {
		return nil, fmt.Errorf("cannot run query %q: end %s is before start %s", expr, end, start)
	}
	return e.exec(ctx, expr, start.UnixMilli(), end.UnixMilli(), step.Milliseconds(), false)
}

func (e *Embedded) exec(ctx context.Context, expr string, start, end, step int64, instant bool) ([]Series, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return nil, ErrClosed
	}
	e.fresh()
	timeout := e.opts.QueryTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
		if timeout <= 0 {
			return nil, fmt.Errorf("cannot run query %q: %w", expr, context.DeadlineExceeded)
		}
	}
	ec := &promql.EvalConfig{
		Start:              start,
		End:                end,
		Step:               step,
		MaxPointsPerSeries: 30e3,
		Deadline:           searchutil.NewDeadline(time.Now(), timeout, "context deadline"),
		MayCache:           !e.opts.DisableQueryCache,
		RoundDigits:        100,
	}
	rs, err := promql.Exec(nil, ec, expr, instant)
	if err != nil {
		return nil, fmt.Errorf("cannot run query %q: %w", expr, err)
	}
	out := make([]Series, len(rs))
	for i := range rs {
		r := &rs[i]
		s := Series{Name: string(r.MetricName.MetricGroup), Timestamps: r.Timestamps, Values: r.Values}
		for _, t := range r.MetricName.Tags {
			s.Labels = append(s.Labels, models.Label{Name: string(t.Key), Value: string(t.Value)})
		}
		out[i] = s
	}
	return out, nil
}
