// Package ingest decodes the push formats ballast accepts — Prometheus text
// exposition and Prometheus remote write — into validated batches of rows.
//
// Decoding is pure: bytes in, a Batch of every valid sample plus a
// *Rejected error naming the line or series and the reason of each invalid
// one. Nothing valid in a request is lost to an invalid neighbour, and every
// check that VictoriaMetrics would otherwise apply by silently dropping or
// truncating data (timestamps outside retention, too many labels, long
// label values) is an explicit rejection here instead. Values are kept as
// VictoriaMetrics keeps them: ±Inf and the Prometheus staleness marker are
// stored; other NaNs are accepted but not stored (lib/storage's encoding
// cannot hold them) and counted by Batch.NaNs.
package ingest

import (
	"fmt"
	"math"
	"time"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/decimal"
	"github.com/VictoriaMetrics/VictoriaMetrics/lib/prompb"
	vmstorage "github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"

	"github.com/ballast-io/ballast/models"
)

// Limits bounds what one batch may contain. The zero value of each field
// means its default.
type Limits struct {
	// MinTimestamp and MaxTimestamp bound sample timestamps (ms). Zero means
	// unbounded on that side; the storage sets them from its retention.
	MinTimestamp int64
	MaxTimestamp int64
	// DefaultTimestamp (ms) is given to samples that carry none.
	DefaultTimestamp int64
	// ExtraLabels are added to every series (and override labels of the
	// same name), e.g. from ?extra_label=. Every call that adds to one
	// batch must pass the same ExtraLabels: the batch keeps them once, not
	// once per row.
	ExtraLabels []models.Label
	// DefaultLabels are added to every series that has no label of the
	// same name (after ExtraLabels), e.g. node and role on scraped series.
	DefaultLabels []models.Label
}

// MaxLabelSetBytes bounds the encoded label set of one series, metric name
// included: VictoriaMetrics indexes a series in one entry of at most
// 64 KiB and silently skips larger ones.
const MaxLabelSetBytes = 65000

// MaxExtraLabelBytes bounds the total size of the extra labels of a
// request (names and values), which are copied into every series.
const MaxExtraLabelBytes = 4096

// Batch is a decoded, validated set of rows. Its strings may alias the
// request body, so a Batch must not outlive the body it was decoded from
// unless Samples is used to copy it out.
type Batch struct {
	nans    int
	rows    []row
	labels  []models.Label
	extra   []models.Label // applied to every row, after its own labels
	scratch []models.Label
	pbuf    []prompb.Label
	psmp    []prompb.Sample
	pts     []prompb.TimeSeries

	// Scratch of Samples: the bytes of every string, where each starts,
	// each row's label count.
	sbuf   []byte
	spans  []int
	counts []int

	// names holds the rows' names encoded for lib/storage
	// (MarshalMetricNameRaw), once per series, while the batch has no
	// extra labels; MetricRows hands them to the store as they are.
	names []byte

	passed     []models.Label // the last label set checkLabels passed
	last       series         // the last series added, when lastOK
	lastName   string         // its metric name
	lastOK     bool
	checked    string                          // the last text metric name that passed models.CheckMetricName
	wru        *prompb.WriteRequestUnmarshaler // ParseRemoteWrite's, kept for its buffers
	asReceived bool                            // see AsReceived
	rwBody     []byte                          // the body AsReceived still has to look into
}

type row struct {
	name string
	series
	ts int64
	v  float64
}

// series locates a validated label set: its labels in Batch.labels and,
// when the batch had no extra labels as it was added, its encoded name in
// Batch.names. Rows of one series share them.
type series struct {
	lstart, lend int32
	nstart, nend int32
}

// mark is where a batch stood, to go back to.
type mark struct{ rows, labels, names, nans int }

func (b *Batch) mark() mark { return mark{len(b.rows), len(b.labels), len(b.names), b.nans} }

// rollback drops everything added since m.
func (b *Batch) rollback(m mark) {
	b.rows, b.labels, b.names, b.nans = b.rows[:m.rows], b.labels[:m.labels], b.names[:m.names], m.nans
	b.lastOK = false
}

// Reset empties b for reuse, keeping its memory.
func (b *Batch) Reset() {
	b.nans = 0
	b.rows = b.rows[:0]
	clear(b.labels)
	b.labels = b.labels[:0]
	b.extra = nil
	b.names = b.names[:0]
	clear(b.passed)
	b.passed = b.passed[:0]
	b.lastOK, b.lastName, b.checked = false, "", ""
	b.asReceived, b.rwBody = false, nil
}

// Len returns the number of rows in b.
func (b *Batch) Len() int { return len(b.rows) }

// NaNs returns how many accepted samples were NaN (not the staleness
// marker): valid, but not stored, as in VictoriaMetrics.
func (b *Batch) NaNs() int { return b.nans }

// rowLabels returns the labels of r with the batch's extra labels applied,
// in scratch space valid until the next call.
func (b *Batch) rowLabels(r *row) []models.Label {
	ls := b.labels[r.lstart:r.lend]
	if len(b.extra) == 0 {
		return ls
	}
	out := append(b.scratch[:0], ls...)
	for _, e := range b.extra {
		out = setLabel(out, 0, e)
	}
	b.scratch = out
	return out
}

// Samples copies the rows of b out as samples that own their memory.
//
// Every string is copied into one block and every label into one slice
// (each sample's labels capped at their length, so an append to them
// copies): three allocations per call instead of three per label, and
// each row's labels (the extra ones applied) are made once. The
// twin's scrapes go through here, and a string and a slice apiece were
// most of their allocations. The samples share the block, so one kept
// keeps the call's strings alive.
func (b *Batch) Samples() []models.Sample {
	// One pass gathers the bytes (in scratch kept by b) and where each
	// string lies; the block is then one string, sliced.
	buf, spans, counts := b.sbuf[:0], b.spans[:0], b.counts[:0]
	put := func(s string) {
		spans = append(spans, len(buf))
		buf = append(buf, s...)
	}
	nl := 0
	for i := range b.rows {
		r := &b.rows[i]
		put(r.name)
		ls := b.rowLabels(r)
		for _, l := range ls {
			put(l.Name)
			put(l.Value)
		}
		counts = append(counts, len(ls))
		nl += len(ls)
	}
	spans = append(spans, len(buf))
	block := string(buf)
	b.sbuf, b.spans, b.counts = buf, spans, counts
	str := func() string {
		s := block[spans[0]:spans[1]]
		spans = spans[1:]
		return s
	}
	out := make([]models.Sample, len(b.rows))
	labels := make([]models.Label, nl)
	for i := range b.rows {
		r := &b.rows[i]
		name := str()
		n := counts[i]
		ls := labels[:n:n]
		labels = labels[n:]
		for j := range ls {
			ls[j].Name = str()
			ls[j].Value = str()
		}
		out[i] = models.Sample{Name: name, Labels: ls, Timestamp: r.ts, Value: r.v}
	}
	return out
}

// MetricRows appends b's rows from index start on to dst in the encoding
// lib/storage expects (MarshalMetricNameRaw; any other encoding is silently
// dropped by it), stopping before the encoded names would pass maxBytes
// (but taking at least one row); next is the index of the first row not
// appended, Len() at the end. A series added while the batch had no extra
// labels and under maxEncodedNames of names had its name encoded once as
// it was added, and its rows' MetricNameRaw alias that memory: valid until
// b is reset or added to. The other rows' names are encoded here, into buf
// (returned for reuse), in chunks that bound memory: extra labels are
// copied into every row's name.
func (b *Batch) MetricRows(dst []vmstorage.MetricRow, buf []byte, start, maxBytes int) (rows []vmstorage.MetricRow, out []byte, next int) {
	// Size buf once so that the MetricNameRaw slices stay valid: appending
	// past capacity would move earlier names.
	need, encode, end := 0, 0, start
	for ; end < len(b.rows); end++ {
		r := &b.rows[end]
		n := int(r.nend - r.nstart)
		if !b.encoded(r) {
			n = b.encodedSize(r)
		}
		if end > start && need+n > maxBytes {
			break
		}
		need += n
		if !b.encoded(r) {
			encode += n
		}
	}
	if cap(buf) < encode {
		buf = make([]byte, 0, encode)
	}
	buf = buf[:0]
	for i := start; i < end; i++ {
		r := &b.rows[i]
		if b.encoded(r) {
			dst = append(dst, vmstorage.MetricRow{MetricNameRaw: b.names[r.nstart:r.nend:r.nend], Timestamp: r.ts, Value: r.v})
			continue
		}
		at := len(buf)
		buf = appendMetricNameRaw(buf, r.name, b.rowLabels(r))
		dst = append(dst, vmstorage.MetricRow{MetricNameRaw: buf[at:len(buf):len(buf)], Timestamp: r.ts, Value: r.v})
	}
	return dst, buf, end
}

// encoded reports whether r's name was encoded as its series was added
// (and no extra labels came since).
func (b *Batch) encoded(r *row) bool { return r.nend > r.nstart && len(b.extra) == 0 }

// maxEncodedNames bounds the names a batch encodes as its series are
// added: a large body whose series do not repeat line after line (a text
// import of many series over many timestamps) would otherwise hold one
// encoded name per row for its whole life, ~50 MB more for a 30 MB body;
// past the bound, MetricRows encodes the rest in bounded chunks.
const maxEncodedNames = 4 << 20

// encodedSize is an upper bound of r's MarshalMetricNameRaw size.
func (b *Batch) encodedSize(r *row) int {
	n := len(r.name) + 8
	for _, l := range b.labels[r.lstart:r.lend] {
		n += len(l.Name) + len(l.Value) + 4
	}
	for _, l := range b.extra {
		n += len(l.Name) + len(l.Value) + 4
	}
	return n
}

// MarshalWriteRequest appends rows [from, to) of b to dst as a Prometheus
// remote-write WriteRequest protobuf (uncompressed), one time series per
// row with __name__ first. WriteRequest holds only the repeated timeseries
// field, so the concatenation of two such messages is the message with
// both sets of series: callers build a block by appending.
func (b *Batch) MarshalWriteRequest(dst []byte, from, to int) []byte {
	n := 0
	for _, r := range b.rows[from:to] {
		n += 1 + int(r.lend-r.lstart) + len(b.extra)
	}
	ls, ss, tss := b.pbuf[:0], b.psmp[:0], b.pts[:0]
	if cap(ls) < n {
		ls = make([]prompb.Label, 0, n)
	}
	if cap(ss) < to-from {
		ss = make([]prompb.Sample, 0, to-from)
	}
	for _, r := range b.rows[from:to] {
		start := len(ls)
		ls = append(ls, prompb.Label{Name: "__name__", Value: r.name})
		for _, l := range b.rowLabels(&r) {
			ls = append(ls, prompb.Label{Name: l.Name, Value: l.Value})
		}
		ss = append(ss, prompb.Sample{Value: r.v, Timestamp: r.ts})
		tss = append(tss, prompb.TimeSeries{Labels: ls[start:len(ls):len(ls)], Samples: ss[len(ss)-1 : len(ss) : len(ss)]})
	}
	wr := prompb.WriteRequest{Timeseries: tss}
	dst = wr.MarshalProtobuf(dst)
	clear(tss)
	clear(ls)
	b.pbuf, b.psmp, b.pts = ls[:0], ss[:0], tss[:0]
	return dst
}

// AddSamples validates samples and appends them to b. It is for ballast's
// own sources, whose bad sample is a bug: on error b is left as it was
// before the call.
func (b *Batch) AddSamples(samples []models.Sample, lim *Limits) error {
	b.asReceived = false
	m := b.mark()
	for i := range samples {
		s := &samples[i]
		// In process, a zero Timestamp means "now" (models.Sample).
		if err := b.add(s.Name, s.Labels, s.Timestamp, s.Timestamp != 0, s.Value, lim); err != nil {
			b.rollback(m)
			return fmt.Errorf("sample %d (%s): %w", i, models.Abbrev(s.Name), err)
		}
	}
	return nil
}

// add validates one row and appends it; a NaN other than the staleness
// marker is counted instead. hasTS says whether ts was given (0 included);
// a row without one gets lim.DefaultTimestamp. Extra labels are checked
// here but kept once per batch (b.extra), not copied into the row.
func (b *Batch) add(name string, ls []models.Label, ts int64, hasTS bool, v float64, lim *Limits) error {
	if err := models.CheckMetricName(name); err != nil {
		return &RejectError{Reason: ReasonName, Err: err}
	}
	start := len(b.labels)
	b.labels = append(b.labels, ls...)
	return b.addRow(name, start, ts, hasTS, v, lim)
}

// addRow adds one row of the series name{b.labels[start:]}, whose labels
// the caller appended and whose name it checked with
// models.CheckMetricName. On error, or for a NaN, the labels are dropped
// again.
func (b *Batch) addRow(name string, start int, ts int64, hasTS bool, v float64, lim *Limits) error {
	names0 := len(b.names)
	s, err := b.addSeries(name, start, lim)
	if err != nil {
		return err
	}
	added, err := b.addSample(name, s, ts, hasTS, v, lim)
	if !added {
		b.dropSeries(s, start, names0)
	}
	return err
}

// dropSeries forgets the series s, added at labels[start:] and
// names[names0:], when no row of it was kept: the next rows reuse the
// space. A series that was the previous one again (addSeries) took none.
func (b *Batch) dropSeries(s series, start, names0 int) {
	if int(s.lstart) == start {
		b.labels, b.names = b.labels[:start], b.names[:names0]
		b.lastOK = false
	}
}

// addSeries validates the series name{b.labels[start:]} (the caller
// appended its own labels there and checked the name), applies the
// default labels (into b.labels) and the extra ones (kept once, in
// b.extra), and, while the batch has no extra labels, encodes its name for
// lib/storage once, for all its rows. A series equal to the previous one
// added (same name, same labels in the same order, as consecutive lines of
// one series in a text body) is that one: nothing is checked or encoded
// again. On error b.labels is cut back to start.
func (b *Batch) addSeries(name string, start int, lim *Limits) (series, error) {
	if len(lim.ExtraLabels) > 0 {
		b.extra = lim.ExtraLabels
	}
	for _, d := range lim.DefaultLabels {
		if models.LabelValue(b.labels[start:], d.Name) == "" && models.LabelValue(b.extra, d.Name) == "" {
			b.labels = setLabel(b.labels, start, d)
		}
	}
	all := b.labels[start:]
	if len(b.extra) > 0 {
		all = append(b.scratch[:0], all...)
		for _, e := range b.extra {
			all = setLabel(all, 0, e)
		}
		b.scratch = all
	}
	n, identical, err := b.checkLabels(name, all)
	if identical && b.lastOK && name == b.lastName {
		b.labels = b.labels[:start]
		return b.last, nil
	}
	if err != nil {
		// checkLabels may have moved b.passed on (values that passed
		// before the bad one): it is no longer the last series' set, so
		// the same-series test above must not trust it.
		b.labels = b.labels[:start]
		b.lastOK = false
		return series{}, &RejectError{Reason: ReasonLabels, Err: err}
	}
	if n > MaxLabelSetBytes {
		b.labels = b.labels[:start]
		b.lastOK = false
		return series{}, &RejectError{Reason: ReasonLabels, Err: fmt.Errorf("label set is %d bytes with the metric name; the limit is %d (one VictoriaMetrics index entry)", n, MaxLabelSetBytes)}
	}
	s := series{lstart: int32(start), lend: int32(len(b.labels))}
	if len(b.extra) == 0 && len(b.names) < maxEncodedNames {
		s.nstart = int32(len(b.names))
		b.names = appendMetricNameRaw(b.names, name, all)
		s.nend = int32(len(b.names))
	}
	b.last, b.lastName, b.lastOK = s, name, true
	return s, nil
}

// addSample adds a sample of the series s. It reports whether a row was
// added: not for a NaN other than the staleness marker (counted, not
// stored, no error) nor for a timestamp out of bounds (the error).
func (b *Batch) addSample(name string, s series, ts int64, hasTS bool, v float64, lim *Limits) (bool, error) {
	if !hasTS {
		ts = lim.DefaultTimestamp
	}
	if err := checkTimestamp(ts, lim); err != nil {
		return false, &RejectError{Reason: ReasonTimestamp, Err: err}
	}
	if math.IsNaN(v) && !decimal.IsStaleNaN(v) {
		b.nans++
		return false, nil
	}
	b.rows = append(b.rows, row{name: name, series: s, ts: ts, v: v})
	return true, nil
}

// checkLabels validates ls, the labels of a series of the metric name
// (checked already), as models.ValidateLabels does (same result, same
// error), and returns labelSetBytes(name, ls), in one pass over ls in the
// usual case. That pass compares ls with the last label set that passed
// (b.passed): when ls has the same names in the same order, count, names
// and uniqueness hold already and only the values that differ are
// checked; identical says that no value differed either (the caller's
// same-series case, which cannot fail). Consecutive series of a body
// mostly share names and most values (job, instance, …). Otherwise ls is
// checked in full and becomes the set that passed.
func (b *Batch) checkLabels(name string, ls []models.Label) (n int, identical bool, err error) {
	if len(ls) == len(b.passed) {
		n, identical = len(name)+1, true
		passed := b.passed[:len(ls)]
		for j := range ls {
			l, p := &ls[j], &passed[j]
			if l.Name != p.Name {
				goto full
			}
			if l.Value != p.Value {
				identical = false
				// An error here is the one ValidateLabels would give:
				// the labels before j passed, and j's name did.
				if err := models.ValidateLabelValue(*l); err != nil {
					return 0, false, err
				}
				// Every value b.passed holds passed, so it may be
				// updated as the loop goes.
				p.Value = l.Value
			}
			if l.Value != "" {
				n += len(l.Name) + len(l.Value) + 2
			}
		}
		if 2*n > MaxLabelSetBytes {
			n = labelSetBytes(name, ls) // escapes may matter
		}
		return n, identical, nil
	}
full:
	if err := models.ValidateLabels(ls); err != nil {
		return 0, false, err
	}
	// A copy of the headers: ls may be scratch space the next row reuses.
	b.passed = append(b.passed[:0], ls...)
	return labelSetBytes(name, ls), false, nil
}

func setLabel(ls []models.Label, start int, l models.Label) []models.Label {
	for i := start; i < len(ls); i++ {
		if ls[i].Name == l.Name {
			ls[i].Value = l.Value
			return ls
		}
	}
	return append(ls, l)
}

// labelSetBytes is the size of a series' identity in VictoriaMetrics'
// index: names and values, a separator each, and an escape byte for every
// byte 0, 1 or 2 in them. Labels with empty values are not stored. A set
// of at most MaxLabelSetBytes/2 bytes before escapes is returned without
// them: it is within the limit either way.
func labelSetBytes(name string, ls []models.Label) int {
	n := len(name) + 1
	for _, l := range ls {
		if l.Value != "" {
			n += len(l.Name) + len(l.Value) + 2
		}
	}
	if 2*n <= MaxLabelSetBytes {
		// Even if every byte needed an escape the set would be within
		// the limit: the exact count cannot change the caller's verdict
		// (and counting costs a pass over every byte of every sample).
		return n
	}
	n += escapes(name)
	for _, l := range ls {
		if l.Value != "" {
			n += escapes(l.Name) + escapes(l.Value)
		}
	}
	return n
}

func escapes(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] <= 2 {
			n++
		}
	}
	return n
}

// CheckExtraLabels validates the extra labels of a request: valid names,
// each value within limits, at most MaxExtraLabelBytes in all.
func CheckExtraLabels(ls []models.Label) error {
	if err := models.ValidateLabels(ls); err != nil {
		return &RejectError{Reason: ReasonLabels, Err: fmt.Errorf("extra_label: %w", err)}
	}
	n := 0
	for _, l := range ls {
		n += len(l.Name) + len(l.Value)
	}
	if n > MaxExtraLabelBytes {
		return &RejectError{Reason: ReasonLabels, Err: fmt.Errorf("extra_label: %d bytes of extra labels; the limit is %d (they are copied into every series)", n, MaxExtraLabelBytes)}
	}
	return nil
}

func checkTimestamp(ts int64, lim *Limits) error {
	// Beyond these, the text parser's float-to-int conversion has
	// overflowed or the number is not a Unix time in milliseconds.
	const minSane, maxSane = -1 << 53, 1 << 53
	if ts == math.MinInt64 {
		return fmt.Errorf("timestamp does not fit in 64-bit Unix milliseconds")
	}
	if ts < minSane || ts > maxSane {
		return fmt.Errorf("timestamp %d is out of range: want Unix milliseconds", ts)
	}
	if lim.MinTimestamp != 0 && ts < lim.MinTimestamp {
		return fmt.Errorf("timestamp %s is older than the retention allows (oldest accepted: %s)", fmtMillis(ts), fmtMillis(lim.MinTimestamp))
	}
	if lim.MaxTimestamp != 0 && ts > lim.MaxTimestamp {
		return fmt.Errorf("timestamp %s is too far in the future (latest accepted: %s)", fmtMillis(ts), fmtMillis(lim.MaxTimestamp))
	}
	return nil
}

func fmtMillis(ms int64) string {
	return fmt.Sprintf("%d (%s)", ms, time.UnixMilli(ms).UTC().Format(time.RFC3339))
}
