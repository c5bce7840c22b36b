package ingest

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	vmstorage "github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"
)

// hugeTextBody is one body of cmd/ballast's TestIssue10Defects "16
// concurrent 30 MB bodies bounded": lines huge_body{req="K",s="J%1000"} J
// TS until the body reaches 30 MiB (~660,000 lines; consecutive lines are
// different series, a series repeats every 1,000 lines).
func hugeTextBody(req int) (string, int) {
	const series = 1000
	base := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	var b strings.Builder
	b.Grow(31 << 20)
	lines := 0
	for j := 0; b.Len() < 30<<20; j++ {
		fmt.Fprintf(&b, "huge_body{req=\"%d\",s=\"%d\"} %d %d\n", req, j%series, j, base.Add(time.Duration(j/series)*time.Second).UnixMilli())
		lines++
	}
	return b.String(), lines
}

// ingestMem is what decoding and writing one body costs the heap.
type ingestMem struct {
	parsed    uint64 // live heap after ParseText, the batch not yet written (body excluded)
	writing   uint64 // most live heap between the chunks handed to the store (body excluded)
	allocated uint64 // bytes allocated by ParseText and the MetricRows chunks
}

// measureIngestMem feeds body through the path the import handler and
// Embedded.WriteBatch take (ParseText into a Batch, then MetricRows in
// chunks of 4 MiB of names) and measures the live heap with a garbage
// collection at each point: deterministic for a given build, unlike RSS.
// A live heap is what the collector's next goal doubles (GOGC 100), so
// it is what two bodies in flight put on the mds's RSS, twice over.
func measureIngestMem(t testing.TB, body string, lines int) ingestMem {
	t.Helper()
	const ts0 = 1_700_000_000_000
	lim := Limits{MinTimestamp: 1, MaxTimestamp: 1 << 50, DefaultTimestamp: ts0}
	var m runtime.MemStats
	runtime.GC()
	runtime.GC() // empty the pools' victim caches too
	runtime.ReadMemStats(&m)
	base, alloc0 := m.HeapAlloc, m.TotalAlloc
	var res ingestMem
	b := new(Batch)
	if err := ParseText(body, &lim, b); err != nil {
		t.Fatal(err)
	}
	// One collection: the parser's rows pool is still held (in the
	// victim cache), as it is in the mds while the batch is written.
	runtime.GC()
	runtime.ReadMemStats(&m)
	res.parsed = m.HeapAlloc - base
	if f := os.Getenv("INGESTMEM_PROFILE"); f != "" {
		w, err := os.Create(f)
		if err != nil {
			t.Fatal(err)
		}
		pprof.WriteHeapProfile(w)
		w.Close()
	}
	var rows []vmstorage.MetricRow
	var buf []byte
	n := 0
	for next := 0; next < b.Len(); {
		rows, buf, next = b.MetricRows(rows[:0], buf, next, 4<<20)
		n += len(rows)
		runtime.ReadMemStats(&m) // no collection: TotalAlloc only
		if a := m.TotalAlloc - alloc0; a > res.allocated {
			res.allocated = a
		}
		runtime.GC()
		runtime.ReadMemStats(&m)
		res.writing = max(res.writing, m.HeapAlloc-base)
	}
	if n != lines || b.Len() != lines {
		t.Fatalf("%d rows, %d written; want %d", b.Len(), n, lines)
	}
	runtime.KeepAlive(b)
	runtime.KeepAlive(rows)
	runtime.KeepAlive(buf)
	return res
}

// TestHugeTextBodyHeap: one 30 MB text body of TestIssue10Defects'
// concurrent bodies holds at most maxLiveBytesPerLine of live heap per line
// (body excluded) while it is parsed and written: the batch's rows (40–48
// bytes) and labels (32 a label), with append's slack, and the 4 MiB
// chunks written. The body parsed whole held ~500 bytes a line (the
// parser's rows and tag arrays, see textChunkBytes). With the default
// ingest.max_inflight_bytes two such bodies are in flight and the mds must
// stay under 1.5 GiB RSS; an encoded name kept per row for the whole body
// (~35 bytes a line) or a row struct grown by a word shows here as a
// failure, where the RSS of the end-to-end test moves within its noise.
func TestHugeTextBodyHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 30 MB body")
	}
	body, lines := hugeTextBody(3)
	m := measureIngestMem(t, body, lines)
	perLine := func(v uint64) float64 { return float64(v) / float64(lines) }
	const maxLiveBytesPerLine = 180
	if perLine(m.parsed) > maxLiveBytesPerLine || perLine(m.writing) > maxLiveBytesPerLine {
		t.Errorf("live heap %.1f B/line after parse, %.1f B/line while written; want at most %d", perLine(m.parsed), perLine(m.writing), maxLiveBytesPerLine)
	}
	t.Logf("%d lines, %d MiB body: live heap after parse %.1f MiB (%.1f B/line), while written %.1f MiB (%.1f B/line); allocated %.1f MiB",
		lines, len(body)>>20, float64(m.parsed)/(1<<20), perLine(m.parsed), float64(m.writing)/(1<<20), perLine(m.writing), float64(m.allocated)/(1<<20))
}
