package collector

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/ballast-io/ballast/models"
)

// filesystemCollector reports size, free and available bytes and inodes of
// every block-device filesystem mounted on the host: on a data server the
// filesystems it exports from its NVMe drives, which are what fills.
//
// Mounts come from <ProcRoot>/self/mounts, or <ProcRoot>/1/mounts when the
// agent's own mount namespace has none (a container sharing the host's
// PID namespace); each mount point is statfs'd under Options.RootFS, so a
// containerised agent with the host's / at /host reports the host's
// filesystems under their host paths.
type filesystemCollector struct {
	procRoot string
	rootFS   string
	log      *onceLogger
	statfs   func(path string) (fsStat, error)
}

func newFilesystemCollector(opts Options, log *onceLogger) (Collector, error) {
	return &filesystemCollector{procRoot: opts.ProcRoot, rootFS: opts.RootFS, log: log, statfs: statfs}, nil
}

// mount is one line of a mounts file.
type mount struct {
	Source, MountPoint, FSType string
	ReadOnly                   bool
}

// fsStat is what statfs(2) reports, in bytes and inodes.
type fsStat struct {
	Size, Free, Avail float64
	Files, FilesFree  float64
}

func statfs(path string) (fsStat, error) {
	var s unix.Statfs_t
	if err := unix.Statfs(path, &s); err != nil {
		return fsStat{}, fmt.Errorf("cannot statfs %q: %w", path, err)
	}
	// f_blocks, f_bfree and f_bavail count fragments of f_frsize bytes
	// (statvfs(3)); Linux leaves f_frsize 0 on a few old filesystems.
	unit := float64(s.Frsize)
	if unit == 0 {
		unit = float64(s.Bsize)
	}
	return fsStat{Size: float64(s.Blocks) * unit, Free: float64(s.Bfree) * unit, Avail: float64(s.Bavail) * unit,
		Files: float64(s.Files), FilesFree: float64(s.Ffree)}, nil
}

func (c *filesystemCollector) Collect(ctx context.Context) ([]Sample, error) {
	ms, err := c.readMounts()
	if err != nil {
		return nil, err
	}
	ms = dataMounts(ms)
	if len(ms) == 0 {
		return nil, fmt.Errorf("no block-device filesystem is mounted: %w", ErrNotApplicable)
	}
	var out []Sample
	for _, m := range ms {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		dev := deviceName(m.Source)
		st, err := c.statfs(filepath.Join(c.rootOr(), m.MountPoint))
		if err != nil {
			c.log.warnOnce("fs:"+m.MountPoint, err.Error(), "cannot read filesystem", "mountpoint", m.MountPoint)
			out = append(out, Sample{models.MetricCollectorDeviceUp, []string{"filesystem", dev}, 0})
			continue
		}
		c.log.clear("fs:" + m.MountPoint)
		out = append(out, filesystemSamples(dev, m, st)...)
	}
	return out, nil
}

func (c *filesystemCollector) rootOr() string {
	if c.rootFS == "" {
		return "/"
	}
	return c.rootFS
}

// readMounts reads <proc>/self/mounts, falling back to <proc>/1/mounts.
func (c *filesystemCollector) readMounts() ([]mount, error) {
	var errs []error
	for _, p := range []string{"self/mounts", "1/mounts"} {
		path := filepath.Join(c.procRoot, p)
		f, err := os.Open(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("cannot open mounts %q: %w", path, err))
			continue
		}
		ms, err := parseMounts(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("cannot parse mounts %q: %w", path, err)
		}
		return ms, nil
	}
	err := errors.Join(errs...)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %w", ErrNotApplicable, err)
	}
	return nil, err
}

// parseMounts parses a mounts file (/proc/self/mounts, fstab(5) format:
// source, mount point, type, options, dump, pass; spaces, tabs, newlines
// and backslashes in the first two fields written as octal escapes).
// Hand-written because github.com/prometheus/procfs parses mountinfo
// only, and the mounts format is six fields and one escape rule.
func parseMounts(r io.Reader) ([]mount, error) {
	var out []mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 {
			return nil, fmt.Errorf("line %d: %d fields, want at least 4 (source, mount point, type, options)", n, len(f))
		}
		m := mount{Source: unescapeOctal(f[0]), MountPoint: unescapeOctal(f[1]), FSType: f[2]}
		for _, o := range strings.Split(f[3], ",") {
			if o == "ro" {
				m.ReadOnly = true
			}
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// unescapeOctal undoes the kernel's \ooo escapes (mangle() in
// fs/proc_namespace.c escapes space, tab, newline and backslash).
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// pseudoFSTypes are filesystems with no capacity to forecast (kernel
// interfaces, memory-backed, read-only images) or whose statfs can block
// on a network (nfs, cifs, ceph, fuse): node_exporter's default
// fs-types-exclude list plus the network filesystems and tmpfs.
var pseudoFSTypes = map[string]bool{
	"autofs": true, "binfmt_misc": true, "bpf": true, "cgroup": true, "cgroup2": true, "configfs": true,
	"debugfs": true, "devpts": true, "devtmpfs": true, "fusectl": true, "hugetlbfs": true, "iso9660": true,
	"mqueue": true, "nsfs": true, "overlay": true, "proc": true, "procfs": true, "pstore": true,
	"rpc_pipefs": true, "securityfs": true, "selinuxfs": true, "squashfs": true, "erofs": true, "sysfs": true,
	"tracefs": true, "tmpfs": true, "ramfs": true, "efivarfs": true, "nfsd": true,
	"nfs": true, "nfs4": true, "cifs": true, "smb3": true, "ceph": true, "fuse": true, "9p": true,
}

// dataMounts keeps, of the last filesystem mounted on each mount point
// (it hides the ones below it), those backed by a block device (source
// under /dev/, type neither pseudo nor networked), sorted by mount point.
func dataMounts(ms []mount) []mount {
	by := map[string]mount{}
	for _, m := range ms {
		by[m.MountPoint] = m
	}
	out := make([]mount, 0, len(by))
	for _, m := range by {
		if pseudoFSTypes[m.FSType] || strings.HasPrefix(m.FSType, "fuse.") || !strings.HasPrefix(m.Source, "/dev/") {
			continue
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].MountPoint < out[j].MountPoint })
	return out
}

// deviceName is the block device of a mount source without /dev/
// ("/dev/nvme0n1" → "nvme0n1", "/dev/mapper/vg-x" → "mapper/vg-x"), so that
// it joins the diskstats and drive series' device label.
func deviceName(source string) string {
	return strings.TrimPrefix(source, "/dev/")
}

// filesystemSamples turns one statfs result into samples.
func filesystemSamples(dev string, m mount, st fsStat) []Sample {
	l := []string{dev, m.MountPoint, m.FSType}
	ro := 0.0
	if m.ReadOnly {
		ro = 1
	}
	return []Sample{
		{models.MetricFilesystemSize, l, st.Size},
		{models.MetricFilesystemFree, l, st.Free},
		{models.MetricFilesystemAvail, l, st.Avail},
		{models.MetricFilesystemFiles, l, st.Files},
		{models.MetricFilesystemFilesFree, l, st.FilesFree},
		{models.MetricFilesystemReadonly, l, ro},
	}
}
