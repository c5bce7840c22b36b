package layoutstats

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/ballast-io/ballast/models"
)

// errKey is one series of MetricLayoutStatsIOErrors.
type errKey struct {
	device, client, op, status string
}

// errCounter is the running total of one error series.
type errCounter struct {
	total    uint64
	stampMs  int64     // timestamp of its last sample, ms; samples never go back
	lastSeen time.Time // the now of its last increment, for eviction
	txn      uint64
}

// errUndo restores one error counter, as keyUndo does a stripe key.
type errUndo struct {
	key     errKey
	ptr     *errCounter
	prev    errCounter
	existed bool
}

func (in *Ingester) saveErr(key errKey, c *errCounter) *errCounter {
	if c == nil {
		in.undoErrs = append(in.undoErrs, errUndo{key: key})
		c = &errCounter{txn: in.txn}
		in.errs[key] = c
		return c
	}
	if c.txn != in.txn {
		in.undoErrs = append(in.undoErrs, errUndo{key: key, ptr: c, prev: *c, existed: true})
		c.txn = in.txn
	}
	return c
}

// checkErrorTimes refuses error windows that end more than MaxClockSkew
// ahead of now, as report_time is.
func (in *Ingester) checkErrorTimes(now time.Time, b *models.LayoutStatsBatch) error {
	for i := range b.Errors {
		if lt := b.Errors[i].LastTime; lt.After(now.Add(in.opts.MaxClockSkew)) {
			return &models.FieldError{Path: "errors[" + strconv.Itoa(i) + "].last_time", Reason: fmt.Sprintf("%s is more than %s ahead of now (%s)",
				lt.Format(time.RFC3339Nano), in.opts.MaxClockSkew, now.Format(time.RFC3339Nano))}
		}
	}
	return nil
}

// applyErrors adds the batch's device errors to their counters and
// renders the counters it changed: each once, stamped with the latest
// last_time of its errors in the batch (the batch's end when they have
// none, and never before the counter's previous sample).
func (in *Ingester) applyErrors(now, end time.Time, b *models.LayoutStatsBatch, res *Result) {
	if len(b.Errors) == 0 {
		return
	}
	changed := map[errKey]*errCounter{}
	for i := range b.Errors {
		e := &b.Errors[i]
		ts := end
		if !e.LastTime.IsZero() {
			ts = e.LastTime
		}
		for j := range e.Errors {
			de := &e.Errors[j]
			op, _ := models.ErrorOp(de.Opnum)
			key := errKey{device: lowerHex(de.DeviceID), client: b.ClientID, op: op, status: de.Status}
			c := in.errs[key]
			if _, ok := changed[key]; !ok {
				c = in.saveErr(key, c)
				changed[key] = c
			}
			c.total += e.Count
			c.lastSeen = now
			c.stampMs = max(c.stampMs, ts.UnixMilli())
			res.Errors += int(min(e.Count, uint64(1<<31)))
		}
	}
	keys := make([]errKey, 0, len(changed))
	for k := range changed {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b errKey) int {
		return cmp.Or(cmp.Compare(a.device, b.device), cmp.Compare(a.client, b.client), cmp.Compare(a.op, b.op), cmp.Compare(a.status, b.status))
	})
	for _, k := range keys {
		c := changed[k]
		res.Samples = append(res.Samples, models.Sample{Name: models.MetricLayoutStatsIOErrors, Labels: []models.Label{
			{Name: models.LabelLayoutStatsDeviceID, Value: k.device},
			{Name: models.LabelLayoutStatsClient, Value: k.client},
			{Name: models.LabelLayoutStatsOp, Value: k.op},
			{Name: models.LabelLayoutStatsStatus, Value: k.status},
		}, Timestamp: c.stampMs, Value: float64(c.total)})
	}
}

// sweepErrors forgets error counters without an increment for
// IdleTimeout; one that comes back starts over at zero, which readers of a
// counter take as a reset.
func (in *Ingester) sweepErrors(now time.Time) {
	for k, c := range in.errs {
		if now.Sub(c.lastSeen) > in.opts.IdleTimeout {
			in.saveErr(k, c)
			delete(in.errs, k)
		}
	}
}

// rollbackErrors undoes the error counters of the open transaction.
func (in *Ingester) rollbackErrors() {
	for i := len(in.undoErrs) - 1; i >= 0; i-- {
		u := &in.undoErrs[i]
		if u.existed {
			*u.ptr = u.prev
			in.errs[u.key] = u.ptr
		} else {
			delete(in.errs, u.key)
		}
	}
}
