package collector

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	smart "github.com/anatol/smart.go"

	"github.com/ballast-io/ballast/models"
)

// nvmeDevice is the part of smart.go's *NVMeDevice the collector uses; the
// tests put a fake behind it.
type nvmeDevice interface {
	ReadSMART() (*smart.NvmeSMARTLog, error)
	Close() error
}

// nvmeCollector reads the SMART/Health log of every NVMe controller under
// <sys>/class/nvme through its character device <dev>/nvmeN, and the
// identity (model, serial, firmware) from sysfs. A controller that cannot
// be opened or read yields ballast_collector_device_up 0 and a warning
// logged once per reason; the other controllers are still read.
//
// It also reads SATA drives (sd* block devices) through smart.go's ATA
// pass-through: ATA attributes, normalised and raw. SAS and other non-ATA
// disks are left to the smartctl collector.
type nvmeCollector struct {
	sysRoot, devRoot string
	open             func(path string) (nvmeDevice, error)
	openSata         func(path string) (sataDevice, error)
	now              func() time.Time
	sataFailed       map[string]sataFailure // drives not to retry before a time
	log              *onceLogger
}

type sataFailure struct {
	until time.Time
	notAT bool // not an ATA drive at all: report nothing
}

func newNVMeCollector(opts Options, log *onceLogger) (Collector, error) {
	return &nvmeCollector{
		sysRoot:    opts.SysRoot,
		devRoot:    opts.DevRoot,
		open:       func(p string) (nvmeDevice, error) { return smart.OpenNVMe(p) },
		openSata:   openSata,
		now:        opts.Now,
		sataFailed: map[string]sataFailure{},
		log:        log,
	}, nil
}

func (c *nvmeCollector) Collect(ctx context.Context) ([]Sample, error) {
	ctrls, err := os.ReadDir(filepath.Join(c.sysRoot, "class/nvme"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("cannot list NVMe controllers: %w", err)
	}
	sata := sataDrives(c.sysRoot)
	if len(ctrls) == 0 && len(sata) == 0 {
		return nil, fmt.Errorf("cannot find NVMe controllers or SATA drives under %q: %w", c.sysRoot, ErrNotApplicable)
	}
	out := c.collectSata(sata)
	for _, e := range ctrls {
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		name := e.Name()
		l, err := c.readLog(filepath.Join(c.devRoot, name))
		if err != nil {
			c.log.warnOnce(name, err.Error(), "cannot read NVMe SMART log", "device", name)
			out = append(out, deviceUp("nvme", name, false))
			continue
		}
		c.log.clear(name)
		id := c.identity(name) // only for a drive that answered: its labels
		out = append(out, deviceUp("nvme", name, true), id.info())
		if b, err := sysUint(filepath.Join(c.sysRoot, "class/nvme", name), "size"); err == nil {
			out = append(out, Sample{models.MetricDriveCapacity, id.labels(), b})
		}
		out = append(out, nvmeHealthFromLog(l).samples(id)...)
		out = append(out, Sample{models.MetricDriveSmartHealthy, id.labels(), boolFloat(l.CritWarning == 0)})
	}
	return out, nil
}

// collectSata reads the SATA drives, skipping those that recently failed
// to open (see sataRetry) and those that are not ATA.
func (c *nvmeCollector) collectSata(names []string) []Sample {
	var out []Sample
	now := c.now()
	for _, name := range names {
		if f, ok := c.sataFailed[name]; ok && now.Before(f.until) {
			if !f.notAT {
				out = append(out, deviceUp("nvme", name, false))
			}
			continue
		}
		path := filepath.Join(c.devRoot, name)
		d, err := c.openSata(path)
		if errors.Is(err, errNotSata) {
			c.sataFailed[name] = sataFailure{until: now.Add(sataRetry), notAT: true}
			continue
		}
		var (
			id    driveID
			attrs []ataAttribute
		)
		if err == nil {
			id, attrs, err = readSata(d, name)
			d.Close()
		} else {
			err = fmt.Errorf("cannot open %q: %w", path, err)
			c.sataFailed[name] = sataFailure{until: now.Add(sataRetry)}
		}
		if err != nil {
			c.log.warnOnce(name, err.Error(), "cannot read SATA SMART data", "device", name)
			out = append(out, deviceUp("nvme", name, false))
			continue
		}
		delete(c.sataFailed, name)
		c.log.clear(name)
		out = append(out, deviceUp("nvme", name, true), id.info())
		out = append(out, ataSamples(id, attrs)...)
	}
	return out
}

func (c *nvmeCollector) readLog(path string) (*smart.NvmeSMARTLog, error) {
	d, err := c.open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot open %q: %w", path, err)
	}
	defer d.Close()
	l, err := d.ReadSMART()
	if err != nil {
		return nil, fmt.Errorf("cannot read SMART log of %q: %w", path, err)
	}
	return l, nil
}

// identity reads model, serial and firmware from sysfs, which the kernel
// fills from Identify Controller; missing files leave labels empty.
func (c *nvmeCollector) identity(name string) driveID {
	dir := filepath.Join(c.sysRoot, "class/nvme", name)
	return driveID{Device: name, Protocol: "NVMe",
		Model: sysString(dir, "model"), Serial: sysString(dir, "serial"), Firmware: sysString(dir, "firmware_rev")}
}

func sysString(dir, file string) string {
	b, err := readSysFile(filepath.Join(dir, file))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// sysUint sums the "size" (512-byte sectors) of the controller's
// namespaces, <ctrl>/<ns>/size, into bytes.
func sysUint(dir, file string) (float64, error) {
	nss, err := filepath.Glob(filepath.Join(dir, "nvme*n*", file))
	if err != nil || len(nss) == 0 {
		return 0, fmt.Errorf("cannot find namespaces under %q", dir)
	}
	sort.Strings(nss)
	var total float64
	for _, p := range nss {
		b, err := readSysFile(p)
		if err != nil {
			return 0, err
		}
		v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("cannot parse %q: %w", p, err)
		}
		total += float64(v) * 512
	}
	return total, nil
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// decodeNVMeSMARTLog decodes a raw 512-byte SMART/Health log page with
// smart.go's own layout (NvmeSMARTLog, little-endian), exactly as its
// ReadSMART does after the ioctl.
func decodeNVMeSMARTLog(page []byte) (*smart.NvmeSMARTLog, error) {
	if len(page) != 512 {
		return nil, fmt.Errorf("cannot decode NVMe SMART log: got %d bytes; want 512", len(page))
	}
	var l smart.NvmeSMARTLog
	if err := binary.Read(bytes.NewReader(page), binary.LittleEndian, &l); err != nil {
		return nil, fmt.Errorf("cannot decode NVMe SMART log: %w", err)
	}
	return &l, nil
}

// u128 converts an NVMe 128-bit counter to float64 (exact up to 2^53,
// then rounded: 2^53 data units are 4.6 EB).
func u128(v smart.Uint128) float64 {
	return float64(v.Val[1])*math.Pow(2, 64) + float64(v.Val[0])
}

// kelvinToCelsius converts an NVMe temperature (kelvin, integer) to °C the
// way smartctl and nvme-cli print it (K - 273), so the ioctl and JSON
// sources agree.
func kelvinToCelsius(k uint16) float64 { return float64(k) - 273 }

// nvmeHealthFromLog maps smart.go's decoded log page to nvmeHealth.
// Sensor values of 0 mean "not implemented" (NVMe Base Specification).
func nvmeHealthFromLog(l *smart.NvmeSMARTLog) nvmeHealth {
	h := nvmeHealth{
		CriticalWarning:   l.CritWarning,
		TemperatureC:      kelvinToCelsius(l.Temperature),
		AvailableSpare:    float64(l.AvailSpare),
		SpareThreshold:    float64(l.SpareThresh),
		PercentageUsed:    float64(l.PercentUsed),
		DataUnitsRead:     u128(l.DataUnitsRead),
		DataUnitsWritten:  u128(l.DataUnitsWritten),
		HostReads:         u128(l.HostReads),
		HostWrites:        u128(l.HostWrites),
		BusyMinutes:       u128(l.CtrlBusyTime),
		PowerCycles:       u128(l.PowerCycles),
		PowerOnHours:      u128(l.PowerOnHours),
		UnsafeShutdowns:   u128(l.UnsafeShutdowns),
		MediaErrors:       u128(l.MediaErrors),
		ErrorLogEntries:   u128(l.NumErrLogEntries),
		WarningTempMinute: float64(l.WarningTempTime),
		CriticalTempMin:   float64(l.CritCompTime),
	}
	for i, k := range l.TempSensor {
		h.Sensors[i] = math.NaN()
		if k != 0 {
			h.Sensors[i] = kelvinToCelsius(k)
		}
	}
	return h
}
