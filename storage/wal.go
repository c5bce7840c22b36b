package storage

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"

	vmstorage_lib "github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"
	"github.com/VictoriaMetrics/metrics"
)

// The write-ahead log of durability mode "wal" (docs/storage.md#durability).
//
// Hand-written rather than a library (tidwall/wal, etcd's wal): what it
// needs is small and specific — group commit across concurrent requests, and
// truncation driven by VictoriaMetrics' forced flushes — and those libraries
// bring their own segment and index formats for random reads ballast never
// does. The format is length + CRC-32C framed records of rows in
// lib/storage's MetricRow.Marshal encoding, so replay needs no conversion.
//
// Segments: DIR/NNNNNNNNNNNNNNNNNNNN.wal. Appends go to the current segment;
// at each forced flush of the store the current segment is sealed and a new
// one opened. A sealed segment is removed once two forced flushes have
// completed after every row written to it was handed to the store: one
// forced flush writes every in-memory part that is not in an in-memory merge
// at that moment, and a part caught in a merge is written by the next.

const (
	walDirName   = "wal"
	walExt       = ".wal"
	walHeaderLen = 8 // uint32 length, uint32 CRC-32C of the payload
	// walMaxRecord bounds one record on replay; writes are chunked far below it.
	walMaxRecord = 1 << 30
	// walFlushesToRemove is how many completed forced flushes after its last
	// write a sealed segment waits for before it is removed.
	walFlushesToRemove = 2
)

var walCRC = crc32.MakeTable(crc32.Castagnoli)

// walBufPool keeps group buffers: a group is a few MB under load.
var walBufPool sync.Pool

// ErrDiskFull is returned when a write failed for lack of space.
var ErrDiskFull = errors.New("no space left on the filesystem of the data dir")

type walSegment struct {
	id   uint64
	path string
	f    *os.File
	// writers counts appends to this segment whose rows are not yet handed
	// to the store; sealed segments get no new ones.
	writers sync.WaitGroup
	records int
	flushes int // completed forced flushes since sealed and writers done
}

// walGroup is one group commit: the records appended while the previous
// group was being written and synced.
type walGroup struct {
	seg  *walSegment
	buf  []byte
	done chan struct{}
	err  error
}

type wal struct {
	dir string

	mu      sync.Mutex
	cond    *sync.Cond
	cur     *walSegment
	pending *walGroup   // the group new records join
	queue   []*walGroup // groups waiting for the syncer
	sealed  []*walSegment
	broken  error // set when a failed write could not be undone
	closing bool
	stopped chan struct{}

	bytes    *metrics.Counter
	fsyncs   *metrics.Counter
	replayed *metrics.Counter
	segments *metrics.Gauge
}

// openWAL opens the WAL in dir, returning the segments left by the last run
// (to replay) as sealed segments, and starts the syncer.
func openWAL(dir string, set *metrics.Set) (*wal, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cannot create WAL dir %q: %w", dir, err)
	}
	w := &wal{dir: dir, stopped: make(chan struct{})}
	w.cond = sync.NewCond(&w.mu)
	w.bytes = set.GetOrCreateCounter(`ballast_storage_wal_bytes_total`)
	w.fsyncs = set.GetOrCreateCounter(`ballast_storage_wal_fsyncs_total`)
	w.replayed = set.GetOrCreateCounter(`ballast_storage_wal_replayed_rows_total`)
	w.segments = set.GetOrCreateGauge(`ballast_storage_wal_segments`, func() float64 {
		w.mu.Lock()
		defer w.mu.Unlock()
		return float64(len(w.sealed) + 1)
	})
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("cannot read WAL dir %q: %w", dir, err)
	}
	var next uint64 = 1
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), walExt)
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(id, 10, 64)
		if err != nil {
			continue
		}
		w.sealed = append(w.sealed, &walSegment{id: n, path: filepath.Join(dir, e.Name())})
		next = max(next, n+1)
	}
	sort.Slice(w.sealed, func(i, j int) bool { return w.sealed[i].id < w.sealed[j].id })
	if w.cur, err = w.newSegment(next); err != nil {
		return nil, err
	}
	go w.syncer()
	return w, nil
}

func (w *wal) newSegment(id uint64) (*walSegment, error) {
	path := filepath.Join(w.dir, fmt.Sprintf("%020d%s", id, walExt))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, w.diskErr(fmt.Errorf("cannot create WAL segment %q: %w", path, err))
	}
	if err := syncDir(w.dir); err != nil {
		f.Close()
		os.Remove(path)
		return nil, w.diskErr(err)
	}
	return &walSegment{id: id, path: path, f: f}, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("cannot sync dir %q: %w", dir, err)
	}
	return nil
}

// diskErr marks err as ErrDiskFull when it is ENOSPC or EDQUOT, naming the
// data dir's filesystem and its free bytes as the low-space guard does (a
// disk filled faster than the guard looks fails here first).
func (w *wal) diskErr(err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		dataDir := filepath.Dir(w.dir)
		return fmt.Errorf("%w (%d bytes free on the filesystem of %s): %w", ErrDiskFull, freeBytes(dataDir), dataDir, err)
	}
	return err
}

// append encodes rows as one record of the current segment. The caller
// hands rows to the store, then calls wait on the group and Done on the
// segment's writers.
func (w *wal) append(rows []vmstorage_lib.MetricRow) (*walGroup, *walSegment, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.broken != nil {
		return nil, nil, w.broken
	}
	if w.closing {
		return nil, nil, ErrClosed
	}
	g := w.pending
	if g == nil || g.seg != w.cur {
		g = &walGroup{seg: w.cur, done: make(chan struct{})}
		w.pending = g
		w.queue = append(w.queue, g)
		w.cond.Broadcast()
	}
	if g.buf == nil {
		if b, ok := walBufPool.Get().(*[]byte); ok {
			g.buf = (*b)[:0]
		}
	}
	need := walHeaderLen
	for i := range rows {
		need += len(rows[i].MetricNameRaw) + binary.MaxVarintLen64 + 16
	}
	g.buf = slices.Grow(g.buf, need)
	start := len(g.buf)
	g.buf = append(g.buf, 0, 0, 0, 0, 0, 0, 0, 0) // walHeaderLen, filled below
	for i := range rows {
		g.buf = rows[i].Marshal(g.buf)
	}
	payload := g.buf[start+walHeaderLen:]
	binary.LittleEndian.PutUint32(g.buf[start:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(g.buf[start+4:], crc32.Checksum(payload, walCRC))
	w.cur.records++
	w.cur.writers.Add(1)
	return g, w.cur, nil
}

// wait blocks until g is on disk (written and fsynced) or failed.
func (g *walGroup) wait() error {
	<-g.done
	return g.err
}

// syncer writes and fsyncs queued groups one after another: records
// appended while one group is being synced form the next group.
func (w *wal) syncer() {
	defer close(w.stopped)
	for {
		w.mu.Lock()
		for len(w.queue) == 0 && !w.closing {
			w.cond.Wait()
		}
		if len(w.queue) == 0 {
			w.mu.Unlock()
			return
		}
		g := w.queue[0]
		w.queue = w.queue[1:]
		if w.pending == g {
			w.pending = nil
		}
		w.mu.Unlock()
		g.err = w.writeGroup(g)
		if cap(g.buf) <= 64<<20 {
			b := g.buf[:0]
			walBufPool.Put(&b)
		}
		g.buf = nil
		close(g.done)
	}
}

func (w *wal) writeGroup(g *walGroup) error {
	f := g.seg.f
	off, err := f.Seek(0, io.SeekCurrent)
	if err == nil {
		if _, err = f.Write(g.buf); err == nil {
			err = f.Sync()
			w.fsyncs.Inc()
		}
	}
	if err == nil {
		w.bytes.Add(len(g.buf))
		return nil
	}
	err = w.diskErr(fmt.Errorf("cannot write the WAL segment %q: %w", g.seg.path, err))
	// Undo the partial write, so the records after it stay readable.
	if terr := f.Truncate(off); terr != nil {
		w.mu.Lock()
		w.broken = fmt.Errorf("the WAL is unusable until restart: %w (and cannot truncate it: %v)", err, terr)
		w.mu.Unlock()
	} else if _, serr := f.Seek(off, io.SeekStart); serr != nil {
		w.mu.Lock()
		w.broken = fmt.Errorf("the WAL is unusable until restart: %w (and cannot seek: %v)", err, serr)
		w.mu.Unlock()
	}
	return err
}

// seal makes new appends go to a fresh segment (when the current one has
// records) and returns the sealed segments not yet removed.
func (w *wal) seal() ([]*walSegment, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cur.records > 0 {
		s, err := w.newSegment(w.cur.id + 1)
		if err != nil {
			return nil, err
		}
		w.sealed = append(w.sealed, w.cur)
		w.cur = s
	}
	return append([]*walSegment(nil), w.sealed...), nil
}

// flushed records a completed forced flush that started after every writer
// of segs was done, and removes the segments that have seen enough of them.
func (w *wal) flushed(segs []*walSegment) error {
	var remove []*walSegment
	w.mu.Lock()
	for _, s := range segs {
		s.flushes++
		if s.flushes >= walFlushesToRemove {
			remove = append(remove, s)
		}
	}
	w.sealed = slicesDelete(w.sealed, remove)
	w.mu.Unlock()
	var errs []error
	for _, s := range remove {
		// The segment's groups are all synced: its writers are done, and a
		// writer is done only after its group.
		if s.f != nil {
			s.f.Close()
		}
		if err := os.Remove(s.path); err != nil && !os.IsNotExist(err) {
			errs = append(errs, err)
		}
	}
	if len(remove) > 0 {
		if err := syncDir(w.dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func slicesDelete(all, del []*walSegment) []*walSegment {
	out := all[:0]
	for _, s := range all {
		keep := true
		for _, d := range del {
			if s == d {
				keep = false
			}
		}
		if keep {
			out = append(out, s)
		}
	}
	return out
}

// close stops the syncer after the queued groups; with removeAll (the
// store has been closed, so everything is on disk) it removes every segment.
func (w *wal) close(removeAll bool) error {
	w.mu.Lock()
	w.closing = true
	w.cond.Broadcast()
	w.mu.Unlock()
	<-w.stopped
	segs := append(w.sealed, w.cur)
	var errs []error
	for _, s := range segs {
		if s.f != nil {
			s.f.Close()
		}
		if removeAll {
			if err := os.Remove(s.path); err != nil && !os.IsNotExist(err) {
				errs = append(errs, err)
			}
		}
	}
	if removeAll {
		errs = append(errs, syncDir(w.dir))
	}
	return errors.Join(errs...)
}

// replay reads segment s and calls add with its rows, record by record. A
// torn or corrupt record ends the segment: it was never acknowledged (its
// fsync had not returned), and nothing after it in the segment was either.
// It returns the rows replayed and the bytes discarded at the end.
func replaySegment(path string, add func([]vmstorage_lib.MetricRow) error) (rows int, discarded int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, fmt.Errorf("cannot open WAL segment %q: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	r := bufio.NewReaderSize(f, 1<<20)
	var off int64
	var hdr [walHeaderLen]byte
	var payload []byte
	var mrs []vmstorage_lib.MetricRow
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			break
		}
		n := binary.LittleEndian.Uint32(hdr[:])
		if n > walMaxRecord || off+walHeaderLen+int64(n) > fi.Size() {
			break
		}
		payload = append(payload[:0], make([]byte, n)...)
		if _, err := io.ReadFull(r, payload); err != nil {
			break
		}
		if crc32.Checksum(payload, walCRC) != binary.LittleEndian.Uint32(hdr[4:]) {
			break
		}
		mrs = mrs[:0]
		tail := payload
		bad := false
		for len(tail) > 0 {
			mrs = append(mrs, vmstorage_lib.MetricRow{})
			if tail, err = mrs[len(mrs)-1].UnmarshalX(tail); err != nil {
				bad = true
				break
			}
		}
		if bad {
			break
		}
		if err := add(mrs); err != nil {
			return rows, 0, err
		}
		rows += len(mrs)
		off += walHeaderLen + int64(n)
	}
	return rows, fi.Size() - off, nil
}
