package remote

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/golang/snappy"

	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/storage"
	"github.com/ballast-io/ballast/storage/ingest"
)

// QueueFile is the name of the queue database inside the data dir.
const QueueFile = "remote-write-queue.db"

// Store is the remote backend: it implements storage.Store.
type Store struct {
	opts      Options
	client    *http.Client
	q         *queue
	lock      *os.File
	writeURL  string
	queryRoot string
	id        string // marks this process's flush markers

	// mu guards the open block; pushMu orders blocks into the queue. A cut
	// takes pushMu before it lets go of mu (hand over hand), so blocks
	// reach the queue in order while writers fill the next block during a
	// push's fsync.
	mu             sync.Mutex
	pushMu         sync.Mutex
	pending        []byte // uncompressed WriteRequest protobuf of the open block
	pendingSamples int
	enc            []byte // snappy output of a cut, reused; guarded by pushMu
	closed         bool
	flushSeq       uint64

	rowsAdded atomic.Uint64
	drained   chan struct{} // signalled by the sender when the queue is empty

	writers sync.WaitGroup // WriteBatch calls in progress

	cancel   context.CancelFunc
	done     chan struct{} // the sender stopped
	tickDone chan struct{} // the block ticker stopped

	readOnly      atomic.Bool
	readOnlyCheck atomic.Int64 // unix nanos of the last free-space check

	m storeMetrics
}

var (
	_ storage.Store            = (*Store)(nil)
	_ storage.AsReceivedWriter = (*Store)(nil)
)

// Open locks opts.DataDir, opens the queue in it (with whatever an earlier
// run left unsent) and starts delivering. It does not contact the remote:
// an unreachable remote is the normal case the queue is for.
func Open(opts Options) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	o := opts.withDefaults()
	client, err := newHTTPClient(o.Auth, o.Timeout)
	if err != nil {
		return nil, err
	}
	dir, lock, err := storage.LockDataDir(o.DataDir)
	if err != nil {
		return nil, err
	}
	o.DataDir = dir
	q, err := openQueue(filepath.Join(dir, QueueFile), o.QueueMaxBytes)
	if err != nil {
		lock.Close()
		return nil, err
	}
	var id [6]byte
	rand.Read(id[:])
	s := &Store{
		opts:      o,
		client:    client,
		q:         q,
		lock:      lock,
		writeURL:  o.writeEndpoint(),
		queryRoot: o.queryRoot(),
		id:        hex.EncodeToString(id[:]),
		drained:   make(chan struct{}, 1),
		done:      make(chan struct{}),
		tickDone:  make(chan struct{}),
	}
	s.m.register(o.Metrics, s)
	if _, n, blocks := q.stats(); n > 0 {
		o.Logger.Info("remote-write queue resumes", "samples", n, "blocks", blocks, "path", q.db.Path())
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go s.run(ctx)
	return s, nil
}

// DataDir returns the absolute data directory (queue and journals).
func (s *Store) DataDir() string { return s.opts.DataDir }

// Limits returns the ingest limits implied by the configured retention.
func (s *Store) Limits(now time.Time) ingest.Limits {
	return storage.RetentionLimits(now, s.opts.Retention)
}

// Append validates samples and queues them for the remote.
func (s *Store) Append(_ context.Context, samples []models.Sample) error {
	return storage.AppendVia(s, samples)
}

// WriteBatch adds a validated batch to the open block, cutting blocks of at
// most BlockSamples. Once it returns nil the samples are the queue's: they
// reach the disk within BlockInterval and the remote when it answers.
func (s *Store) WriteBatch(b *ingest.Batch) error {
	if err := s.writeBatch(b); err != nil {
		return err
	}
	s.rowsAdded.Add(uint64(b.Len()))
	return nil
}

func (s *Store) writeBatch(b *ingest.Batch) error {
	return s.write(func() error {
		for from := 0; from < b.Len(); {
			to := min(b.Len(), from+s.opts.BlockSamples-s.pendingSamples)
			s.pending = b.MarshalWriteRequest(s.pending, from, to)
			s.pendingSamples += to - from
			from = to
			if s.pendingSamples >= s.opts.BlockSamples {
				s.cutLocked()
			}
		}
		return nil
	})
}

// write runs add with mu held, once the store is known to take writes.
func (s *Store) write(add func() error) error {
	if s.IsReadOnly() {
		return storage.ErrReadOnly
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return storage.ErrClosed
	}
	s.writers.Add(1) // Close waits for writers that got past this point
	defer s.writers.Done()
	return add()
}

// WriteAsReceived takes a remote-write body whose every sample passed
// validation unchanged (ingest.Batch.AsReceived) without encoding it again.
// A body of at least BlockSamples/2 samples goes out as its own request,
// exactly the bytes received: straight to the remote when nothing waits
// before it (open block and queue empty), else — or when that send fails —
// as a block of its own, queued on disk behind the open block (cut first,
// so order is kept). Either way it returns only once the body is at the
// remote or on disk. A smaller body joins the open block as its decoded
// protobuf (WriteRequests concatenate), saving the re-encoding but not the
// compression. A body of more than BlockSamples samples is split as
// WriteBatch splits it.
func (s *Store) WriteAsReceived(b *ingest.Batch, body, pb []byte) error {
	n := b.Len()
	if n > s.opts.BlockSamples {
		return s.WriteBatch(b)
	}
	direct := false
	err := s.write(func() error {
		if 2*n >= s.opts.BlockSamples {
			if _, _, blocks := s.q.stats(); blocks == 0 && s.pendingSamples == 0 {
				direct = true
				s.writers.Add(1) // Close waits for the send too
				return nil
			}
			return s.queueOwnLocked(n, body)
		}
		if s.pendingSamples+n > s.opts.BlockSamples {
			s.cutLocked()
		}
		s.pending = append(s.pending, pb...)
		s.pendingSamples += n
		if s.pendingSamples >= s.opts.BlockSamples {
			s.cutLocked()
		}
		return nil
	})
	if err == nil && direct {
		err = s.sendDirect(n, body)
	}
	if err != nil {
		return err
	}
	s.rowsAdded.Add(uint64(n))
	return nil
}

// queueOwnLocked cuts the open block and queues body, n samples, as a block
// of its own behind it. The block is the request's own: a failure to queue
// it is the request's failure (503, the client retries), not a loss of
// acknowledged samples.
func (s *Store) queueOwnLocked(n int, body []byte) error {
	s.cutLocked()
	return s.pushLocked(n, body)
}

// directTimeout bounds a send straight from a request; a slower remote gets
// the body through the queue instead.
const directTimeout = 5 * time.Second

// sendDirect sends body, n samples that nothing queued precedes, to the
// remote from the request that brought it: it costs neither a disk write
// nor a read. A refusal for good counts and logs the samples as dropped,
// as the sender does with a refused block; any other failure queues the
// body on disk instead (a send that timed out yet reached the remote is
// then sent twice, which receivers de-duplicate). It ends the s.writers
// entry WriteAsReceived made.
func (s *Store) sendDirect(n int, body []byte) error {
	defer s.writers.Done()
	ctx, cancel := context.WithTimeout(context.Background(), min(directTimeout, s.opts.Timeout))
	permanent, err := s.send(ctx, body)
	cancel()
	switch {
	case err == nil:
		s.m.queued.Add(n)
		s.m.sent.Add(n)
		s.m.lastSuccess.Store(time.Now().Unix())
		return nil
	case permanent:
		s.m.queued.Add(n)
		s.m.dropped("rejected").Add(n)
		s.opts.Logger.Warn("remote refused a block; its samples are dropped", "samples", n, "err", err)
		return nil
	}
	s.m.sendErrors.Inc()
	// Even if Close began meanwhile, the queue is still open: Close waits
	// for this send (s.writers) before it closes the queue.
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queueOwnLocked(n, body)
}

// cutLocked compresses the open block and queues it on disk. It is called
// with mu held and returns with mu held; the push itself runs without mu.
// A block the queue cannot take is counted and logged as lost: its samples
// were acknowledged when they joined the open block.
func (s *Store) cutLocked() {
	if s.pendingSamples == 0 {
		return
	}
	n := s.pendingSamples
	s.pushMu.Lock()
	body := snappy.Encode(s.enc[:cap(s.enc)], s.pending)
	if cap(body) <= maxKeptValue {
		s.enc = body
	}
	s.pending, s.pendingSamples = s.pending[:0], 0
	if err := s.pushHeldLocked(n, body); err != nil {
		s.m.queued.Add(n)
		s.m.dropped("disk").Add(n)
		s.opts.Logger.Error("remote-write queue cannot take a block; its samples are lost", "samples", n, "err", err)
	}
}

// pushLocked queues body, a block of n samples, behind every block queued
// so far. Called with mu held, it returns with mu held, letting go of it
// during the push (hand over hand with pushMu, so blocks keep their order
// while writers fill the next block during the push's fsync).
func (s *Store) pushLocked(n int, body []byte) error {
	s.pushMu.Lock()
	return s.pushHeldLocked(n, body)
}

// pushHeldLocked is pushLocked with pushMu already taken (and mu held).
func (s *Store) pushHeldLocked(n int, body []byte) error {
	s.mu.Unlock()
	defer func() {
		s.pushMu.Unlock()
		s.mu.Lock()
	}()
	dropped, blocks, err := s.q.push(n, body)
	if err != nil {
		return err
	}
	s.m.queued.Add(n)
	if dropped > 0 {
		s.m.dropped("queue_full").Add(int(dropped))
		s.opts.Logger.Warn("remote-write queue is full: dropped its oldest blocks", "samples", dropped, "blocks", blocks, "queue_max_bytes", s.opts.QueueMaxBytes)
	}
	return nil
}

// run cuts blocks every BlockInterval and delivers the queue in order.
func (s *Store) run(ctx context.Context) {
	defer close(s.done)
	go func() {
		defer close(s.tickDone)
		t := time.NewTicker(s.opts.BlockInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				s.mu.Lock()
				s.cutLocked()
				s.mu.Unlock()
			}
		}
	}()
	backoff := s.opts.RetryMin
	var failingSince time.Time
	var lastLog time.Time
	for ctx.Err() == nil {
		blk, ok, err := s.q.peek()
		if err != nil {
			s.opts.Logger.Error("cannot read the remote-write queue", "err", err)
			sleep(ctx, s.opts.RetryMax)
			continue
		}
		if !ok {
			select {
			case s.drained <- struct{}{}:
			default:
			}
			select {
			case <-ctx.Done():
			case <-s.q.notify:
			}
			continue
		}
		permanent, err := s.send(ctx, blk.body)
		switch {
		case err == nil:
			s.m.sent.Add(blk.samples)
			s.m.lastSuccess.Store(time.Now().Unix())
			if !failingSince.IsZero() {
				s.opts.Logger.Info("remote write recovered", "url", redact(s.writeURL), "down_for", time.Since(failingSince).Round(time.Second))
				failingSince = time.Time{}
			}
			backoff = s.opts.RetryMin
		case permanent:
			// The receiver refuses this block for good (400, 409, …):
			// resending would fail forever and hold back everything after it.
			s.m.dropped("rejected").Add(blk.samples)
			s.opts.Logger.Warn("remote refused a block; its samples are dropped", "samples", blk.samples, "err", err)
		default:
			if ctx.Err() != nil {
				return
			}
			s.m.sendErrors.Inc()
			if failingSince.IsZero() {
				failingSince = time.Now()
			}
			if time.Since(lastLog) > 30*time.Second {
				lastLog = time.Now()
				_, n, _ := s.q.stats()
				s.opts.Logger.Warn("remote write failed; retrying with backoff", "err", err, "queued_samples", n, "retry_in", backoff)
			}
			sleep(ctx, backoff)
			backoff = min(s.opts.RetryMax, time.Duration(float64(backoff)*(1.5+mrand.Float64())))
			continue
		}
		if err := s.q.remove(blk.seq); err != nil {
			s.opts.Logger.Error("cannot remove a delivered block from the remote-write queue", "err", err)
			sleep(ctx, s.opts.RetryMin)
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// send posts one block. permanent reports a refusal that a retry cannot fix.
func (s *Store) send(ctx context.Context, body []byte) (permanent bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.writeURL, bytes.NewReader(body))
	if err != nil {
		return true, err
	}
	req.Header.Set("Content-Encoding", "snappy")
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	req.Header.Set("User-Agent", s.opts.UserAgent)
	resp, err := s.client.Do(req)
	if err != nil {
		return false, fmt.Errorf("cannot send to %s: %w", redact(s.writeURL), unwrapURLError(err))
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 == 2 {
		return false, nil
	}
	err = fmt.Errorf("remote %s answered %s: %s", redact(s.writeURL), resp.Status, bytes.TrimSpace(msg))
	switch resp.StatusCode {
	case http.StatusBadRequest, http.StatusConflict, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity:
		return true, err
	}
	return false, err
}

// unwrapURLError drops net/http's "Post URL:" prefix, which we replace by a
// redacted URL.
func unwrapURLError(err error) error {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			return inner
		}
	}
	return err
}

// Flush queues the open block and waits until the remote acknowledged
// everything queued; then, with FlushURLs set, it makes the writes
// searchable at once (see flushRemote). Used by simulated clocks, which read
// back what they just wrote; bounded by 2 × Timeout.
func (s *Store) Flush() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*s.opts.Timeout)
	defer cancel()
	if err := s.drain(ctx); err != nil {
		s.opts.Logger.Warn("flush: the remote did not take the queue in time", "err", err)
		return
	}
	if len(s.opts.FlushURLs) > 0 {
		if err := s.flushRemote(ctx); err != nil {
			s.opts.Logger.Warn("flush: the remote did not make recent writes searchable", "err", err)
		}
	}
}

// drain cuts the open block and waits for an empty queue.
func (s *Store) drain(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return storage.ErrClosed
	}
	s.cutLocked()
	s.mu.Unlock()
	for {
		if _, n, _ := s.q.stats(); n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			_, n, _ := s.q.stats()
			return fmt.Errorf("%d samples still queued: %w", n, ctx.Err())
		case <-s.drained:
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// flushMetric is the series Flush writes to learn when the remote shows
// what came before it; flushMarkers is how many of them (label shard) one
// flush writes.
const (
	flushMetric  = "ballast_remote_flush_marker"
	flushMarkers = 64
)

// flushRemote makes everything delivered so far searchable. A receiver
// that buffers after acknowledging is waited for with markers sent behind
// the data: vminsert shards series over one buffer per storage node and
// sends each buffer in order to its replicas, so once a marker from every
// buffer is searchable (after a FlushURLs round) the data before it reached
// a storage node too, and one more round makes it searchable. 64 markers
// reach every buffer of a cluster of up to 8 vmstorage nodes with
// probability above 99.9 %; beyond that Flush is best effort. A receiver
// that commits before answering (Prometheus, single-node VictoriaMetrics
// after force_flush) passes on the first round.
func (s *Store) flushRemote(ctx context.Context) error {
	s.mu.Lock()
	s.flushSeq++
	seq := s.flushSeq
	s.mu.Unlock()
	var b ingest.Batch
	lim := s.Limits(time.Now())
	markers := make([]models.Sample, flushMarkers)
	for i := range markers {
		markers[i] = models.Sample{Name: flushMetric, Labels: []models.Label{{Name: "store", Value: s.id}, {Name: "shard", Value: strconv.Itoa(i)}}, Value: float64(seq)}
	}
	if err := b.AddSamples(markers, &lim); err != nil {
		return err
	}
	if err := s.writeBatch(&b); err != nil { // not counted in RowsAdded
		return err
	}
	if err := s.drain(ctx); err != nil {
		return err
	}
	expr := fmt.Sprintf(`count(last_over_time(%s{store=%q}[1h]) >= %d)`, flushMetric, s.id, seq)
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		if err := s.hitFlushURLs(ctx); err != nil {
			return err
		}
		rs, err := s.query(ctx, "/api/v1/query", expr, func(f urlValues) {
			f.Set("time", formatTime(time.Now().Add(time.Second)))
			f.Set("nocache", "1") // no cache, and no latency offset
			f.Del("latency_offset")
		})
		if err == nil && len(rs) == 1 && len(rs[0].Values) > 0 && rs[0].Values[0] == flushMarkers {
			return s.hitFlushURLs(ctx)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("flush markers %d not searchable: %w", seq, ctx.Err())
		case <-time.After(wait):
		}
	}
}

func (s *Store) hitFlushURLs(ctx context.Context) error {
	for _, u := range s.opts.FlushURLs {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return err
		}
		resp, err := s.client.Do(req)
		if err != nil {
			return fmt.Errorf("cannot request flush URL %s: %w", redact(u), unwrapURLError(err))
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("flush URL %s answered %s", redact(u), resp.Status)
		}
	}
	return nil
}

// IsReadOnly reports whether free space in the data dir is below
// MinFreeDiskBytes (checked at most once a second).
func (s *Store) IsReadOnly() bool {
	now := time.Now().UnixNano()
	if last := s.readOnlyCheck.Load(); now-last > int64(time.Second) && s.readOnlyCheck.CompareAndSwap(last, now) {
		var st syscall.Statfs_t
		if err := syscall.Statfs(s.opts.DataDir, &st); err == nil {
			free := int64(st.Bavail) * int64(st.Bsize)
			s.readOnly.Store(free < s.opts.MinFreeDiskBytes)
		}
	}
	return s.readOnly.Load()
}

// SizeBytes is the size of the queue file.
func (s *Store) SizeBytes() int64 { return s.q.fileSize() }

// RowsAdded counts the samples this process accepted for the remote.
func (s *Store) RowsAdded() uint64 { return s.rowsAdded.Load() }

// QueueStats returns what waits for the remote: payload bytes, samples and
// blocks.
func (s *Store) QueueStats() (bytes, samples int64, blocks int) { return s.q.stats() }

// Close queues the open block, stops the sender (a block in flight stays
// queued and is sent again on the next start; receivers de-duplicate equal
// samples) and closes the queue. Idempotent; bounded by ctx.
func (s *Store) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	writersDone := make(chan struct{})
	go func() { s.writers.Wait(); close(writersDone) }()
	select {
	case <-writersDone:
	case <-ctx.Done():
		return fmt.Errorf("cannot close the remote store: writes in flight did not finish: %w", ctx.Err())
	}
	s.mu.Lock()
	s.cutLocked()
	s.mu.Unlock()
	s.cancel()
	for _, ch := range []chan struct{}{s.done, s.tickDone} {
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("cannot close the remote store: the sender did not stop: %w", ctx.Err())
		}
	}
	err := s.q.close()
	s.lock.Close()
	return err
}

// formatTime renders t as Prometheus API seconds.
func formatTime(t time.Time) string {
	return fmt.Sprintf("%.3f", float64(t.UnixMilli())/1e3)
}
