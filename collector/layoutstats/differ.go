package layoutstats

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ballast-io/ballast/models"
)

// counterVec holds the cumulative counters of one report in a fixed order,
// so that comparing and differencing them is one loop. Times are in
// nanoseconds.
type counterVec [numCounters]uint64

// Positions in counterVec. Each ff_io_latency4 occupies latencyFields
// consecutive slots starting at readLatency or writeLatency.
const (
	cReadCount = iota
	cReadBytes
	cWriteCount
	cWriteBytes
	readLatency
	writeLatency = readLatency + latencyFields
	numCounters  = writeLatency + latencyFields
)

// Offsets within one ff_io_latency4 block.
const (
	lOpsRequested = iota
	lBytesRequested
	lOpsCompleted
	lBytesCompleted
	lBytesNotDelivered
	lBusyNs
	lCompletionNs
	latencyFields
)

// counterPaths names each counter by its JSON path within a report.
var counterPaths = func() [numCounters]string {
	var p [numCounters]string
	p[cReadCount] = "ffis_read.ii_count"
	p[cReadBytes] = "ffis_read.ii_bytes"
	p[cWriteCount] = "ffis_write.ii_count"
	p[cWriteBytes] = "ffis_write.ii_bytes"
	lat := [latencyFields]string{"ffil_ops_requested", "ffil_bytes_requested", "ffil_ops_completed",
		"ffil_bytes_completed", "ffil_bytes_not_delivered", "ffil_total_busy_time", "ffil_aggregate_completion_time"}
	for i, n := range lat {
		p[readLatency+i] = "ffis_layoutupdate.ffl_read." + n
		p[writeLatency+i] = "ffis_layoutupdate.ffl_write." + n
	}
	return p
}()

// vecOf copies the counters of a validated report into a counterVec.
func vecOf(r *models.FFIOStats4) counterVec {
	var v counterVec
	v[cReadCount], v[cReadBytes] = r.Read.Count, r.Read.Bytes
	v[cWriteCount], v[cWriteBytes] = r.Write.Count, r.Write.Bytes
	putLatency(v[readLatency:writeLatency], &r.LayoutUpdate.Read)
	putLatency(v[writeLatency:], &r.LayoutUpdate.Write)
	return v
}

func putLatency(dst []uint64, l *models.FFIOLatency4) {
	dst[lOpsRequested] = l.OpsRequested
	dst[lBytesRequested] = l.BytesRequested
	dst[lOpsCompleted] = l.OpsCompleted
	dst[lBytesCompleted] = l.BytesCompleted
	dst[lBytesNotDelivered] = l.BytesNotDelivered
	dst[lBusyNs] = uint64(l.TotalBusyTime.Duration())
	dst[lCompletionNs] = uint64(l.AggregateCompletionTime.Duration())
}

// stripeIO reads one direction of a counter difference.
func (v *counterVec) stripeIO(count, latency int) models.StripeIO {
	l := v[latency : latency+latencyFields]
	return models.StripeIO{
		Count:             v[count],
		Bytes:             v[count+1],
		OpsRequested:      l[lOpsRequested],
		BytesRequested:    l[lBytesRequested],
		OpsCompleted:      l[lOpsCompleted],
		BytesCompleted:    l[lBytesCompleted],
		BytesNotDelivered: l[lBytesNotDelivered],
		BusyTime:          time.Duration(l[lBusyNs]),
		CompletionTime:    time.Duration(l[lCompletionNs]),
	}
}

// ConflictError reports a well-formed report that contradicts what the
// ingest already accepted for the same stripe key: counters that went
// backwards without a reset, or counters that changed while the duration
// stood still. The HTTP handler answers it with 409 Conflict.
type ConflictError struct {
	Path   string
	Reason string
}

// Error renders the error as "path: reason".
func (e *ConflictError) Error() string { return e.Path + ": " + e.Reason }

// step classifies the move from one cumulative report to the next.
type step int

const (
	stepForward   step = iota // counters advanced (or stood) and duration advanced
	stepDuplicate             // the same counters and duration again: a re-send
	stepReset                 // the counters started over; the new values are the delta
)

// diff compares the cumulative counters and duration of a key's previous
// report with the current one. It returns how the counters moved, the
// delta and the length of the interval it covers. The rules, in order:
//
//  1. same duration and counters: a duplicate, no delta;
//  2. same duration, other counters: conflict (time stood still);
//  3. shorter duration: the client restarted collection, so the current
//     values are the delta over the current duration;
//  4. every counter that was non-zero is now lower: the counters were reset
//     within the interval; the current values are the delta over the
//     duration's advance;
//  5. some but not all counters lower: conflict (went backwards);
//  6. otherwise the difference, over the duration's advance.
//
// A delta whose busy time exceeds its interval is a conflict too
// (utilisation cannot exceed 1), unless it is within BusySlack: then it is
// clamped to the interval and counted in clamped.
func diff(report int, prev, cur *counterVec, prevDur, curDur time.Duration, clamped *int) (step, counterVec, time.Duration, error) {
	var d counterVec
	if curDur == prevDur {
		if *cur == *prev {
			return stepDuplicate, d, 0, nil
		}
		i := firstDifferent(prev, cur)
		return 0, d, 0, &ConflictError{Path: reportPath(report, counterPaths[i]),
			Reason: fmt.Sprintf("changed from %d to %d while ffis_layoutupdate.ffl_duration stayed at %s", prev[i], cur[i], curDur)}
	}
	if curDur < prevDur {
		d = *cur
		return stepReset, d, curDur, checkBusy(report, &d, curDur, clamped)
	}
	interval := curDur - prevDur
	dropped, kept := -1, -1
	for i := range cur {
		switch {
		case cur[i] < prev[i]:
			if dropped < 0 {
				dropped = i
			}
		case prev[i] != 0 && kept < 0:
			kept = i
		}
	}
	if dropped >= 0 && kept < 0 {
		d = *cur
		return stepReset, d, interval, checkBusy(report, &d, interval, clamped)
	}
	if dropped >= 0 {
		return 0, d, 0, &ConflictError{Path: reportPath(report, counterPaths[dropped]),
			Reason: fmt.Sprintf("went backwards from %d to %d without a reset (%s did not drop too, and ffl_duration advanced from %s to %s)",
				prev[dropped], cur[dropped], counterPaths[kept], prevDur, curDur)}
	}
	for i := range cur {
		d[i] = cur[i] - prev[i]
	}
	return stepForward, d, interval, checkBusy(report, &d, interval, clamped)
}

func firstDifferent(a, b *counterVec) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return 0
}

// BusySlack is how far a delta's busy time may exceed its interval and
// still be taken, clamped to the interval: 1 ms plus 0.1 % of the
// interval. A client measures busy time and the duration with separate
// clock reads, each rounded to the nanosecond of an nfstime4, so the
// difference of two cumulative reports can come out a few nanoseconds
// (or, with a coarse clock, a tick) longer than the interval; refusing it
// would drop the client's whole batch for rounding. Beyond the slack the
// counters contradict each other and the batch is a conflict.
func BusySlack(interval time.Duration) time.Duration {
	return time.Millisecond + interval/1000
}

// checkBusy clamps a delta's busy time that exceeds its interval by at
// most BusySlack to the interval (utilisation cannot exceed 1), counting
// each clamp in clamped, and refuses one that exceeds it by more.
func checkBusy(report int, d *counterVec, interval time.Duration, clamped *int) error {
	for _, base := range [2]int{readLatency, writeLatency} {
		busy := time.Duration(d[base+lBusyNs])
		switch {
		case busy <= interval:
		case busy-interval <= BusySlack(interval):
			d[base+lBusyNs] = uint64(interval)
			*clamped++
		default:
			return &ConflictError{Path: reportPath(report, counterPaths[base+lBusyNs]),
				Reason: fmt.Sprintf("advanced by %s in an interval of %s (more than the %s allowed for rounding)", busy, interval, BusySlack(interval))}
		}
	}
	return nil
}

// reportPath names a field of the report at index i of a batch; it is
// built only for errors.
func reportPath(i int, name string) string {
	return "reports[" + strconv.Itoa(i) + "]." + name
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// lowerHex returns s in lower case; validated hex is ASCII, and
// strings.ToLower returns s itself when there is nothing to change.
func lowerHex(s string) string { return strings.ToLower(s) }
