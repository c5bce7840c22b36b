package cluster

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/storage"
)

// orderQuerier answers every query with the same series, rotated by one
// more place at each call: the order the store's workers hand series back
// in is not fixed.
type orderQuerier struct {
	ss    []storage.Series
	calls int
	exprs []string
}

func (q *orderQuerier) Query(_ context.Context, expr string, _ time.Time) ([]storage.Series, error) {
	q.exprs = append(q.exprs, expr)
	n := len(q.ss)
	out := make([]storage.Series, n)
	for i := range q.ss {
		out[i] = q.ss[(i+q.calls)%n]
	}
	q.calls++
	return out, nil
}

func (q *orderQuerier) QueryRange(context.Context, string, time.Time, time.Time, time.Duration) ([]storage.Series, error) {
	return nil, nil
}

// TestMeasureAggregatesInLabelOrder: an action's effect numbers (sum of
// the moved-from devices' load, mean GPU utilisation) were the store's
// sums, whose order follows its workers: 1e17, 5 and 5 add up to 1e17 or
// 1e17+16 depending on it, and two eval runs of one seed journaled
// different effects. A plain sum/avg/min/max is now taken in the order of
// the series' labels whatever order the store answers in.
func TestMeasureAggregatesInLabelOrder(t *testing.T) {
	dev := func(id string, v float64) storage.Series {
		return storage.Series{Labels: []models.Label{{Name: "op", Value: "read"}, {Name: "device_id", Value: id}}, Timestamps: []int64{0}, Values: []float64{v}}
	}
	q := &orderQuerier{ss: []storage.Series{dev("c", 5), dev("a", 1e17), dev("b", 5), dev("d", math.NaN())}}
	m := measureFunc(q)
	want := 1e17
	for _, x := range []float64{5, 5} {
		want += x
	}
	for i := range 8 {
		v, ok, err := m(context.Background(), `sum(avg_over_time(x{device_id=~"a|b|c|d"}[60s]))`, time.Time{})
		if err != nil || !ok || math.Float64bits(v) != math.Float64bits(want) {
			t.Fatalf("call %d: sum %v, %v, %v; want %v (a, b, c in label order, NaN skipped)", i, v, ok, err, want)
		}
		v, ok, err = m(context.Background(), `avg(avg_over_time(x[60s]))`, time.Time{})
		if err != nil || !ok || math.Float64bits(v) != math.Float64bits(want/3) {
			t.Fatalf("call %d: avg %v, %v, %v; want %v", i, v, ok, err, want/3)
		}
	}
	if got := q.exprs[0]; got != `avg_over_time(x{device_id=~"a|b|c|d"}[60s])` {
		t.Errorf("the store was asked %q; want the inner expression", got)
	}
	for _, tc := range []struct {
		expr string
		want float64
	}{{`max(x)`, 1e17}, {`min(x)`, 5}} {
		if v, ok, err := m(context.Background(), tc.expr, time.Time{}); err != nil || !ok || v != tc.want {
			t.Errorf("%s = %v, %v, %v; want %v", tc.expr, v, ok, err, tc.want)
		}
	}
	// grouped aggregates and other expressions go to the store as they are
	n := len(q.exprs)
	if _, _, err := m(context.Background(), `sum by (device_id) (x)`, time.Time{}); err != nil || q.exprs[n] != `sum by (device_id) (x)` {
		t.Errorf("sum by went to the store as %q (err %v); want it unchanged", q.exprs[n], err)
	}
	if _, ok, _ := m(context.Background(), `sum(x)`, time.Time{}); !ok {
		t.Error("sum of series: no value")
	}
	empty := measureFunc(&orderQuerier{ss: nil})
	if _, ok, err := empty(context.Background(), `sum(x)`, time.Time{}); ok || err != nil {
		t.Errorf("sum of no series: ok %v, err %v; want no value", ok, err)
	}
}
