package storage

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/VictoriaMetrics/VictoriaMetrics/app/vmselect"
	"github.com/VictoriaMetrics/VictoriaMetrics/app/vmselect/promql"
	"github.com/VictoriaMetrics/VictoriaMetrics/app/vmstorage"
	"github.com/VictoriaMetrics/VictoriaMetrics/lib/logger"
	vmstorage_lib "github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"
	"github.com/VictoriaMetrics/metrics"

	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/storage/ingest"
)

// Options configure the embedded store. Every field has a usable zero value
// (its default, documented per field and in docs/config.md).
type Options struct {
	// DataDir holds the data; required.
	DataDir string
	// Retention is how long samples are kept. Default 30 days; minimum 1 day.
	Retention time.Duration
	// FlushInterval bounds how much acknowledged data a crash can lose: rows
	// reach disk within FlushInterval plus the 2 s in-memory buffering of
	// lib/storage. Default 5 s; minimum 1 s.
	FlushInterval time.Duration
	// MinFreeDiskBytes: below this free space the store turns read-only and
	// ingest answers 503 instead of filling the disk. Default 100 MB.
	MinFreeDiskBytes int64
	// MemoryBytes caps VictoriaMetrics' caches. Default: 25 % of RAM.
	MemoryBytes int64
	// MaxConcurrentQueries bounds concurrent queries of the query API; more
	// wait up to 10 s for a slot, then get 503. Default 2 × CPUs, at most 16.
	MaxConcurrentQueries int
	// QueryTimeout bounds one query (VictoriaMetrics' -search.maxQueryDuration;
	// a request's timeout= can only shorten it) and is the deadline of
	// in-process queries whose context has none. Default 30 s.
	QueryTimeout time.Duration
	// MaxMemoryPerQuery rejects a query whose rollups need more memory than
	// this (VictoriaMetrics' -search.maxMemoryPerQuery). 0: only the shared
	// limit every concurrent query draws from (a share of MemoryBytes).
	MaxMemoryPerQuery int64
	// LatencyOffset hides the newest samples from instant queries at "now"
	// while they may still be incomplete (VictoriaMetrics' -search.latencyOffset).
	// Default 5 s; negative means 0.
	LatencyOffset time.Duration
	// RefreshInterval bounds how stale a query's view may be
	// (docs/storage.md#freshness): a query sees every row acknowledged
	// more than RefreshInterval before it, and every row acknowledged
	// before the latest refresh. lib/storage keeps new rows and index
	// entries in buffers for up to 2 s and 1 s (constants, not options),
	// and caches the series found for each query filter per day until its
	// next index flush, which it signals at most every 10 s. A refresh
	// (Storage.DebugFlush) turns the buffers into searchable in-memory
	// parts and, when index entries were pending, resets that cache, so an
	// empty answer cached for a series created since is dropped. It does
	// not write to disk. Refreshes run on read: before a query, when rows
	// were written since the last refresh and that one started at least
	// RefreshInterval ago; ingest that nobody queries pays nothing.
	// Default 200 ms; negative turns it off (visibility after 2–12 s,
	// VictoriaMetrics' own timers).
	RefreshInterval time.Duration
	// DisableQueryCache turns off the rollup result cache, for backfills and
	// simulated clocks that write far in the past.
	DisableQueryCache bool
	// LogLevel for VictoriaMetrics' own logger: INFO, WARN, ERROR. Default WARN.
	LogLevel string
	// Metrics receives ballast's storage counters (rejected queries, WAL,
	// disk space). Default: a private set.
	Metrics *metrics.Set
	// Durability is DurabilityWindow (default) or DurabilityWAL
	// (docs/storage.md#durability).
	Durability string
	// Logger receives the WAL's replay and flush problems. Default: discard.
	Logger *slog.Logger
}

// Durability modes of the embedded store.
const (
	// DurabilityWindow: a crash loses at most what was acknowledged in the
	// last WindowLoss(flush interval).
	DurabilityWindow = "window"
	// DurabilityWAL: every acknowledged row is in the fsynced write-ahead
	// log; a crash loses nothing acknowledged.
	DurabilityWAL = "wal"
)

// DefaultRefreshInterval is Options.RefreshInterval's default: a query
// finds every row acknowledged at least this long before it.
const DefaultRefreshInterval = 200 * time.Millisecond

// WindowLoss is the documented loss window of durability "window": rows
// acknowledged longer ago than this before a crash are on disk. ballast
// forces a flush every flush interval; a row waits for the next forced
// flush (at most one interval), and a part caught in an in-memory merge
// during that flush is written by VictoriaMetrics' own flusher within the
// following interval; 2 s covers the flush itself.
func WindowLoss(flushInterval time.Duration) time.Duration {
	return 2*flushInterval + 2*time.Second
}

func (o *Options) withDefaults() Options {
	r := *o
	if r.Retention == 0 {
		r.Retention = 30 * 24 * time.Hour
	}
	if r.FlushInterval == 0 {
		r.FlushInterval = 5 * time.Second
	}
	if r.MinFreeDiskBytes == 0 {
		r.MinFreeDiskBytes = 100e6
	}
	if r.MaxConcurrentQueries == 0 {
		r.MaxConcurrentQueries = min(2*runtime.NumCPU(), 16)
	}
	if r.QueryTimeout == 0 {
		r.QueryTimeout = 30 * time.Second
	}
	if r.LatencyOffset == 0 {
		r.LatencyOffset = 5 * time.Second
	} else if r.LatencyOffset < 0 {
		r.LatencyOffset = 0
	}
	if r.RefreshInterval == 0 {
		r.RefreshInterval = DefaultRefreshInterval
	}
	if r.LogLevel == "" {
		r.LogLevel = "WARN"
	}
	if r.Metrics == nil {
		r.Metrics = metrics.NewSet()
	}
	if r.Durability == "" {
		r.Durability = DurabilityWindow
	}
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	return r
}

// Validate reports the first bad option, naming it.
func (o *Options) Validate() error {
	switch {
	case o.DataDir == "":
		return fmt.Errorf("storage data dir is empty")
	case o.Retention != 0 && o.Retention < 24*time.Hour:
		return fmt.Errorf("storage retention %s is below the minimum of 24h", o.Retention)
	case o.FlushInterval != 0 && o.FlushInterval < time.Second:
		return fmt.Errorf("storage flush interval %s is below the minimum of 1s", o.FlushInterval)
	case o.MinFreeDiskBytes < 0:
		return fmt.Errorf("storage min free disk bytes %d is negative", o.MinFreeDiskBytes)
	case o.MemoryBytes < 0:
		return fmt.Errorf("storage memory bytes %d is negative", o.MemoryBytes)
	case o.MaxConcurrentQueries < 0:
		return fmt.Errorf("max concurrent queries %d is negative", o.MaxConcurrentQueries)
	case o.QueryTimeout < 0 || o.QueryTimeout != 0 && o.QueryTimeout < time.Second:
		return fmt.Errorf("storage query timeout %s is below the minimum of 1s", o.QueryTimeout)
	case o.MaxMemoryPerQuery < 0:
		return fmt.Errorf("storage max memory per query %d is negative", o.MaxMemoryPerQuery)
	}
	switch o.Durability {
	case "", DurabilityWindow, DurabilityWAL:
	default:
		return fmt.Errorf("storage durability %q is not one of %s, %s", o.Durability, DurabilityWindow, DurabilityWAL)
	}
	switch strings.ToUpper(o.LogLevel) {
	case "", "INFO", "WARN", "ERROR":
	default:
		return fmt.Errorf("storage log level %q is not one of INFO, WARN, ERROR", o.LogLevel)
	}
	return nil
}

// Embedded is the in-process VictoriaMetrics store.
type Embedded struct {
	opts Options
	lock *os.File

	// mu guards closed: appends and queries hold it shared, Close holds it
	// exclusively, because lib/storage's MustClose assumes no concurrent
	// AddRows or Search.
	mu     sync.RWMutex
	closed bool

	rowsAdded atomic.Uint64

	wal         *wal // nil in durability "window"
	stopFlusher chan struct{}
	flusherDone chan struct{}
	stopOnce    sync.Once
	// refreshMu serialises refreshes on read (fresh): queries that
	// arrive during one wait for it instead of starting their own. It
	// guards refreshStart.
	refreshMu sync.Mutex
	refreshes *metrics.Counter
	// refreshed is the row count the last completed refresh read before
	// it started: every row counted up to it is searchable.
	refreshed atomic.Uint64
	// refreshStart is when the last refresh started.
	refreshStart time.Time
	// deferRefresh, when set and true, makes queries skip the refresh
	// (DeferRefreshWhile); refreshSkips counts those skipped.
	deferRefresh atomic.Pointer[func() bool]
	refreshSkips *metrics.Counter
	flushes      *metrics.Counter
	flushSkips   *metrics.Counter
	// lowDisk is set by the disk watcher below MinFreeDiskBytes free, at
	// most 100 ms after it happens (VictoriaMetrics' own check runs every
	// second); lowFree is the free space it saw.
	lowDisk    atomic.Bool
	lowFree    atomic.Int64
	reserve    string // DATA_DIR/disk-reserve, see diskWatcher
	hasReserve bool
	flushSecs  *metrics.Histogram
}

var (
	openMu     sync.Mutex
	openedOnce bool // VictoriaMetrics' package state cannot be re-initialised
	vmInitOnce sync.Once
)

// ErrDataDirLocked is returned when another process holds the data dir.
var ErrDataDirLocked = errors.New("data dir is in use by another process")

// OpenEmbedded locks opts.DataDir, opens the store in it and starts the query
// engine. Only one Embedded can ever be opened per process.
func OpenEmbedded(opts Options) (*Embedded, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	o := opts.withDefaults()
	openMu.Lock()
	defer openMu.Unlock()
	if openedOnce {
		return nil, fmt.Errorf("cannot open storage at %q: an embedded store was already opened in this process", o.DataDir)
	}
	dir, lock, err := LockDataDir(o.DataDir)
	if err != nil {
		return nil, err
	}
	o.DataDir = dir
	if err := setVMFlags(&o); err != nil {
		lock.Close()
		return nil, err
	}
	vmInitOnce.Do(logger.InitNoLogFlags)
	openedOnce = true
	vmstorage.Init(o.MaxConcurrentQueries, 10*time.Second, promql.ResetRollupResultCacheIfNeeded)
	vmselect.Init(o.MaxConcurrentQueries, 10*time.Second)
	e := &Embedded{opts: o, lock: lock, stopFlusher: make(chan struct{}), flusherDone: make(chan struct{})}
	e.refreshes = o.Metrics.GetOrCreateCounter(`ballast_storage_refreshes_total`)
	e.refreshSkips = o.Metrics.GetOrCreateCounter(`ballast_storage_refreshes_deferred_total`)
	e.flushes = o.Metrics.GetOrCreateCounter(`ballast_storage_forced_flushes_total`)
	e.flushSkips = o.Metrics.GetOrCreateCounter(`ballast_storage_forced_flushes_skipped_total`)
	e.flushSecs = o.Metrics.GetOrCreateHistogram(`ballast_storage_forced_flush_duration_seconds`)
	if o.Durability == DurabilityWAL {
		if err := e.openWAL(); err != nil {
			vmselect.Stop()
			vmstorage.Stop()
			lock.Close()
			return nil, err
		}
	}
	e.reserve = filepath.Join(o.DataDir, reserveFileName)
	e.checkDisk()
	go e.flusher()
	return e, nil
}

const reserveFileName = "disk-reserve"

// reserveBytes is the size of the reserve file: a quarter of the free-space
// minimum, at most 64 MiB.
func (e *Embedded) reserveBytes() int64 { return min(e.opts.MinFreeDiskBytes/4, 64<<20) }

// checkDisk is the disk watcher's step (every 100 ms in the flusher's
// goroutine). Below MinFreeDiskBytes free the store refuses writes and
// flushes what it holds while there is still room. The reserve file —
// space held while the disk has room — is deleted when another writer
// fills the filesystem to the last quarter of the reserve: VictoriaMetrics
// panics when a flush or merge meets a full disk, and the freed reserve
// gives what it still holds in memory room to land. It is recreated once
// the space is back above the minimum plus the reserve.
func (e *Embedded) checkDisk() {
	free := freeBytes(e.opts.DataDir)
	e.lowFree.Store(free)
	res := e.reserveBytes()
	switch {
	case free < e.opts.MinFreeDiskBytes:
		if !e.lowDisk.Swap(true) {
			e.opts.Logger.Warn("storage is read-only: free disk space is below storage.min_free_disk_bytes; ingest answers 503 until it is back",
				"data_dir", e.opts.DataDir, "free_bytes", free, "min_free_disk_bytes", e.opts.MinFreeDiskBytes)
			if _, err := e.forceFlush(); err != nil {
				e.opts.Logger.Warn("cannot flush the store before it runs out of space", "err", err)
			}
		}
		if e.hasReserve && free < res/4 {
			if err := os.Remove(e.reserve); err == nil || os.IsNotExist(err) {
				e.hasReserve = false
				e.opts.Logger.Warn("the filesystem of the data dir is full: released the disk reserve for the store's last flush",
					"data_dir", e.opts.DataDir, "free_bytes", free, "reserve_bytes", res)
			}
		}
	case e.lowDisk.Load() && free >= e.opts.MinFreeDiskBytes+res:
		e.lowDisk.Store(false)
		e.opts.Logger.Info("storage is writable again: free disk space is above storage.min_free_disk_bytes", "data_dir", e.opts.DataDir, "free_bytes", free)
		fallthrough
	default:
		if !e.hasReserve && !e.lowDisk.Load() && res > 0 {
			e.hasReserve = makeReserve(e.reserve, res) == nil
		}
	}
}

// makeReserve allocates size bytes at path (real blocks, not a sparse file).
func makeReserve(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	err = syscall.Fallocate(int(f.Fd()), 0, 0, size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

// readOnlyErr says why writes are refused, or nil.
func (e *Embedded) readOnlyErr() error {
	if e.lowDisk.Load() || vmstorage.VMInsertAPI.IsReadOnly() {
		return fmt.Errorf("%w (%d bytes free on the filesystem of %s, storage.min_free_disk_bytes is %d)",
			ErrReadOnly, e.lowFree.Load(), e.opts.DataDir, e.opts.MinFreeDiskBytes)
	}
	return nil
}

// ReadOnlyReason says why the store refuses writes, or "" when it takes them.
func (e *Embedded) ReadOnlyReason() string {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return ""
	}
	if err := e.readOnlyErr(); err != nil {
		return err.Error()
	}
	return ""
}

// openWAL replays what the last run left in the WAL into the store and
// opens it for appends.
func (e *Embedded) openWAL() error {
	w, err := openWAL(filepath.Join(e.opts.DataDir, walDirName), e.opts.Metrics)
	if err != nil {
		return err
	}
	var rows int
	for _, s := range w.sealed {
		n, discarded, err := replaySegment(s.path, func(mrs []vmstorage_lib.MetricRow) error {
			return vmstorage.VMInsertAPI.WriteRows(mrs)
		})
		rows += n
		w.replayed.Add(n)
		if err != nil {
			w.close(false)
			return fmt.Errorf("cannot replay the WAL segment %q: %w", s.path, err)
		}
		if discarded > 0 {
			e.opts.Logger.Warn("WAL segment ends in a record that was never acknowledged; discarded", "segment", s.path, "bytes", discarded)
		}
	}
	if len(w.sealed) > 0 {
		e.opts.Logger.Info("WAL replayed", "segments", len(w.sealed), "rows", rows)
	}
	e.wal = w
	return nil
}

// flusher forces VictoriaMetrics' in-memory data to disk every flush
// interval — on a deadline, also under load, where VictoriaMetrics' own
// flusher falls behind — and removes WAL segments the flushes made
// redundant.
func (e *Embedded) flusher() {
	defer close(e.flusherDone)
	t := time.NewTicker(e.opts.FlushInterval)
	defer t.Stop()
	disk := time.NewTicker(100 * time.Millisecond)
	defer disk.Stop()
	for {
		select {
		case <-e.stopFlusher:
			return
		case <-disk.C:
			e.checkDisk()
			continue
		case <-t.C:
		}
		if err := e.checkpoint(); err != nil {
			e.opts.Logger.Warn("cannot force a flush of the store", "err", err)
		}
	}
}

// fresh runs before every query (Query, QueryRange, QueryHandler), with
// e.mu held for reading: it makes the rows acknowledged so far searchable
// (Storage.DebugFlush) unless none were written since the last refresh or
// that refresh started less than RefreshInterval ago. So a query sees
// every row acknowledged RefreshInterval before it, and a store that is
// written to but not queried never refreshes (a timer every 200 ms cost
// the 2,000-agent fleet scrape ~10 % of the mds's CPU: each refresh
// allocates and clears lib/storage's 8 MiB raw-row buffer and makes a
// small part to merge). The row count is read before the flush: a row
// counted before that read had returned from lib/storage's AddRows, so
// the flush covers it.
func (e *Embedded) fresh() {
	iv := e.opts.RefreshInterval
	if iv <= 0 {
		return
	}
	n := e.rowsAdded.Load()
	if e.refreshed.Load() >= n {
		return
	}
	if f := e.deferRefresh.Load(); f != nil && (*f)() {
		e.refreshSkips.Inc()
		return
	}
	e.refreshMu.Lock()
	defer e.refreshMu.Unlock()
	// A refresh that started after n was read, while this query waited,
	// covers its rows.
	if e.refreshed.Load() >= n {
		return
	}
	now := time.Now()
	if now.Sub(e.refreshStart) < iv {
		return
	}
	e.refreshStart = now
	m := e.rowsAdded.Load()
	vmstorage.DebugFlush()
	e.refreshed.Store(m)
	e.refreshes.Inc()
}

// DeferRefreshWhile makes queries skip the refresh on read while
// overloaded reports true (the mds passes its ingest admission's): a
// refresh turns the rows acknowledged since the last one into searchable
// parts on the query's own time, so under an ingest overload every query
// paid for the overload's rows (TestOverload: queries took 1–4 s where
// /readyz took well under one). Rows then become searchable within
// VictoriaMetrics' own timers (docs/storage.md#freshness). A nil function
// refreshes always, the default.
func (e *Embedded) DeferRefreshWhile(overloaded func() bool) {
	if overloaded == nil {
		e.deferRefresh.Store(nil)
		return
	}
	e.deferRefresh.Store(&overloaded)
}

// checkpoint seals the current WAL segment, waits until every row of the
// sealed segments is in the store, forces a flush and removes the segments
// that enough flushes have made redundant.
func (e *Embedded) checkpoint() error {
	var segs []*walSegment
	if e.wal != nil {
		var err error
		if segs, err = e.wal.seal(); err != nil {
			return err
		}
		for _, s := range segs {
			s.writers.Wait()
		}
	}
	ok, err := e.forceFlush()
	if err != nil || !ok {
		return err
	}
	if e.wal != nil {
		return e.wal.flushed(segs)
	}
	return nil
}

// forceFlush writes every row handed to the store so far to disk, except
// parts VictoriaMetrics is merging in memory at that moment. lib/storage
// has no public call for it; creating a snapshot flushes (the partitions'
// flushInmemoryRowsToFiles and the indexdb's flushInmemoryItemsToFiles),
// and the snapshot, hard links only, is deleted at once. It does nothing
// (false) below a quarter of MinFreeDiskBytes free: a flush into a full
// disk panics in lib/storage.
func (e *Embedded) forceFlush() (bool, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return false, ErrClosed
	}
	if freeBytes(e.opts.DataDir) < e.opts.MinFreeDiskBytes/4 {
		// Too close to full: a flush that meets a full disk panics.
		e.flushSkips.Inc()
		return false, nil
	}
	start := time.Now()
	vmstorage.DebugFlush()
	rec := httptest.NewRecorder()
	vmstorage.RequestHandler(rec, httptest.NewRequest(http.MethodPost, "/snapshot/create", nil))
	var ans struct {
		Status, Snapshot, Msg string
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &ans); err != nil || ans.Snapshot == "" {
		return false, fmt.Errorf("cannot flush through a snapshot: %d %s", rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	rec = httptest.NewRecorder()
	vmstorage.RequestHandler(rec, httptest.NewRequest(http.MethodPost, "/snapshot/delete?snapshot="+url.QueryEscape(ans.Snapshot), nil))
	if !strings.Contains(rec.Body.String(), `"ok"`) {
		return true, fmt.Errorf("cannot delete the flush snapshot %s: %s", ans.Snapshot, strings.TrimSpace(rec.Body.String()))
	}
	e.flushes.Inc()
	e.flushSecs.UpdateDuration(start)
	return true, nil
}

// freeBytes is the space available to unprivileged writers at dir, or
// max int64 when it cannot be read.
func freeBytes(dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return math.MaxInt64
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// LockDataDir makes dir absolute, creates it, and takes an exclusive,
// non-blocking flock on DIR/ballast.lock with our pid in it, so that a
// second process on the same data dir — embedded store or remote queue —
// fails with a clear error (and before VictoriaMetrics' own lock would make
// it exit). It returns the absolute dir and the lock to close on release.
func LockDataDir(dir string) (string, *os.File, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", nil, fmt.Errorf("cannot resolve data dir %q: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return "", nil, fmt.Errorf("cannot create data dir %q: %w", abs, err)
	}
	f, err := lockFile(abs)
	return abs, f, err
}

func lockFile(dir string) (*os.File, error) {
	path := filepath.Join(dir, "ballast.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cannot open lock file %q: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		pid, _ := os.ReadFile(path)
		f.Close()
		holder := strings.TrimSpace(string(pid))
		if holder == "" {
			holder = "unknown"
		}
		return nil, fmt.Errorf("cannot open storage at %q: %w (pid %s holds %s)", dir, ErrDataDirLocked, holder, path)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// setVMFlags applies o through VictoriaMetrics' global flags, which is the
// only way its app packages are configured.
func setVMFlags(o *Options) error {
	set := map[string]string{
		"storageDataPath":               o.DataDir,
		"retentionPeriod":               fmt.Sprintf("%dh", int64(o.Retention/time.Hour)),
		"inmemoryDataFlushInterval":     o.FlushInterval.String(),
		"storage.minFreeDiskSpaceBytes": strconv.FormatInt(o.MinFreeDiskBytes, 10),
		"search.latencyOffset":          o.LatencyOffset.String(),
		"search.disableCache":           strconv.FormatBool(o.DisableQueryCache),
		"search.disableAutoCacheReset":  strconv.FormatBool(o.DisableQueryCache),
		"loggerLevel":                   strings.ToUpper(o.LogLevel),
		"search.cacheTimestampOffset":   "5m",
		"storage.trackMetricNamesStats": "false",
		"search.maxStalenessInterval":   "0s",
		"search.minStalenessInterval":   "0s",
		"search.maxQueryDuration":       o.QueryTimeout.String(),
		"search.maxMemoryPerQuery":      strconv.FormatInt(o.MaxMemoryPerQuery, 10),
	}
	if o.Durability == DurabilityWAL {
		// A replayed row may already be on disk: keep one sample per
		// series and millisecond, as the row was written once.
		set["dedup.minScrapeInterval"] = "1ms"
	}
	if o.MemoryBytes > 0 {
		set["memory.allowedBytes"] = strconv.FormatInt(o.MemoryBytes, 10)
	} else {
		set["memory.allowedPercent"] = "25"
	}
	return SetVMFlags(set)
}

// SetVMFlags sets VictoriaMetrics' global flags (name without the dash →
// value), parsing flag.CommandLine first if nobody has: lib/memory reads its
// limits from parsed flags, and ballast's own commands use separate flag sets.
func SetVMFlags(set map[string]string) error {
	if !flag.CommandLine.Parsed() {
		if err := flag.CommandLine.Parse(nil); err != nil {
			return fmt.Errorf("cannot initialise VictoriaMetrics flags: %w", err)
		}
	}
	for k, v := range set {
		if flag.CommandLine.Lookup(k) == nil {
			return fmt.Errorf("cannot configure VictoriaMetrics: flag -%s does not exist in this build", k)
		}
		if err := flag.Set(k, v); err != nil {
			return fmt.Errorf("cannot set VictoriaMetrics option -%s=%q: %w", k, v, err)
		}
	}
	return nil
}

// WriteMetrics writes VictoriaMetrics' own metrics (storage, query engine,
// scraper) in Prometheus text format. Their gauges read the embedded
// store's state, so only an open Embedded may write them.
func (e *Embedded) WriteMetrics(w io.Writer) { metrics.WritePrometheus(w, false) }

// DataDir returns the absolute data directory.
func (e *Embedded) DataDir() string { return e.opts.DataDir }

// Options returns the effective options, defaults filled in.
func (e *Embedded) Options() Options { return e.opts }

// ErrClosed is returned by operations on a closed store.
var ErrClosed = errors.New("storage is closed")

// ErrReadOnly is returned when the store refuses writes for lack of disk.
var ErrReadOnly = errors.New("storage is read-only: free disk space is below the configured minimum")

// Append validates samples and writes them. Validation covers the whole batch
// first, so an error means nothing was written.
func (e *Embedded) Append(ctx context.Context, samples []models.Sample) error {
	return AppendVia(e, samples)
}

// AppendVia validates samples against w's limits at the wall clock and
// writes them with one WriteBatch: every backend's Append. An error means
// nothing was written.
func AppendVia(w BatchWriter, samples []models.Sample) error {
	if len(samples) == 0 {
		return nil
	}
	b, _ := appendBatches.Get().(*ingest.Batch)
	if b == nil {
		b = new(ingest.Batch)
	}
	defer func() {
		// Keep the memory of ordinary batches only: one huge Append
		// would otherwise be held for good.
		if b.Len() <= maxPooledBatchRows {
			b.Reset()
			appendBatches.Put(b)
		}
	}()
	lim := w.Limits(time.Now())
	if err := b.AddSamples(samples, &lim); err != nil {
		return err
	}
	return w.WriteBatch(b)
}

// appendBatches are AppendVia's batches, reused: every scrape and every
// LAYOUTSTATS batch goes through it, and a batch built up from nothing
// each time (rows, labels, encoded names grown by doubling) was a third
// of the bytes an eval run allocated. WriteBatch keeps nothing of a batch
// once it returns.
var appendBatches sync.Pool

// maxPooledBatchRows bounds the batches appendBatches keeps.
const maxPooledBatchRows = 1 << 16

// Limits returns the ingest limits implied by the retention at now.
func (e *Embedded) Limits(now time.Time) ingest.Limits { return RetentionLimits(now, e.opts.Retention) }

// RetentionLimits are the ingest limits of a store keeping retention at
// now: an hour's margin inside the retention (VictoriaMetrics drops older
// rows silently) and at most two days ahead (it drops those too).
func RetentionLimits(now time.Time, retention time.Duration) ingest.Limits {
	return ingest.Limits{
		MinTimestamp:     now.Add(-retention).Add(time.Hour).UnixMilli(),
		MaxTimestamp:     now.Add(2 * 24 * time.Hour).Add(-time.Hour).UnixMilli(),
		DefaultTimestamp: now.UnixMilli(),
	}
}

var rowBufPool sync.Pool

type rowBuf struct {
	rows []vmstorage_lib.MetricRow
	buf  []byte
}

// writeChunkBytes bounds the encoded names handed to the store at once:
// a request's rows are encoded and written in chunks of about this size,
// so that extra labels copied into every row cannot blow memory up.
const writeChunkBytes = 4 << 20

// WriteBatch writes an already validated batch.
func (e *Embedded) WriteBatch(b *ingest.Batch) error {
	rb, _ := rowBufPool.Get().(*rowBuf)
	if rb == nil {
		rb = &rowBuf{}
	}
	defer rowBufPool.Put(rb)
	for next := 0; next < b.Len(); {
		rb.rows, rb.buf, next = b.MetricRows(rb.rows[:0], rb.buf, next, writeChunkBytes)
		if err := e.WriteRows(rb.rows); err != nil {
			return err
		}
	}
	if cap(rb.buf) > 2*writeChunkBytes {
		rb.buf = nil // one huge row: do not keep its buffer in the pool
	}
	return nil
}

// WriteRows hands rows in lib/storage encoding to the store. It exists for
// callers that build rows themselves (benchmarks); others use Append.
func (e *Embedded) WriteRows(rows []vmstorage_lib.MetricRow) error {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return ErrClosed
	}
	if err := e.readOnlyErr(); err != nil {
		return err
	}
	if e.wal == nil {
		if err := vmstorage.VMInsertAPI.WriteRows(rows); err != nil {
			return fmt.Errorf("cannot write %d rows: %w", len(rows), err)
		}
		e.rowsAdded.Add(uint64(len(rows)))
		return nil
	}
	// The rows go to the WAL's current group and to the store while the
	// previous group is being synced; the answer waits for the fsync.
	g, seg, err := e.wal.append(rows)
	if err != nil {
		return fmt.Errorf("cannot write %d rows to the WAL: %w", len(rows), err)
	}
	werr := vmstorage.VMInsertAPI.WriteRows(rows)
	err = g.wait()
	seg.writers.Done()
	if werr != nil {
		return fmt.Errorf("cannot write %d rows: %w", len(rows), werr)
	}
	if err != nil {
		return err
	}
	e.rowsAdded.Add(uint64(len(rows)))
	return nil
}

// RowsAdded returns how many rows this process wrote.
func (e *Embedded) RowsAdded() uint64 { return e.rowsAdded.Load() }

// Flush makes every row written so far visible to queries now, whatever
// Options.RefreshInterval says. It does not force them to disk. Used on
// simulated clocks, where analyzers read back what was just written.
func (e *Embedded) Flush() {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if !e.closed {
		vmstorage.DebugFlush()
	}
}

// IsReadOnly reports whether the store refuses writes.
func (e *Embedded) IsReadOnly() bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return !e.closed && e.readOnlyErr() != nil
}

// SizeBytes returns the bytes the data dir occupies on disk.
func (e *Embedded) SizeBytes() int64 {
	var n int64
	filepath.WalkDir(e.opts.DataDir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// Close flushes everything to disk and releases the data dir. It waits for
// in-flight appends and queries, then refuses new ones; it is idempotent.
// The context bounds only the wait for in-flight work.
func (e *Embedded) Close(ctx context.Context) error {
	e.stopOnce.Do(func() { close(e.stopFlusher) })
	select {
	case <-e.flusherDone:
	case <-ctx.Done():
		return fmt.Errorf("cannot close storage at %q: the forced flush did not finish: %w", e.opts.DataDir, ctx.Err())
	}
	done := make(chan struct{})
	go func() {
		e.mu.Lock()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("cannot close storage at %q: in-flight requests did not finish: %w", e.opts.DataDir, ctx.Err())
	}
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	vmselect.Stop()
	vmstorage.Stop()
	var err error
	if e.wal != nil {
		// Stop wrote everything to disk: the WAL holds nothing needed.
		err = e.wal.close(true)
	}
	e.lock.Close()
	return err
}
