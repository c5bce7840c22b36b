package layoutstats

import (
	"math"
	"math/bits"
	"sort"
	"time"

	"github.com/ballast-io/ballast/models"
)

// The aggregates sum, per device and per data server, the latest interval of
// every stripe key that reported recently. Sums are kept in integers (rates
// in fixed point, 128-bit totals) rather than floats: adding a key's new
// interval and subtracting its old one is then exact, the result does not
// drift over millions of updates and does not depend on the order keys were
// visited in, so the same reports always give the same samples.

// Fixed-point scales of the per-key rates.
const (
	rateScale  = 1e6 // rates in millionths per second
	ratioScale = 1e9 // busy ratios in billionths
)

// u128 is an unsigned 128-bit integer, enough for any sum of uint64 values
// over 2^64 keys.
type u128 struct{ hi, lo uint64 }

func (a *u128) add(v uint64) {
	var c uint64
	a.lo, c = bits.Add64(a.lo, v, 0)
	a.hi += c
}

func (a *u128) sub(v uint64) {
	var b uint64
	a.lo, b = bits.Sub64(a.lo, v, 0)
	a.hi -= b
}

func (a u128) float() float64 { return float64(a.hi)*0x1p64 + float64(a.lo) }

// dirSums are the sums for one direction (read or write); dirContrib is
// one key's share of them.
type dirSums struct {
	ops, bytes, notDelivered, busy u128 // fixed-point rates and busy ratio
	completedOps, completionNs     u128 // for the mean latency
}

type dirContrib struct {
	ops, bytes, notDelivered, busy uint64
	completedOps, completionNs     uint64
}

// contribution is one key's latest interval as the aggregates count it.
type contribution [2]dirContrib

// fixed converts v per interval into fixed point, saturating at the top of
// uint64 (only absurd reports get there; saturation is deterministic).
func fixed(v float64, interval time.Duration, scale float64) uint64 {
	x := math.Round(v / interval.Seconds() * scale)
	if x >= math.MaxUint64 {
		return math.MaxUint64
	}
	return uint64(x)
}

func contribOf(d *models.StripeDelta) contribution {
	var c contribution
	for i, io := range [2]*models.StripeIO{&d.Read, &d.Write} {
		c[i] = dirContrib{
			ops:          fixed(float64(io.OpsCompleted), d.Duration, rateScale),
			bytes:        fixed(float64(io.BytesCompleted), d.Duration, rateScale),
			notDelivered: fixed(float64(io.BytesNotDelivered), d.Duration, rateScale),
			busy:         fixed(io.BusyTime.Seconds(), d.Duration, ratioScale),
			completedOps: io.OpsCompleted,
			completionNs: uint64(io.CompletionTime),
		}
	}
	return c
}

// seriesNames are the metric and label names of one kind of aggregate.
type seriesNames struct {
	label                                                  string
	ops, bytes, notDelivered, latency, util, busy, streams string
}

var (
	deviceNames = &seriesNames{models.LabelLayoutStatsDeviceID,
		models.MetricLayoutStatsDeviceOps, models.MetricLayoutStatsDeviceBytes, models.MetricLayoutStatsDeviceNotDelivered,
		models.MetricLayoutStatsDeviceLatency, models.MetricLayoutStatsDeviceUtilization, models.MetricLayoutStatsDeviceBusyStreams,
		models.MetricLayoutStatsDeviceStreams}
	dsNames = &seriesNames{models.LabelLayoutStatsDS,
		models.MetricLayoutStatsDSOps, models.MetricLayoutStatsDSBytes, models.MetricLayoutStatsDSNotDelivered,
		models.MetricLayoutStatsDSLatency, models.MetricLayoutStatsDSUtilization, models.MetricLayoutStatsDSBusyStreams,
		models.MetricLayoutStatsDSStreams}
)

// aggregate holds the sums of one device or data server.
type aggregate struct {
	names   *seriesNames
	label   string // the deviceid or DS address
	streams int
	dir     [2]dirSums
	// dirty is set when the sums change and cleared when they are written;
	// lastEmit is the now of the last write.
	dirty    bool
	lastEmit time.Time
	txn      uint64 // the transaction that last saved an undo copy
}

func (a *aggregate) add(c *contribution) {
	a.streams++
	a.apply(c, (*u128).add)
}

func (a *aggregate) remove(c *contribution) {
	a.streams--
	a.apply(c, (*u128).sub)
}

// apply adds or subtracts (op) every field of c to or from the sums.
func (a *aggregate) apply(c *contribution, op func(*u128, uint64)) {
	for i := range c {
		s, v := &a.dir[i], &c[i]
		op(&s.ops, v.ops)
		op(&s.bytes, v.bytes)
		op(&s.notDelivered, v.notDelivered)
		op(&s.busy, v.busy)
		op(&s.completedOps, v.completedOps)
		op(&s.completionNs, v.completionNs)
	}
}

// aggUndo restores one aggregate: its value before the transaction, or
// that the transaction added it to m (rollback deletes it) or removed it
// from m (rollback puts it back; an earlier entry restores its value).
type aggUndo struct {
	agg     *aggregate
	prev    aggregate
	m       map[string]*aggregate
	added   bool
	removed bool
}

// save records agg's value before this transaction first changes it.
func (in *Ingester) save(agg *aggregate, m map[string]*aggregate) {
	if agg.txn != in.txn {
		in.undoAggs = append(in.undoAggs, aggUndo{agg: agg, prev: *agg, m: m})
		agg.txn = in.txn
	}
}

// touch saves agg and marks it changed.
func (in *Ingester) touch(agg *aggregate, m map[string]*aggregate) {
	in.save(agg, m)
	agg.dirty = true
}

func (in *Ingester) getAgg(m map[string]*aggregate, names *seriesNames, label string) *aggregate {
	if a := m[label]; a != nil {
		in.touch(a, m)
		return a
	}
	a := &aggregate{names: names, label: label, txn: in.txn, dirty: true}
	m[label] = a
	in.undoAggs = append(in.undoAggs, aggUndo{agg: a, m: m, added: true})
	return a
}

// dropContribution takes st's interval out of its aggregates; st must be
// this transaction's copy.
func (in *Ingester) dropContribution(st *stripeState) {
	if st.contribAt.IsZero() {
		return
	}
	in.touch(st.device, in.devices)
	in.touch(st.ds, in.servers)
	st.device.remove(&st.contrib)
	st.ds.remove(&st.contrib)
	st.contribAt = time.Time{}
	if !in.unsorted {
		in.byContrib.remove(st)
	}
}

// setContribution replaces st's interval in the aggregates with d.
func (in *Ingester) setContribution(st *stripeState, d *models.StripeDelta, now time.Time) {
	in.dropContribution(st)
	st.contrib = contribOf(d)
	st.contribAt = now
	in.moveToBack(&in.byContrib, st)
	st.device = in.getAgg(in.devices, deviceNames, d.DeviceID)
	st.ds = in.getAgg(in.servers, dsNames, st.dsName)
	st.device.add(&st.contrib)
	st.ds.add(&st.contrib)
}

// sweep forgets keys idle for longer than IdleTimeout and takes intervals
// older than StaleAfter out of the aggregates. It returns how many keys it
// forgot. Aggregates left with no streams go when their zeros are written.
//
// The keys come from the heads of the expiry lists (expiry.go), oldest
// first, so a sweep visits only the keys it changes; the sums it leaves
// do not depend on the order.
func (in *Ingester) sweep(now time.Time) int {
	in.lastSweep = now
	if in.unsorted {
		in.sortLists()
	}
	evicted := 0
	for st := in.bySeen.head; st != nil && now.Sub(st.lastSeen) > in.opts.IdleTimeout; st = in.bySeen.head {
		st = in.saveKey(st.key, st)
		in.dropContribution(st)
		in.bySeen.remove(st)
		delete(in.keys, st.key)
		evicted++
	}
	for st := in.byContrib.head; st != nil && now.Sub(st.contribAt) > in.opts.StaleAfter; st = in.byContrib.head {
		st = in.saveKey(st.key, st)
		in.dropContribution(st)
	}
	in.sweepErrors(now)
	return evicted
}

var opNames = [2]string{"read", "write"}

// samples renders the series of every dirty aggregate not written in the
// last EmitInterval, sorted by kind and label so that output is
// deterministic, and forgets aggregates left with no streams once their
// zeros are written. An aggregate with no completed operations in a
// direction has no latency sample (the mean of nothing is not a number,
// which the store cannot keep).
func (in *Ingester) samples(now, end time.Time, out []models.Sample) []models.Sample {
	in.emit = in.emit[:0]
	for _, m := range [2]map[string]*aggregate{in.devices, in.servers} {
		for _, a := range m {
			if a.dirty && (a.lastEmit.IsZero() || now.Sub(a.lastEmit) >= in.opts.EmitInterval) {
				in.emit = append(in.emit, a)
			}
		}
	}
	sort.Slice(in.emit, func(i, j int) bool {
		a, b := in.emit[i], in.emit[j]
		if a.names != b.names {
			return a.names == deviceNames
		}
		return a.label < b.label
	})
	ts := end.UnixMilli()
	for _, a := range in.emit {
		m := in.devices
		if a.names == dsNames {
			m = in.servers
		}
		in.save(a, m)
		a.dirty, a.lastEmit = false, now
		out = a.render(ts, out)
		if a.streams == 0 {
			delete(m, a.label)
			in.undoAggs = append(in.undoAggs, aggUndo{agg: a, m: m, removed: true})
		}
	}
	return out
}

// render appends the aggregate's series at timestamp ts (milliseconds).
func (a *aggregate) render(ts int64, out []models.Sample) []models.Sample {
	n := a.names
	out = append(out, models.Sample{Name: n.streams, Labels: []models.Label{{Name: n.label, Value: a.label}},
		Timestamp: ts, Value: float64(a.streams)})
	for i := range a.dir {
		s := &a.dir[i]
		lbl := []models.Label{{Name: n.label, Value: a.label}, {Name: models.LabelLayoutStatsOp, Value: opNames[i]}}
		add := func(name string, v float64) {
			out = append(out, models.Sample{Name: name, Labels: lbl, Timestamp: ts, Value: v})
		}
		add(n.ops, s.ops.float()/rateScale)
		add(n.bytes, s.bytes.float()/rateScale)
		add(n.notDelivered, s.notDelivered.float()/rateScale)
		busy := s.busy.float() / ratioScale
		add(n.busy, busy)
		util := 0.0
		if a.streams > 0 {
			util = busy / float64(a.streams)
		}
		add(n.util, util)
		if ops := s.completedOps.float(); ops > 0 {
			add(n.latency, s.completionNs.float()/ops/1e9)
		}
	}
	return out
}
