package collector

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"

	"github.com/ballast-io/ballast/models"
)

// readaheadCollector reads the read-ahead windows the readahead actuator
// tunes: /sys/block/<dev>/queue/read_ahead_kb for block devices and
// /sys/class/bdi/<major:minor>/read_ahead_kb for the NFS mounts listed in
// /proc/self/mountinfo.
type readaheadCollector struct {
	proc    procfs.FS
	sysRoot string
	log     *onceLogger
}

func newReadaheadCollector(opts Options, log *onceLogger) (Collector, error) {
	p, err := procfs.NewFS(opts.ProcRoot)
	if err != nil {
		return nil, fmt.Errorf("cannot open procfs %q: %w", opts.ProcRoot, err)
	}
	return &readaheadCollector{proc: p, sysRoot: opts.SysRoot, log: log}, nil
}

func (c *readaheadCollector) Collect(context.Context) ([]Sample, error) {
	var out []Sample
	var errs []error
	devs, err := os.ReadDir(filepath.Join(c.sysRoot, "block"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, fmt.Errorf("cannot list block devices: %w", err))
	}
	for _, d := range devs {
		kb, err := readKB(filepath.Join(c.sysRoot, "block", d.Name(), "queue/read_ahead_kb"))
		if err != nil {
			c.log.warnOnce("block:"+d.Name(), err.Error(), "cannot read read-ahead", "device", d.Name())
			continue
		}
		out = append(out, Sample{models.MetricBlockReadahead, []string{d.Name()}, kb * 1024})
	}
	mounts, err := c.proc.GetMounts()
	if err != nil {
		errs = append(errs, fmt.Errorf("cannot read mountinfo: %w", err))
	}
	for _, m := range nfsMounts(mounts) {
		kb, err := readKB(filepath.Join(c.sysRoot, "class/bdi", m.MajorMinorVer, "read_ahead_kb"))
		if err != nil {
			c.log.warnOnce("bdi:"+m.MountPoint, err.Error(), "cannot read NFS read-ahead", "mountpoint", m.MountPoint)
			continue
		}
		out = append(out, Sample{models.MetricNFSReadahead, []string{m.MountPoint, m.Source, m.MajorMinorVer}, kb * 1024})
	}
	return out, errors.Join(errs...)
}

// nfsMounts keeps the NFS mounts of mountinfo, one per mount point (the
// last one mounted wins, as in the kernel's view), sorted by mount point.
func nfsMounts(ms []*procfs.MountInfo) []*procfs.MountInfo {
	by := map[string]*procfs.MountInfo{}
	for _, m := range ms {
		if m.FSType == "nfs" || m.FSType == "nfs4" {
			by[m.MountPoint] = m
		}
	}
	out := make([]*procfs.MountInfo, 0, len(by))
	for _, m := range by {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].MountPoint < out[j].MountPoint })
	return out
}

func readKB(path string) (float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("cannot read %q: %w", path, err)
	}
	return parseKB(b, path)
}

// parseKB parses a sysfs read_ahead_kb file: one decimal integer.
func parseKB(b []byte, path string) (float64, error) {
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cannot parse %q: %w", path, err)
	}
	return float64(v), nil
}
