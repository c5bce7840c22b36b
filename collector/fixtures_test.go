package collector

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files and docs/metrics.md")

// fixtureCase is one fixture and how the collectors read it.
type fixtureCase struct {
	Fixture   string // path under testdata/fixtures
	Collector string
	Golden    string // path under testdata/golden
	Read      func(t *testing.T) ([]Sample, error)
}

func readFixture(t testing.TB, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata/fixtures", rel))
	if err != nil {
		t.Fatalf("cannot read fixture: %v", err)
	}
	return b
}

// fakeRoot writes files (path relative to the root → content) into a new
// temporary directory and returns it. A value of "->target" makes a
// symlink.
func fakeRoot(t *testing.T, files map[string]string) string {
	return fakeRootTB(t, files)
}

func fakeRootTB(t testing.TB, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(c, "->"); ok {
			if err := os.Symlink(target, full); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// collectWith builds collector name over opts and runs it once.
func collectWith(t *testing.T, name string, opts Options) ([]Sample, error) {
	t.Helper()
	r, err := lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	opts = opts.withDefaults()
	c, err := r.new(opts, newOnceLogger(opts.Logger))
	if err != nil {
		t.Fatalf("cannot build %s: %v", name, err)
	}
	return c.Collect(context.Background())
}

func fixtureFiles(t *testing.T, dir, suffix string) []string {
	t.Helper()
	es, err := os.ReadDir(filepath.Join("testdata/fixtures", dir))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		if strings.HasSuffix(e.Name(), suffix) {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// fixtureCases lists every fixture under testdata/fixtures with the reader
// that turns it into samples. TestFixturesCovered fails when a fixture is
// left out.
func fixtureCases(t *testing.T) []fixtureCase {
	var cs []fixtureCase
	add := func(fix, coll string, read func(t *testing.T) ([]Sample, error)) {
		cs = append(cs, fixtureCase{fix, coll, strings.TrimSuffix(fix, filepath.Ext(fix)) + ".prom", read})
	}
	for _, f := range fixtureFiles(t, "smartctl", ".json") {
		fix := "smartctl/" + f
		add(fix, "smartctl", func(t *testing.T) ([]Sample, error) {
			r, err := parseSmartctlJSON(readFixture(t, fix))
			return r.Samples, err
		})
	}
	for _, f := range fixtureFiles(t, "nvme-cli", ".json") {
		fix := "nvme-cli/" + f
		add(fix, "smartctl", func(t *testing.T) ([]Sample, error) {
			r, err := ParseDriveReport(readFixture(t, fix), "nvme0")
			return r.Samples, err
		})
	}
	for _, f := range fixtureFiles(t, "procfs/diskstats", "") {
		fix := "procfs/diskstats/" + f
		files := map[string]string{"diskstats": string(readFixture(t, fix))}
		if strings.HasSuffix(f, "pressure_io") {
			files = map[string]string{"diskstats": "", "pressure/io": files["diskstats"]}
		}
		add(fix, "diskstats", func(t *testing.T) ([]Sample, error) {
			return collectWith(t, "diskstats", Options{ProcRoot: fakeRoot(t, files), SysRoot: t.TempDir()})
		})
	}
	for _, f := range fixtureFiles(t, "procfs/mountstats", "") {
		fix := "procfs/mountstats/" + f
		if strings.HasSuffix(f, "mountinfo") {
			add(fix, "readahead", func(t *testing.T) ([]Sample, error) {
				proc := fakeRoot(t, map[string]string{"self": "->1", "1/mountinfo": string(readFixture(t, fix))})
				sys := fakeRoot(t, map[string]string{
					"block/nvme0n1/queue/read_ahead_kb": "128\n",
					"block/sda/queue/read_ahead_kb":     "4096\n",
					"class/bdi/0:42/read_ahead_kb":      "15360\n",
					"class/bdi/0:44/read_ahead_kb":      "128\n",
				})
				return collectWith(t, "readahead", Options{ProcRoot: proc, SysRoot: sys})
			})
			continue
		}
		add(fix, "mountstats", func(t *testing.T) ([]Sample, error) {
			proc := fakeRoot(t, map[string]string{"self": "->1", "1/mountstats": string(readFixture(t, fix))})
			return collectWith(t, "mountstats", Options{ProcRoot: proc})
		})
	}
	for _, f := range fixtureFiles(t, "procfs/nfsd", "") {
		fix := "procfs/nfsd/" + f
		switch {
		case strings.HasSuffix(f, "_nfs_client"):
			add(fix, "mountstats", func(t *testing.T) ([]Sample, error) { return parseNFSClientRPC(readFixture(t, fix)) })
		case strings.HasSuffix(f, "_pool_stats"):
			add(fix, "nfsd", func(t *testing.T) ([]Sample, error) { return parsePoolStats(readFixture(t, fix)) })
		default:
			add(fix, "nfsd", func(t *testing.T) ([]Sample, error) {
				return collectWith(t, "nfsd", Options{ProcRoot: fakeRoot(t, map[string]string{"net/rpc/nfsd": string(readFixture(t, fix))})})
			})
		}
	}
	for _, f := range fixtureFiles(t, "procfs/netdev", "") {
		fix := "procfs/netdev/" + f
		add(fix, "netdev", func(t *testing.T) ([]Sample, error) {
			// The link speeds come from the same procfs fixture set
			// (testdata/netdev/sys), never the test host's /sys.
			proc := fakeRoot(t, map[string]string{"net/dev": string(readFixture(t, fix))})
			return collectWith(t, "netdev", Options{ProcRoot: proc, SysRoot: "testdata/netdev/sys"})
		})
	}
	for _, f := range fixtureFiles(t, "gpu/dcgm-exporter", ".prom") {
		fix := "gpu/dcgm-exporter/" + f
		add(fix, "dcgm", func(t *testing.T) ([]Sample, error) {
			rs, err := parseDCGMExporter(readFixture(t, fix))
			return gpuSamples(rs), err
		})
	}
	return cs
}

// checkGolden compares got with testdata/golden/name, or rewrites it.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata/golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("cannot read golden file (run go test -update): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: output differs from golden file; run go test ./collector -update and review the diff\n%s", name, firstDiff(string(got), string(want)))
	}
}

func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return "line " + strconv.Itoa(i+1) + ":\n got  " + gl + "\n want " + wl
		}
	}
	return ""
}
