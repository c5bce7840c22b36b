package ingest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/prompb"
	"github.com/golang/snappy"

	"github.com/ballast-io/ballast/models"
)

// ErrTooLarge is returned when a body decodes to more than the allowed size.
var ErrTooLarge = errors.New("body too large")

// DecodeSnappy decodes a snappy block-format body (the Prometheus remote
// write 1.0 framing) after checking that its decoded size is within max.
func DecodeSnappy(dst, body []byte, max int) ([]byte, error) {
	n, err := snappy.DecodedLen(body)
	if err != nil {
		return dst, fmt.Errorf("cannot decode snappy body: %w", err)
	}
	if n > max {
		return dst, fmt.Errorf("%w: decoded size %d bytes exceeds the limit of %d", ErrTooLarge, n, max)
	}
	out, err := snappy.Decode(dst[:cap(dst)], body)
	if err != nil {
		return dst, fmt.Errorf("cannot decode snappy body: %w", err)
	}
	return out, nil
}

// ParseRemoteWrite decodes an uncompressed Prometheus remote write
// WriteRequest protobuf into b. A body that does not decode returns an
// error and adds nothing. Otherwise every valid sample is added to b, and
// the invalid ones (a series without a valid __name__, bad labels, a
// timestamp outside retention) are described by a *Rejected error whose
// entries name the series index, its labels and the reason. Afterwards
// b.AsReceived says whether pb itself carries exactly b's rows.
//
// b's strings alias pb, and, for series converted from native histograms,
// a buffer b keeps that the next ParseRemoteWrite into b reuses: use the
// rows before parsing the next body into the same batch.
func ParseRemoteWrite(pb []byte, lim *Limits, b *Batch) error {
	if b.wru == nil {
		// Kept with the batch (itself pooled by its users) rather than
		// taken from prompb's pool, so that its label and sample slices
		// keep their capacity across requests instead of growing again
		// after every garbage collection.
		b.wru = new(prompb.WriteRequestUnmarshaler)
	}
	rows0 := len(b.rows)
	wr, err := b.wru.UnmarshalProtobuf(pb)
	if err != nil {
		b.asReceived = false
		return fmt.Errorf("cannot unmarshal remote write protobuf: %w", err)
	}
	var rej Rejected
	nans0 := b.nans
	b.AddTimeSeries(wr.Timeseries, lim, rej.add)
	b.asReceived = rows0 == 0 && rej.Count == 0 && b.nans == nans0 && len(b.extra) == 0 &&
		len(lim.ExtraLabels) == 0 && len(lim.DefaultLabels) == 0 &&
		len(b.rows) == samplesIn(wr.Timeseries)
	// What else pb holds (onlySeries) is looked at when AsReceived is
	// asked, by a writer that can forward the body; the embedded store
	// never asks. b's strings alias pb anyway.
	b.rwBody = pb
	b.wru.Reset() // drop the references into pb
	return rej.orNil()
}

// AsReceived reports whether the remote-write body b was last filled from
// (by ParseRemoteWrite, into an empty batch) holds exactly b's rows and
// nothing else: every sample in it passed validation as it is, no label
// was added or changed, no NaN was left out, and it carries no metadata,
// exemplars or native histograms. Such a body can be forwarded as
// received instead of being encoded again from b.
func (b *Batch) AsReceived() bool {
	if b.asReceived && b.rwBody != nil {
		b.asReceived = onlySeries(b.rwBody)
	}
	b.rwBody = nil
	return b.asReceived
}

func samplesIn(tss []prompb.TimeSeries) int {
	n := 0
	for i := range tss {
		n += len(tss[i].Samples)
	}
	return n
}

// onlySeries reports whether the WriteRequest pb holds only time series
// (field 1) and each series only labels (1) and samples (2): no metadata
// (WriteRequest field 3), exemplars (TimeSeries 3) or native histograms
// (TimeSeries 4, which prompb's unmarshaler turns into vmrange series).
// It runs after a successful unmarshal, on every remote-write body, and
// reads only tags and lengths; written by hand because easyproto's
// FieldContext (a full field decoder) made it cost a tenth of ballast's
// whole remote-write path. A tag in a longer encoding than one byte is
// legal protobuf but answers false: the body is then encoded again, which
// is always correct.
func onlySeries(pb []byte) bool {
	const series, labels, samples = 1<<3 | 2, 1<<3 | 2, 2<<3 | 2 // field number << 3 | wire type 2 (length-delimited)
	for len(pb) > 0 {
		var ts []byte
		var ok bool
		if pb[0] != series {
			return false
		}
		if ts, pb, ok = lengthDelimited(pb[1:]); !ok {
			return false
		}
		for len(ts) > 0 {
			if ts[0] != labels && ts[0] != samples {
				return false
			}
			if _, ts, ok = lengthDelimited(ts[1:]); !ok {
				return false
			}
		}
	}
	return true
}

// lengthDelimited splits b, which starts with a varint length, into the
// field's data and what follows it.
func lengthDelimited(b []byte) (data, rest []byte, ok bool) {
	if len(b) > 0 && b[0] < 0x80 && int(b[0]) < len(b) {
		// One length byte: labels and samples nearly always.
		n := int(b[0])
		return b[1 : 1+n], b[1+n:], true
	}
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, false
	}
	return b[k : k+int(n)], b[k+int(n):], true
}

// AddTimeSeries validates remote-write series and appends their valid
// samples to b. Each invalid sample, or series when its name or labels are
// bad, is reported to onReject with its series index, labels and the
// number of samples lost. A series' labels are checked, copied and
// encoded once, for all its samples.
func (b *Batch) AddTimeSeries(tss []prompb.TimeSeries, lim *Limits, onReject func(err error, samples int)) {
	checked, haveChecked := "", false // the last metric name that passed CheckMetricName
	for i := range tss {
		ts := &tss[i]
		name := ""
		start, names0 := len(b.labels), len(b.names)
		nameCount, at := 0, 0
		for j := range ts.Labels {
			if ts.Labels[j].Name == "__name__" {
				name, at = ts.Labels[j].Value, j
				nameCount++
			}
		}
		if nameCount == 1 {
			// The other labels, copied as two blocks (one bulk write
			// barrier each while the GC runs, not one per string).
			ls := labelsOf(ts.Labels)
			b.labels = append(append(b.labels, ls[:at]...), ls[at+1:]...)
		}
		var err error
		switch {
		case nameCount == 0:
			err = &RejectError{Reason: ReasonName, Err: fmt.Errorf("series has no __name__ label")}
		case nameCount > 1:
			err = &RejectError{Reason: ReasonLabels, Err: fmt.Errorf("duplicate label \"__name__\"")}
		case (!haveChecked || name != checked) && len(ts.Samples) > 0:
			// Series of one metric usually come together: its name
			// is checked once per run, not once per sample.
			if cerr := models.CheckMetricName(name); cerr != nil {
				err = &RejectError{Reason: ReasonName, Err: cerr}
			} else {
				checked, haveChecked = name, true
			}
		}
		if err == nil && len(ts.Samples) > 0 {
			// A bad label set is the series' fault, not a sample's: said
			// once, for all its samples.
			var s series
			if s, err = b.addSeries(name, start, lim); err == nil {
				added := false
				for j, smp := range ts.Samples {
					// Remote write always carries a timestamp: 0 means 1970.
					ok, serr := b.addSample(name, s, smp.Timestamp, true, smp.Value, lim)
					added = added || ok
					if serr != nil {
						onReject(fmt.Errorf("timeseries %d (%s): sample %d: %w", i, seriesString(ts.Labels), j, serr), 1)
					}
				}
				if !added {
					b.dropSeries(s, start, names0)
				}
				continue
			}
		}
		b.labels = b.labels[:start]
		if err != nil {
			onReject(fmt.Errorf("timeseries %d (%s): %w", i, seriesString(ts.Labels), err), len(ts.Samples))
		}
	}
}

// labelsOf views remote-write labels as models.Labels, the same struct
// (the conversion below stops compiling if that changes), without a copy.
func labelsOf(ls []prompb.Label) []models.Label {
	return unsafe.Slice((*models.Label)(unsafe.Pointer(unsafe.SliceData(ls))), len(ls))
}

var _ = models.Label(prompb.Label{})

// seriesString renders labels for an error message, at most about 300
// bytes: an error never echoes a whole (possibly megabytes long) label set.
func seriesString(ls []prompb.Label) string {
	const max = 300
	var sb strings.Builder
	sb.WriteByte('{')
	for i, l := range ls {
		if i > 0 {
			sb.WriteByte(',')
		}
		if sb.Len() > max {
			fmt.Fprintf(&sb, "… %d more labels", len(ls)-i)
			break
		}
		fmt.Fprintf(&sb, "%s=%s", models.Abbrev(l.Name), models.Abbrev(l.Value))
	}
	sb.WriteByte('}')
	return sb.String()
}
