//go:build cgo && linux

package collector

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/ballast-io/ballast/models"
)

// The tests below drive nvmlSource through go-nvml's own mock of its
// Interface: this machine has no NVIDIA GPU. The real library is checked
// by bench/gpu-check.sh on a GPU host.

// mockGPU is an H200-like device; ecc says whether ECC is enabled (the
// ECC calls answer NOT_SUPPORTED otherwise), memTemp whether the memory
// temperature field is supported.
func mockGPU(i int, ecc, memTemp bool) *mock.Device {
	eccRet := nvml.SUCCESS
	if !ecc {
		eccRet = nvml.ERROR_NOT_SUPPORTED
	}
	return &mock.Device{
		GetUUIDFunc: func() (string, nvml.Return) { return fmt.Sprintf("GPU-%d", i), nvml.SUCCESS },
		GetNameFunc: func() (string, nvml.Return) { return "NVIDIA H200", nvml.SUCCESS },
		GetPciInfoFunc: func() (nvml.PciInfo, nvml.Return) {
			var p nvml.PciInfo
			for j, c := range fmt.Sprintf("00000000:%02X:00.0", 0x17+i) {
				p.BusId[j] = int8(c)
			}
			return p, nvml.SUCCESS
		},
		GetUtilizationRatesFunc: func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 91, Memory: 40}, nvml.SUCCESS },
		GetMemoryInfo_v2Func: func() (nvml.Memory_v2, nvml.Return) {
			return nvml.Memory_v2{Total: 150 << 30, Reserved: 512 << 20, Used: 5120 << 20, Free: 150<<30 - 5632<<20}, nvml.SUCCESS
		},
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			return nvml.Memory{Total: 150 << 30, Used: 5632 << 20, Free: 150<<30 - 5632<<20}, nvml.SUCCESS
		},
		GetPowerUsageFunc:             func() (uint32, nvml.Return) { return 350123, nvml.SUCCESS },
		GetTotalEnergyConsumptionFunc: func() (uint64, nvml.Return) { return 15152422938, nvml.SUCCESS },
		GetTemperatureFunc: func(s nvml.TemperatureSensors) (uint32, nvml.Return) {
			if s != nvml.TEMPERATURE_GPU {
				return 0, nvml.ERROR_INVALID_ARGUMENT
			}
			return 41, nvml.SUCCESS
		},
		GetFieldValuesFunc: func(vs []nvml.FieldValue) nvml.Return {
			for k := range vs {
				if vs[k].FieldId != nvml.FI_DEV_MEMORY_TEMP || !memTemp {
					vs[k].NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
					continue
				}
				vs[k].ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_INT)
				binary.NativeEndian.PutUint32(vs[k].Value[:], 38)
			}
			return nvml.SUCCESS
		},
		GetClockInfoFunc: func(c nvml.ClockType) (uint32, nvml.Return) {
			switch c {
			case nvml.CLOCK_SM:
				return 1980, nvml.SUCCESS
			case nvml.CLOCK_MEM:
				return 2619, nvml.SUCCESS
			}
			return 0, nvml.ERROR_INVALID_ARGUMENT
		},
		GetTotalEccErrorsFunc: func(t nvml.MemoryErrorType, c nvml.EccCounterType) (uint64, nvml.Return) {
			if c != nvml.VOLATILE_ECC {
				return 0, nvml.ERROR_INVALID_ARGUMENT
			}
			if t == nvml.MEMORY_ERROR_TYPE_CORRECTED {
				return 7, eccRet
			}
			return 2, eccRet
		},
		GetRemappedRowsFunc:      func() (int, int, bool, bool, nvml.Return) { return 3, 1, false, true, nvml.SUCCESS },
		GetPcieReplayCounterFunc: func() (int, nvml.Return) { return 12, nvml.SUCCESS },
		RegisterEventsFunc:       func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS },
	}
}

// mockNVML is a host whose driver has every symbol but those in missing.
func mockNVML(devs []*mock.Device, missing ...string) *mock.Interface {
	return &mock.Interface{
		InitFunc:                   func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:               func() nvml.Return { return nvml.SUCCESS },
		SystemGetDriverVersionFunc: func() (string, nvml.Return) { return "580.159.04", nvml.SUCCESS },
		DeviceGetCountFunc:         func() (int, nvml.Return) { return len(devs), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			if i < 0 || i >= len(devs) {
				return nil, nvml.ERROR_INVALID_ARGUMENT
			}
			return devs[i], nvml.SUCCESS
		},
		EventSetCreateFunc: func() (nvml.EventSet, nvml.Return) {
			// No XID ever comes: each wait times out (after a token pause).
			return &mock.EventSet{
				WaitFunc: func(uint32) (nvml.EventData, nvml.Return) {
					time.Sleep(time.Millisecond)
					return nvml.EventData{}, nvml.ERROR_TIMEOUT
				},
				FreeFunc: func() nvml.Return { return nvml.SUCCESS },
			}, nvml.SUCCESS
		},
		ExtensionsFunc: func() nvml.ExtendedInterface {
			return &mock.ExtendedInterface{LookupSymbolFunc: func(s string) error {
				for _, m := range missing {
					if s == m {
						return errors.New("undefined symbol " + s)
					}
				}
				return nil
			}}
		},
	}
}

// TestNVMLReadingMapsUnits reads two mocked GPUs, the second without ECC
// and memory temperature, and checks the ballast series and the skipped
// fields: NOT_SUPPORTED skips a field of one GPU, not the GPU.
func TestNVMLReadingMapsUnits(t *testing.T) {
	lib := mockNVML([]*mock.Device{mockGPU(0, true, true), mockGPU(1, false, false)})
	src := &nvmlSource{lib: lib}
	rs, skipped, err := src.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 {
		t.Fatalf("got %d readings; want 2", len(rs))
	}
	if want := (gpuInfo{"1", "GPU-1", "NVIDIA H200", "00000000:18:00.0", "580.159.04"}); rs[1].GPU != want {
		t.Errorf("GPU 1 identity: got %+v; want %+v", rs[1].GPU, want)
	}
	got := map[string]float64{}
	for _, s := range gpuSamples(rs) {
		if s.Values[0] == "0" {
			got[s.Name+"/"+s.Values[len(s.Values)-1]] = s.Value
		}
	}
	want := map[string]float64{
		models.MetricGPUInfo + "/580.159.04":                1,
		models.MetricGPUUtilization + "/NVIDIA H200":        0.91,
		models.MetricGPUMemCopyUtilization + "/NVIDIA H200": 0.40,
		models.MetricGPUMemoryUsed + "/NVIDIA H200":         5120 << 20,
		models.MetricGPUMemoryFree + "/NVIDIA H200":         150<<30 - 5632<<20,
		models.MetricGPUPower + "/NVIDIA H200":              350.123,
		models.MetricGPUEnergy + "/NVIDIA H200":             15152422.938,
		models.MetricGPUTemperature + "/NVIDIA H200":        41,
		models.MetricGPUMemoryTemperature + "/NVIDIA H200":  38,
		models.MetricGPUSMClock + "/NVIDIA H200":            1.98e9,
		models.MetricGPUMemoryClock + "/NVIDIA H200":        2.619e9,
		models.MetricGPUECCErrors + "/single_bit":           7,
		models.MetricGPUECCErrors + "/double_bit":           2,
		models.MetricGPURemappedRows + "/correctable":       3,
		models.MetricGPURemappedRows + "/uncorrectable":     1,
		models.MetricGPURowRemapFailure + "/NVIDIA H200":    1,
		models.MetricGPUPCIeReplays + "/NVIDIA H200":        12,
		// No XID event came: the last XID is 0, as DCGM reports it.
		models.MetricGPULastXID + "/NVIDIA H200":   0,
		models.MetricGPUXIDErrors + "/NVIDIA H200": 0,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("GPU 0 series:\ngot  %v\nwant %v", got, want)
	}
	for _, f := range []string{"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_MEMORY_TEMP"} {
		if _, ok := rs[1].Fields[f]; ok {
			t.Errorf("GPU 1 has %s; want it skipped (NOT_SUPPORTED)", f)
		}
		if !strings.Contains(skipped[f], "GPU 1") {
			t.Errorf("skipped[%s] = %q; want a reason naming GPU 1", f, skipped[f])
		}
	}
	if len(rs[1].Fields) != len(rs[0].Fields)-3 {
		t.Errorf("GPU 1 has %d fields; want GPU 0's %d less the 3 unsupported", len(rs[1].Fields), len(rs[0].Fields))
	}
	// Every field ballast maps is either read from NVML or skipped with a reason.
	for _, f := range dcgmFields {
		_, read := rs[0].Fields[f.Field]
		why, skip := skipped[f.Field]
		switch {
		case !read && !skip:
			t.Errorf("%s: neither read nor skipped", f.Field)
		case f.Prof && (read || !strings.Contains(why, "install DCGM")):
			t.Errorf("%s skipped with %q; want it to say NVML has no profiling counters", f.Field, why)
		}
	}
	if err := src.Close(); err != nil || len(lib.ShutdownCalls()) != 1 {
		t.Errorf("Close: err %v, %d Shutdown calls; want NVML shut down once", err, len(lib.ShutdownCalls()))
	}
}

// TestNVMLOldDriver: a driver without nvmlDeviceGetMemoryInfo_v2 is read
// with v1 (reserved memory counted as used), and one without
// nvmlDeviceGetRemappedRows (before R450) skips the row fields instead of
// calling a symbol that is not there.
func TestNVMLOldDriver(t *testing.T) {
	dev := mockGPU(0, true, true)
	dev.GetRemappedRowsFunc = nil // a call would panic
	src := &nvmlSource{lib: mockNVML([]*mock.Device{dev}, "nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetRemappedRows")}
	t.Cleanup(func() { src.Close() }) // stops the XID watcher
	rs, skipped, err := src.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := rs[0].Fields["DCGM_FI_DEV_FB_USED"]; got != 5632 {
		t.Errorf("FB_USED from v1: got %v MiB; want 5632", got)
	}
	if why := skipped["DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS"]; !strings.Contains(why, "nvmlDeviceGetRemappedRows") {
		t.Errorf("remapped rows on an old driver: skipped with %q; want the missing function named", why)
	}
}

// TestNVMLErrors: no library or no driver is "not applicable"; a GPU that
// fails (not a field it does not support) is an error naming the GPU.
func TestNVMLErrors(t *testing.T) {
	for _, ret := range []nvml.Return{nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED} {
		lib := mockNVML(nil)
		lib.InitFunc = func() nvml.Return { return ret }
		if _, _, err := (&nvmlSource{lib: lib}).Read(context.Background()); !errors.Is(err, ErrNotApplicable) {
			t.Errorf("Init %v: got %v; want ErrNotApplicable", ret, err)
		}
	}
	if _, _, err := (&nvmlSource{lib: mockNVML(nil)}).Read(context.Background()); !errors.Is(err, ErrNotApplicable) {
		t.Errorf("no GPUs: got %v; want ErrNotApplicable", err)
	}
	lib := mockNVML(nil)
	lib.InitFunc = func() nvml.Return { return nvml.ERROR_INSUFFICIENT_RESOURCES }
	if _, _, err := (&nvmlSource{lib: lib}).Read(context.Background()); err == nil || errors.Is(err, ErrNotApplicable) {
		t.Errorf("Init failing otherwise: got %v; want an error other than not applicable", err)
	}
	dev := mockGPU(0, true, true)
	dev.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_UNKNOWN }
	failing := &nvmlSource{lib: mockNVML([]*mock.Device{dev})}
	t.Cleanup(func() { failing.Close() })
	_, _, err := failing.Read(context.Background())
	if err == nil || !strings.Contains(err.Error(), "GPU 0") || !strings.Contains(err.Error(), "POWER_USAGE") {
		t.Errorf("a failing GPU: got %v; want an error naming GPU 0 and the field", err)
	}
	// A lost GPU (off the bus) is not an error of the collection: the
	// reading says why, and the other GPUs are read.
	dev = mockGPU(0, true, true)
	dev.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_GPU_IS_LOST }
	lost := &nvmlSource{lib: mockNVML([]*mock.Device{dev, mockGPU(1, true, true)})}
	t.Cleanup(func() { lost.Close() })
	rs, _, err := lost.Read(context.Background())
	if err != nil || len(rs) != 2 || !strings.Contains(rs[0].Lost, "GPU 0") || !strings.Contains(rs[0].Lost, "POWER_USAGE") || rs[1].Lost != "" || len(rs[1].Fields) == 0 {
		t.Errorf("a lost GPU: got err %v, %d readings (%+v); want GPU 0 lost naming the field, GPU 1 read", err, len(rs), rs)
	}
}

// TestDCGMFallsBackToNVML: with libdcgm missing the collector reads NVML,
// says so in ballast_gpu_source_info, and keeps to NVML without probing
// libdcgm or initialising NVML again on later scrapes.
func TestDCGMFallsBackToNVML(t *testing.T) {
	noDCGM := &fakeGPUs{name: "libdcgm", err: fmt.Errorf("cannot load libdcgm: %w", ErrNotApplicable)}
	lib := mockNVML([]*mock.Device{mockGPU(0, true, true)})
	log := newOnceLogger(Options{}.withDefaults().Logger)
	c := &dcgmCollector{src: &fallbackSource{srcs: []gpuSource{noDCGM, &nvmlSource{lib: lib}}, log: log}, log: log}
	t.Cleanup(func() { c.Close() })
	for i := 0; i < 3; i++ {
		s, err := c.Collect(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var src []string
		for _, x := range s {
			if x.Name == models.MetricGPUSource {
				src = x.Values
			}
		}
		if !reflect.DeepEqual(src, []string{"nvml"}) {
			t.Errorf("scrape %d: %s labels %v; want [nvml]", i, models.MetricGPUSource, src)
		}
	}
	if noDCGM.reads != 1 || len(lib.InitCalls()) != 1 {
		t.Errorf("libdcgm read %d times, NVML initialised %d times over 3 scrapes; want 1 and 1", noDCGM.reads, len(lib.InitCalls()))
	}
}
