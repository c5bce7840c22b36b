package remote

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// queue is the on-disk FIFO of outgoing remote-write blocks: a bbolt
// database with one bucket keyed by a big-endian sequence number, each value
// a 4-byte sample count followed by the snappy-compressed WriteRequest,
// ready to send as is.
//
// Why not VictoriaMetrics' lib/persistentqueue (vmagent's queue): it removes
// a block when the sender reads it, so a block that is being retried while
// the remote is down is lost if the process dies, and its in-memory part is
// written to disk only on a clean stop. Here a block leaves the queue only
// after the remote acknowledged it (peek, send, delete), every push is one
// fsync'd bbolt transaction, and the store was already a dependency
// (the findings journal).
//
// The queue is bounded by maxBytes of block payload: a push that would go
// over it drops the oldest blocks first (the newest data is what analyzers
// read) and reports how many samples it dropped. bbolt reuses freed pages, so
// the file stays near its high-water mark and never grows past maxBytes plus
// its page overhead.
type queue struct {
	db       *bolt.DB
	maxBytes int64

	mu      sync.Mutex
	bytes   int64 // payload bytes queued
	samples int64 // samples queued
	blocks  int
	next    uint64 // sequence of the next push
	val     []byte // a push's value (count and body), reused: bbolt copies it at commit
	notify  chan struct{}
}

var bucketBlocks = []byte("blocks")

// maxKeptValue bounds the push buffer the queue keeps for the next push.
const maxKeptValue = 4 << 20

// errBlockTooLarge is returned by push for a block larger than the bound.
var errBlockTooLarge = errors.New("block is larger than the whole queue")

// openQueue opens or creates the queue file at path and counts what it holds
// from an earlier run.
func openQueue(path string, maxBytes int64) (*queue, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("cannot open remote-write queue %q: %w", path, err)
	}
	q := &queue{db: db, maxBytes: maxBytes, notify: make(chan struct{}, 1)}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketBlocks)
		if err != nil {
			return err
		}
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if len(k) != 8 || len(v) < 4 {
				return fmt.Errorf("malformed entry of %d bytes under a key of %d bytes", len(v), len(k))
			}
			q.bytes += int64(len(v) - 4)
			q.samples += int64(binary.BigEndian.Uint32(v))
			q.blocks++
			q.next = binary.BigEndian.Uint64(k) + 1
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("cannot read remote-write queue %q: %w", path, err)
	}
	return q, nil
}

// push appends a block of samples; it returns the samples and blocks it
// dropped from the head to stay within maxBytes.
func (q *queue) push(samples int, body []byte) (droppedSamples, droppedBlocks int64, err error) {
	if int64(len(body)) > q.maxBytes {
		return 0, 0, fmt.Errorf("cannot queue %d samples: %w (%d bytes > %d)", samples, errBlockTooLarge, len(body), q.maxBytes)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	var dBytes int64
	err = q.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketBlocks)
		over := q.bytes + int64(len(body)) - q.maxBytes
		if over > 0 {
			c := b.Cursor()
			for k, v := c.First(); k != nil && over > 0; k, v = c.First() {
				n := int64(len(v) - 4)
				droppedSamples += int64(binary.BigEndian.Uint32(v))
				droppedBlocks++
				dBytes += n
				over -= n
				if err := c.Delete(); err != nil {
					return err
				}
			}
		}
		var key [8]byte
		binary.BigEndian.PutUint64(key[:], q.next)
		v := binary.BigEndian.AppendUint32(q.val[:0], uint32(samples))
		v = append(v, body...)
		if cap(v) <= maxKeptValue {
			q.val = v
		}
		return b.Put(key[:], v)
	})
	if err != nil {
		return 0, 0, fmt.Errorf("cannot queue %d samples: %w", samples, err)
	}
	q.next++
	q.bytes += int64(len(body)) - dBytes
	q.samples += int64(samples) - droppedSamples
	q.blocks += 1 - int(droppedBlocks)
	select {
	case q.notify <- struct{}{}:
	default:
	}
	return droppedSamples, droppedBlocks, nil
}

// block is one queued block.
type block struct {
	seq     uint64
	samples int
	body    []byte
}

// peek returns the oldest block, or ok false when the queue is empty.
func (q *queue) peek() (blk block, ok bool, err error) {
	err = q.db.View(func(tx *bolt.Tx) error {
		k, v := tx.Bucket(bucketBlocks).Cursor().First()
		if k == nil {
			return nil
		}
		ok = true
		blk = block{seq: binary.BigEndian.Uint64(k), samples: int(binary.BigEndian.Uint32(v)), body: append([]byte(nil), v[4:]...)}
		return nil
	})
	return blk, ok, err
}

// remove deletes the block seq after it was delivered or refused. A block
// that is no longer there (dropped for space meanwhile) is not an error.
func (q *queue) remove(seq uint64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	var key [8]byte
	binary.BigEndian.PutUint64(key[:], seq)
	// A removal lost to a power cut only makes the block go out again,
	// which receivers de-duplicate: it needs no fsync of its own (the next
	// push's fsync carries it). bbolt reads NoSync at commit; q.mu
	// serialises every commit.
	q.db.NoSync = true
	defer func() { q.db.NoSync = false }()
	return q.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketBlocks)
		v := b.Get(key[:])
		if v == nil {
			return nil
		}
		q.bytes -= int64(len(v) - 4)
		q.samples -= int64(binary.BigEndian.Uint32(v))
		q.blocks--
		return b.Delete(key[:])
	})
}

// stats returns the payload bytes, samples and blocks queued.
func (q *queue) stats() (bytes, samples int64, blocks int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.bytes, q.samples, q.blocks
}

// fileSize is the size of the queue file on disk.
func (q *queue) fileSize() int64 {
	fi, err := os.Stat(q.db.Path())
	if err != nil {
		return 0
	}
	return fi.Size()
}

func (q *queue) close() error { return q.db.Close() }
