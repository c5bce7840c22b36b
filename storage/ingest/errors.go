package ingest

import (
	"errors"
	"fmt"
	"strings"
)

// Reasons a batch is rejected, used as the reason label of ballast's
// rejection counters.
const (
	ReasonParse     = "parse"
	ReasonName      = "metric_name"
	ReasonLabels    = "labels"
	ReasonTimestamp = "timestamp"
)

// RejectError is a validation failure with a machine-readable reason.
type RejectError struct {
	Reason string
	Err    error
}

func (e *RejectError) Error() string { return e.Err.Error() }
func (e *RejectError) Unwrap() error { return e.Err }

// BadInput reports that the input itself was refused: sending it again
// unchanged cannot succeed. Callers outside storage check for the method.
func (e *RejectError) BadInput() bool { return true }

// Reason returns the rejection reason of err (of its first rejection for a
// *Rejected), or ReasonParse when err carries none (lexing and protobuf
// errors).
func Reason(err error) string {
	var re *RejectError
	if errors.As(err, &re) {
		return re.Reason
	}
	return ReasonParse
}

// maxRejectedErrs is how many rejections a Rejected spells out.
const maxRejectedErrs = 5

// Rejected describes the samples of one request that were not accepted
// while the valid ones were: how many, by reason, and the first few errors,
// each naming its line or series.
type Rejected struct {
	// Count is the number of samples rejected, ByReason the same by
	// reason (the values of the Reason constants).
	Count    int
	ByReason map[string]int
	// Errs are the first rejections in input order.
	Errs []error
	more int // rejections beyond Errs
}

// add records the rejection of n samples for err.
func (r *Rejected) add(err error, n int) {
	if r.ByReason == nil {
		r.ByReason = map[string]int{}
	}
	r.Count += n
	r.ByReason[Reason(err)] += n
	if len(r.Errs) < maxRejectedErrs {
		r.Errs = append(r.Errs, err)
	} else {
		r.more++
	}
}

// orNil returns r as an error, or nil when nothing was rejected.
func (r *Rejected) orNil() error {
	if r.Count == 0 {
		return nil
	}
	return r
}

// Error lists the first rejections and how many more there were.
func (r *Rejected) Error() string {
	var b strings.Builder
	for i, e := range r.Errs {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(e.Error())
	}
	if r.more > 0 {
		fmt.Fprintf(&b, "; and %d more", r.more)
	}
	return b.String()
}

// Unwrap returns the rejections spelled out.
func (r *Rejected) Unwrap() []error { return r.Errs }
