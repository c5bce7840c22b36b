//go:build linux

package readahead_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Read-ahead values the curve is measured at, KiB: 128 is the Linux
// default since 5.4, 15360 is 15 × rsize for a 1 MiB rsize (nfsrahead).
var benchRA = []int64{128, 512, 2048, 8192, 15360}

const (
	benchFileBytes = 256 << 20
	benchReqBytes  = 64 << 10 // random pread size (the twin's inference reads)
	benchRandReads = 1024
	benchMmapPages = 2048 // random 4 KiB page touches of a mapping
)

// BenchmarkReadAheadCurve (issue 14, acceptance 2) measures what the
// read-ahead policy relies on, on a real block-backed filesystem: an ext4
// on a loop device over a file of the host's disk (root only). For each
// read_ahead_kb of benchRA (in a new order every round) it reads a 256 MiB file sequentially (64 KiB
// reads), with random 64 KiB preads, and through a mapping touching random
// 4 KiB pages, with the page cache of the file and of the loop's backing
// image dropped (posix_fadvise DONTNEED) before every run. Reported:
// per value MB/s of application bytes (MB/s@KIB), and dev/app@KIB = bytes the loop device read ÷
// bytes the application asked for (read-ahead waste).
func BenchmarkReadAheadCurve(b *testing.B) {
	l := newLoopFS(b, benchFileBytes+64<<20)
	path := filepath.Join(l.mnt, "data")
	writeBenchFile(b, path)
	img := filepath.Join(filepath.Dir(l.mnt), "fs.img")
	for _, pat := range []string{"sequential", "random-pread", "random-mmap"} {
		b.Run(pat, func(b *testing.B) {
			app := map[int64]int64{}
			dev := map[int64]int64{}
			el := map[int64]time.Duration{}
			ios := map[int64]int64{}
			r := rand.New(rand.NewPCG(3, 4))
			for i := 0; i < b.N; i++ {
				// every value once per round, in a new order each round,
				// so that the load of a shared machine falls on all alike
				for _, j := range r.Perm(len(benchRA)) {
					kb := benchRA[j]
					if err := os.WriteFile(bdiPath(l.bdi), []byte(strconv.FormatInt(kb, 10)), 0); err != nil {
						b.Fatal(err)
					}
					if got := readSysKB(b, l.bdi); got != kb {
						b.Fatalf("read_ahead_kb reads %d after writing %d", got, kb)
					}
					dropCache(b, path)
					dropCache(b, img)
					d0, n0 := devReads(b, l.dev)
					t0 := time.Now()
					app[kb] += readPattern(b, path, pat, uint64(i))
					el[kb] += time.Since(t0)
					d1, n1 := devReads(b, l.dev)
					dev[kb] += d1 - d0
					ios[kb] += n1 - n0
				}
			}
			for _, kb := range benchRA {
				b.ReportMetric(float64(app[kb])/el[kb].Seconds()/1e6, fmt.Sprintf("MB/s@%d", kb))
			}
			for _, kb := range benchRA {
				b.ReportMetric(float64(dev[kb])/float64(app[kb]), fmt.Sprintf("dev/app@%d", kb))
			}
			for _, kb := range benchRA {
				b.ReportMetric(float64(dev[kb])/1024/float64(max(1, ios[kb])), fmt.Sprintf("KiB/io@%d", kb))
			}
		})
	}
}

func writeBenchFile(b *testing.B, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	for n := 0; n < benchFileBytes; n += len(buf) {
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	f.Close()
}

// dropCache evicts path's pages from the page cache (clean pages only:
// the file was synced).
func dropCache(b *testing.B, path string) {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		b.Fatal(err)
	}
}

// devReads is the bytes (sectors × 512) and the read I/Os the loop device
// completed (/sys/block/loopN/stat fields 3 and 1).
func devReads(b *testing.B, dev string) (bytes, ios int64) {
	s, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(dev), "stat"))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(s))
	v, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	return v * 512, n
}

var sink byte

// readPattern reads path as pat says and returns the bytes it asked for.
func readPattern(b *testing.B, path, pat string, seed uint64) int64 {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	r := rand.New(rand.NewPCG(seed, 7))
	var n int64
	switch pat {
	case "sequential":
		buf := make([]byte, benchReqBytes)
		for {
			k, err := f.Read(buf)
			n += int64(k)
			if err != nil {
				break
			}
		}
	case "random-pread":
		buf := make([]byte, benchReqBytes)
		perm := r.Perm(benchFileBytes / benchReqBytes) // no block read twice
		for i := 0; i < benchRandReads; i++ {
			off := int64(perm[i]) * benchReqBytes
			k, err := f.ReadAt(buf, off)
			if err != nil {
				b.Fatal(err)
			}
			n += int64(k)
		}
	case "random-mmap":
		m, err := unix.Mmap(int(f.Fd()), 0, benchFileBytes, unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			b.Fatal(err)
		}
		perm := r.Perm(benchFileBytes / 4096)
		for i := 0; i < benchMmapPages; i++ {
			sink += m[perm[i]*4096] // a page fault per page not yet cached
			n += 4096
		}
		unix.Munmap(m)
	}
	return n
}
