package layoutstats

import (
	"fmt"
	"strconv"
	"time"

	"github.com/ballast-io/ballast/models"
)

// Options tunes the ingest. The zero value of each field means its default.
type Options struct {
	// IdleTimeout is how long a stripe key's counters are kept after its
	// last report; a key unseen for longer is forgotten, which bounds
	// memory. Default 15m.
	IdleTimeout time.Duration
	// FirstSightMaxDuration decides what the first report of an unknown key
	// means. With ffl_duration up to this long the counters are young and
	// the report is a delta since they started; with a longer duration (the
	// mds restarted, or the key was forgotten) it is only a baseline for the
	// next report, so no I/O is counted twice. It must not exceed
	// IdleTimeout. Default 5m.
	FirstSightMaxDuration time.Duration
	// StaleAfter is how long a key's latest interval keeps counting in the
	// per-device and per-DS rates without a newer report. Default 3m.
	StaleAfter time.Duration
	// SweepInterval is how often (in the time passed to Ingest) stale
	// intervals are dropped from the rates and idle keys are forgotten.
	// Default 30s.
	SweepInterval time.Duration
	// MaxClockSkew is how far a batch's report_time may lie ahead of now.
	// Default 5m.
	MaxClockSkew time.Duration
	// MaxKeys bounds how many stripe keys are remembered (about 0.7 KB
	// each). A batch that would add a key beyond it is refused with a
	// *CapacityError and changes nothing; idle keys make room as they are
	// forgotten. Default 1000000.
	MaxKeys int
	// EmitInterval is the least time (in now) between two samples of the
	// same device or DS series. Every client's batch changes the sums of
	// the devices it touched; writing them all each time would store each
	// series once per client per report interval. A change within the
	// interval is written with the first batch or Tick after it. Default
	// 15s; set 1ns to write on every batch.
	EmitInterval time.Duration
}

// Default option values.
const (
	DefaultIdleTimeout           = 15 * time.Minute
	DefaultFirstSightMaxDuration = 5 * time.Minute
	DefaultStaleAfter            = 3 * time.Minute
	DefaultSweepInterval         = 30 * time.Second
	DefaultMaxClockSkew          = 5 * time.Minute
	DefaultEmitInterval          = 15 * time.Second
	DefaultMaxKeys               = 1000000
)

// CapacityError refuses a batch that would add stripe keys beyond
// Options.MaxKeys. Nothing of the batch was kept; it can be sent again
// once idle keys have been forgotten. The HTTP handler answers 503.
type CapacityError struct {
	Path    string
	MaxKeys int
}

// Error describes the refusal.
func (e *CapacityError) Error() string {
	return fmt.Sprintf("%s: cannot remember a new stripe key: the ingest already holds its limit of %d keys", e.Path, e.MaxKeys)
}

// withDefaults fills zero fields and checks the result.
func (o Options) withDefaults() (Options, error) {
	def := func(d *time.Duration, v time.Duration, name string) error {
		if *d < 0 {
			return fmt.Errorf("cannot use layoutstats option %s %q: must not be negative", name, d.String())
		}
		if *d == 0 {
			*d = v
		}
		return nil
	}
	for _, f := range []struct {
		d    *time.Duration
		v    time.Duration
		name string
	}{
		{&o.IdleTimeout, DefaultIdleTimeout, "IdleTimeout"},
		{&o.FirstSightMaxDuration, DefaultFirstSightMaxDuration, "FirstSightMaxDuration"},
		{&o.StaleAfter, DefaultStaleAfter, "StaleAfter"},
		{&o.SweepInterval, DefaultSweepInterval, "SweepInterval"},
		{&o.MaxClockSkew, DefaultMaxClockSkew, "MaxClockSkew"},
		{&o.EmitInterval, DefaultEmitInterval, "EmitInterval"},
	} {
		if err := def(f.d, f.v, f.name); err != nil {
			return o, err
		}
	}
	if o.MaxKeys < 0 {
		return o, fmt.Errorf("cannot use layoutstats option MaxKeys %q: must not be negative", strconv.Itoa(o.MaxKeys))
	}
	if o.MaxKeys == 0 {
		o.MaxKeys = DefaultMaxKeys
	}
	if o.FirstSightMaxDuration > o.IdleTimeout {
		return o, fmt.Errorf("cannot use layoutstats option FirstSightMaxDuration %q: must not exceed IdleTimeout (%s), or a forgotten key's counters would be counted twice",
			o.FirstSightMaxDuration.String(), o.IdleTimeout)
	}
	return o, nil
}

// stripeState is what the ingest remembers about one stripe key.
type stripeState struct {
	last     counterVec
	dur      time.Duration
	lastSeen time.Time // the now of the last report, for eviction
	// The key's latest interval as it counts in the aggregates; zero
	// (contribAt zero) when it does not count.
	contrib   contribution
	contribAt time.Time
	device    *aggregate
	ds        *aggregate
	dsName    string // the DS address as ip:port
	txn       uint64 // the transaction that last saved an undo copy
	key       models.StripeKey
	links     [2]stripeLinks // places in Ingester.bySeen and byContrib
}

// Ingester differences cumulative LAYOUTSTATS counters per stripe key and
// keeps the per-device and per-DS aggregates. It is not safe for concurrent
// use; Service serialises access for the HTTP handler.
type Ingester struct {
	opts      Options
	keys      map[models.StripeKey]*stripeState
	devices   map[string]*aggregate
	servers   map[string]*aggregate
	errs      map[errKey]*errCounter
	lastSweep time.Time
	// bySeen lists the keys by lastSeen, byContrib those whose interval
	// counts by contribAt, so that a sweep visits only the due ones;
	// unsorted says they must be rebuilt first (expiry.go).
	bySeen, byContrib keyList
	unsorted          bool
	// sweptBefore is lastSweep before the open transaction, for Rollback.
	sweptBefore time.Time
	txn         uint64
	isOpen      bool
	// Scratch reused by every transaction.
	undoKeys []keyUndo
	undoAggs []aggUndo
	undoErrs []errUndo
	emit     []*aggregate
}

// NewIngester returns an Ingester with opts (zero fields take defaults).
func NewIngester(opts Options) (*Ingester, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Ingester{
		opts:      o,
		keys:      make(map[models.StripeKey]*stripeState),
		devices:   make(map[string]*aggregate),
		servers:   make(map[string]*aggregate),
		errs:      make(map[errKey]*errCounter),
		bySeen:    keyList{which: 0},
		byContrib: keyList{which: 1},
	}, nil
}

// Keys returns how many stripe keys the ingester remembers.
func (in *Ingester) Keys() int { return len(in.keys) }

// RateHold is how long after a stripe key's last report its rate can
// still count in the per-device and per-DS series: StaleAfter, then up to
// a SweepInterval until a sweep takes it out, then up to an EmitInterval
// until the lowered sum is written (with a batch or Tick at least that
// often). A component a layout change retired stops reporting, so its old
// device reads its load for this long after the switch.
func (in *Ingester) RateHold() time.Duration {
	return in.opts.StaleAfter + in.opts.SweepInterval + in.opts.EmitInterval
}

// EmitInterval is the least time between two samples of one per-device
// or per-DS series.
func (in *Ingester) EmitInterval() time.Duration { return in.opts.EmitInterval }

// Result is what one accepted batch produced.
type Result struct {
	// Deltas has one entry per report that carried new information, in
	// report order.
	Deltas []models.StripeDelta
	// Samples are the per-device and per-DS series of every aggregate
	// changed since it was last written (by this batch, an earlier one or a
	// sweep) and not written in the last EmitInterval, stamped with the
	// batch's end time.
	Samples []models.Sample
	// Accepted counts the reports in the batch.
	Accepted int
	// Duplicates counts reports identical to the key's previous one.
	Duplicates int
	// Baselines counts first reports of keys whose counters were too old to
	// count as a delta (see Options.FirstSightMaxDuration).
	Baselines int
	// Resets counts deltas whose counters had started over.
	Resets int
	// BusyClamped counts busy times (read or write) that exceeded their
	// delta's interval by no more than BusySlack and were clamped to it:
	// clock rounding in the client, not a reason to drop the batch.
	BusyClamped int
	// Evicted counts keys forgotten by a sweep in this call.
	Evicted int
	// Errors counts the device errors of the batch's errors (each entry's
	// count times its device errors).
	Errors int
}

// Ingest validates the batch, differences it against the counters already
// accepted and commits it. now is the ingest's notion of the current time
// (wall clock for the HTTP handler, simulated time for the twin); it is
// used for eviction and staleness, and as the interval end when the batch
// has no report_time. Rates come only from the reports' durations. On error
// nothing changes: a batch is all or nothing. The error is a
// *models.FieldError for a malformed batch and a *ConflictError for one
// that contradicts accepted counters.
func (in *Ingester) Ingest(now time.Time, b *models.LayoutStatsBatch) (Result, error) {
	tx, err := in.Begin(now, b)
	if err != nil {
		return Result{}, err
	}
	tx.Commit()
	return tx.Result, nil
}

// Txn is a batch applied to the ingester but not yet final: Commit keeps
// it, Rollback restores the state from before Begin. Exactly one of them
// must be called before the next Begin.
type Txn struct {
	// Result is what the batch produced; it stays valid after Commit.
	Result Result
	in     *Ingester
	done   bool
}

// Begin applies the batch as Ingest does but keeps the way back open, so
// that a caller can hand Result to storage first and roll back if storage
// refuses it: accepted data is then never lost and refused data changes
// nothing.
func (in *Ingester) Begin(now time.Time, b *models.LayoutStatsBatch) (*Txn, error) {
	if err := b.Validate(); err != nil {
		return nil, err
	}
	end := now
	if !b.ReportTime.IsZero() {
		if b.ReportTime.After(now.Add(in.opts.MaxClockSkew)) {
			return nil, &models.FieldError{Path: "report_time", Reason: fmt.Sprintf("%s is more than %s ahead of now (%s)",
				b.ReportTime.Format(time.RFC3339Nano), in.opts.MaxClockSkew, now.Format(time.RFC3339Nano))}
		}
		end = b.ReportTime
	}
	if err := in.checkErrorTimes(now, b); err != nil {
		return nil, err
	}
	tx := in.open(now)
	res := &tx.Result
	res.Accepted = len(b.Reports)
	res.Deltas = make([]models.StripeDelta, 0, len(b.Reports))
	for i := range b.Reports {
		if err := in.apply(now, end, b.ClientID, i, &b.Reports[i], res); err != nil {
			tx.Rollback()
			return nil, err
		}
	}
	in.applyErrors(now, end, b, res)
	in.finish(now, end, res)
	return tx, nil
}

// Tick runs the periodic work without a batch: it forgets idle keys, drops
// stale intervals and writes the series changed since they were last
// written. The mds (or the twin) calls it every few seconds so that the
// last change of a quiet device still reaches storage.
func (in *Ingester) Tick(now time.Time) *Txn {
	tx := in.open(now)
	in.finish(now, now, &tx.Result)
	return tx
}

func (in *Ingester) open(now time.Time) *Txn {
	if in.isOpen {
		panic("layoutstats: a transaction is already open")
	}
	in.txn++
	in.isOpen = true
	in.sweptBefore = in.lastSweep
	in.undoKeys, in.undoAggs, in.undoErrs = in.undoKeys[:0], in.undoAggs[:0], in.undoErrs[:0]
	return &Txn{in: in}
}

// finish sweeps when due and renders the samples that are due.
func (in *Ingester) finish(now, end time.Time, res *Result) {
	if now.Sub(in.lastSweep) >= in.opts.SweepInterval {
		res.Evicted = in.sweep(now)
	}
	res.Samples = in.samples(now, end, res.Samples)
}

// Commit makes the transaction final.
func (tx *Txn) Commit() {
	if tx.done {
		return
	}
	tx.done = true
	tx.in.isOpen = false
}

// Rollback undoes the transaction: every key and aggregate it changed gets
// its previous value back, and keys it added are removed.
func (tx *Txn) Rollback() {
	if tx.done {
		return
	}
	tx.done = true
	in := tx.in
	for i := len(in.undoKeys) - 1; i >= 0; i-- {
		u := &in.undoKeys[i]
		if u.existed {
			*u.ptr = u.prev
			in.keys[u.key] = u.ptr
		} else {
			delete(in.keys, u.key)
		}
	}
	for i := len(in.undoAggs) - 1; i >= 0; i-- {
		u := &in.undoAggs[i]
		switch {
		case u.added:
			delete(u.m, u.agg.label)
		case u.removed:
			u.m[u.agg.label] = u.agg
		default:
			*u.agg = u.prev
		}
	}
	in.rollbackErrors()
	// The restored keys have their times back but not their places in
	// the expiry lists.
	in.unsorted = true
	in.lastSweep = in.sweptBefore
	in.isOpen = false
}

// keyUndo restores one key: prev is its value before the transaction and
// existed says whether it was in the map at all (if not, rollback deletes
// it; if so, rollback also puts ptr back should the key have been evicted).
type keyUndo struct {
	key     models.StripeKey
	ptr     *stripeState
	prev    stripeState
	existed bool
}

// saveKey records the state of key before this transaction first changes
// it and returns the state to change in place; a nil st creates the key.
func (in *Ingester) saveKey(key models.StripeKey, st *stripeState) *stripeState {
	if st == nil {
		in.undoKeys = append(in.undoKeys, keyUndo{key: key})
		st = &stripeState{txn: in.txn, key: key}
		in.keys[key] = st
		return st
	}
	if st.txn != in.txn {
		in.undoKeys = append(in.undoKeys, keyUndo{key: key, ptr: st, prev: *st, existed: true})
		st.txn = in.txn
	}
	return st
}

// apply differences one validated report and updates its key and
// aggregates.
func (in *Ingester) apply(now, end time.Time, client string, i int, r *models.FFIOStats4, res *Result) error {
	lu := &r.LayoutUpdate
	key := models.StripeKey{
		Client:     client,
		Stateid:    lowerHex(r.Stateid.Other),
		DeviceID:   lowerHex(r.DeviceID),
		DSNetID:    lu.Addr.NetID,
		DSAddr:     lu.Addr.Addr,
		FileHandle: lowerHex(lu.FHandle),
	}
	cur := vecOf(r)
	curDur := lu.Duration.Duration()
	old := in.keys[key]
	var (
		kind     step
		delta    counterVec
		interval time.Duration
	)
	if old == nil {
		if len(in.keys) >= in.opts.MaxKeys {
			return &CapacityError{Path: "reports[" + strconv.Itoa(i) + "]", MaxKeys: in.opts.MaxKeys}
		}
		if curDur > in.opts.FirstSightMaxDuration {
			res.Baselines++
			st := in.saveKey(key, nil)
			st.last, st.dur = cur, curDur
			in.seen(st, now)
			st.dsName = dsName(&lu.Addr)
			return nil
		}
		kind, delta, interval = stepReset, cur, curDur
		// Validation let the busy time exceed the duration by at most
		// the rounding slack; clamp it like any delta's.
		if err := checkBusy(i, &delta, interval, &res.BusyClamped); err != nil {
			return err
		}
	} else {
		var err error
		kind, delta, interval, err = diff(i, &old.last, &cur, old.dur, curDur, &res.BusyClamped)
		if err != nil {
			return err
		}
	}
	st := in.saveKey(key, old)
	st.last, st.dur = cur, curDur
	in.seen(st, now)
	if st.dsName == "" {
		st.dsName = dsName(&lu.Addr)
	}
	if kind == stepDuplicate {
		res.Duplicates++
		return nil
	}
	d := models.StripeDelta{
		StripeKey: key,
		DS:        st.dsName,
		Seqid:     r.Stateid.Seqid,
		Offset:    r.Offset,
		Length:    r.Length,
		Local:     lu.Local,
		Reset:     kind == stepReset,
		End:       end,
		Duration:  interval,
		Read:      delta.stripeIO(cReadCount, readLatency),
		Write:     delta.stripeIO(cWriteCount, writeLatency),
	}
	if d.Reset {
		res.Resets++
	}
	res.Deltas = append(res.Deltas, d)
	in.setContribution(st, &d, now)
	return nil
}

// dsName renders a validated netaddr4 as ip:port.
func dsName(a *models.NetAddr4) string {
	ap, _ := a.AddrPort()
	return ap.String()
}
