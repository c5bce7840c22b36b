package collector

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
	"github.com/prometheus/procfs/blockdevice"
	"github.com/prometheus/procfs/nfs"

	"github.com/ballast-io/ballast/models"
)

// notApplicableIfMissing turns "file does not exist" into ErrNotApplicable:
// a kernel without nfsd or PSI is not a failure of the collector.
func notApplicableIfMissing(err error, what string) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("cannot read %s: %w (%v)", what, ErrNotApplicable, err)
	}
	return fmt.Errorf("cannot read %s: %w", what, err)
}

func f64(v uint64) float64 { return float64(v) }

// ---- diskstats ----

type diskstatsCollector struct {
	block blockdevice.FS
	proc  procfs.FS
}

func newDiskstatsCollector(opts Options, _ *onceLogger) (Collector, error) {
	b, err := blockdevice.NewFS(opts.ProcRoot, opts.SysRoot)
	if err != nil {
		return nil, fmt.Errorf("cannot open block device roots %q, %q: %w", opts.ProcRoot, opts.SysRoot, err)
	}
	p, err := procfs.NewFS(opts.ProcRoot)
	if err != nil {
		return nil, fmt.Errorf("cannot open procfs %q: %w", opts.ProcRoot, err)
	}
	return &diskstatsCollector{block: b, proc: p}, nil
}

func (c *diskstatsCollector) Collect(context.Context) ([]Sample, error) {
	ds, err := c.block.ProcDiskstats()
	if err != nil {
		return nil, notApplicableIfMissing(err, "diskstats")
	}
	out := diskstatsSamples(ds)
	// /proc/pressure/io exists only with CONFIG_PSI; its absence is normal.
	if psi, err := c.proc.PSIStatsForResource("io"); err == nil {
		out = append(out, psiSamples(psi)...)
	}
	return out, nil
}

// diskstatsSamples maps parsed /proc/diskstats rows to samples. Rows of
// 14 fields (kernels before 4.18) lack discard stats, rows of 18 fields
// (before 5.5) lack flush stats; those series are omitted rather than
// reported as zero. Ticks are milliseconds, sectors 512 bytes whatever the
// device's sector size (the kernel's diskstats unit).
func diskstatsSamples(ds []blockdevice.Diskstats) []Sample {
	const ms, sector = 0.001, 512.0
	out := make([]Sample, 0, 17*len(ds))
	for _, d := range ds {
		dev := []string{d.DeviceName}
		add := func(name string, v float64) { out = append(out, Sample{name, dev, v}) }
		add(models.MetricDiskReads, f64(d.ReadIOs))
		add(models.MetricDiskReadsMerged, f64(d.ReadMerges))
		add(models.MetricDiskReadBytes, f64(d.ReadSectors)*sector)
		add(models.MetricDiskReadTime, f64(d.ReadTicks)*ms)
		add(models.MetricDiskWrites, f64(d.WriteIOs))
		add(models.MetricDiskWritesMerged, f64(d.WriteMerges))
		add(models.MetricDiskWrittenBytes, f64(d.WriteSectors)*sector)
		add(models.MetricDiskWriteTime, f64(d.WriteTicks)*ms)
		add(models.MetricDiskIOInFlight, f64(d.IOsInProgress))
		add(models.MetricDiskIOTime, f64(d.IOsTotalTicks)*ms)
		add(models.MetricDiskIOTimeWeighted, f64(d.WeightedIOTicks)*ms)
		if d.IoStatsCount >= 18 {
			add(models.MetricDiskDiscards, f64(d.DiscardIOs))
			add(models.MetricDiskDiscardsMerged, f64(d.DiscardMerges))
			add(models.MetricDiskDiscardedBytes, f64(d.DiscardSectors)*sector)
			add(models.MetricDiskDiscardTime, f64(d.DiscardTicks)*ms)
		}
		if d.IoStatsCount >= 20 {
			add(models.MetricDiskFlushes, f64(d.FlushRequestsCompleted))
			add(models.MetricDiskFlushTime, f64(d.TimeSpentFlushing)*ms)
		}
	}
	return out
}

// psiSamples maps /proc/pressure/io; totals are microseconds.
func psiSamples(p procfs.PSIStats) []Sample {
	var out []Sample
	if p.Some != nil {
		out = append(out, Sample{models.MetricIOPressureStalled, []string{"some"}, f64(p.Some.Total) / 1e6})
	}
	if p.Full != nil {
		out = append(out, Sample{models.MetricIOPressureStalled, []string{"full"}, f64(p.Full.Total) / 1e6})
	}
	return out
}

// ---- netdev ----

type netdevCollector struct {
	proc procfs.FS
	// netClass is SysRoot/class/net, where each interface's speed is.
	netClass string
}

func newNetdevCollector(opts Options, _ *onceLogger) (Collector, error) {
	p, err := procfs.NewFS(opts.ProcRoot)
	if err != nil {
		return nil, fmt.Errorf("cannot open procfs %q: %w", opts.ProcRoot, err)
	}
	return &netdevCollector{proc: p, netClass: filepath.Join(opts.SysRoot, "class/net")}, nil
}

func (c *netdevCollector) Collect(context.Context) (out []Sample, err error) {
	// procfs' parser panics on an interface line with too few fields
	// ("0:" after the two header lines; found by FuzzNetdev, kept in
	// testdata/fuzz): a malformed /proc/net/dev is this collector's error,
	// never a crash.
	defer func() {
		if v := recover(); v != nil {
			out, err = nil, fmt.Errorf("cannot parse net/dev: a malformed line (%v)", v)
		}
	}()
	nd, err := c.proc.NetDev()
	if err != nil {
		return nil, notApplicableIfMissing(err, "net/dev")
	}
	return append(netdevSamples(nd), c.speedSamples(nd)...), nil
}

// netdevSamples maps parsed /proc/net/dev rows to samples, sorted by
// interface name.
func netdevSamples(nd procfs.NetDev) []Sample {
	names := make([]string, 0, len(nd))
	for n := range nd {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []Sample
	for _, n := range names {
		l, dev := nd[n], []string{n}
		out = append(out,
			Sample{models.MetricNetReceiveBytes, dev, f64(l.RxBytes)},
			Sample{models.MetricNetReceivePackets, dev, f64(l.RxPackets)},
			Sample{models.MetricNetReceiveErrors, dev, f64(l.RxErrors)},
			Sample{models.MetricNetReceiveDrops, dev, f64(l.RxDropped)},
			Sample{models.MetricNetTransmitBytes, dev, f64(l.TxBytes)},
			Sample{models.MetricNetTransmitPackets, dev, f64(l.TxPackets)},
			Sample{models.MetricNetTransmitErrors, dev, f64(l.TxErrors)},
			Sample{models.MetricNetTransmitDrops, dev, f64(l.TxDropped)},
		)
	}
	return out
}

// speedSamples reads the link speed of each interface of nd from
// SysRoot/class/net/IFACE/speed (Mb/s). Hand-written over readSysFile:
// procfs' sysfs package has the same reader (ParseNetClassAttribute) but
// importing it pulls golang.org/x/sync into go.mod for its CPU code, and
// its NetClass would read every attribute of every interface each
// scrape. An unknown speed (-1 for a virtual link, EINVAL for a down
// one, 0, absent, unreadable or unparsable) yields no series: the link
// has no capacity to compare with, which is no failure of the collector.
func (c *netdevCollector) speedSamples(nd procfs.NetDev) []Sample {
	names := make([]string, 0, len(nd))
	for n := range nd {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []Sample
	for _, n := range names {
		if strings.ContainsRune(n, '/') || n == "." || n == ".." {
			continue
		}
		b, err := readSysFile(filepath.Join(c.netClass, n, "speed"))
		if err != nil {
			continue
		}
		mbps, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || mbps <= 0 {
			continue
		}
		out = append(out, Sample{models.MetricNetSpeed, []string{n}, float64(mbps) * 1e6 / 8})
	}
	return out
}

// ---- nfsd ----

type nfsdCollector struct{ procRoot string }

func newNFSDCollector(opts Options, _ *onceLogger) (Collector, error) {
	return &nfsdCollector{procRoot: opts.ProcRoot}, nil
}

func (c *nfsdCollector) Collect(context.Context) ([]Sample, error) {
	b, err := readSysFile(filepath.Join(c.procRoot, "net/rpc/nfsd"))
	if err != nil {
		return nil, notApplicableIfMissing(err, "nfsd statistics")
	}
	out, err := parseNFSD(b)
	if err != nil {
		return nil, err
	}
	// pool_stats needs the nfsd filesystem mounted; without it only the
	// thread-pool series are missing.
	if pb, err := readSysFile(filepath.Join(c.procRoot, "fs/nfsd/pool_stats")); err == nil {
		ps, err := parsePoolStats(pb)
		if err != nil {
			return out, err
		}
		out = append(out, ps...)
	}
	return out, nil
}

// parseNFSD parses /proc/net/rpc/nfsd with procfs and maps it to samples.
func parseNFSD(b []byte) ([]Sample, error) {
	st, err := nfs.ParseServerRPCStats(bytes.NewReader(dropBlankLines(b)))
	if err != nil {
		return nil, fmt.Errorf("cannot parse nfsd statistics: %w", err)
	}
	out := []Sample{
		{models.MetricNFSDThreads, nil, f64(st.Threads.Threads)},
		{models.MetricNFSDReadBytes, nil, f64(st.InputOutput.Read)},
		{models.MetricNFSDWrittenBytes, nil, f64(st.InputOutput.Write)},
		{models.MetricNFSDRPCCalls, nil, f64(st.ServerRPC.RPCCount)},
		{models.MetricNFSDRPCBadCalls, []string{"fmt"}, f64(st.ServerRPC.BadFmt)},
		{models.MetricNFSDRPCBadCalls, []string{"auth"}, f64(st.ServerRPC.BadAuth)},
		{models.MetricNFSDRPCBadCalls, []string{"client"}, f64(st.ServerRPC.BadcInt)},
		{models.MetricNFSDPackets, []string{"udp"}, f64(st.Network.UDPCount)},
		{models.MetricNFSDPackets, []string{"tcp"}, f64(st.Network.TCPCount)},
		{models.MetricNFSDReplyCache, []string{"hit"}, f64(st.ReplyCache.Hits)},
		{models.MetricNFSDReplyCache, []string{"miss"}, f64(st.ReplyCache.Misses)},
		{models.MetricNFSDReplyCache, []string{"nocache"}, f64(st.ReplyCache.NoCache)},
	}
	out = append(out, opSamples(models.MetricNFSDOps, "2", st.V2Stats)...)
	out = append(out, opSamples(models.MetricNFSDOps, "3", st.V3Stats)...)
	out = append(out, opSamples(models.MetricNFSDOps, "4", st.V4Ops)...)
	return out, nil
}

// dropBlankLines removes empty lines, which procfs's NFS parsers reject
// but which captures of these files can contain (pcp's qa captures do);
// the kernel itself never prints one.
func dropBlankLines(b []byte) []byte {
	var out []byte
	for _, l := range bytes.SplitAfter(b, []byte("\n")) {
		if len(bytes.TrimSpace(l)) > 0 {
			out = append(out, l...)
		}
	}
	return out
}

// opSamples turns a procfs per-operation struct (all uint64 fields, one per
// operation) into one sample per operation, labelled with the lower-cased
// field name. Reflection keeps the list of operations in one place:
// procfs's struct.
func opSamples(name, version string, ops any) []Sample {
	v := reflect.ValueOf(ops)
	t := v.Type()
	out := make([]Sample, 0, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		op := strings.ToLower(t.Field(i).Name)
		if strings.HasSuffix(op, "unused") || strings.HasSuffix(op, "future") {
			continue
		}
		out = append(out, Sample{name, []string{version, op}, f64(v.Field(i).Uint())})
	}
	return out
}

// parsePoolStats parses /proc/fs/nfsd/pool_stats, which procfs does not
// cover: a "# pool packets-arrived sockets-enqueued threads-woken
// threads-timedout" header and one row per pool (a fifth column,
// sockets-enqueued-again, appears on some kernels and is ignored).
func parsePoolStats(b []byte) ([]Sample, error) {
	var out []Sample
	sc := bufio.NewScanner(bytes.NewReader(b))
	names := []string{models.MetricNFSDPoolPacketsArrived, models.MetricNFSDPoolSocketsQueued, models.MetricNFSDPoolThreadsWoken, models.MetricNFSDPoolThreadsTimeout}
	for line := 1; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if len(f) < 5 {
			return nil, fmt.Errorf("cannot parse pool_stats line %d %q: want at least 5 fields, got %d", line, sc.Text(), len(f))
		}
		for i, n := range names {
			v, err := strconv.ParseUint(f[i+1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("cannot parse pool_stats line %d field %d %q: %w", line, i+2, f[i+1], err)
			}
			out = append(out, Sample{n, []string{f[0]}, f64(v)})
		}
	}
	return out, sc.Err()
}
