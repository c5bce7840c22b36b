package collector

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/prometheus/procfs"
	"github.com/prometheus/procfs/nfs"

	"github.com/ballast-io/ballast/models"
)

// mountstatsCollector reads <proc>/self/mountstats (per NFS mount) and
// <proc>/net/rpc/nfs (client-wide RPC counts). In a fake tree proc/self
// must be a symlink to a numeric directory, as on a real host.
type mountstatsCollector struct {
	proc     procfs.FS
	procRoot string
	log      *onceLogger
}

func newMountstatsCollector(opts Options, log *onceLogger) (Collector, error) {
	p, err := procfs.NewFS(opts.ProcRoot)
	if err != nil {
		return nil, fmt.Errorf("cannot open procfs %q: %w", opts.ProcRoot, err)
	}
	return &mountstatsCollector{proc: p, procRoot: opts.ProcRoot, log: log}, nil
}

func (c *mountstatsCollector) Collect(context.Context) ([]Sample, error) {
	self, err := c.proc.Self()
	if err != nil {
		return nil, fmt.Errorf("cannot find own process in %q: %w", c.procRoot, err)
	}
	mounts, err := c.mountStats(self)
	if err != nil {
		return nil, notApplicableIfMissing(err, "mountstats")
	}
	raw, err := os.ReadFile(filepath.Join(c.procRoot, "self/mountstats"))
	if err != nil {
		return nil, fmt.Errorf("cannot read mountstats: %w", err)
	}
	out, skipped := mountstatsSamples(mounts, parsePNFS(raw))
	for _, s := range skipped {
		c.log.warnOnce("skip:"+s, s, "skipped NFS client statistics")
	}
	b, err := os.ReadFile(filepath.Join(c.procRoot, "net/rpc/nfs"))
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return out, fmt.Errorf("cannot read NFS client RPC statistics: %w", err)
	}
	rpc, err := parseNFSClientRPC(b)
	return append(out, rpc...), err
}

// parseNFSClientRPC parses /proc/net/rpc/nfs with procfs: the client-wide
// RPC call and retransmission counts.
func parseNFSClientRPC(b []byte) ([]Sample, error) {
	st, err := nfs.ParseClientRPCStats(bytes.NewReader(dropBlankLines(b)))
	if err != nil {
		return nil, fmt.Errorf("cannot parse NFS client RPC statistics: %w", err)
	}
	return []Sample{
		{models.MetricNFSClientRPCCalls, nil, f64(st.ClientRPC.RPCCount)},
		{models.MetricNFSClientRPCRetransmits, nil, f64(st.ClientRPC.Retransmissions)},
	}, nil
}

// parsePNFS returns the pNFS layout driver of each NFSv4 mount, keyed by
// mount point, from the "nfsv4:" lines of mountstats, which procfs does
// not parse. The kernel prints "pnfs=not configured" (reported as "none")
// or the driver's name, such as LAYOUT_FLEX_FILES.
func parsePNFS(b []byte) map[string]string {
	out := map[string]string{}
	mount := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if f := strings.Fields(line); len(f) >= 5 && f[0] == "device" && f[2] == "mounted" && f[3] == "on" {
			mount = f[4]
			continue
		}
		t := strings.TrimSpace(line)
		if !strings.HasPrefix(t, "nfsv4:") {
			continue
		}
		for _, kv := range strings.Split(strings.TrimSpace(strings.TrimPrefix(t, "nfsv4:")), ",") {
			if v, ok := strings.CutPrefix(kv, "pnfs="); ok {
				if v == "not configured" {
					v = "none"
				}
				out[mount] = v
			}
		}
	}
	return out
}

// wrapped reports whether a mountstats counter has its top bit set. The
// kernel accumulates RPC times as signed 64-bit sums printed unsigned, so
// such a value (18446743919241604546 in the ACCESS row of
// prometheus-procfs_mountstats) is a negative sum, not a real count; it is
// skipped instead of exported as a counter that would jump by 1.8e19.
func wrapped(v uint64) bool { return v > math.MaxInt64 }

// mountstatsSamples maps procfs's parsed mountstats to samples; it returns
// the series it skipped: counters that wrapped, and repeats of a mount
// (same mount point and export, as when a mount is stacked over itself) or
// of an operation within a mount, where the first one listed is kept.
// Mounts that are not NFS are ignored.
func mountstatsSamples(mounts []*procfs.Mount, pnfs map[string]string) (out []Sample, skipped []string) {
	const ms = 0.001
	seenMount := map[string]bool{}
	for _, m := range mounts {
		st, ok := m.Stats.(*procfs.MountStatsNFS)
		if !ok {
			continue
		}
		if key := m.Mount + "\xff" + m.Device; seenMount[key] {
			skipped = append(skipped, fmt.Sprintf("repeated mount %s of %s", m.Mount, m.Device))
			continue
		} else {
			seenMount[key] = true
		}
		seenOp := map[string]bool{}
		ml := []string{m.Mount, m.Device}
		server := st.Opts["addr"]
		if server == "" {
			server, _, _ = strings.Cut(m.Device, ":")
		}
		out = append(out,
			Sample{models.MetricNFSClientMountInfo, []string{m.Mount, m.Device, server, st.Opts["vers"], st.Opts["proto"], pnfs[m.Mount]}, 1},
			Sample{models.MetricNFSClientAge, ml, st.Age.Seconds()},
			Sample{models.MetricNFSClientReadBytes, ml, f64(st.Bytes.Read)},
			Sample{models.MetricNFSClientWriteBytes, ml, f64(st.Bytes.Write)},
			Sample{models.MetricNFSClientDirectReadBytes, ml, f64(st.Bytes.DirectRead)},
			Sample{models.MetricNFSClientDirectWriteBytes, ml, f64(st.Bytes.DirectWrite)},
			Sample{models.MetricNFSClientServerReadBytes, ml, f64(st.Bytes.ReadTotal)},
			Sample{models.MetricNFSClientServerWriteBytes, ml, f64(st.Bytes.WriteTotal)},
		)
		for _, op := range st.Operations {
			if seenOp[op.Operation] {
				skipped = append(skipped, fmt.Sprintf("repeated operation %s on %s", op.Operation, m.Mount))
				continue
			}
			seenOp[op.Operation] = true
			ol := []string{m.Mount, m.Device, op.Operation}
			add := func(name string, v uint64, scale float64) {
				if wrapped(v) {
					skipped = append(skipped, fmt.Sprintf("wrapped counter %s{mountpoint=%q,operation=%q} (above 2^63: the kernel's signed sum went negative)", name, m.Mount, op.Operation))
					return
				}
				out = append(out, Sample{name, ol, f64(v) * scale})
			}
			add(models.MetricNFSClientOps, op.Requests, 1)
			add(models.MetricNFSClientOpTransmissions, op.Transmissions, 1)
			if op.Transmissions >= op.Requests {
				add(models.MetricNFSClientOpRetransmits, op.Transmissions-op.Requests, 1)
			}
			add(models.MetricNFSClientOpMajorTimeouts, op.MajorTimeouts, 1)
			add(models.MetricNFSClientOpSentBytes, op.BytesSent, 1)
			add(models.MetricNFSClientOpReceivedBytes, op.BytesReceived, 1)
			add(models.MetricNFSClientOpQueueTime, op.CumulativeQueueMilliseconds, ms)
			add(models.MetricNFSClientOpRTT, op.CumulativeTotalResponseMilliseconds, ms)
			add(models.MetricNFSClientOpExecTime, op.CumulativeTotalRequestMilliseconds, ms)
			if st.StatVersion >= "1.1" {
				add(models.MetricNFSClientOpErrors, op.Errors, 1)
			}
		}
		var sends, receives, badXIDs uint64
		for _, x := range st.Transport {
			sends += x.Sends
			receives += x.Receives
			badXIDs += x.BadTransactionIDs
		}
		out = append(out,
			Sample{models.MetricNFSClientXprtSends, ml, f64(sends)},
			Sample{models.MetricNFSClientXprtReceives, ml, f64(receives)},
			Sample{models.MetricNFSClientXprtBadXIDs, ml, f64(badXIDs)},
		)
	}
	return out, skipped
}

// mountStats is procfs' MountStats, with its panics turned into this
// collector's error: procfs v0.21.1 indexes past its buffer on an RDMA
// transport ("xprt: rdma") line of statvers 1.1 with more than 31 numbers
// (found by FuzzMountstats, kept in testdata/fuzz), which a kernel that
// adds RDMA counters would print. The handler would recover the panic too,
// but its message says nothing useful; this error names the first such
// line, so the operator sees why the host's NFS client statistics are
// missing.
func (c *mountstatsCollector) mountStats(self procfs.Proc) (mounts []*procfs.Mount, err error) {
	defer func() {
		if v := recover(); v != nil {
			mounts, err = nil, fmt.Errorf("procfs failed on %s (%v)", longRDMALine(filepath.Join(c.procRoot, "self/mountstats")), v)
		}
	}()
	return self.MountStats()
}

// maxRDMAFields is the most numbers after "rdma" that procfs v0.21.1 reads
// from an "xprt:" line of statvers 1.1 (its fieldTransport11RDMAMaxLen + 3).
const maxRDMAFields = 31

// longRDMALine describes the first "xprt: rdma" line of the mountstats
// file at path with more numbers than procfs reads, or says there is none.
func longRDMALine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "a malformed line"
	}
	for i, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && f[0] == "xprt:" && f[1] == "rdma" && len(f)-2 > maxRDMAFields {
			return fmt.Sprintf("line %d, an RDMA transport line with %d numbers (it reads at most %d)", i+1, len(f)-2, maxRDMAFields)
		}
	}
	return "a malformed line"
}
