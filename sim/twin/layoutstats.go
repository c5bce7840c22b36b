package twin

import (
	"cmp"
	"encoding/binary"
	"encoding/hex"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/ballast-io/ballast/cluster/identity"
	"github.com/ballast-io/ballast/models"
)

// layoutRecentWindow is how long after its last I/O a client keeps
// reporting a layout's counters (it still holds the layout).
const layoutRecentWindow = 60.0

// ioStat is one direction of ff_io_latency4, cumulative. The physics
// delivers fractional operations (a fluid model); a client counts an
// operation, its bytes and its completion time together when the whole
// operation completes or fails. So the fractional totals (opsDone …
// completion) are kept as delivered, and the *Out fields hold what the
// client has counted: whole operations (the floor of the totals) and the
// bytes and completion time they carried, released in proportion as the
// whole count advances (docs/scenarios.md, "Physical reason for whole
// operations in LAYOUTSTATS"). Busy time is time with a request in flight,
// which a fraction of one is, and is rendered from busy itself.
type ioStat struct {
	opsDone, bytesDone, opsFailed, notDelivered, busy, completion float64
	busyAt                                                        int64   // tick of the last busy-time update
	busyThis                                                      float64 // busy time added in that tick
	// counted by the client: whole ops and what they carried
	opsOut, bytesOut, complOut float64
	failedOut, ndOut           float64
}

// complete books ops operations completed in tick tick of dt seconds,
// carrying bytes, each op's latencies summing to sec seconds.
func (s *ioStat) complete(tick int64, dt, ops, bytes, sec float64) {
	s.opsDone += ops
	s.bytesDone += bytes
	s.completion += sec
	// busy time: at least one request outstanding, at most the tick
	// however many streams of this client share the stripe
	if s.busyAt != tick {
		s.busyAt, s.busyThis = tick, 0
	}
	add := min(dt-s.busyThis, sec)
	s.busy += add
	s.busyThis += add
	if w := math.Floor(s.opsDone); w > s.opsOut {
		// the pending ops are opsDone − opsOut; w − opsOut of them are
		// now whole, so they take that share of the pending bytes and time
		f := (w - s.opsOut) / (s.opsDone - s.opsOut)
		s.bytesOut += f * max(0, s.bytesDone-s.bytesOut)
		s.complOut += f * max(0, s.completion-s.complOut)
		s.opsOut = w
	}
}

// fail books ops operations that failed, requesting bytes not delivered.
func (s *ioStat) fail(ops, bytes float64) {
	s.opsFailed += ops
	s.notDelivered += bytes
	if w := math.Floor(s.opsFailed); w > s.failedOut {
		f := (w - s.failedOut) / (s.opsFailed - s.failedOut)
		s.ndOut += f * max(0, s.notDelivered-s.ndOut)
		s.failedOut = w
	}
}

// layoutRec is the LAYOUTSTATS counters one client keeps for one stripe
// (one file's component on one device). A layout change (the stripe moved)
// gives the client a new layout stateid and new counters.
type layoutRec struct {
	client int32 // -1 while the record is free
	stripe int32
	gen    uint32
	seq    uint32  // layout sequence: a new one for every LAYOUTGET
	first  float64 // when the counters started, seconds since start
	last   float64
	rd, wr ioStat
	// identifiers rendered once per layout (empty until first reported)
	stateid, fhandle string
	// sentAt is past the time of the last I/O reported: a report is due
	// when the layout saw I/O at or after it
	sentAt float64
}

// recChunk is how many records one allocation holds: records live in
// fixed chunks so that adding one never copies the others.
const recChunk = 4096

func (t *Twin) rec(i int32) *layoutRec { return &t.recs[i/recChunk][i%recChunk] }

func (r *layoutRec) stamp(_ *Twin, now float64) { r.last = now }

// record returns the index of client c's counters for stripe s, creating
// or restarting them as needed.
func (t *Twin) record(c, s int32) int32 {
	k := int(c)*len(t.stripes) + int(s)
	i := t.recIdx[k]
	now := float64(t.tick) * t.dt
	if i < 0 {
		if n := len(t.freeRecs); n > 0 {
			i = t.freeRecs[n-1]
			t.freeRecs = t.freeRecs[:n-1]
		} else {
			i = int32(t.nRecs)
			if t.nRecs%recChunk == 0 {
				t.recs = append(t.recs, make([]layoutRec, recChunk))
			}
			t.nRecs++
		}
		t.layoutSeq++
		*t.rec(i) = layoutRec{client: c, stripe: s, gen: t.stripes[s].gen, seq: t.layoutSeq, first: now, last: now}
		t.recIdx[k] = i
		return i
	}
	if r := t.rec(i); r.gen != t.stripes[s].gen {
		t.layoutSeq++
		*r = layoutRec{client: c, stripe: s, gen: t.stripes[s].gen, seq: t.layoutSeq, first: now, last: now}
	}
	return i
}

// streamRecord is record(st.client, stripe k of st's file) through a
// per-stream cache: a stream reads one file at a time, so the records of
// its stripes are found without touching the large recIdx table.
func (t *Twin) streamRecord(si int32, st *stream, k int32) int32 {
	s := t.files[st.file].first + k
	slot := int(si)*t.maxStripes + int(k)
	if i := t.streamRecs[slot]; i >= 0 {
		if r := t.rec(i); r.client == st.client && r.stripe == s && r.gen == t.stripes[s].gen {
			return i
		}
	}
	i := t.record(st.client, s)
	t.streamRecs[slot] = i
	return i
}

// sweepRecords frees the records of layouts idle for two report windows:
// the client has returned the layout and sent its last LAYOUTSTATS, and
// the next LAYOUTGET starts new counters under a new stateid. It keeps
// memory bounded by the layouts in use, not by every stripe ever read.
func (t *Twin) sweepRecords(now float64) {
	for i := 0; i < t.nRecs; i++ {
		r := t.rec(int32(i))
		if r.client < 0 || now-r.last <= 2*layoutRecentWindow {
			continue
		}
		t.recIdx[int(r.client)*len(t.stripes)+int(r.stripe)] = -1
		r.client = -1
		r.stateid, r.fhandle = "", ""
		t.freeRecs = append(t.freeRecs, int32(i))
	}
}

func hexID(parts ...uint32) string {
	b := make([]byte, 4*len(parts))
	for i, p := range parts {
		binary.BigEndian.PutUint32(b[4*i:], p)
	}
	return hex.EncodeToString(b)
}

// deviceID is the 16-byte pNFS deviceid4 of device d.
func deviceID(d int32) string { return hexID(0x62616c6c, 0x61737400, 0, uint32(d)) }

// DeviceID returns the pNFS deviceid4 (hex) the twin's MDS gives the named
// device, or "" when there is no such device. Scoring uses it to map
// LAYOUTSTATS-derived series back to device names.
func (t *Twin) DeviceID(name string) string {
	if d := t.findDevice(name); d >= 0 {
		return deviceID(d)
	}
	return ""
}

// MDSDevices returns the device table of the twin's pNFS server: every
// drive's device id (spares included, so a promoted spare is known), its
// data server and the export on it, ExportRoot/<namespace>. That is what
// an operator copies from a real pNFS server's configuration into the mds
// config's `devices:`; the drive behind each export is not given, the mds
// learns it from the data servers' filesystem series as it would on a real
// cluster (docs/scenarios.md, "Names").
func (t *Twin) MDSDevices() []identity.Device {
	out := make([]identity.Device, 0, len(t.dev))
	for d := range t.dev {
		dv := &t.dev[d]
		out = append(out, identity.Device{ID: deviceID(int32(d)), DS: t.ds[dv.ds].name, Export: ExportRoot + "/" + dv.kname})
	}
	return out
}

func nfsTime(sec float64) models.NFSTime4 {
	return models.NFSTime4FromDuration(time.Duration(math.Round(max(0, sec) * 1e9)))
}

// latency4 renders the counters the client has counted: whole ops and
// the bytes and completion time they carried (complete, fail). Requested
// is completed plus failed (no request is in flight between ticks), so
// that every rendered counter is monotonic and completed + not delivered
// = requested exactly.
func (s *ioStat) latency4(dur float64) models.FFIOLatency4 {
	done, nd := uint64(math.Round(s.bytesOut)), uint64(math.Round(s.ndOut))
	opsDone, opsFailed := uint64(s.opsOut), uint64(s.failedOut)
	l := models.FFIOLatency4{
		OpsRequested:      opsDone + opsFailed,
		BytesRequested:    done + nd,
		OpsCompleted:      opsDone,
		BytesCompleted:    done,
		BytesNotDelivered: nd,
		TotalBusyTime:     nfsTime(min(s.busy, dur)),
	}
	if l.OpsCompleted > 0 {
		l.AggregateCompletionTime = nfsTime(s.complOut)
	}
	return l
}

// ioInfo4 renders the io_info4 of ff_iostats4: the whole ops completed
// and their bytes, as in latency4.
func (s *ioStat) ioInfo4() models.IOInfo4 {
	return models.IOInfo4{Count: uint64(s.opsOut), Bytes: uint64(math.Round(s.bytesOut))}
}

// LayoutStats returns what the clients send the MDS in LAYOUTSTATS since
// the previous call: one batch per client, one RFC 8435 ff_iostats4 report
// per (layout stateid, device, data server, file handle) that saw I/O since
// it was last reported, counters cumulative since the client got the
// layout. A layout idle since its last report is not sent again (a client
// reports the layouts it uses, and a returned layout once more at
// LAYOUTRETURN). Call it at least once a minute: layouts idle for two
// minutes are returned and their counters dropped. Batches are in client
// order, reports in the order the client first used the stripe.
func (t *Twin) LayoutStats() []models.LayoutStatsBatch {
	now := float64(t.tick) * t.dt
	recent := func(r *layoutRec) bool { return r.client >= 0 && r.last >= r.sentAt && now > r.first }
	// count first so that every batch is allocated once
	count := make([]int, len(t.cli))
	for i := 0; i < t.nRecs; i++ {
		if r := t.rec(int32(i)); recent(r) {
			count[r.client]++
		}
	}
	errs := make([]bool, len(t.cli))
	for k := range t.ioErrs {
		errs[k.client] = true
	}
	var out []models.LayoutStatsBatch
	idx := make([]int, len(t.cli))
	for c := range idx {
		idx[c] = -1
		if count[c] > 0 || errs[c] {
			idx[c] = len(out)
			out = append(out, models.LayoutStatsBatch{ClientID: t.cli[c].name, ReportTime: t.at(now), Reports: make([]models.FFIOStats4, 0, count[c])})
		}
	}
	for i := 0; i < t.nRecs; i++ {
		r := t.rec(int32(i))
		if !recent(r) {
			continue
		}
		bi := idx[r.client]
		st := &t.stripes[r.stripe]
		dv := &t.dev[st.dev]
		if r.stateid == "" {
			t.layoutIDs(r)
		}
		if t.devIDs == nil {
			t.devIDs = make([]string, len(t.dev))
			t.dsUaddr = make([]string, len(t.ds))
			for d := range t.dev {
				t.devIDs[d] = deviceID(int32(d))
			}
			for i := range t.ds {
				t.dsUaddr[i] = t.ds[i].addr + ".8.1" // port 2049
			}
		}
		out[bi].Reports = append(out[bi].Reports, models.FFIOStats4{
			Offset:   0,
			Length:   math.MaxUint64,
			Stateid:  models.Stateid4{Seqid: r.gen, Other: r.stateid},
			Read:     r.rd.ioInfo4(),
			Write:    r.wr.ioInfo4(),
			DeviceID: t.devIDs[st.dev],
			LayoutUpdate: models.FFLayoutUpdate4{
				Addr:     models.NetAddr4{NetID: "tcp", Addr: t.dsUaddr[dv.ds]},
				FHandle:  r.fhandle,
				Read:     r.rd.latency4(now - r.first),
				Write:    r.wr.latency4(now - r.first),
				Duration: nfsTime(now - r.first),
			},
		})
		r.sentAt = now
	}
	for c := range idx {
		if errs[c] {
			out[idx[c]].Errors = t.reportIOErrors(int32(c))
		}
	}
	return out
}

// DeviceName returns the drive name of a pNFS device id (hex) the twin
// issued, or "" for an unknown id. Scoring uses it to map device ids of
// LAYOUTSTATS-derived series and findings back to drive names.
func (t *Twin) DeviceName(id string) string {
	b, err := hex.DecodeString(id)
	if err != nil || len(b) != 16 || !strings.EqualFold(hexID(0x62616c6c, 0x61737400, 0), id[:24]) {
		return ""
	}
	d := binary.BigEndian.Uint32(b[12:])
	if int(d) >= len(t.dev) {
		return ""
	}
	return t.dev[d].name
}

// StripeOfHandle returns the stripe ("<file>#<k>") whose component file
// handle (hex) the twin issued, or "" for an unknown handle. Like
// DeviceName it is for scoring: the MDS knows which file a handle belongs
// to, so an analyzer's stripe can be matched to hot_shard truth.
func (t *Twin) StripeOfHandle(fh string) string {
	b, err := hex.DecodeString(fh)
	if err != nil || len(b) != 16 || binary.BigEndian.Uint32(b) != 0x01000700 {
		return ""
	}
	f, k := binary.BigEndian.Uint32(b[4:]), binary.BigEndian.Uint32(b[8:])
	if int(f) >= len(t.files) || k >= uint32(t.files[f].n) {
		return ""
	}
	return t.stripeID(t.files[f].first + int32(k))
}

// ioErrKey is one kind of error one client met on one layout's device.
type ioErrKey struct {
	client, rec, dev int32
	write            bool
	status           string
}

// ioErr is what the client will report of it: how many requests failed,
// when the first and the last did, and the layout they went through.
type ioErr struct {
	ops         float64
	first, last float64
	stateid     string
	seq         uint32
}

// noteIOError records a failed request of flow f as the client sees it:
// only the device whose I/O failed reports an error (NFS4ERR_NXIO when its
// data server does not answer, NFS4ERR_NOSPC on a full drive,
// NFS4ERR_IO on a failed one); the stream's requests to healthy devices
// that wait behind it fail nothing. This is an output of the twin (what
// LAYOUTERROR carries), not a change of its physics.
func (t *Twin) noteIOError(st *stream, f *flow, r *layoutRec, now, ops float64) {
	status := "NFS4ERR_IO"
	dv := &t.dev[f.dev]
	switch {
	case f.err == causeNodeDown:
		if int32(t.dsBase+slotsPerHost*int(dv.ds)) != f.errSubj {
			return
		}
		status = "NFS4ERR_NXIO"
	case f.write && dv.used >= dv.capBytes:
		status = "NFS4ERR_NOSPC"
	}
	if r.stateid == "" {
		t.layoutIDs(r)
	}
	if t.ioErrs == nil {
		t.ioErrs = map[ioErrKey]*ioErr{}
	}
	k := ioErrKey{client: st.client, rec: f.rec, dev: f.dev, write: f.write, status: status}
	e := t.ioErrs[k]
	if e == nil {
		e = &ioErr{first: now, stateid: r.stateid, seq: r.gen}
		t.ioErrs[k] = e
	}
	e.ops += max(ops, 0)
	e.last = now
}

// layoutIDs renders the stateid and file handle of a layout record.
func (t *Twin) layoutIDs(r *layoutRec) {
	st := &t.stripes[r.stripe]
	r.stateid = hexID(uint32(r.client), uint32(st.file), r.seq)
	r.fhandle = hexID(0x01000700, uint32(st.file), uint32(st.idx), r.gen)
}

// reportIOErrors renders the errors client c met since the last report as
// ff_ioerr4 entries (one device error each, with how many requests failed
// and when), in a fixed order, and forgets them.
func (t *Twin) reportIOErrors(c int32) []models.FFIOErr4 {
	var keys []ioErrKey
	for k := range t.ioErrs {
		if k.client == c {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	slices.SortFunc(keys, func(a, b ioErrKey) int {
		return cmp.Or(cmp.Compare(a.rec, b.rec), cmp.Compare(a.dev, b.dev), cmp.Compare(b2i(a.write), b2i(b.write)), cmp.Compare(a.status, b.status))
	})
	out := make([]models.FFIOErr4, 0, len(keys))
	for _, k := range keys {
		e := t.ioErrs[k]
		op := "OP_READ"
		if k.write {
			op = "OP_WRITE"
		}
		out = append(out, models.FFIOErr4{
			Offset:    0,
			Length:    math.MaxUint64,
			Stateid:   models.Stateid4{Seqid: e.seq, Other: e.stateid},
			Errors:    []models.DeviceError4{{DeviceID: deviceID(k.dev), Status: k.status, Opnum: op}},
			Count:     uint64(max(1, math.Ceil(e.ops-1e-9))),
			FirstTime: t.at(e.first),
			LastTime:  t.at(e.last),
		})
		delete(t.ioErrs, k)
	}
	return out
}
