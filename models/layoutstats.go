package models

// This file is the vocabulary of the LAYOUTSTATS ingest (POST
// /api/v1/layoutstats on the mds, collector/layoutstats): the JSON shape of
// the RFC 8435 ff_iostats4 reports that pNFS flex-files clients send to the
// metadata server, the per-stripe deltas the ingest hands to the analyzers,
// and the names of the series it derives. JSON field names are the XDR field
// names of RFC 8435 §9.2 (ff_iostats4, ff_layoutupdate4, ff_io_latency4),
// RFC 7862 §15.6 (io_info4) and RFC 8881 §3.3 (nfstime4, netaddr4, stateid4),
// so docs/layoutstats.md maps them one to one.

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Sizes of the fixed-length opaque XDR types, in bytes (RFC 8881 §2.2).
const (
	StateidOtherSize = 12  // stateid4.other: opaque other[NFS4_OTHER_SIZE]
	DeviceIDSize     = 16  // deviceid4: opaque deviceid4[NFS4_DEVICEID4_SIZE]
	MaxFileHandle    = 128 // nfs_fh4: opaque nfs_fh4<NFS4_FHSIZE>
)

// Limits the ingest enforces on free-form strings so that they stay usable
// as label values.
const (
	MaxClientIDBytes = 256
	MaxNetIDBytes    = 16
	MaxUaddrBytes    = 64
	// MaxNFSTimeSeconds bounds nfstime4.seconds so that every duration
	// converts to a time.Duration without overflow (2^32 s is 136 years).
	MaxNFSTimeSeconds = 1 << 32
)

// NFSTime4 is nfstime4 (RFC 8881 §3.3.1): seconds and nanoseconds. In
// ff_io_latency4 and ff_layoutupdate4 it holds a duration, not a date.
type NFSTime4 struct {
	Seconds  int64  `json:"seconds"`
	Nseconds uint32 `json:"nseconds"`
}

// Duration converts t to a time.Duration. It assumes t passed Validate
// (0 ≤ seconds ≤ MaxNFSTimeSeconds, nseconds < 1e9).
func (t NFSTime4) Duration() time.Duration {
	return time.Duration(t.Seconds)*time.Second + time.Duration(t.Nseconds)
}

// NFSTime4FromDuration converts a non-negative duration to nfstime4.
func NFSTime4FromDuration(d time.Duration) NFSTime4 {
	return NFSTime4{Seconds: int64(d / time.Second), Nseconds: uint32(d % time.Second)}
}

// Stateid4 is stateid4 (RFC 8881 §3.3.12). Other is the 12-byte opaque
// "other" field as hexadecimal (24 digits, either case). The ingest keys
// counters by Other only: Seqid is the version of the layout state and
// changes with every LAYOUTGET, while the counters run on.
type Stateid4 struct {
	Seqid uint32 `json:"seqid"`
	Other string `json:"other"`
}

// IOInfo4 is io_info4 (RFC 7862 §15.6.1): the cumulative count and bytes of
// one direction of I/O for the reported byte range.
type IOInfo4 struct {
	Count uint64 `json:"ii_count"`
	Bytes uint64 `json:"ii_bytes"`
}

// NetAddr4 is netaddr4 (RFC 8881 §3.3.9, RFC 5665): a network id such as
// "tcp", "tcp6", "rdma" or "rdma6" and a universal address such as
// "192.0.2.7.8.1" (IPv4 address, then port high and low bytes: 2049) or
// "2001:db8::7.8.1".
type NetAddr4 struct {
	NetID string `json:"na_r_netid"`
	Addr  string `json:"na_r_addr"`
}

// FFIOLatency4 is ff_io_latency4 (RFC 8435 §9.2.1): cumulative counters of
// one direction of I/O between the client and one data server. Ops and
// bytes are counted when requested and again when completed; bytes not
// delivered are requested bytes that never arrived (short or failed I/O).
// TotalBusyTime is the time at least one request was outstanding;
// AggregateCompletionTime is the sum of the completion times of all
// completed requests.
type FFIOLatency4 struct {
	OpsRequested            uint64   `json:"ffil_ops_requested"`
	BytesRequested          uint64   `json:"ffil_bytes_requested"`
	OpsCompleted            uint64   `json:"ffil_ops_completed"`
	BytesCompleted          uint64   `json:"ffil_bytes_completed"`
	BytesNotDelivered       uint64   `json:"ffil_bytes_not_delivered"`
	TotalBusyTime           NFSTime4 `json:"ffil_total_busy_time"`
	AggregateCompletionTime NFSTime4 `json:"ffil_aggregate_completion_time"`
}

// FFLayoutUpdate4 is ff_layoutupdate4 (RFC 8435 §9.2.2): which data server
// and file handle the counters are about, the read and write latency
// counters, and Duration, the time over which the counters were collected.
// FHandle is the nfs_fh4 as hexadecimal.
type FFLayoutUpdate4 struct {
	Addr     NetAddr4     `json:"ffl_addr"`
	FHandle  string       `json:"ffl_fhandle"`
	Read     FFIOLatency4 `json:"ffl_read"`
	Write    FFIOLatency4 `json:"ffl_write"`
	Duration NFSTime4     `json:"ffl_duration"`
	Local    bool         `json:"ffl_local"`
}

// FFIOStats4 is ff_iostats4 (RFC 8435 §9.2.3): one report about one byte
// range of one file, through one layout stateid, on one device and data
// server. All counters are cumulative since the client started collecting
// them (ffl_duration ago). DeviceID is the 16-byte deviceid4 as hexadecimal.
type FFIOStats4 struct {
	Offset       uint64          `json:"ffis_offset"`
	Length       uint64          `json:"ffis_length"`
	Stateid      Stateid4        `json:"ffis_stateid"`
	Read         IOInfo4         `json:"ffis_read"`
	Write        IOInfo4         `json:"ffis_write"`
	DeviceID     string          `json:"ffis_deviceid"`
	LayoutUpdate FFLayoutUpdate4 `json:"ffis_layoutupdate"`
}

// DeviceError4 is device_error4 (RFC 7862 §15.6.1): one data server I/O
// that failed, as a flex-files client reports it in LAYOUTERROR or in
// LAYOUTRETURN's ff_ioerr4. DeviceID is the deviceid4 as hexadecimal;
// Status the nfsstat4 by name ("NFS4ERR_NXIO"); Opnum the nfs_opnum4 by
// name ("OP_READ", "OP_WRITE" or "OP_COMMIT").
type DeviceError4 struct {
	DeviceID string `json:"de_deviceid"`
	Status   string `json:"de_status"`
	Opnum    string `json:"de_opnum"`
}

// FFIOErr4 is ff_ioerr4 (RFC 8435 §9.1.1): I/O errors a client met on one
// byte range of one file through one layout stateid, one device_error4 per
// device. Count, FirstTime and LastTime are ballast's envelope, not XDR:
// an MDS folds repeated identical errors into one entry, and says how many
// there were (each device error counts Count times) and when the first and
// the last happened (both or neither; neither means the batch's time).
type FFIOErr4 struct {
	Offset    uint64         `json:"ffie_offset"`
	Length    uint64         `json:"ffie_length"`
	Stateid   Stateid4       `json:"ffie_stateid"`
	Errors    []DeviceError4 `json:"ffie_errors"`
	Count     uint64         `json:"count"`
	FirstTime time.Time      `json:"first_time,omitzero"`
	LastTime  time.Time      `json:"last_time,omitzero"`
}

// LayoutStatsBatch is the body of POST /api/v1/layoutstats: the reports one
// client sent in LAYOUTSTATS (or the MDS gathered from it) at one time.
// ClientID names the NFS client (a host name or its clientid4 in hex); it
// becomes part of every stripe key. ReportTime is when the reports were
// taken; when zero the ingest uses its own notion of now. Errors, optional,
// are the data-server I/O errors the client reported since the previous
// batch (LAYOUTERROR, ff_ioerr4 in LAYOUTRETURN); a batch may carry
// errors and no reports.
type LayoutStatsBatch struct {
	ClientID   string       `json:"client_id"`
	ReportTime time.Time    `json:"report_time,omitzero"`
	Reports    []FFIOStats4 `json:"reports"`
	Errors     []FFIOErr4   `json:"errors,omitempty"`
}

// FieldError is a validation error about one field of a LAYOUTSTATS batch.
// Path is the JSON path of the field, e.g.
// "reports[3].ffis_layoutupdate.ffl_read.ffil_ops_completed".
type FieldError struct {
	Path   string
	Reason string
}

// Error renders the error as "path: reason".
func (e *FieldError) Error() string { return e.Path + ": " + e.Reason }

func fieldErr(path, format string, args ...any) *FieldError {
	return &FieldError{Path: path, Reason: fmt.Sprintf(format, args...)}
}

// Validate checks every field of the batch and returns the first problem
// as a *FieldError naming its JSON path. It checks each report on its own;
// whether counters move forward from one report to the next is the ingest's
// business.
func (b *LayoutStatsBatch) Validate() error {
	if b.ClientID == "" {
		return fieldErr("client_id", "must not be empty")
	}
	if len(b.ClientID) > MaxClientIDBytes {
		return fieldErr("client_id", "is %d bytes long; the limit is %d", len(b.ClientID), MaxClientIDBytes)
	}
	if !utf8.ValidString(b.ClientID) {
		return fieldErr("client_id", "is not valid UTF-8")
	}
	if len(b.Reports) == 0 && len(b.Errors) == 0 {
		return fieldErr("reports", "batch has no reports and no errors")
	}
	for i := range b.Reports {
		if err := b.Reports[i].validate(); err != nil {
			err.Path = "reports[" + strconv.Itoa(i) + "]." + err.Path
			return err
		}
	}
	for i := range b.Errors {
		if err := b.Errors[i].validate(); err != nil {
			err.Path = "errors[" + strconv.Itoa(i) + "]." + err.Path
			return err
		}
	}
	return nil
}

// MaxErrorCount bounds FFIOErr4.Count so that error counters stay exact in
// a float64 sample (2^53).
const MaxErrorCount = 1 << 53

// NFSStatusNames are the nfsstat4 names (RFC 8881 §15.1, RFC 7862 §11.1)
// the ingest accepts as de_status: the errors a flex-files client gets
// from a data server, or makes up for one it cannot reach (the Linux
// client reports a timed-out or refused connection as NFS4ERR_NXIO).
var NFSStatusNames = []string{
	"NFS4ERR_ACCESS", "NFS4ERR_BADHANDLE", "NFS4ERR_BAD_STATEID", "NFS4ERR_DELAY", "NFS4ERR_DQUOT",
	"NFS4ERR_EXPIRED", "NFS4ERR_FBIG", "NFS4ERR_GRACE", "NFS4ERR_INVAL", "NFS4ERR_IO", "NFS4ERR_NOSPC",
	"NFS4ERR_NXIO", "NFS4ERR_OLD_STATEID", "NFS4ERR_PERM", "NFS4ERR_ROFS", "NFS4ERR_SERVERFAULT",
	"NFS4ERR_STALE", "NFS4ERR_STALE_STATEID",
}

// ErrorOp maps a de_opnum name to the op label of the error series: a
// failed COMMIT is a failed write. ok is false for another operation.
func ErrorOp(opnum string) (op string, ok bool) {
	switch opnum {
	case "OP_READ":
		return "read", true
	case "OP_WRITE", "OP_COMMIT":
		return "write", true
	}
	return "", false
}

func (e *FFIOErr4) validate() *FieldError {
	if err := checkRange("ffie_", e.Offset, e.Length, &e.Stateid); err != nil {
		return err
	}
	if len(e.Errors) == 0 {
		return fieldErr("ffie_errors", "must name at least one device error")
	}
	for i := range e.Errors {
		if err := e.Errors[i].validate(); err != nil {
			err.Path = "ffie_errors[" + strconv.Itoa(i) + "]." + err.Path
			return err
		}
	}
	if e.Count == 0 {
		return fieldErr("count", "must be at least 1")
	}
	if e.Count > MaxErrorCount {
		return fieldErr("count", "%d exceeds the limit of %d", e.Count, uint64(MaxErrorCount))
	}
	if e.FirstTime.IsZero() != e.LastTime.IsZero() {
		if e.FirstTime.IsZero() {
			return fieldErr("first_time", "must be given with last_time")
		}
		return fieldErr("last_time", "must be given with first_time")
	}
	if e.LastTime.Before(e.FirstTime) {
		return fieldErr("last_time", "%s is before first_time %s", e.LastTime.Format(time.RFC3339Nano), e.FirstTime.Format(time.RFC3339Nano))
	}
	return nil
}

func (d *DeviceError4) validate() *FieldError {
	if err := checkHex("de_deviceid", d.DeviceID, DeviceIDSize, DeviceIDSize); err != nil {
		return err
	}
	if !slices.Contains(NFSStatusNames, d.Status) {
		if len(d.Status) > 32 {
			return fieldErr("de_status", "is not an nfsstat4 name ballast accepts (see docs/layoutstats.md)")
		}
		return fieldErr("de_status", "%q is not an nfsstat4 name ballast accepts (see docs/layoutstats.md)", d.Status)
	}
	if _, ok := ErrorOp(d.Opnum); !ok {
		if len(d.Opnum) > 32 {
			return fieldErr("de_opnum", "is not OP_READ, OP_WRITE or OP_COMMIT")
		}
		return fieldErr("de_opnum", "%q is not OP_READ, OP_WRITE or OP_COMMIT", d.Opnum)
	}
	return nil
}

// Validate checks one report; errors name fields relative to the report.
func (r *FFIOStats4) Validate() error {
	if err := r.validate(); err != nil {
		return err
	}
	return nil
}

// under prefixes the path of err, if any, with p. Paths are built only on
// error so that validating a valid report allocates nothing.
func under(p string, err *FieldError) *FieldError {
	if err != nil {
		err.Path = p + "." + err.Path
	}
	return err
}

// checkRange checks a byte range and its layout stateid, fields
// <prefix>length and <prefix>stateid.other.
func checkRange(prefix string, offset, length uint64, stateid *Stateid4) *FieldError {
	if length == 0 {
		return fieldErr(prefix+"length", "must not be zero")
	}
	if length != math.MaxUint64 && offset > math.MaxUint64-length {
		return fieldErr(prefix+"length", "offset %d + length %d overflows 64 bits (use length %d for \"to the end of file\")", offset, length, uint64(math.MaxUint64))
	}
	return checkHex(prefix+"stateid.other", stateid.Other, StateidOtherSize, StateidOtherSize)
}

func (r *FFIOStats4) validate() *FieldError {
	if err := checkRange("ffis_", r.Offset, r.Length, &r.Stateid); err != nil {
		return err
	}
	if err := checkHex("ffis_deviceid", r.DeviceID, DeviceIDSize, DeviceIDSize); err != nil {
		return err
	}
	return under("ffis_layoutupdate", r.LayoutUpdate.validate())
}

func (lu *FFLayoutUpdate4) validate() *FieldError {
	if _, err := lu.Addr.AddrPort(); err != nil {
		return fieldErr("ffl_addr", "%s", err.Error())
	}
	if err := checkHex("ffl_fhandle", lu.FHandle, 1, MaxFileHandle); err != nil {
		return err
	}
	if err := under("ffl_duration", lu.Duration.validate()); err != nil {
		return err
	}
	if lu.Duration.Seconds == 0 && lu.Duration.Nseconds == 0 {
		return fieldErr("ffl_duration", "must be positive")
	}
	dur := lu.Duration.Duration()
	if err := under("ffl_read", lu.Read.validate(dur)); err != nil {
		return err
	}
	return under("ffl_write", lu.Write.validate(dur))
}

func (t NFSTime4) validate() *FieldError {
	if t.Seconds < 0 {
		return fieldErr("seconds", "%d is negative; a duration cannot be", t.Seconds)
	}
	if t.Seconds > MaxNFSTimeSeconds {
		return fieldErr("seconds", "%d exceeds the limit of %d", t.Seconds, int64(MaxNFSTimeSeconds))
	}
	if t.Nseconds >= 1e9 {
		return fieldErr("nseconds", "%d is not below 1000000000", t.Nseconds)
	}
	return nil
}

func (l *FFIOLatency4) validate(duration time.Duration) *FieldError {
	if l.OpsCompleted > l.OpsRequested {
		return fieldErr("ffil_ops_completed", "completed (%d) exceeds requested (%d)", l.OpsCompleted, l.OpsRequested)
	}
	if l.BytesCompleted > l.BytesRequested {
		return fieldErr("ffil_bytes_completed", "completed (%d) exceeds requested (%d)", l.BytesCompleted, l.BytesRequested)
	}
	if l.BytesNotDelivered > l.BytesRequested-l.BytesCompleted {
		return fieldErr("ffil_bytes_not_delivered", "completed (%d) + not delivered (%d) exceeds requested (%d)", l.BytesCompleted, l.BytesNotDelivered, l.BytesRequested)
	}
	if err := under("ffil_total_busy_time", l.TotalBusyTime.validate()); err != nil {
		return err
	}
	if err := under("ffil_aggregate_completion_time", l.AggregateCompletionTime.validate()); err != nil {
		return err
	}
	// The same slack for rounding as the ingest's deltas (1 ms + 0.1 %):
	// busy time and duration come from separate clock reads.
	if busy := l.TotalBusyTime.Duration(); busy > duration+time.Millisecond+duration/1000 {
		return fieldErr("ffil_total_busy_time", "busy time (%s) exceeds ffl_duration (%s)", busy, duration)
	}
	if l.OpsCompleted == 0 && (l.AggregateCompletionTime.Seconds != 0 || l.AggregateCompletionTime.Nseconds != 0) {
		return fieldErr("ffil_aggregate_completion_time", "is %s with no completed operations", l.AggregateCompletionTime.Duration())
	}
	return nil
}

// checkHex checks that s is hexadecimal encoding min to max bytes.
func checkHex(path, s string, min, max int) *FieldError {
	if s == "" {
		return fieldErr(path, "must not be empty")
	}
	if len(s)%2 != 0 {
		return fieldErr(path, "has an odd number (%d) of hex digits", len(s))
	}
	if n := len(s) / 2; n < min || n > max {
		if min == max {
			return fieldErr(path, "is %d bytes; want exactly %d (%d hex digits)", n, min, 2*min)
		}
		return fieldErr(path, "is %d bytes; want %d to %d", n, min, max)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') {
			continue
		}
		return fieldErr(path, "has a non-hex character %q at position %d", c, i)
	}
	return nil
}

// AddrPort parses the universal address of a (RFC 5665 §5.2.3.3 for tcp,
// §5.2.3.4 for tcp6; rdma and udp use the same forms) into an IP address and
// port. It checks that the address family matches the netid: a "6" netid
// needs an IPv6 address and the others an IPv4 one.
func (a NetAddr4) AddrPort() (netip.AddrPort, error) {
	var zero netip.AddrPort
	if a.NetID == "" {
		return zero, fmt.Errorf("na_r_netid must not be empty")
	}
	if len(a.NetID) > MaxNetIDBytes {
		return zero, fmt.Errorf("na_r_netid %q is longer than %d bytes", a.NetID, MaxNetIDBytes)
	}
	if len(a.Addr) > MaxUaddrBytes {
		return zero, fmt.Errorf("na_r_addr is %d bytes long; the limit is %d", len(a.Addr), MaxUaddrBytes)
	}
	var want6 bool
	switch a.NetID {
	case "tcp", "udp", "rdma", "sctp":
	case "tcp6", "udp6", "rdma6", "sctp6":
		want6 = true
	default:
		return zero, fmt.Errorf("na_r_netid %q is not one of tcp, tcp6, udp, udp6, rdma, rdma6, sctp, sctp6", a.NetID)
	}
	// The port is the last two dot-separated decimal octets.
	lo := strings.LastIndexByte(a.Addr, '.')
	if lo < 0 {
		return zero, fmt.Errorf("na_r_addr %q is not a universal address (want h1.h2.h3.h4.p1.p2 or IPv6.p1.p2)", a.Addr)
	}
	hi := strings.LastIndexByte(a.Addr[:lo], '.')
	if hi < 0 {
		return zero, fmt.Errorf("na_r_addr %q is not a universal address (want h1.h2.h3.h4.p1.p2 or IPv6.p1.p2)", a.Addr)
	}
	p1, err1 := strconv.ParseUint(a.Addr[hi+1:lo], 10, 8)
	p2, err2 := strconv.ParseUint(a.Addr[lo+1:], 10, 8)
	if err1 != nil || err2 != nil {
		return zero, fmt.Errorf("na_r_addr %q is not a universal address (want h1.h2.h3.h4.p1.p2 or IPv6.p1.p2): port octets %q.%q are not numbers 0-255", a.Addr, a.Addr[hi+1:lo], a.Addr[lo+1:])
	}
	ip, err := netip.ParseAddr(a.Addr[:hi])
	if err != nil {
		return zero, fmt.Errorf("na_r_addr %q has an invalid IP address %q", a.Addr, a.Addr[:hi])
	}
	if ip.Zone() != "" {
		return zero, fmt.Errorf("na_r_addr %q has a zone, which a universal address cannot carry", a.Addr)
	}
	if want6 != (ip.Is6() && !ip.Is4In6()) {
		fam := "IPv4"
		if want6 {
			fam = "IPv6"
		}
		return zero, fmt.Errorf("na_r_addr %q is not an %s address as na_r_netid %q requires", a.Addr, fam, a.NetID)
	}
	return netip.AddrPortFrom(ip, uint16(p1<<8|p2)), nil
}

// StripeKey identifies one stream of LAYOUTSTATS counters: one client's
// I/O through one layout stateid to one file handle on one device at one
// data server address. Hexadecimal fields are lower case.
type StripeKey struct {
	Client     string `json:"client"`
	Stateid    string `json:"stateid"`  // stateid4.other, hex
	DeviceID   string `json:"deviceid"` // deviceid4, hex
	DSNetID    string `json:"ds_netid"` // netaddr4.na_r_netid
	DSAddr     string `json:"ds_addr"`  // netaddr4.na_r_addr (universal address)
	FileHandle string `json:"fhandle"`  // nfs_fh4, hex
}

// ID renders the key as one stable string, usable as a subject id. (It is
// not String, so that printing a StripeDelta, which embeds the key, shows
// the whole delta.)
func (k StripeKey) ID() string {
	return k.Client + "/" + k.Stateid + "/" + k.DeviceID + "/" + k.DSNetID + ":" + k.DSAddr + "/" + k.FileHandle
}

// StripeIO is what happened in one direction (read or write) of one
// stripe in one interval: differences of the cumulative counters.
type StripeIO struct {
	// Count and Bytes are the io_info4 differences (ffis_read/ffis_write).
	Count uint64 `json:"count"`
	Bytes uint64 `json:"bytes"`
	// The ff_io_latency4 differences. Rates should use OpsCompleted and
	// BytesCompleted: they count I/O the data server actually served.
	OpsRequested      uint64 `json:"ops_requested"`
	BytesRequested    uint64 `json:"bytes_requested"`
	OpsCompleted      uint64 `json:"ops_completed"`
	BytesCompleted    uint64 `json:"bytes_completed"`
	BytesNotDelivered uint64 `json:"bytes_not_delivered"`
	// BusyTime is how long at least one request was outstanding in the
	// interval (≤ Duration). CompletionTime is the summed completion time
	// of the requests completed in the interval: CompletionTime /
	// OpsCompleted is their mean latency.
	BusyTime       time.Duration `json:"busy_time"`
	CompletionTime time.Duration `json:"completion_time"`
}

// StripeDelta is the per-interval difference of one stripe key's
// cumulative LAYOUTSTATS counters, what the analyzers consume as
// []StripeDelta. The interval is (End-Duration, End]. Rates are
// Read.OpsCompleted / Duration.Seconds() and so on; utilisation is
// BusyTime / Duration. Offset and Length are the byte range of the latest
// report (a whole-file layout has Length math.MaxUint64).
type StripeDelta struct {
	StripeKey
	// DS is the data server address as "ip:port" (IPv6 in brackets).
	DS     string `json:"ds"`
	Seqid  uint32 `json:"seqid"`
	Offset uint64 `json:"offset"`
	Length uint64 `json:"length"`
	// Local is ffl_local: the client reached the data server locally.
	Local bool `json:"local,omitempty"`
	// Reset is true when the counters started over in this interval (the
	// client restarted them, or this is the first report of the key): the
	// delta is then the counters' own value since they started.
	Reset    bool          `json:"reset,omitempty"`
	End      time.Time     `json:"end"`
	Duration time.Duration `json:"duration"`
	Read     StripeIO      `json:"read"`
	Write    StripeIO      `json:"write"`
}

// Series derived by the LAYOUTSTATS ingest from stripe deltas, per pNFS
// device (label deviceid) and per data server (label ds), each with label
// op="read" or "write". Each value sums the latest interval of every stripe
// stream seen recently on that device or DS.
const (
	MetricLayoutStatsDeviceOps          = "ballast_layoutstats_device_ops_per_second"
	MetricLayoutStatsDeviceBytes        = "ballast_layoutstats_device_bytes_per_second"
	MetricLayoutStatsDeviceNotDelivered = "ballast_layoutstats_device_bytes_not_delivered_per_second"
	MetricLayoutStatsDeviceLatency      = "ballast_layoutstats_device_latency_seconds"
	MetricLayoutStatsDeviceUtilization  = "ballast_layoutstats_device_utilization_ratio"
	MetricLayoutStatsDeviceBusyStreams  = "ballast_layoutstats_device_busy_streams"
	MetricLayoutStatsDeviceStreams      = "ballast_layoutstats_device_streams"

	MetricLayoutStatsDSOps          = "ballast_layoutstats_ds_ops_per_second"
	MetricLayoutStatsDSBytes        = "ballast_layoutstats_ds_bytes_per_second"
	MetricLayoutStatsDSNotDelivered = "ballast_layoutstats_ds_bytes_not_delivered_per_second"
	MetricLayoutStatsDSLatency      = "ballast_layoutstats_ds_latency_seconds"
	MetricLayoutStatsDSUtilization  = "ballast_layoutstats_ds_utilization_ratio"
	MetricLayoutStatsDSBusyStreams  = "ballast_layoutstats_ds_busy_streams"
	MetricLayoutStatsDSStreams      = "ballast_layoutstats_ds_streams"
)

// MetricLayoutStatsIOErrors counts the data-server I/O errors clients
// reported (the errors of a LAYOUTSTATS batch: LAYOUTERROR, ff_ioerr4),
// labels deviceid, client, op ("read" or "write") and status (the
// nfsstat4 name). It is a counter kept by the ingest since the mds started
// (a restart starts it over, as any counter), written with every batch that
// adds to it, stamped with the last_time of the errors it adds.
const MetricLayoutStatsIOErrors = "ballast_layoutstats_io_errors_total"

// Label names of MetricLayoutStatsIOErrors beyond deviceid and op.
const (
	LabelLayoutStatsClient = "client"
	LabelLayoutStatsStatus = "status"
)

// Info series the mds writes from its device table (cluster/identity), so
// queries can join the LAYOUTSTATS series (deviceid, ds) to the agents'
// series (node, device): value 1, labels deviceid, node (the DS), device
// (its drive), export, name (what findings call it); and ds, node.
const (
	MetricPNFSDeviceInfo = "ballast_pnfs_device_info"
	MetricPNFSDSInfo     = "ballast_pnfs_ds_info"
)

// Label names of the LAYOUTSTATS series.
const (
	LabelLayoutStatsDeviceID = "deviceid"
	LabelLayoutStatsDS       = "ds"
	LabelLayoutStatsOp       = "op"
)

// LayoutStatsMetrics describes the LAYOUTSTATS series in the same form as
// Metrics; the MDS derives them, no agent exposes them.
var LayoutStatsMetrics = []MetricDesc{
	{MetricLayoutStatsDeviceOps, MetricGauge, "ops/second", "Completed operations per second on the pNFS device, summed over recent stripe streams.", []string{"deviceid", "op"}, "layoutstats"},
	{MetricLayoutStatsDeviceBytes, MetricGauge, "bytes/second", "Completed bytes per second on the pNFS device, summed over recent stripe streams.", []string{"deviceid", "op"}, "layoutstats"},
	{MetricLayoutStatsDeviceNotDelivered, MetricGauge, "bytes/second", "Requested bytes per second the device did not deliver (short or failed I/O).", []string{"deviceid", "op"}, "layoutstats"},
	{MetricLayoutStatsDeviceLatency, MetricGauge, "seconds", "Mean completion time of the operations completed on the device: aggregate completion time / completed ops.", []string{"deviceid", "op"}, "layoutstats"},
	{MetricLayoutStatsDeviceUtilization, MetricGauge, "ratio", "Mean over the device's recent stripe streams of busy time / duration (0..1): the fraction of time a stream had I/O outstanding.", []string{"deviceid", "op"}, "layoutstats"},
	{MetricLayoutStatsDeviceBusyStreams, MetricGauge, "", "Sum over recent stripe streams of busy time / duration: the mean number of streams with I/O outstanding at once.", []string{"deviceid", "op"}, "layoutstats"},
	{MetricLayoutStatsDeviceStreams, MetricGauge, "", "Number of stripe streams (client, stateid, device, DS, file handle) that reported on the device recently.", []string{"deviceid"}, "layoutstats"},
	{MetricLayoutStatsDSOps, MetricGauge, "ops/second", "Completed operations per second at the data server address.", []string{"ds", "op"}, "layoutstats"},
	{MetricLayoutStatsDSBytes, MetricGauge, "bytes/second", "Completed bytes per second at the data server address.", []string{"ds", "op"}, "layoutstats"},
	{MetricLayoutStatsDSNotDelivered, MetricGauge, "bytes/second", "Requested bytes per second the data server did not deliver.", []string{"ds", "op"}, "layoutstats"},
	{MetricLayoutStatsDSLatency, MetricGauge, "seconds", "Mean completion time of the operations completed at the data server.", []string{"ds", "op"}, "layoutstats"},
	{MetricLayoutStatsDSUtilization, MetricGauge, "ratio", "Mean over the data server's recent stripe streams of busy time / duration (0..1).", []string{"ds", "op"}, "layoutstats"},
	{MetricLayoutStatsDSBusyStreams, MetricGauge, "", "Sum over recent stripe streams of busy time / duration at the data server.", []string{"ds", "op"}, "layoutstats"},
	{MetricLayoutStatsDSStreams, MetricGauge, "", "Number of stripe streams that reported on the data server recently.", []string{"ds"}, "layoutstats"},
	{MetricLayoutStatsIOErrors, MetricCounter, "", "Data-server I/O errors clients reported to the MDS (LAYOUTERROR, ff_ioerr4): device, client, operation (read or write) and nfsstat4 status.", []string{"deviceid", "client", "op", "status"}, "layoutstats"},
	{MetricPNFSDeviceInfo, MetricGauge, "", "Constant 1 per pNFS device id of the mds's device table: the DS (node), its drive (device), export and the name findings use.", []string{"deviceid", "node", "device", "export", "name"}, "identity"},
	{MetricPNFSDSInfo, MetricGauge, "", "Constant 1 per data-server address (ds, as LAYOUTSTATS reports it) with the DS's name (node).", []string{"ds", "node"}, "identity"},
}
