package analysis

import (
	"cmp"
	"context"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ballast-io/ballast/analyzer/checkpoint"
	"github.com/ballast-io/ballast/models"
)

// errSeries is one write-error counter of the LAYOUTSTATS ingest.
type errSeries struct{ client, deviceid, status string }

// writeErrorsQuery reads every client's write-error counters, and
// writeErrorsTimeQuery when each was last written. The ingest writes a
// counter only when it grows, so the latest sample within an hour is read
// rather than an instant value; its time tells a counter that grew from
// one that stands still, even when the ingest forgot an idle counter and
// it started over at the value it had.
const (
	writeErrorsQuery     = `max by (client, deviceid, status) (last_over_time(` + models.MetricLayoutStatsIOErrors + `{op="write"}[1h]))`
	writeErrorsTimeQuery = `max by (client, deviceid, status) (tlast_over_time(` + models.MetricLayoutStatsIOErrors + `{op="write"}[1h]))`
)

// errReading is an error counter's latest sample.
type errReading struct{ v, t float64 }

// failures reads the write errors reported since the last tick (a counter
// written again since: its growth, or its whole value when it did not grow,
// as it was restarted), hands
// them to the failure matcher under the reporting client's group and
// returns the checkpoint_failed findings of every group. The first reading
// is only a baseline: an mds that just started cannot tell old errors from
// new.
func (c *checkpointStage) failures(ctx context.Context, now time.Time) ([]models.Finding, error) {
	read := func(expr string) (map[errSeries]float64, error) {
		series, err := c.a.q.Query(ctx, expr, now)
		if err != nil {
			return nil, err
		}
		out := make(map[errSeries]float64, len(series))
		for i := range series {
			s := &series[i]
			v, ok := lastValue(s)
			k := errSeries{client: s.Label(models.LabelLayoutStatsClient), deviceid: s.Label(models.LabelLayoutStatsDeviceID), status: s.Label(models.LabelLayoutStatsStatus)}
			if ok && !math.IsNaN(v) && v >= 0 && k.client != "" && k.deviceid != "" {
				out[k] = v
			}
		}
		return out, nil
	}
	vals, err := read(writeErrorsQuery)
	if err != nil {
		return c.failedFindings(now), err
	}
	times, err := read(writeErrorsTimeQuery)
	if err != nil {
		return c.failedFindings(now), err
	}
	seen := make(map[errSeries]errReading, len(vals))
	for k, v := range vals {
		if t, ok := times[k]; ok {
			seen[k] = errReading{v: v, t: t}
		}
	}
	keys := make([]errSeries, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b errSeries) int {
		return cmp.Or(cmp.Compare(a.client, b.client), cmp.Compare(a.deviceid, b.deviceid), cmp.Compare(a.status, b.status))
	})
	for _, k := range keys {
		r := seen[k]
		prev, known := c.errSeen[k]
		n := r.v - prev.v
		switch {
		case !c.errInit || known && r.t <= prev.t:
			n = 0
		case !known || r.v <= prev.v:
			n = r.v
		}
		if n <= 0 {
			continue
		}
		g, ok := c.nodeGroup[k.client]
		if !ok {
			g = models.Subject{Kind: models.SubjectClient, ID: k.client}
		}
		dev := c.a.ids.DeviceName(k.deviceid)
		ds := ""
		if dev != k.deviceid {
			if i := strings.IndexAny(dev, "/:"); i > 0 {
				ds = dev[:i]
			}
		}
		e := checkpoint.WriteError{At: now, Device: dev, DS: ds, Status: k.status, Count: n}
		// the forecast window that covers now, or ended up to Grace ago,
		// opened a quarter period early: a checkpoint that comes early
		// within the jitter jobs show (up to 25 % of the period) is still
		// the one predicted
		if p, ok := c.det.Forecast(now.Add(-c.fail.Grace()), g); ok && !now.Before(p.NextStart.Add(-p.Period/4)) && !now.After(p.NextEnd.Add(c.fail.Grace())) {
			e.ExpectedStart, e.ExpectedEnd = p.NextStart, p.NextEnd
		}
		c.fail.Observe(g, e)
	}
	c.errSeen, c.errInit = seen, true
	return c.failedFindings(now), nil
}

// failedFindings asks the matcher about every group the detector tracks.
func (c *checkpointStage) failedFindings(now time.Time) []models.Finding {
	subs := make([]models.Subject, 0, len(c.groups))
	for g := range c.groups {
		subs = append(subs, g)
	}
	sort.Slice(subs, func(i, j int) bool { return subs[i].String() < subs[j].String() })
	var out []models.Finding
	for _, g := range subs {
		out = append(out, c.fail.Findings(now, g, c.det.TrackedBursts(g))...)
	}
	return out
}
