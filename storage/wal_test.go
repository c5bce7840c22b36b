package storage

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/prompb"
	vmstorage_lib "github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"
	"github.com/VictoriaMetrics/metrics"
)

func walRows(name string, n int, ts int64) []vmstorage_lib.MetricRow {
	rows := make([]vmstorage_lib.MetricRow, n)
	for i := range rows {
		rows[i] = vmstorage_lib.MetricRow{
			MetricNameRaw: vmstorage_lib.MarshalMetricNameRaw(nil, []prompb.Label{{Name: "__name__", Value: name}}),
			Timestamp:     ts + int64(i),
			Value:         float64(i),
		}
	}
	return rows
}

func walFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+walExt))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestWALGroupCommitSealAndRemove: concurrent appends are acknowledged
// after their group's fsync; a sealed segment is removed only after two
// completed flushes; what is left is replayed row for row.
func TestWALGroupCommitSealAndRemove(t *testing.T) {
	dir := t.TempDir()
	set := metrics.NewSet()
	w, err := openWAL(dir, set)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				g, seg, err := w.append(walRows("wal_a", 10, int64(i*1000+j*10)))
				if err != nil {
					t.Error(err)
					return
				}
				if err := g.wait(); err != nil {
					t.Error(err)
				}
				seg.writers.Done()
			}
		}()
	}
	wg.Wait()
	if f := w.fsyncs.Get(); f == 0 || f > 320 {
		t.Errorf("fsyncs: got %d for 320 appends; want between 1 and 320", f)
	}
	segs, err := w.seal()
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) != 1 || len(walFiles(t, dir)) != 2 {
		t.Fatalf("after seal: %d sealed, files %v; want 1 sealed and 2 files", len(segs), walFiles(t, dir))
	}
	// The sealed segment holds every acknowledged row.
	n, discarded, err := replaySegment(segs[0].path, func([]vmstorage_lib.MetricRow) error { return nil })
	if err != nil || n != 3200 || discarded != 0 {
		t.Fatalf("replay: %d rows, %d bytes discarded, %v; want 3200, 0, nil", n, discarded, err)
	}
	if err := w.flushed(segs); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(segs[0].path); err != nil {
		t.Fatalf("segment removed after one flush; want it kept until the second: %v", err)
	}
	if err := w.flushed(segs); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(segs[0].path); !os.IsNotExist(err) {
		t.Fatalf("segment still there after two flushes: %v", err)
	}
	// Rows of the current segment survive a close without removal and
	// come back as a sealed segment to replay.
	g, seg, _ := w.append(walRows("wal_b", 5, 1))
	if err := g.wait(); err != nil {
		t.Fatal(err)
	}
	seg.writers.Done()
	if err := w.close(false); err != nil {
		t.Fatal(err)
	}
	w2, err := openWAL(dir, metrics.NewSet())
	if err != nil {
		t.Fatal(err)
	}
	defer w2.close(true)
	if len(w2.sealed) != 1 {
		t.Fatalf("reopened: %d segments to replay; want 1", len(w2.sealed))
	}
	var names []string
	n, _, err = replaySegment(w2.sealed[0].path, func(mrs []vmstorage_lib.MetricRow) error {
		var mn vmstorage_lib.MetricName
		for _, r := range mrs {
			if err := mn.UnmarshalRaw(r.MetricNameRaw); err != nil {
				return err
			}
			names = append(names, string(mn.MetricGroup))
		}
		return nil
	})
	if err != nil || n != 5 || names[0] != "wal_b" {
		t.Fatalf("replay after reopen: %d rows %v, %v; want 5 rows of wal_b", n, names, err)
	}
}

// TestWALReplayStopsAtTornRecord: a record cut short by a crash (never
// acknowledged) and anything after it are discarded, not replayed as junk.
func TestWALReplayStopsAtTornRecord(t *testing.T) {
	dir := t.TempDir()
	w, err := openWAL(dir, metrics.NewSet())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		g, seg, _ := w.append(walRows("torn", 4, int64(i*10)))
		if err := g.wait(); err != nil {
			t.Fatal(err)
		}
		seg.writers.Done()
	}
	path := w.cur.path
	w.close(false)
	fi, _ := os.Stat(path)
	for _, cut := range []int64{1, 9, 20} {
		if err := os.Truncate(path, fi.Size()-cut); err != nil {
			t.Fatal(err)
		}
		n, discarded, err := replaySegment(path, func([]vmstorage_lib.MetricRow) error { return nil })
		if err != nil || n != 8 || discarded <= 0 {
			t.Errorf("cut %d bytes: %d rows, %d discarded, %v; want the 8 rows of the two whole records", cut, n, discarded, err)
		}
		fi, _ = os.Stat(path)
	}
	// A flipped byte in the last whole record fails its CRC.
	_, discarded, _ := replaySegment(path, func([]vmstorage_lib.MetricRow) error { return nil })
	os.Truncate(path, fi.Size()-discarded)
	b, _ := os.ReadFile(path)
	b[len(b)-1] ^= 0xff
	os.WriteFile(path, b, 0o644)
	if n, _, _ := replaySegment(path, func([]vmstorage_lib.MetricRow) error { return nil }); n != 4 {
		t.Errorf("corrupt last record: %d rows replayed; want 4", n)
	}
}
