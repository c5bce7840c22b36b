package collector

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ballast-io/ballast/models"
)

func TestParseMountsFixture(t *testing.T) {
	f, err := os.Open("testdata/filesystem/mounts")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ms, err := parseMounts(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 18 {
		t.Fatalf("parsed %d mounts, want 18", len(ms))
	}
	got := dataMounts(ms)
	want := []mount{
		{"/dev/sda2", "/", "ext4", false},
		{"/dev/sda1", "/boot/efi", "vfat", false},
		{"/dev/nvme0n1", "/export/nvme0n1", "xfs", false},
		{"/dev/nvme1n1", "/export/nvme1n1", "xfs", true},
		{"/dev/nvme2n1", "/export/nvme2 old", "xfs", false},
		{"/dev/nvme2n1", "/export/nvme2n1", "xfs", false},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("data mounts:\n got %+v\nwant %+v", got, want)
	}
}

func TestParseMountsErrors(t *testing.T) {
	_, err := parseMounts(strings.NewReader("/dev/sda1 / ext4 rw 0 0\n/dev/sdb1 /x\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("err = %v, want one naming line 2", err)
	}
}

func TestUnescapeOctal(t *testing.T) {
	for in, want := range map[string]string{
		`/a\040b`:        "/a b",
		`/tab\011x`:      "/tab\tx",
		`/back\134slash`: `/back\slash`,
		`/plain`:         "/plain",
		`/short\04`:      `/short\04`,
		`/not\089`:       `/not\089`,
	} {
		if got := unescapeOctal(in); got != want {
			t.Errorf("unescapeOctal(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestFilesystemCollectFake runs Collect over the fixture with a statfs
// that knows two of the filesystems and fails on the others.
func TestFilesystemCollectFake(t *testing.T) {
	proc := t.TempDir()
	fsCopyFixture(t, "testdata/filesystem/mounts", filepath.Join(proc, "self/mounts"))
	stats := map[string]fsStat{
		"/host/export/nvme0n1": {Size: 3.84e12, Free: 1e12, Avail: 1e12, Files: 375e6, FilesFree: 374e6},
		"/host/export/nvme1n1": {Size: 3.84e12, Free: 2e12, Avail: 2e12, Files: 375e6, FilesFree: 370e6},
	}
	c := &filesystemCollector{procRoot: proc, rootFS: "/host", log: newOnceLogger(slog.New(slog.DiscardHandler)),
		statfs: func(p string) (fsStat, error) {
			if s, ok := stats[p]; ok {
				return s, nil
			}
			return fsStat{}, errors.New("permission denied")
		}}
	got, err := c.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]float64{}
	for _, s := range got {
		byKey[s.Name+"|"+strings.Join(s.Values, "|")] = s.Value
	}
	for k, want := range map[string]float64{
		models.MetricFilesystemSize + "|nvme0n1|/export/nvme0n1|xfs":      3.84e12,
		models.MetricFilesystemAvail + "|nvme0n1|/export/nvme0n1|xfs":     1e12,
		models.MetricFilesystemFree + "|nvme1n1|/export/nvme1n1|xfs":      2e12,
		models.MetricFilesystemFilesFree + "|nvme1n1|/export/nvme1n1|xfs": 370e6,
		models.MetricFilesystemReadonly + "|nvme1n1|/export/nvme1n1|xfs":  1,
		models.MetricFilesystemReadonly + "|nvme0n1|/export/nvme0n1|xfs":  0,
		models.MetricCollectorDeviceUp + "|filesystem|sda2":               0,
		models.MetricCollectorDeviceUp + "|filesystem|nvme2n1":            0,
	} {
		if v, ok := byKey[k]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", k, v, ok, want)
		}
	}
	if n := len(got); n != 2*6+4 {
		t.Errorf("%d samples, want 16 (6 per readable filesystem, device_up 0 for 4 others)", n)
	}
	for _, s := range got {
		d, ok := models.LookupMetric(s.Name)
		if !ok || len(d.Labels) != len(s.Values) {
			t.Errorf("sample %s%v does not match its descriptor %+v", s.Name, s.Values, d)
		}
	}
}

// TestFilesystemCollectReal statfs's a real temporary directory, listed
// as a mount in a mounts file under a fake /proc (1/mounts: the fallback).
func TestFilesystemCollectReal(t *testing.T) {
	dir := t.TempDir()
	proc := t.TempDir()
	if err := os.MkdirAll(filepath.Join(proc, "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	mp := strings.ReplaceAll(dir, " ", `\040`)
	if err := os.WriteFile(filepath.Join(proc, "1/mounts"), []byte("proc /proc proc rw 0 0\n/dev/testdisk1 "+mp+" ext4 rw,relatime 0 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := newFilesystemCollector(Options{ProcRoot: proc, RootFS: "/"}, newOnceLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	v := map[string]float64{}
	for _, s := range got {
		if want := []string{"testdisk1", dir, "ext4"}; !reflect.DeepEqual(s.Values, want) {
			t.Fatalf("labels %v, want %v", s.Values, want)
		}
		v[s.Name] = s.Value
	}
	size, free, avail := v[models.MetricFilesystemSize], v[models.MetricFilesystemFree], v[models.MetricFilesystemAvail]
	if !(size > 0 && free <= size && avail <= free && avail >= 0) {
		t.Errorf("statfs of %s: size %v free %v avail %v; want 0 <= avail <= free <= size, size > 0", dir, size, free, avail)
	}
	if files, ffree := v[models.MetricFilesystemFiles], v[models.MetricFilesystemFilesFree]; ffree > files {
		t.Errorf("files free %v > files %v", ffree, files)
	}
	// The same numbers as a direct statfs, within what other writers on
	// the machine can change between the two calls.
	st, err := statfs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if d := st.Size - size; d != 0 {
		t.Errorf("size %v, direct statfs %v", size, st.Size)
	}
}

func TestFilesystemNotApplicable(t *testing.T) {
	c, _ := newFilesystemCollector(Options{ProcRoot: t.TempDir()}, newOnceLogger(slog.New(slog.DiscardHandler)))
	if _, err := c.Collect(context.Background()); !errors.Is(err, ErrNotApplicable) {
		t.Errorf("no mounts file: err = %v, want ErrNotApplicable", err)
	}
	proc := t.TempDir()
	os.MkdirAll(filepath.Join(proc, "self"), 0o755)
	os.WriteFile(filepath.Join(proc, "self/mounts"), []byte("proc /proc proc rw 0 0\ntmpfs /run tmpfs rw 0 0\n"), 0o644)
	c, _ = newFilesystemCollector(Options{ProcRoot: proc}, newOnceLogger(slog.New(slog.DiscardHandler)))
	if _, err := c.Collect(context.Background()); !errors.Is(err, ErrNotApplicable) {
		t.Errorf("only pseudo filesystems: err = %v, want ErrNotApplicable", err)
	}
}

func TestFilesystemDefaultForDS(t *testing.T) {
	found := false
	for _, n := range DefaultEnabled("ds") {
		found = found || n == "filesystem"
	}
	if !found {
		t.Errorf("filesystem is not enabled by default for ds: %v", DefaultEnabled("ds"))
	}
}

func fsCopyFixture(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
