package analysis

import (
	"math"

	"github.com/ballast-io/ballast/models"
)

// Client-side slowness. LAYOUTSTATS latency is what the client saw: the
// data server's service time plus the network between them and the
// client's own queue (its NIC, its switch port, its CPU). A device that is
// slow is slow for every client reading it; a client that sees every
// device it reads several times slower than the other clients reading the
// same devices is slow on its own side — a node behind a slow or
// congested link, the readahead scenario's 25 GbE node once its read-ahead
// was raised (5–16 ms where the others saw 1.1–1.4 ms from the same
// drives). Judged per device, so a slow device, a saturated DS or port
// and a lost DS, which every reader sees alike, cancel out.

// clientSideFactor and clientSideMinLatency are the starvation analyzer's
// SlowFactor and MinSlowLatency defaults: the stage decides which clients
// are slow on their own side with the rule the analyzer applies to the
// client subject it is given.
const (
	clientSideFactor     = 2
	clientSideMinLatency = 0.0005
)

// readSums is completed reads: seconds of completion time, operations and
// bytes.
type readSums struct{ secs, ops, bytes float64 }

func (r *readSums) add(o readSums) {
	r.secs, r.ops, r.bytes = r.secs+o.secs, r.ops+o.ops, r.bytes+o.bytes
}

// clientSubject keys one client's reads on one device or DS.
type clientSubject struct {
	client string
	sub    models.Subject
}

// clientReads sums the tick's completed reads per client and device and
// per client and DS.
func clientReads(tick []models.StripeDelta) map[clientSubject]readSums {
	out := map[clientSubject]readSums{}
	for i := range tick {
		d := &tick[i]
		r := readSums{secs: d.Read.CompletionTime.Seconds(), ops: float64(d.Read.OpsCompleted), bytes: float64(d.Read.BytesCompleted)}
		if r.ops <= 0 || d.Client == "" {
			continue
		}
		k := clientSubject{d.Client, models.Subject{Kind: models.SubjectDevice, ID: d.DeviceID}}
		v := out[k]
		v.add(r)
		out[k] = v
		if d.DS != "" {
			k.sub = models.Subject{Kind: models.SubjectDS, ID: d.DS}
			v := out[k]
			v.add(r)
			out[k] = v
		}
	}
	return out
}

// clientLatency is one client's mean read latency on the devices other
// clients read too (own) and what it would have been at the other
// clients' latency on those devices (expected): the larger of the two
// comparisons per operation and per byte, so a client that reads in
// smaller or larger requests than its peers is not slow for that alone.
type clientLatency struct{ own, expected float64 }

// clientLatencies compares each client's reads with the other clients'
// on the same devices; a client sharing no device with another is absent.
func clientLatencies(reads map[clientSubject]readSums) map[string]clientLatency {
	total := map[models.Subject]readSums{}
	for k, r := range reads {
		if k.sub.Kind == models.SubjectDevice {
			v := total[k.sub]
			v.add(r)
			total[k.sub] = v
		}
	}
	type acc struct {
		own          readSums
		byOp, byByte float64
	}
	per := map[string]*acc{}
	for k, r := range reads {
		if k.sub.Kind != models.SubjectDevice {
			continue
		}
		t := total[k.sub]
		oOps, oBytes, oSecs := t.ops-r.ops, t.bytes-r.bytes, t.secs-r.secs
		if oOps <= 0 || oBytes <= 0 {
			continue
		}
		a := per[k.client]
		if a == nil {
			a = &acc{}
			per[k.client] = a
		}
		a.own.add(r)
		a.byOp += r.ops * oSecs / oOps
		a.byByte += r.bytes * oSecs / oBytes
	}
	out := make(map[string]clientLatency, len(per))
	for c, a := range per {
		out[c] = clientLatency{own: a.own.secs / a.own.ops, expected: max(a.byOp, a.byByte) / a.own.ops}
	}
	return out
}

// slowSide reports whether a client's (smoothed) latency is its own side's.
func (l clientLatency) slowSide() bool {
	return l.own >= clientSideMinLatency && l.own >= clientSideFactor*l.expected
}

// latencyWithout is the mean read latency of a device or DS over the
// tick's reads of the clients not slow on their own side, and how many
// reads that mean is over; NaN (and 0) when none of them read it.
// l.latency() when no client is excluded.
func latencyWithout(l *subjectLoad, reads map[clientSubject]readSums, excluded []string) (float64, float64) {
	if len(excluded) == 0 {
		return l.latency(), max(l.opsDone, 0)
	}
	secs, ops := l.completion, l.opsDone
	for _, c := range excluded {
		r := reads[clientSubject{c, l.subject}]
		secs, ops = secs-r.secs, ops-r.ops
	}
	if ops <= 0.5 {
		return math.NaN(), 0
	}
	return max(secs, 0) / ops, ops
}
