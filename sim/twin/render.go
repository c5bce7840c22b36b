package twin

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/ballast-io/ballast/collector"
	"github.com/ballast-io/ballast/models"
)

// ErrNodeDown is returned by RenderNode for a data server that is down: a
// scrape of its agent fails, as it would on a real cluster.
var ErrNodeDown = errors.New("node is down")

// Mount point, export and transport every simulated client uses.
const (
	MountPoint = "/mnt/pnfs"
	exportPath = "/data"
	mtu        = 9000
	nicName    = "eth0"
)

// DiskStat is one /proc/diskstats row of a simulated data server, with
// counters as the kernel would print them (wrapped to 32 bits on a server
// whose diskstats_counter_bits is 32; zero after a reboot).
type DiskStat struct {
	Major, Minor                       int
	Device                             string
	ReadIOs, ReadSectors, ReadTicks    uint64
	WriteIOs, WriteSectors, WriteTicks uint64
	InFlight, IOTicks, WeightedTicks   uint64
}

// NetDevStat is one /proc/net/dev row.
type NetDevStat struct {
	Iface                                  string
	RxBytes, RxPackets, TxBytes, TxPackets uint64
}

// SmartHealth is one NVMe drive's SMART / Health log in the units of the
// log page (temperatures in °C, data units of 512,000 bytes, minutes).
type SmartHealth struct {
	Device, Namespace, Serial, Model string
	Up                               bool
	CriticalWarning                  uint8
	TemperatureC                     float64
	AvailableSpare, SpareThreshold   float64
	PercentageUsed                   float64
	DataUnitsRead, DataUnitsWritten  float64
	HostReads, HostWrites            float64
	BusyMinutes                      float64
	PowerCycles, PowerOnHours        float64
	UnsafeShutdowns                  float64
	MediaErrors, ErrorLogEntries     float64
	WarningTempMinutes               float64
	CriticalTempMinutes              float64
	CapacityBytes                    float64
	UsedBytes                        float64
}

// GPUFields is one GPU's DCGM fields.
type GPUFields struct {
	Index, UUID, Model                       string
	Util, SMActive, TensorActive, DRAMActive float64
	FBUsed, FBFree                           float64 // bytes
	PCIeRxPerSec                             float64
	PowerW, EnergyJ, TempC                   float64
}

func wrap(v float64, bits int) uint64 {
	u := uint64(math.Max(0, v))
	if bits == 32 {
		return u & 0xffffffff
	}
	return u
}

// Diskstats returns the diskstats rows of data server node, one per drive
// (spares included), or an error for an unknown or down node.
func (t *Twin) Diskstats(node string) ([]DiskStat, error) {
	i := t.findDS(node)
	if i < 0 {
		return nil, fmt.Errorf("cannot read diskstats of %q: no such data server", node)
	}
	n := &t.ds[i]
	if n.down {
		return nil, fmt.Errorf("cannot read diskstats of %q: %w", node, ErrNodeDown)
	}
	out := make([]DiskStat, 0, n.nDev)
	for d := n.firstDev; d < n.firstDev+n.nDev; d++ {
		dv := &t.dev[d]
		if dv.failed {
			continue // a dead controller drops off the bus
		}
		b := n.bits
		out = append(out, DiskStat{
			Major: 259, Minor: int(d - n.firstDev), Device: dv.kname,
			ReadIOs: wrap(dv.rdOps, b), ReadSectors: wrap(dv.rdBytes/512, b), ReadTicks: wrap(dv.rdMs, b),
			WriteIOs: wrap(dv.wrOps, b), WriteSectors: wrap(dv.wrBytes/512, b), WriteTicks: wrap(dv.wrMs, b),
			InFlight: uint64(math.Round(dv.inflight)), IOTicks: wrap(dv.ioMs, b), WeightedTicks: wrap(dv.wIoMs, b),
		})
	}
	return out, nil
}

// WriteDiskstats writes the node's /proc/diskstats in the 20-field format
// of kernels 5.5 and later.
func (t *Twin) WriteDiskstats(node string, w io.Writer) error {
	rows, err := t.Diskstats(node)
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "%4d %7d %s %d 0 %d %d %d 0 %d %d %d %d %d 0 0 0 0 0 0\n", r.Major, r.Minor, r.Device,
			r.ReadIOs, r.ReadSectors, r.ReadTicks, r.WriteIOs, r.WriteSectors, r.WriteTicks, r.InFlight, r.IOTicks, r.WeightedTicks)
	}
	_, err = io.WriteString(w, b.String())
	return err
}

// NetDev returns the /proc/net/dev row of the node's storage NIC.
func (t *Twin) NetDev(node string) (NetDevStat, error) {
	if i := t.findDS(node); i >= 0 {
		n := &t.ds[i]
		if n.down {
			return NetDevStat{}, fmt.Errorf("cannot read net/dev of %q: %w", node, ErrNodeDown)
		}
		return netdev(n.rxBytes, n.txBytes), nil
	}
	if i := t.findClient(node); i >= 0 {
		return netdev(t.cli[i].rxBytes, t.cli[i].txBytes), nil
	}
	return NetDevStat{}, fmt.Errorf("cannot read net/dev of %q: no such node", node)
}

func netdev(rx, tx float64) NetDevStat {
	return NetDevStat{Iface: nicName, RxBytes: uint64(rx), RxPackets: uint64(math.Ceil(rx / mtu)), TxBytes: uint64(tx), TxPackets: uint64(math.Ceil(tx / mtu))}
}

// WriteNetDev writes the node's /proc/net/dev.
func (t *Twin) WriteNetDev(node string, w io.Writer) error {
	s, err := t.NetDev(node)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "Inter-|   Receive                                                |  Transmit\n"+
		" face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n"+
		"    lo: 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"+
		"%6s: %d %d 0 0 0 0 0 0 %d %d 0 0 0 0 0 0\n", s.Iface, s.RxBytes, s.RxPackets, s.TxBytes, s.TxPackets)
	return err
}

// Smart returns the NVMe SMART / Health values of every drive of data
// server node; a failed drive is listed with Up false and no values.
func (t *Twin) Smart(node string) ([]SmartHealth, error) {
	i := t.findDS(node)
	if i < 0 {
		return nil, fmt.Errorf("cannot read SMART of %q: no such data server", node)
	}
	n := &t.ds[i]
	if n.down {
		return nil, fmt.Errorf("cannot read SMART of %q: %w", node, ErrNodeDown)
	}
	out := make([]SmartHealth, 0, n.nDev)
	for d := n.firstDev; d < n.firstDev+n.nDev; d++ {
		dv := &t.dev[d]
		sm := &dv.smart
		h := SmartHealth{
			Device: strings.TrimSuffix(dv.kname, "n1"), Namespace: dv.kname,
			Serial: fmt.Sprintf("SIM%08X", uint32(d)), Model: t.sc.Topology.DataServers[n.group].Drive.Model,
			Up: !dv.failed,
		}
		if dv.failed {
			out = append(out, h)
			continue
		}
		h.CriticalWarning = t.criticalWarning(d)
		h.TemperatureC = math.Round(sm.tempC)
		h.AvailableSpare, h.SpareThreshold = sm.spare, spareThresh
		h.PercentageUsed = t.percentUsed(d)
		h.DataUnitsRead = math.Floor(sm.bytesRead / 512000)
		h.DataUnitsWritten = math.Floor(sm.bytesWritten / 512000)
		h.HostReads, h.HostWrites = math.Floor(sm.hostReads), math.Floor(sm.hostWrites)
		h.BusyMinutes = math.Floor(sm.busyMin)
		h.PowerCycles, h.PowerOnHours, h.UnsafeShutdowns = sm.powerCycles, math.Floor(sm.powerOnHours), sm.unsafe
		h.MediaErrors, h.ErrorLogEntries = sm.mediaErr, sm.errLog
		h.WarningTempMinutes, h.CriticalTempMinutes = math.Floor(sm.warnTempMin), math.Floor(sm.critTempMin)
		h.CapacityBytes, h.UsedBytes = dv.capBytes, dv.used
		out = append(out, h)
	}
	return out, nil
}

// GPUs returns the DCGM fields of every GPU of client node, from the last
// tick.
func (t *Twin) GPUs(node string) ([]GPUFields, error) {
	c := t.findClient(node)
	if c < 0 {
		return nil, fmt.Errorf("cannot read GPUs of %q: no such client", node)
	}
	cl := &t.cli[c]
	model := t.sc.Topology.Clients[cl.group].GPUModel
	out := make([]GPUFields, 0, cl.nGPU)
	for k := int32(0); k < cl.nGPU; k++ {
		g := &t.gpus[cl.firstGPU+k]
		u := g.busy
		used := 2e9
		if g.job >= 0 && t.jobs[g.job].active {
			used = 62e9
		}
		out = append(out, GPUFields{
			Index: strconv.Itoa(int(k)), UUID: fmt.Sprintf("GPU-5e1a0000-0000-4000-8000-%012x", cl.firstGPU+k), Model: model,
			Util: u, SMActive: 0.85 * u, TensorActive: 0.55 * u, DRAMActive: 0.45 * u,
			FBUsed: used, FBFree: 80e9 - used,
			PCIeRxPerSec: g.lastRx / t.dt,
			PowerW:       gpuIdleWatts + (gpuBusyWatts-gpuIdleWatts)*u,
			EnergyJ:      math.Floor(g.energyJ),
			TempC:        math.Round(34 + 38*u),
		})
	}
	return out, nil
}

// WriteMountstats writes the client's /proc/self/mountstats with its one
// pNFS (flex-files) mount, statvers 1.1.
func (t *Twin) WriteMountstats(node string, w io.Writer) error {
	c := t.findClient(node)
	if c < 0 {
		return fmt.Errorf("cannot write mountstats of %q: no such client", node)
	}
	cl := &t.cli[c]
	age := int64(float64(t.tick) * t.dt)
	var b strings.Builder
	fmt.Fprintf(&b, "device proc mounted on /proc with fstype proc\n")
	fmt.Fprintf(&b, "device %s mounted on %s with fstype nfs4 statvers=1.1\n", t.export(), MountPoint)
	fmt.Fprintf(&b, "\topts:\trw,vers=4.2,rsize=%d,wsize=%d,namlen=255,acregmin=3,acregmax=60,acdirmin=30,acdirmax=60,hard,proto=tcp,nconnect=4,port=0,timeo=600,retrans=2,sec=sys,clientaddr=%s,local_lock=none,addr=%s\n",
		int(cl.rsize), int(cl.rsize), cl.addr, mdsAddr)
	fmt.Fprintf(&b, "\tage:\t%d\n", age)
	fmt.Fprintf(&b, "\tcaps:\tcaps=0x3ffbffff,wtmult=512,dtsize=1048576,bsize=0,namlen=255\n")
	fmt.Fprintf(&b, "\tnfsv4:\tbm0=0xfdffbfff,bm1=0x40fdbe3e,bm2=0x60803,acl=0x3,sessions,pnfs=LAYOUT_FLEX_FILES,lease_time=90,lease_expired=0\n")
	fmt.Fprintf(&b, "\tsec:\tflavor=1,pseudoflavor=1\n")
	fmt.Fprintf(&b, "\tevents:\t0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n")
	ops := cl.readOps + cl.wrOps + 4*cl.opens
	fmt.Fprintf(&b, "\tbytes:\t%d %d 0 0 %d %d %d %d\n", uint64(cl.readGood), uint64(cl.wrBytes), uint64(cl.readBytes), uint64(cl.wrBytes), uint64(cl.readBytes/4096), uint64(cl.wrBytes/4096))
	fmt.Fprintf(&b, "\tRPC iostats version: 1.1  p/v: 100003/4 (nfs)\n")
	fmt.Fprintf(&b, "\txprt:\ttcp 0 1 1 0 0 %d %d 0 %d 0 2 0 0\n", uint64(ops), uint64(ops), uint64(ops))
	fmt.Fprintf(&b, "\tper-op statistics\n")
	for _, o := range t.mountOps(cl) {
		fmt.Fprintf(&b, "\t%12s: %d %d 0 %d %d %d %d %d %d\n", o.name, o.n, o.n, o.sent, o.recv, 0, o.rtt, o.exe, o.errs)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

const mdsAddr = "10.0.0.1"

func (t *Twin) export() string { return mdsAddr + ":" + exportPath }

// Export is the clients' mount source (SERVER:PATH).
func (t *Twin) Export() string { return t.export() }

type mountOp struct {
	name                          string
	n, sent, recv, rtt, exe, errs uint64
}

// mountOps derives the per-operation rows of a client's mount: READ and
// WRITE from the I/O it did, OPEN/CLOSE/LAYOUTGET/LAYOUTRETURN once per
// file it opened, LAYOUTSTATS once a minute per open layout.
func (t *Twin) mountOps(cl *client) []mountOp {
	u := func(v float64) uint64 { return uint64(v) }
	o := u(cl.opens)
	return []mountOp{
		{"READ", u(cl.readOps), u(cl.readOps * 180), u(cl.readBytes + cl.readOps*120), u(cl.readRTTms), u(cl.readExems), u(cl.errors)},
		{"WRITE", u(cl.wrOps), u(cl.wrBytes + cl.wrOps*200), u(cl.wrOps * 140), u(cl.wrRTTms), u(cl.wrExems), 0},
		{"OPEN", o, o * 300, o * 400, o / 5, o / 4, 0},
		{"CLOSE", o, o * 200, o * 150, o / 10, o / 8, 0},
		{"GETATTR", 2 * o, 2 * o * 180, 2 * o * 260, o / 10, o / 8, 0},
		{"LAYOUTGET", o, o * 250, o * 420, o / 5, o / 4, 0},
		{"LAYOUTRETURN", o, o * 220, o * 120, o / 8, o / 6, 0},
		{"LAYOUTSTATS", u(cl.layoutStats), u(cl.layoutStats * 400), u(cl.layoutStats * 100), u(cl.layoutStats / 8), u(cl.layoutStats / 6), 0},
		{"GETDEVICEINFO", u(float64(len(t.ds))), u(float64(len(t.ds)) * 200), u(float64(len(t.ds)) * 300), 1, 1, 0},
	}
}

// RenderNode writes the Prometheus text exposition that node's ballast
// agent would serve now (role ds: nvme, diskstats, nfsd, filesystem and
// netdev collectors; role client: dcgm, mountstats, netdev and readahead), from
// the metric table in models, encoded by collector.WriteText (ballast's one
// exposition encoder, byte for byte what the agent serves). A data server
// that is down returns ErrNodeDown and writes nothing.
func (t *Twin) RenderNode(node string, w io.Writer) error {
	samples, err := t.NodeSamples(node)
	if err != nil {
		return err
	}
	if err := collector.WriteText(w, samples); err != nil {
		return fmt.Errorf("cannot render node %q: %w", node, err)
	}
	return nil
}

// NodeSamples returns the samples node's agent would expose now.
func (t *Twin) NodeSamples(node string) ([]collector.Sample, error) {
	if i := t.findDS(node); i >= 0 {
		if t.ds[i].down {
			return nil, fmt.Errorf("cannot render node %q: %w", node, ErrNodeDown)
		}
		return t.dsSamples(i), nil
	}
	if i := t.findClient(node); i >= 0 {
		return t.clientSamples(i), nil
	}
	return nil, fmt.Errorf("cannot render node %q: no such node", node)
}

type sampler []collector.Sample

func (s *sampler) add(name string, v float64, labels ...string) {
	*s = append(*s, collector.Sample{Name: name, Values: labels, Value: v})
}

func (s *sampler) collectors(names ...string) {
	for _, n := range names {
		s.add(models.MetricCollectorSuccess, 1, n)
		s.add(models.MetricCollectorDuration, 0, n)
	}
}

func (t *Twin) dsSamples(i int32) []collector.Sample {
	n := &t.ds[i]
	var s sampler
	s.collectors("nvme", "diskstats", "nfsd", "filesystem", "netdev")
	sm, _ := t.Smart(n.name)
	for _, h := range sm {
		s.add(models.MetricCollectorDeviceUp, b2f(h.Up), "nvme", h.Device)
		if !h.Up {
			continue
		}
		l := []string{h.Device, h.Serial, h.Model}
		s.add(models.MetricDriveInfo, 1, h.Device, h.Serial, h.Model, "SIM1.0", "NVMe")
		s.add(models.MetricDriveSmartHealthy, b2f(h.CriticalWarning == 0), l...)
		s.add(models.MetricDriveCapacity, h.CapacityBytes, l...)
		s.add(models.MetricDriveTemperature, h.TemperatureC, l...)
		s.add(models.MetricDrivePowerOn, h.PowerOnHours*3600, l...)
		s.add(models.MetricDrivePowerCycles, h.PowerCycles, l...)
		for bit, name := range models.NVMeCriticalWarningBits {
			s.add(models.MetricNVMeCriticalWarning, float64(h.CriticalWarning>>bit&1), h.Device, h.Serial, h.Model, name)
		}
		s.add(models.MetricNVMeAvailableSpare, h.AvailableSpare/100, l...)
		s.add(models.MetricNVMeAvailableSpareThresh, h.SpareThreshold/100, l...)
		s.add(models.MetricNVMePercentageUsed, h.PercentageUsed/100, l...)
		s.add(models.MetricNVMeDataRead, h.DataUnitsRead*512000, l...)
		s.add(models.MetricNVMeDataWritten, h.DataUnitsWritten*512000, l...)
		s.add(models.MetricNVMeHostReadCommands, h.HostReads, l...)
		s.add(models.MetricNVMeHostWriteCommands, h.HostWrites, l...)
		s.add(models.MetricNVMeControllerBusy, h.BusyMinutes*60, l...)
		s.add(models.MetricNVMeUnsafeShutdowns, h.UnsafeShutdowns, l...)
		s.add(models.MetricNVMeMediaErrors, h.MediaErrors, l...)
		s.add(models.MetricNVMeErrorLogEntries, h.ErrorLogEntries, l...)
		s.add(models.MetricNVMeWarningTempTime, h.WarningTempMinutes*60, l...)
		s.add(models.MetricNVMeCriticalTempTime, h.CriticalTempMinutes*60, l...)
	}
	rows, _ := t.Diskstats(n.name)
	for _, r := range rows {
		s.diskstats(r)
	}
	t.filesystems(&s, n)
	s.add(models.MetricNFSDThreads, 64)
	s.add(models.MetricNFSDOps, math.Floor(n.nfsdReads), "4", "read")
	s.add(models.MetricNFSDOps, math.Floor(n.nfsdWrites), "4", "write")
	nd, _ := t.NetDev(n.name)
	s.netdev(nd, t.sc.Topology.DataServers[n.group].NICGbps*1e9/8)
	return s
}

// ExportRoot is where a simulated data server mounts the XFS filesystem
// it exports from each drive: ExportRoot/<namespace>.
const ExportRoot = "/export"

// filesystems adds what the filesystem collector's statfs would report for
// the XFS filesystem on each of node n's drives in service: size is the
// drive's capacity, free and avail (equal on XFS, which reserves no blocks
// for root) its capacity less the bytes its stripes hold. Spares and
// replaced drives carry no mounted filesystem; a failed drive's statfs
// fails (device_up 0). The twin does not model inodes, so the files and
// files_free series are not rendered.
func (t *Twin) filesystems(s *sampler, n *dsNode) {
	for d := n.firstDev; d < n.firstDev+n.nDev; d++ {
		dv := &t.dev[d]
		if dv.spare || dv.retired {
			continue
		}
		if dv.failed {
			s.add(models.MetricCollectorDeviceUp, 0, "filesystem", dv.kname)
			continue
		}
		l := []string{dv.kname, ExportRoot + "/" + dv.kname, "xfs"}
		free := math.Max(0, dv.capBytes-dv.used)
		s.add(models.MetricFilesystemSize, dv.capBytes, l...)
		s.add(models.MetricFilesystemFree, free, l...)
		s.add(models.MetricFilesystemAvail, free, l...)
		s.add(models.MetricFilesystemReadonly, 0, l...)
	}
}

func (s *sampler) diskstats(r DiskStat) {
	const ms, sector = 0.001, 512.0
	d := r.Device
	s.add(models.MetricDiskReads, float64(r.ReadIOs), d)
	s.add(models.MetricDiskReadsMerged, 0, d)
	s.add(models.MetricDiskReadBytes, float64(r.ReadSectors)*sector, d)
	s.add(models.MetricDiskReadTime, float64(r.ReadTicks)*ms, d)
	s.add(models.MetricDiskWrites, float64(r.WriteIOs), d)
	s.add(models.MetricDiskWritesMerged, 0, d)
	s.add(models.MetricDiskWrittenBytes, float64(r.WriteSectors)*sector, d)
	s.add(models.MetricDiskWriteTime, float64(r.WriteTicks)*ms, d)
	s.add(models.MetricDiskIOInFlight, float64(r.InFlight), d)
	s.add(models.MetricDiskIOTime, float64(r.IOTicks)*ms, d)
	s.add(models.MetricDiskIOTimeWeighted, float64(r.WeightedTicks)*ms, d)
	s.add(models.MetricDiskDiscards, 0, d)
	s.add(models.MetricDiskDiscardsMerged, 0, d)
	s.add(models.MetricDiskDiscardedBytes, 0, d)
	s.add(models.MetricDiskDiscardTime, 0, d)
	s.add(models.MetricDiskFlushes, 0, d)
	s.add(models.MetricDiskFlushTime, 0, d)
}

// netdev renders the node's loopback and storage NIC rows, and the
// NIC's link speed (bytes/s; the scenario's nic_gbps, the capacity the
// physics already gives the NIC) as /sys/class/net/eth0/speed would
// show it. Loopback has no speed in sysfs, so no series.
func (s *sampler) netdev(nd NetDevStat, speed float64) {
	if speed > 0 && nd.Iface != "" {
		s.add(models.MetricNetSpeed, speed, nd.Iface)
	}
	for _, r := range []NetDevStat{{Iface: "lo"}, nd} {
		d := r.Iface
		s.add(models.MetricNetReceiveBytes, float64(r.RxBytes), d)
		s.add(models.MetricNetReceivePackets, float64(r.RxPackets), d)
		s.add(models.MetricNetReceiveErrors, 0, d)
		s.add(models.MetricNetReceiveDrops, 0, d)
		s.add(models.MetricNetTransmitBytes, float64(r.TxBytes), d)
		s.add(models.MetricNetTransmitPackets, float64(r.TxPackets), d)
		s.add(models.MetricNetTransmitErrors, 0, d)
		s.add(models.MetricNetTransmitDrops, 0, d)
	}
}

func (t *Twin) clientSamples(i int32) []collector.Sample {
	cl := &t.cli[i]
	var s sampler
	s.collectors("dcgm", "mountstats", "netdev", "readahead")
	gs, _ := t.GPUs(cl.name)
	for _, g := range gs {
		l := []string{g.Index, g.UUID, g.Model}
		s.add(models.MetricGPUInfo, 1, g.Index, g.UUID, g.Model, fmt.Sprintf("00000000:%02X:00.0", 0x18+len(s)%200), "simulated")
		s.add(models.MetricGPUUtilization, g.Util, l...)
		s.add(models.MetricGPUGraphicsActive, g.Util, l...)
		s.add(models.MetricGPUSMActive, g.SMActive, l...)
		s.add(models.MetricGPUTensorActive, g.TensorActive, l...)
		s.add(models.MetricGPUDRAMActive, g.DRAMActive, l...)
		s.add(models.MetricGPUMemoryUsed, g.FBUsed, l...)
		s.add(models.MetricGPUMemoryFree, g.FBFree, l...)
		s.add(models.MetricGPUPCIeRx, g.PCIeRxPerSec, l...)
		s.add(models.MetricGPUPower, g.PowerW, l...)
		s.add(models.MetricGPUEnergy, g.EnergyJ, l...)
		s.add(models.MetricGPUTemperature, g.TempC, l...)
		s.add(models.MetricGPUSMClock, 1980e6, l...)
		s.add(models.MetricGPUMemoryClock, 2619e6, l...)
		s.add(models.MetricGPULastXID, 0, l...)
	}
	ml := []string{MountPoint, t.export()}
	s.add(models.MetricNFSClientMountInfo, 1, MountPoint, t.export(), mdsAddr, "4.2", "tcp", "LAYOUT_FLEX_FILES")
	s.add(models.MetricNFSClientAge, math.Floor(float64(t.tick)*t.dt), ml...)
	s.add(models.MetricNFSClientReadBytes, math.Floor(cl.readGood), ml...)
	s.add(models.MetricNFSClientWriteBytes, math.Floor(cl.wrBytes), ml...)
	s.add(models.MetricNFSClientDirectReadBytes, 0, ml...)
	s.add(models.MetricNFSClientDirectWriteBytes, 0, ml...)
	s.add(models.MetricNFSClientServerReadBytes, math.Floor(cl.readBytes), ml...)
	s.add(models.MetricNFSClientServerWriteBytes, math.Floor(cl.wrBytes), ml...)
	for _, o := range t.mountOps(cl) {
		ol := []string{MountPoint, t.export(), o.name}
		s.add(models.MetricNFSClientOps, float64(o.n), ol...)
		s.add(models.MetricNFSClientOpTransmissions, float64(o.n), ol...)
		s.add(models.MetricNFSClientOpRetransmits, 0, ol...)
		s.add(models.MetricNFSClientOpMajorTimeouts, 0, ol...)
		s.add(models.MetricNFSClientOpSentBytes, float64(o.sent), ol...)
		s.add(models.MetricNFSClientOpReceivedBytes, float64(o.recv), ol...)
		s.add(models.MetricNFSClientOpQueueTime, 0, ol...)
		s.add(models.MetricNFSClientOpRTT, float64(o.rtt)*0.001, ol...)
		s.add(models.MetricNFSClientOpExecTime, float64(o.exe)*0.001, ol...)
		s.add(models.MetricNFSClientOpErrors, float64(o.errs), ol...)
	}
	ops := uint64(cl.readOps + cl.wrOps + 4*cl.opens)
	s.add(models.MetricNFSClientXprtSends, float64(ops), ml...)
	s.add(models.MetricNFSClientXprtReceives, float64(ops), ml...)
	s.add(models.MetricNFSClientXprtBadXIDs, 0, ml...)
	nd, _ := t.NetDev(cl.name)
	s.netdev(nd, cl.nicBW)
	s.add(models.MetricNFSReadahead, cl.ra, MountPoint, t.export(), fmt.Sprintf("0:%d", 50+i))
	return s
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
