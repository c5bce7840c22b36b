package alert

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Outbox is the durable queue of notifications per receiver, with the
// grouping state that decided them: a bbolt file (copy-on-write B+tree,
// fsync per transaction) beside the findings journal. A notification and
// the state that records it as sent are written in one transaction, so a
// crash neither loses a decided notification nor decides it twice.
//
// Layout: bucket "queues" holds one bucket per receiver whose keys are
// big-endian sequence numbers (delivery order); "rejected" keeps the last
// maxRejected notifications each receiver refused (4xx) with the reason;
// "state" holds the dispatcher's state under one key.
type Outbox struct {
	db *bolt.DB
}

var (
	bucketQueues   = []byte("queues")
	bucketRejected = []byte("rejected")
	bucketState    = []byte("state")
	keyState       = []byte("state")
)

// maxRejected bounds the rejected notifications kept per receiver.
const maxRejected = 1000

// OpenOutbox opens or creates the outbox file at path.
func OpenOutbox(path string) (*Outbox, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("cannot open alert outbox %q: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketQueues, bucketRejected, bucketState} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("cannot initialise alert outbox %q: %w", path, err)
	}
	return &Outbox{db: db}, nil
}

// Close closes the file. Idempotent.
func (o *Outbox) Close() error {
	if o == nil || o.db == nil {
		return nil
	}
	err := o.db.Close()
	o.db = nil
	return err
}

// Entry is one queued notification.
type Entry struct {
	Queue string
	Seq   uint64
	Value []byte
}

func seqKey(seq uint64) []byte {
	k := make([]byte, 8)
	binary.BigEndian.PutUint64(k, seq)
	return k
}

// countKeys counts a bucket's keys with a cursor: Bucket.Stats reads only
// committed pages, so it lags inside a write transaction.
func countKeys(b *bolt.Bucket) int {
	n := 0
	c := b.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		n++
	}
	return n
}

// Commit appends values to their queues in order and saves state, in one
// transaction. A queue longer than limit afterwards loses its oldest
// entries behind the head (the head may be in flight); those are returned
// so the caller can say so. limit <= 0 means no bound.
func (o *Outbox) Commit(state []byte, appends []Entry, limit map[string]int) (added, dropped []Entry, err error) {
	err = o.db.Update(func(tx *bolt.Tx) error {
		qs := tx.Bucket(bucketQueues)
		touched := map[string]bool{}
		for _, e := range appends {
			b, err := qs.CreateBucketIfNotExists([]byte(e.Queue))
			if err != nil {
				return err
			}
			seq, err := b.NextSequence()
			if err != nil {
				return err
			}
			if err := b.Put(seqKey(seq), e.Value); err != nil {
				return err
			}
			e.Seq = seq
			added = append(added, e)
			touched[e.Queue] = true
		}
		for q := range touched {
			n := limit[q]
			if n <= 0 {
				continue
			}
			b := qs.Bucket([]byte(q))
			over := countKeys(b) - n
			if over <= 0 {
				continue
			}
			// Collect first, then delete: a cursor must not run over keys
			// deleted under it.
			var drop []Entry
			c := b.Cursor()
			c.First() // the head stays: it may be in flight
			for k, v := c.Next(); k != nil && len(drop) < over; k, v = c.Next() {
				drop = append(drop, Entry{Queue: q, Seq: binary.BigEndian.Uint64(k), Value: append([]byte(nil), v...)})
			}
			for _, d := range drop {
				if err := b.Delete(seqKey(d.Seq)); err != nil {
					return err
				}
			}
			dropped = append(dropped, drop...)
		}
		if state != nil {
			return tx.Bucket(bucketState).Put(keyState, state)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("cannot commit alert outbox: %w", err)
	}
	return added, dropped, nil
}

// Head returns the oldest entry of queue, or false when it is empty.
func (o *Outbox) Head(queue string) (Entry, bool, error) {
	var e Entry
	var ok bool
	err := o.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketQueues).Bucket([]byte(queue))
		if b == nil {
			return nil
		}
		k, v := b.Cursor().First()
		if k == nil {
			return nil
		}
		e, ok = Entry{Queue: queue, Seq: binary.BigEndian.Uint64(k), Value: append([]byte(nil), v...)}, true
		return nil
	})
	return e, ok, err
}

// Len returns how many entries queue holds.
func (o *Outbox) Len(queue string) (int, error) {
	n := 0
	err := o.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketQueues).Bucket([]byte(queue)); b != nil {
			n = countKeys(b)
		}
		return nil
	})
	return n, err
}

// Queues returns the names of the queues that hold entries.
func (o *Outbox) Queues() ([]string, error) {
	var out []string
	err := o.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketQueues).ForEachBucket(func(k []byte) error {
			if first, _ := tx.Bucket(bucketQueues).Bucket(k).Cursor().First(); first != nil {
				out = append(out, string(k))
			}
			return nil
		})
	})
	return out, err
}

// Done removes a delivered entry.
func (o *Outbox) Done(queue string, seq uint64) error {
	return o.db.Update(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketQueues).Bucket([]byte(queue)); b != nil {
			return b.Delete(seqKey(seq))
		}
		return nil
	})
}

// Rejection is a notification a receiver refused, kept for inspection.
type Rejection struct {
	At     time.Time       `json:"at"`
	Reason string          `json:"reason"`
	Value  json.RawMessage `json:"notification"`
}

// Reject moves an entry the receiver refused out of its queue into the
// rejected bucket with the reason, keeping the newest maxRejected.
func (o *Outbox) Reject(queue string, seq uint64, at time.Time, reason string) error {
	return o.db.Update(func(tx *bolt.Tx) error {
		q := tx.Bucket(bucketQueues).Bucket([]byte(queue))
		if q == nil {
			return nil
		}
		v := q.Get(seqKey(seq))
		if v == nil {
			return nil
		}
		r, err := tx.Bucket(bucketRejected).CreateBucketIfNotExists([]byte(queue))
		if err != nil {
			return err
		}
		rec, err := json.Marshal(Rejection{At: at.UTC(), Reason: reason, Value: json.RawMessage(v)})
		if err != nil {
			return err
		}
		if err := r.Put(seqKey(seq), rec); err != nil {
			return err
		}
		for countKeys(r) > maxRejected {
			k, _ := r.Cursor().First()
			if err := r.Delete(k); err != nil {
				return err
			}
		}
		return q.Delete(seqKey(seq))
	})
}

// Rejected returns the kept rejections of queue, oldest first.
func (o *Outbox) Rejected(queue string) ([]Rejection, error) {
	var out []Rejection
	err := o.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketRejected).Bucket([]byte(queue))
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			var r Rejection
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("rejected notification %d of %q is corrupt: %w", binary.BigEndian.Uint64(k), queue, err)
			}
			out = append(out, r)
			return nil
		})
	})
	return out, err
}

// State returns the saved dispatcher state, nil when none was saved.
func (o *Outbox) State() ([]byte, error) {
	var out []byte
	err := o.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketState).Get(keyState); v != nil {
			out = append([]byte(nil), v...)
		}
		return nil
	})
	return out, err
}
