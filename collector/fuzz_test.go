package collector

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/ballast-io/ballast/models"
)

// Fuzz targets for every parser of the agents' outside bytes: files under
// /proc and /sys, smartctl and nvme-cli JSON, raw NVMe log pages and
// dcgm-exporter pages. Each is seeded with the real fixtures under
// testdata/fixtures, so `go test` runs those seeds (and any crash kept in
// testdata/fuzz) every time; `make test-long` fuzzes each for 10 M
// executions. Whatever the input, a parser must not panic, and every
// sample it returns names a known metric with its label values.

// seedFixtures adds every file of testdata/fixtures/dir to f's corpus.
func seedFixtures(f *testing.F, dir string) {
	f.Helper()
	es, err := os.ReadDir(filepath.Join("testdata/fixtures", dir))
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range es {
		if b, err := os.ReadFile(filepath.Join("testdata/fixtures", dir, e.Name())); err == nil && !e.IsDir() {
			f.Add(b)
		}
	}
}

// fuzzTree builds a fake /proc or /sys tree once per fuzzing process
// (each worker runs its inputs one after another) and returns its root and
// a function that overwrites one of its files with an input: a tree per
// input (fakeRoot) spends most of each execution creating and removing
// directories.
func fuzzTree(f *testing.F, files map[string]string) (string, func(*testing.T, string, []byte)) {
	f.Helper()
	root := fakeRootTB(f, files)
	return root, func(t *testing.T, p string, b []byte) {
		if err := os.WriteFile(filepath.Join(root, p), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// checkSamples fails t for a sample of an unknown metric or with more
// label values than its metric has labels.
func checkSamples(t *testing.T, ss []Sample) {
	t.Helper()
	for _, s := range ss {
		d, ok := models.LookupMetric(s.Name)
		if !ok {
			t.Fatalf("sample of unknown metric %q", s.Name)
		}
		if len(s.Values) > len(d.Labels) {
			t.Fatalf("sample %s has %d label values; its metric has %d labels", s.Name, len(s.Values), len(d.Labels))
		}
	}
}

func FuzzParseSmartctlJSON(f *testing.F) {
	seedFixtures(f, "smartctl")
	seedFixtures(f, "nvme-cli")
	f.Add([]byte(`{"device":{"type":"nvme"},"nvme_smart_health_information_log":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseDriveReport(b, "nvme0")
		if err == nil {
			checkSamples(t, r.Samples)
		}
	})
}

func FuzzParseSmartctlScan(f *testing.F) {
	f.Add([]byte(`{"devices":[{"name":"/dev/nvme0","info_name":"/dev/nvme0","type":"nvme","protocol":"NVMe"},{"name":"/dev/sda","type":"sat"}]}`))
	f.Add([]byte(`{"devices":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) { parseSmartctlScan(b) })
}

func FuzzParseNVMeCLISmartLog(f *testing.F) {
	seedFixtures(f, "nvme-cli")
	f.Fuzz(func(t *testing.T, b []byte) { parseNVMeCLISmartLog(b) })
}

func FuzzDecodeNVMeSMARTLog(f *testing.F) {
	f.Add(specPage())
	f.Add(make([]byte, 512))
	f.Add(bytes.Repeat([]byte{0xff}, 512))
	f.Fuzz(func(t *testing.T, b []byte) { decodeNVMeSMARTLog(b) })
}

func FuzzParseDCGMExporter(f *testing.F) {
	seedFixtures(f, "gpu/dcgm-exporter")
	// The 49-byte page that crashed `ballast client` (issue 10).
	f.Add([]byte("#HELP A000000000000000000000000000000 000000000\n{}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		rs, err := parseDCGMExporter(b)
		if err == nil {
			checkSamples(t, gpuSamples(rs))
		}
	})
}

func FuzzParseNFSD(f *testing.F) {
	for _, n := range []string{"node-exporter_nfsd", "prometheus-procfs_nfsd", "pcp_nfsrpc-root-001_nfsd", "pcp_nfsrpc-root-002_nfsd"} {
		b, err := os.ReadFile(filepath.Join("testdata/fixtures/procfs/nfsd", n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if ss, err := parseNFSD(b); err == nil {
			checkSamples(t, ss)
		}
	})
}

func FuzzParsePoolStats(f *testing.F) {
	b, err := os.ReadFile("testdata/fixtures/procfs/nfsd/pcp_nfsrpc-root-002_pool_stats")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		if ss, err := parsePoolStats(b); err == nil {
			checkSamples(t, ss)
		}
	})
}

func FuzzParseNFSClientRPC(f *testing.F) {
	for _, n := range []string{"node-exporter_nfs_client", "prometheus-procfs_nfs_client", "pcp_nfsrpc-root-001_nfs_client", "pcp_nfsrpc-root-002_nfs_client"} {
		b, err := os.ReadFile(filepath.Join("testdata/fixtures/procfs/nfsd", n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if ss, err := parseNFSClientRPC(b); err == nil {
			checkSamples(t, ss)
		}
	})
}

// FuzzMountstats runs the mountstats collector (procfs' parser, then
// ballast's pNFS parse of the same file) over a fuzzed /proc/self/mountstats.
func FuzzMountstats(f *testing.F) {
	seedFixtures(f, "procfs/mountstats")
	proc, write := fuzzTree(f, map[string]string{"self": "->1", "1/mountstats": ""})
	f.Fuzz(func(t *testing.T, b []byte) {
		write(t, "1/mountstats", b)
		if ss, err := collectWith(t, "mountstats", Options{ProcRoot: proc}); err == nil {
			checkSamples(t, ss)
		}
		parsePNFS(b)
	})
}

// FuzzDiskstats runs the diskstats collector over a fuzzed /proc/diskstats
// and the same bytes as /proc/pressure/io.
func FuzzDiskstats(f *testing.F) {
	seedFixtures(f, "procfs/diskstats")
	proc, write := fuzzTree(f, map[string]string{"diskstats": "", "pressure/io": ""})
	sys := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		write(t, "diskstats", b)
		write(t, "pressure/io", b)
		if ss, err := collectWith(t, "diskstats", Options{ProcRoot: proc, SysRoot: sys}); err == nil {
			checkSamples(t, ss)
		}
	})
}

func FuzzNetdev(f *testing.F) {
	seedFixtures(f, "procfs/netdev")
	proc, write := fuzzTree(f, map[string]string{"net/dev": ""})
	f.Fuzz(func(t *testing.T, b []byte) {
		write(t, "net/dev", b)
		if ss, err := collectWith(t, "netdev", Options{ProcRoot: proc, SysRoot: proc}); err == nil {
			checkSamples(t, ss)
		}
	})
}

// FuzzReadahead runs the readahead collector over a fuzzed
// /proc/self/mountinfo and the same bytes as a read_ahead_kb file.
func FuzzReadahead(f *testing.F) {
	b, err := os.ReadFile("testdata/fixtures/procfs/mountstats/prometheus-procfs_mountinfo")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b, []byte("128\n"))
	f.Add([]byte("1 0 0:42 / /mnt rw - nfs4 srv:/ rw\n"), []byte("-1\n"))
	proc, writeProc := fuzzTree(f, map[string]string{"self": "->1", "1/mountinfo": ""})
	sys, writeSys := fuzzTree(f, map[string]string{"class/bdi/0:42/read_ahead_kb": "", "block/sda/queue/read_ahead_kb": ""})
	f.Fuzz(func(t *testing.T, mountinfo, kb []byte) {
		parseKB(kb, "read_ahead_kb")
		writeProc(t, "1/mountinfo", mountinfo)
		writeSys(t, "class/bdi/0:42/read_ahead_kb", kb)
		writeSys(t, "block/sda/queue/read_ahead_kb", kb)
		if ss, err := collectWith(t, "readahead", Options{ProcRoot: proc, SysRoot: sys}); err == nil {
			checkSamples(t, ss)
		}
	})
}

func FuzzParseMounts(f *testing.F) {
	es, _ := os.ReadDir("testdata/filesystem")
	for _, e := range es {
		if b, err := os.ReadFile(filepath.Join("testdata/filesystem", e.Name())); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("/dev/sda1 / ext4 rw 0 0\n/dev/nvme0n1 /export/a\\040b xfs rw 0 0\n"))
	f.Fuzz(func(t *testing.T, b []byte) { parseMounts(bytes.NewReader(b)) })
}
