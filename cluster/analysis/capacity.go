package analysis

import (
	"context"
	"time"

	"github.com/ballast-io/ballast/analyzer/capacity"
	"github.com/ballast-io/ballast/cluster/report"
	"github.com/ballast-io/ballast/models"
)

// capacityEvery is how often fill is re-forecast: capacity moves in hours
// and days, and a fit over two weeks of history costs tens of ms per
// subject.
const capacityEvery = 15 * time.Minute

// capacityPoints bounds the readings per drive one forecast reads.
const capacityPoints = 2000

// capacityStage forecasts fill per device, DS, pool and cluster from the
// data servers' filesystem series (used = size − avail, as the capacity
// report reads them) and raises capacity_threshold findings. It needs a
// store that answers range queries; without one it does nothing.
type capacityStage struct {
	q    report.Querier
	opt  capacity.Options
	next time.Time
	cl   closer
}

func newCapacityStage(a *Analysis) *capacityStage {
	c := &capacityStage{opt: capacity.DefaultOptions()}
	if rq, ok := a.q.(report.RangeQuerier); ok {
		c.q = report.FromStore(rq)
	}
	return c
}

func (c *capacityStage) Name() string { return "capacity" }

func (c *capacityStage) Run(ctx context.Context, now time.Time) ([]models.Finding, error) {
	if c.q == nil {
		return nil, nil
	}
	if c.next.IsZero() {
		// Wait one interval for history before the first forecast.
		c.next = now.Add(capacityEvery)
	}
	if now.Before(c.next) {
		return nil, nil
	}
	c.next = now.Add(capacityEvery)
	step := max(time.Minute, c.opt.Window/capacityPoints).Truncate(time.Minute)
	devs, err := report.ReadDevices(ctx, c.q, report.ReadOptions{
		Start: now.Add(-c.opt.Window), End: now, Step: step, Match: `role="ds"`,
	})
	if err != nil {
		return nil, err
	}
	var fcs []*capacity.Forecast
	for _, s := range capacity.Aggregate(devs) {
		// A subject with too little history yet is not an error: it is
		// forecast once enough accumulates.
		if f, err := capacity.Fit(s, now, c.opt); err == nil {
			fcs = append(fcs, f)
		}
	}
	return c.cl.update(now, capacity.Findings(fcs, c.opt)), nil
}
