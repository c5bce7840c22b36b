package ingest

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/protoparser/prometheus"

	"github.com/ballast-io/ballast/models"
)

var rowsPool = sync.Pool{New: func() any { return new(prometheus.Rows) }}

// ParseText decodes Prometheus text exposition (an optional timestamp in
// milliseconds per line, # comments and HELP/TYPE lines ignored) into b.
// Lexing is VictoriaMetrics' own exposition parser; ballast adds the checks
// that parser leaves to later stages. Every valid line is added to b; the
// invalid ones are described by a *Rejected error whose entries name the
// 1-based line number and the reason.
func ParseText(body string, lim *Limits, b *Batch) error {
	b.asReceived = false
	m := b.mark()
	// Fast path: the body in pieces of whole lines. Errors are rare, so on
	// the first one the slow path re-parses line by line to say which line
	// it was.
	rs := rowsPool.Get().(*prometheus.Rows)
	defer rowsPool.Put(rs)
	if b.addTextChunks(body, rs, lim) {
		return nil
	}
	b.rollback(m)
	var rej Rejected
	parseTextByLine(body, lim, b, rs, &rej)
	if rej.Count == 0 {
		// The fast path failed but no single line does: cannot happen unless
		// the parser's whole-body and per-line results differ.
		rej.add(fmt.Errorf("cannot parse Prometheus text body"), 1)
	}
	return &rej
}

// textChunkBytes bounds the piece of a text body parsed at once. The
// parser's rows hold their tags in arrays that it grows by reallocating,
// and rows parsed before a growth keep the previous arrays alive: a whole
// 30 MB body parsed at once held ~250 MB of the parser's rows and tags
// (TestHugeTextBodyHeap), twice what the batch keeps. Pieces of this size
// keep the parser's memory to about 2 MB, reused from piece to piece, at
// no measurable cost per line (VictoriaMetrics' own stream parser reads
// 64 KiB blocks).
const textChunkBytes = 256 << 10

// addTextChunks parses body in pieces of whole lines of about
// textChunkBytes (a longer line is a piece of its own) and adds each
// piece's rows to b. It reports false at the first piece that does not
// parse or holds an invalid row; what it added is then still in b.
func (b *Batch) addTextChunks(body string, rs *prometheus.Rows, lim *Limits) bool {
	failed := false
	onErr := func(string) { failed = true }
	for len(body) > 0 {
		piece := body
		if len(body) > textChunkBytes {
			n := strings.IndexByte(body[textChunkBytes:], '\n')
			if n >= 0 {
				piece = body[:textChunkBytes+n+1]
			}
		}
		body = body[len(piece):]
		rs.UnmarshalWithErrLogger(piece, onErr)
		if failed || b.addTextRows(piece, rs.Rows, lim) != nil {
			return false
		}
	}
	return true
}

// addTextRows adds rows parsed from body to b, stopping at the first
// invalid one.
func (b *Batch) addTextRows(body string, rows []prometheus.Row, lim *Limits) error {
	for i := range rows {
		if err := b.addTextRow(body, &rows[i], lim); err != nil {
			return err
		}
	}
	return nil
}

func (b *Batch) addTextRow(body string, r *prometheus.Row, lim *Limits) error {
	if r.Metric != b.checked {
		// Lines of one metric usually come together: its name is
		// checked once per run, not once per line.
		if err := models.CheckMetricName(r.Metric); err != nil {
			return &RejectError{Reason: ReasonName, Err: err}
		}
		b.checked = r.Metric
	}
	// The parsed tags go straight into the batch's labels, which are
	// checked and encoded where they lie: copied as a block (one bulk
	// write barrier while the GC runs, not one per string).
	start := len(b.labels)
	b.labels = append(b.labels, tagsAsLabels(r.Tags)...)
	// The parser reads both "m 1" and "m 1 0" as timestamp 0; only the
	// first means "no timestamp".
	hasTS := r.Timestamp != 0 || explicitTimestamp(body, r)
	return b.addRow(r.Metric, start, r.Timestamp, hasTS, r.Value, lim)
}

// prometheus.Tag and models.Label are both struct{ string; string }:
// these conversions stop compiling if either changes.
var (
	_ = struct{ Key, Value string }(prometheus.Tag{})
	_ = struct{ Name, Value string }(models.Label{})
)

// tagsAsLabels views parsed tags as labels, without a copy.
func tagsAsLabels(ts []prometheus.Tag) []models.Label {
	return unsafe.Slice((*models.Label)(unsafe.Pointer(unsafe.SliceData(ts))), len(ts))
}

// explicitTimestamp reports whether the line of body that r was parsed
// from carries a timestamp field. It finds the line through r's metric
// name (or first label), which the parser slices from body; a row whose
// strings were unescaped into copies cannot be located and counts as
// having none.
func explicitTimestamp(body string, r *prometheus.Row) bool {
	off := offsetIn(body, r.Metric)
	if off < 0 && len(r.Tags) > 0 {
		off = offsetIn(body, r.Tags[0].Key)
	}
	if off < 0 {
		return false
	}
	ls := strings.LastIndexByte(body[:off], '\n') + 1
	le := strings.IndexByte(body[off:], '\n')
	line := body[ls:]
	if le >= 0 {
		line = body[ls : off+le]
	}
	// Skip the name and the label set, which may quote '}' and '#'.
	if i := strings.IndexByte(line, '{'); i >= 0 {
		tail, inQuote, esc := "", false, false
	scan:
		for j := i + 1; j < len(line); j++ {
			c := line[j]
			switch {
			case esc:
				esc = false
			case c == '\\' && inQuote:
				esc = true
			case c == '"':
				inQuote = !inQuote
			case c == '}' && !inQuote:
				tail = line[j+1:]
				break scan
			}
		}
		line = tail
	} else {
		line = strings.TrimLeft(line, " \t")
		if i := strings.IndexAny(line, " \t"); i >= 0 {
			line = line[i:]
		}
	}
	if i := strings.IndexByte(line, '#'); i >= 0 {
		line = line[:i]
	}
	return len(strings.Fields(line)) >= 2
}

// offsetIn returns where s starts inside body when s is a slice of body,
// else -1.
func offsetIn(body, s string) int {
	if len(s) == 0 || len(body) == 0 {
		return -1
	}
	b := uintptr(unsafe.Pointer(unsafe.StringData(body)))
	p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
	if p < b || p >= b+uintptr(len(body)) {
		return -1
	}
	return int(p - b)
}

// parseTextByLine adds every valid line of body to b and records each
// invalid one in rej.
func parseTextByLine(body string, lim *Limits, b *Batch, rs *prometheus.Rows, rej *Rejected) {
	line := 0
	for len(body) > 0 {
		line++
		n := strings.IndexByte(body, '\n')
		s := body
		if n >= 0 {
			s, body = body[:n], body[n+1:]
		} else {
			body = ""
		}
		var perr string
		rs.UnmarshalWithErrLogger(s, func(msg string) { perr = msg })
		if perr != "" {
			rej.add(fmt.Errorf("line %d: %s", line, trimVMPrefix(perr)), 1)
			continue
		}
		for i := range rs.Rows {
			if err := b.addTextRow(s, &rs.Rows[i], lim); err != nil {
				rej.add(fmt.Errorf("line %d: %s: %w", line, abbreviate(strings.TrimSpace(s)), err), 1)
			}
		}
	}
}

// trimVMPrefix shortens VictoriaMetrics' "cannot unmarshal Prometheus line
// "…": reason" to "…: reason" with a bounded quote of the line.
func trimVMPrefix(msg string) string {
	msg = strings.TrimPrefix(msg, "cannot unmarshal Prometheus line ")
	q, err := strconv.QuotedPrefix(msg)
	if err != nil {
		return msg
	}
	line, err := strconv.Unquote(q)
	if err != nil {
		return msg
	}
	return abbreviate(line) + msg[len(q):]
}

// abbreviate quotes s, cutting long lines so an error never echoes megabytes.
func abbreviate(s string) string {
	const max = 120
	if len(s) > max {
		return fmt.Sprintf("%q…", s[:max])
	}
	return fmt.Sprintf("%q", s)
}
