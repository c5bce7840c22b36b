//go:build cgo && linux

package collector

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// nvmlSource reads GPUs through github.com/NVIDIA/go-nvml, which
// dlopen()s the driver's libnvidia-ml.so.1 at run time: the fallback of
// the dcgm collector on hosts with the NVIDIA driver but no DCGM. Its
// readings carry DCGM field names and DCGM's units, so dcgmFields maps
// them unchanged. NVML has no profiling counters, so those fields are
// skipped with the reason. It has no "last XID" to read either, only XID
// events: an xidWatcher goroutine, started on the first read and stopped
// by Close, waits for them and fills DCGM_FI_DEV_XID_ERRORS and the XID
// count (a GPU whose registration for the events failed has the field
// skipped with NVML's error). As with
// go-dcgm, nothing in go-nvml is called before Init succeeded: its C
// symbols resolve against the library loaded at run time.
type nvmlSource struct {
	lib nvml.Interface
	log *onceLogger // may be nil (tests)

	mu       sync.Mutex
	up       bool
	missing  map[string]bool // NVML functions this driver lacks, found at Init
	xid      *xidWatcher     // nil until started, or when no GPU could be registered
	xidWhy   []string        // by GPU index: why its XIDs are not watched ("" when they are)
	xidTried bool
	ids      map[int]gpuInfo // each GPU's identity as last read, for when it is lost
}

func newNVMLSource(log *onceLogger) gpuSource { return &nvmlSource{lib: nvml.New(), log: log} }

// nvmlSkipped are the dcgmFields NVML cannot give, with the reason.
func nvmlSkipped() map[string]string {
	skipped := map[string]string{}
	for _, f := range dcgmFields {
		if f.Prof {
			skipped[f.Field] = "NVML has no profiling counters; install DCGM"
		}
	}
	return skipped
}

// nvmlRead is one NVML call and the DCGM fields it fills, in DCGM's units.
type nvmlRead struct {
	fields []string
	symbol string // the NVML function called: a driver without it skips the fields
	read   func(d nvml.Device, has func(symbol string) bool) ([]float64, nvml.Return)
}

const mib = 1 << 20

// nvmlReads lists what NVML reads for each DCGM field.
var nvmlReads = []nvmlRead{
	{[]string{"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL"}, "nvmlDeviceGetUtilizationRates", func(d nvml.Device, _ func(string) bool) ([]float64, nvml.Return) {
		u, ret := d.GetUtilizationRates() // percent, as DCGM
		return []float64{float64(u.Gpu), float64(u.Memory)}, ret
	}},
	{[]string{"DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE"}, "nvmlDeviceGetMemoryInfo", func(d nvml.Device, has func(string) bool) ([]float64, nvml.Return) {
		// Bytes → MiB. The v2 call (drivers from R510) counts the
		// memory the driver reserves as neither used nor free, as DCGM
		// does; v1 counts it as used.
		if has("nvmlDeviceGetMemoryInfo_v2") {
			m, ret := d.GetMemoryInfo_v2()
			return []float64{float64(m.Used) / mib, float64(m.Free) / mib}, ret
		}
		m, ret := d.GetMemoryInfo()
		return []float64{float64(m.Used) / mib, float64(m.Free) / mib}, ret
	}},
	{[]string{"DCGM_FI_DEV_POWER_USAGE"}, "nvmlDeviceGetPowerUsage", func(d nvml.Device, _ func(string) bool) ([]float64, nvml.Return) {
		mw, ret := d.GetPowerUsage() // mW → W
		return []float64{float64(mw) / 1000}, ret
	}},
	{[]string{"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"}, "nvmlDeviceGetTotalEnergyConsumption", func(d nvml.Device, _ func(string) bool) ([]float64, nvml.Return) {
		mj, ret := d.GetTotalEnergyConsumption() // mJ, as DCGM
		return []float64{float64(mj)}, ret
	}},
	{[]string{"DCGM_FI_DEV_GPU_TEMP"}, "nvmlDeviceGetTemperature", func(d nvml.Device, _ func(string) bool) ([]float64, nvml.Return) {
		c, ret := d.GetTemperature(nvml.TEMPERATURE_GPU)
		return []float64{float64(c)}, ret
	}},
	{[]string{"DCGM_FI_DEV_MEMORY_TEMP"}, "nvmlDeviceGetFieldValues", func(d nvml.Device, _ func(string) bool) ([]float64, nvml.Return) {
		v, ret := nvmlFieldValue(d, nvml.FI_DEV_MEMORY_TEMP)
		return []float64{v}, ret
	}},
	{[]string{"DCGM_FI_DEV_SM_CLOCK"}, "nvmlDeviceGetClockInfo", func(d nvml.Device, _ func(string) bool) ([]float64, nvml.Return) {
		mhz, ret := d.GetClockInfo(nvml.CLOCK_SM)
		return []float64{float64(mhz)}, ret
	}},
	{[]string{"DCGM_FI_DEV_MEM_CLOCK"}, "nvmlDeviceGetClockInfo", func(d nvml.Device, _ func(string) bool) ([]float64, nvml.Return) {
		mhz, ret := d.GetClockInfo(nvml.CLOCK_MEM)
		return []float64{float64(mhz)}, ret
	}},
	{[]string{"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"}, "nvmlDeviceGetTotalEccErrors", func(d nvml.Device, _ func(string) bool) ([]float64, nvml.Return) {
		n, ret := d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC)
		return []float64{float64(n)}, ret
	}},
	{[]string{"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"}, "nvmlDeviceGetTotalEccErrors", func(d nvml.Device, _ func(string) bool) ([]float64, nvml.Return) {
		n, ret := d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
		return []float64{float64(n)}, ret
	}},
	{[]string{"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_ROW_REMAP_FAILURE"}, "nvmlDeviceGetRemappedRows", func(d nvml.Device, _ func(string) bool) ([]float64, nvml.Return) {
		corr, unc, _, failed, ret := d.GetRemappedRows()
		f := 0.0
		if failed {
			f = 1
		}
		return []float64{float64(corr), float64(unc), f}, ret
	}},
	{[]string{"DCGM_FI_DEV_PCIE_REPLAY_COUNTER"}, "nvmlDeviceGetPcieReplayCounter", func(d nvml.Device, _ func(string) bool) ([]float64, nvml.Return) {
		n, ret := d.GetPcieReplayCounter()
		return []float64{float64(n)}, ret
	}},
}

// nvmlFieldValue reads one NVML field (nvmlDeviceGetFieldValues) as a
// number; the per-field return counts, not only the call's.
func nvmlFieldValue(d nvml.Device, id uint32) (float64, nvml.Return) {
	vs := []nvml.FieldValue{{FieldId: id}}
	if ret := d.GetFieldValues(vs); ret != nvml.SUCCESS {
		return 0, ret
	}
	v := vs[0]
	if ret := nvml.Return(v.NvmlReturn); ret != nvml.SUCCESS {
		return 0, ret
	}
	b := v.Value[:]
	switch nvml.ValueType(v.ValueType) {
	case nvml.VALUE_TYPE_DOUBLE:
		return math.Float64frombits(binary.NativeEndian.Uint64(b)), nvml.SUCCESS
	case nvml.VALUE_TYPE_UNSIGNED_INT:
		return float64(binary.NativeEndian.Uint32(b)), nvml.SUCCESS
	case nvml.VALUE_TYPE_SIGNED_INT:
		return float64(int32(binary.NativeEndian.Uint32(b))), nvml.SUCCESS
	case nvml.VALUE_TYPE_UNSIGNED_LONG, nvml.VALUE_TYPE_UNSIGNED_LONG_LONG:
		return float64(binary.NativeEndian.Uint64(b)), nvml.SUCCESS
	case nvml.VALUE_TYPE_SIGNED_LONG_LONG:
		return float64(int64(binary.NativeEndian.Uint64(b))), nvml.SUCCESS
	case nvml.VALUE_TYPE_UNSIGNED_SHORT:
		return float64(binary.NativeEndian.Uint16(b)), nvml.SUCCESS
	}
	return 0, nvml.ERROR_UNKNOWN
}

// nvmlSkippable says whether a per-field NVML return means "this GPU
// does not give this field" rather than a failure.
func nvmlSkippable(ret nvml.Return) bool {
	switch ret {
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_NO_PERMISSION, nvml.ERROR_NOT_FOUND, nvml.ERROR_FUNCTION_NOT_FOUND:
		return true
	}
	return false
}

// nvmlReading reads GPU index through NVML. Fields the GPU does not
// support go into skipped; any other failure is an error.
func nvmlReading(index int, d nvml.Device, driver string, has func(string) bool, skipped map[string]string) (gpuReading, error) {
	uuid, ret := d.GetUUID()
	if ret != nvml.SUCCESS {
		return gpuReading{}, &nvmlCallError{fmt.Sprintf("cannot read the UUID of GPU %d through NVML", index), ret}
	}
	g := gpuInfo{Index: strconv.Itoa(index), UUID: uuid, Driver: driver}
	if name, ret := d.GetName(); ret == nvml.SUCCESS {
		g.Model = name
	}
	if pci, ret := d.GetPciInfo(); ret == nvml.SUCCESS {
		g.PCIBusID = cString(pci.BusId[:])
	}
	r := gpuReading{GPU: g, Fields: map[string]float64{}}
	for _, rd := range nvmlReads {
		if !has(rd.symbol) {
			for _, f := range rd.fields {
				skipped[f] = "this driver's NVML has no " + rd.symbol
			}
			continue
		}
		vs, ret := rd.read(d, has)
		switch {
		case ret == nvml.SUCCESS:
			for i, f := range rd.fields {
				r.Fields[f] = vs[i]
			}
		case nvmlSkippable(ret):
			for _, f := range rd.fields {
				skipped[f] = fmt.Sprintf("NVML %s on GPU %d: %v", rd.symbol, index, ret)
			}
		default:
			return r, &nvmlCallError{fmt.Sprintf("cannot read %s of GPU %d through NVML (%s)", rd.fields[0], index, rd.symbol), ret}
		}
	}
	return r, nil
}

// nvmlCallError is an NVML call that failed, with NVML's return.
type nvmlCallError struct {
	what string
	ret  nvml.Return
}

func (e *nvmlCallError) Error() string { return fmt.Sprintf("%s: %v", e.what, e.ret) }

// gpuLost says whether err is NVML's GPU_IS_LOST: the GPU fell off the
// bus or is otherwise gone until a reset.
func gpuLost(err error) bool {
	var ce *nvmlCallError
	return errors.As(err, &ce) && ce.ret == nvml.ERROR_GPU_IS_LOST
}

// cString is the text of a NUL-terminated C char array.
func cString(b []int8) string {
	s := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		s = append(s, byte(c))
	}
	return string(s)
}

func (s *nvmlSource) init() error {
	if s.up {
		return nil
	}
	switch ret := s.lib.Init(); ret {
	case nvml.SUCCESS:
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return fmt.Errorf("cannot load libnvidia-ml.so.1: %w (%v)", ErrNotApplicable, ret)
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return fmt.Errorf("cannot start NVML: %w (%v)", ErrNotApplicable, ret)
	default:
		return fmt.Errorf("cannot start NVML: %v", ret)
	}
	s.up = true
	s.missing = map[string]bool{}
	ext := s.lib.Extensions()
	syms := append([]string{"nvmlDeviceGetMemoryInfo_v2"}, xidSymbols...)
	for _, rd := range nvmlReads {
		syms = append(syms, rd.symbol)
	}
	for _, sym := range syms {
		if ext.LookupSymbol(sym) != nil {
			s.missing[sym] = true
		}
	}
	return nil
}

func (s *nvmlSource) Read(ctx context.Context) ([]gpuReading, map[string]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.init(); err != nil {
		return nil, nil, err
	}
	n, ret := s.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, nil, fmt.Errorf("cannot count GPUs through NVML: %v", ret)
	}
	if n == 0 {
		return nil, nil, fmt.Errorf("cannot find a GPU through NVML: %w", ErrNotApplicable)
	}
	driver, ret := s.lib.SystemGetDriverVersion()
	if ret != nvml.SUCCESS {
		driver = ""
	}
	has := func(sym string) bool { return !s.missing[sym] }
	skipped := nvmlSkipped()
	devs := make([]nvml.Device, n)
	for i := range devs {
		d, ret := s.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, skipped, fmt.Errorf("cannot open GPU %d through NVML: %v", i, ret)
		}
		devs[i] = d
	}
	if !s.xidTried {
		s.xidTried = true
		s.xid, s.xidWhy = startXIDWatcher(s.lib, devs, has, s.log)
	}
	var out []gpuReading
	for i, d := range devs {
		if ctx.Err() != nil {
			return out, skipped, ctx.Err()
		}
		r, err := nvmlReading(i, d, driver, has, skipped)
		switch {
		case gpuLost(err):
			// A GPU off the bus (XID 79) reads nothing more, but its XIDs
			// are what says why: serve them under its last identity, and
			// the other GPUs as usual.
			id, ok := s.ids[i]
			if !ok {
				id = gpuInfo{Index: strconv.Itoa(i), Driver: driver}
			}
			r = gpuReading{GPU: id, Fields: map[string]float64{}, Lost: err.Error()}
		case err != nil:
			return out, skipped, err
		default:
			if s.ids == nil {
				s.ids = map[int]gpuInfo{}
			}
			s.ids[i] = r.GPU
		}
		s.readXID(i, &r, skipped)
		out = append(out, r)
	}
	return out, skipped, nil
}

// readXID fills GPU i's last XID and XID count from the watcher, or
// skips the field with the reason its XIDs are not watched.
func (s *nvmlSource) readXID(i int, r *gpuReading, skipped map[string]string) {
	if s.xid != nil {
		if last, count, ok := s.xid.read(i); ok {
			r.Fields[xidField] = float64(last)
			c := float64(count)
			r.XIDEvents = &c
			return
		}
	}
	if i < len(s.xidWhy) && s.xidWhy[i] != "" {
		skipped[xidField] = s.xidWhy[i]
		return
	}
	skipped[xidField] = fmt.Sprintf("GPU %d appeared after NVML XID events were registered; restart the agent to watch it", i)
}

func (s *nvmlSource) Name() string { return "nvml" }

func (s *nvmlSource) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.up {
		return nil
	}
	s.up = false
	var err error
	if s.xid != nil {
		err = s.xid.Close() // before Shutdown: the goroutine calls into NVML
	}
	s.xid, s.xidWhy, s.xidTried = nil, nil, false
	if ret := s.lib.Shutdown(); ret != nvml.SUCCESS {
		return errors.Join(err, fmt.Errorf("cannot shut NVML down: %v", ret))
	}
	return err
}
