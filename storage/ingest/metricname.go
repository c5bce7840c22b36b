package ingest

import (
	"fmt"
	"math"
	"slices"

	"github.com/ballast-io/ballast/models"
)

// appendMetricNameRaw appends the series name{ls} to dst in the encoding
// lib/storage reads from MetricRow.MetricNameRaw: exactly the bytes of
// vmstorage.MarshalMetricNameRaw(dst, labels) with labels being
// {__name__=name} followed by ls. That is, for the metric name under the
// empty key and then each label in order, unless its value is empty: the
// key's length as a big-endian uint16, the key, the value's length, the
// value; a label named __name__ is written under the empty key too.
//
// Hand-written rather than two MarshalMetricNameRaw calls (the name, then
// the labels where they lie) because each call walks its labels twice (to
// size, then to write) and the batch's labels would otherwise have to be
// copied behind the name into one []prompb.Label first: this is one call
// that sizes (lengths only) and grows the buffer once, then writes each
// string in place. TestAppendMetricNameRaw and FuzzAppendMetricNameRaw hold it to
// MarshalMetricNameRaw's bytes.
//
// Like MarshalMetricNameRaw it panics on a name or value longer than
// 65535 bytes, which the format cannot hold; callers bound a label set to
// MaxLabelSetBytes first.
func appendMetricNameRaw(dst []byte, name string, ls []models.Label) []byte {
	// Size: the name and each label with a value, two bytes of length
	// before each string.
	size, long := 0, len(name)
	if name != "" {
		size = len(name) + 4
	}
	for i := range ls {
		if l := &ls[i]; l.Value != "" {
			size += len(l.Name) + len(l.Value) + 4
			long = max(long, len(l.Name), len(l.Value))
		}
	}
	if long > math.MaxUint16 {
		tooLong(long)
	}
	at := len(dst)
	dst = slices.Grow(dst, size)[:at+size]
	w := dst[at:]
	if name != "" {
		w[0], w[1] = 0, 0
		w = putRawString(w[2:], name)
	}
	for i := range ls {
		l := &ls[i]
		if l.Value == "" {
			continue
		}
		if l.Name == "__name__" {
			w[0], w[1] = 0, 0
			w = w[2:]
		} else {
			w = putRawString(w, l.Name)
		}
		w = putRawString(w, l.Value)
	}
	// A __name__ key took no bytes of the len(l.Name) it was sized with.
	return dst[:len(dst)-len(w)]
}

// putRawString writes s with its length as a big-endian uint16 at the
// start of w and returns the rest of w.
func putRawString(w []byte, s string) []byte {
	w[0], w[1] = byte(len(s)>>8), byte(len(s))
	copy(w[2:], s)
	return w[2+len(s):]
}

func tooLong(n int) {
	panic(fmt.Sprintf("BUG: a %d-byte label name or value does not fit lib/storage's metric name encoding", n))
}
