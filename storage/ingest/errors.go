package ingest

import "errors"

// Reasons a batch is rejected, used as the reason label of ballast's
// rejection counters.
const (
	ReasonParse     = "parse"
	ReasonName      = "metric_name"
	ReasonLabels    = "labels"
	ReasonValue     = "value"
	ReasonTimestamp = "timestamp"
)

// RejectError is a validation failure with a machine-readable reason.
type RejectError struct {
	Reason string
	Err    error
}

func (e *RejectError) Error() string { return e.Err.Error() }
func (e *RejectError) Unwrap() error { return e.Err }

// Reason returns the rejection reason of err, or ReasonParse when err
// carries none (lexing and protobuf errors).
func Reason(err error) string {
	var re *RejectError
	if errors.As(err, &re) {
		return re.Reason
	}
	return ReasonParse
}
