package ingest

import (
	"errors"
	"fmt"
	"strings"

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
// entries name the series index, its labels and the reason.
func ParseRemoteWrite(pb []byte, lim *Limits, b *Batch) error {
	wru := prompb.GetWriteRequestUnmarshaler()
	defer prompb.PutWriteRequestUnmarshaler(wru)
	wr, err := wru.UnmarshalProtobuf(pb)
	if err != nil {
		return fmt.Errorf("cannot unmarshal remote write protobuf: %w", err)
	}
	var rej Rejected
	b.AddTimeSeries(wr.Timeseries, lim, rej.add)
	return rej.orNil()
}

// AddTimeSeries validates remote-write series and appends their valid
// samples to b. Each invalid sample, or series when its name or labels are
// bad, is reported to onReject with its series index, labels and the
// number of samples lost.
func (b *Batch) AddTimeSeries(tss []prompb.TimeSeries, lim *Limits, onReject func(err error, samples int)) {
	var ls []models.Label
	for i := range tss {
		ts := &tss[i]
		name := ""
		ls = ls[:0]
		nameCount := 0
		for _, l := range ts.Labels {
			if l.Name == "__name__" {
				name = l.Value
				nameCount++
				continue
			}
			ls = append(ls, models.Label{Name: l.Name, Value: l.Value})
		}
		var err error
		switch {
		case nameCount == 0:
			err = &RejectError{Reason: ReasonName, Err: fmt.Errorf("series has no __name__ label")}
		case nameCount > 1:
			err = &RejectError{Reason: ReasonLabels, Err: fmt.Errorf("duplicate label \"__name__\"")}
		}
		if err != nil {
			onReject(fmt.Errorf("timeseries %d (%s): %w", i, seriesString(ts.Labels), err), len(ts.Samples))
			continue
		}
		for j, s := range ts.Samples {
			// Remote write always carries a timestamp: 0 means 1970.
			err := b.add(name, ls, s.Timestamp, true, s.Value, lim)
			if err == nil {
				continue
			}
			if r := Reason(err); r == ReasonName || r == ReasonLabels {
				// The series is bad, not the sample: say so once.
				onReject(fmt.Errorf("timeseries %d (%s): %w", i, seriesString(ts.Labels), err), len(ts.Samples)-j)
				break
			}
			onReject(fmt.Errorf("timeseries %d (%s): sample %d: %w", i, seriesString(ts.Labels), j, err), 1)
		}
	}
}

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
