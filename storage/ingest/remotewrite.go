package ingest

import (
	"errors"
	"fmt"

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
// WriteRequest protobuf into b. Every series must carry a valid __name__;
// staleness markers are kept, other NaNs are refused. Any bad series fails
// the whole batch with an error naming the series index and the reason.
func ParseRemoteWrite(pb []byte, lim *Limits, b *Batch) error {
	wru := prompb.GetWriteRequestUnmarshaler()
	defer prompb.PutWriteRequestUnmarshaler(wru)
	wr, err := wru.UnmarshalProtobuf(pb)
	if err != nil {
		return fmt.Errorf("cannot unmarshal remote write protobuf: %w", err)
	}
	return b.AddTimeSeries(wr.Timeseries, lim, nil)
}

// AddTimeSeries validates remote-write series and appends them to b. With a
// nil onReject the batch is all-or-nothing: the first bad sample fails the
// call and b is left as it was. With onReject set (scrapes, where there is
// no client to answer), bad samples are reported to it and skipped.
func (b *Batch) AddTimeSeries(tss []prompb.TimeSeries, lim *Limits, onReject func(error)) error {
	rows0, labels0 := len(b.rows), len(b.labels)
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
		for j := 0; err == nil && j < len(ts.Samples); j++ {
			s := ts.Samples[j]
			if err = b.add(name, ls, s.Timestamp, s.Value, true, lim); err != nil {
				err = fmt.Errorf("sample %d: %w", j, err)
				if onReject != nil {
					onReject(fmt.Errorf("timeseries %d (%s): %w", i, prompb.LabelsToString(ts.Labels), err))
					err = nil
				}
			}
		}
		if err != nil {
			if onReject != nil {
				onReject(fmt.Errorf("timeseries %d (%s): %w", i, prompb.LabelsToString(ts.Labels), err))
				continue
			}
			b.rows, b.labels = b.rows[:rows0], b.labels[:labels0]
			return fmt.Errorf("timeseries %d (%s): %w", i, prompb.LabelsToString(ts.Labels), err)
		}
	}
	return nil
}
