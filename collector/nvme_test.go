package collector

import (
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"math"
	"strings"
	"testing"

	smart "github.com/anatol/smart.go"

	"github.com/ballast-io/ballast/models"
)

// specPage builds a SMART / Health Information log page (log identifier
// 02h) byte by byte from the NVMe Base Specification 2.0 (figure 207,
// "SMART / Health Information Log Page"), independently of smart.go's
// struct, so that the decoding is checked against the specification's
// offsets rather than against itself.
func specPage() []byte {
	p := make([]byte, 512)
	le16 := func(off int, v uint16) { binary.LittleEndian.PutUint16(p[off:], v) }
	le32 := func(off int, v uint32) { binary.LittleEndian.PutUint32(p[off:], v) }
	le128 := func(off int, lo, hi uint64) { // 16-byte little-endian counter
		binary.LittleEndian.PutUint64(p[off:], lo)
		binary.LittleEndian.PutUint64(p[off+8:], hi)
	}
	p[0] = 1<<0 | 1<<2 | 1<<5 // byte 0: critical warning: spare, reliability, PMR read-only
	le16(1, 310)              // bytes 1-2: composite temperature, kelvin
	p[3] = 95                 // byte 3: available spare, percent
	p[4] = 10                 // byte 4: available spare threshold, percent
	p[5] = 3                  // byte 5: percentage used
	le128(32, 0, 1)           // bytes 32-47: data units read = 2^64 (upper half used)
	le128(48, 123456789, 0)   // bytes 48-63: data units written
	le128(64, 1000, 0)        // bytes 64-79: host read commands
	le128(80, 2000, 0)        // bytes 80-95: host write commands
	le128(96, 30, 0)          // bytes 96-111: controller busy time, minutes
	le128(112, 7, 0)          // bytes 112-127: power cycles
	le128(128, 500, 0)        // bytes 128-143: power-on hours
	le128(144, 3, 0)          // bytes 144-159: unsafe shutdowns
	le128(160, 2, 0)          // bytes 160-175: media and data integrity errors
	le128(176, 9, 0)          // bytes 176-191: number of error information log entries
	le32(192, 11)             // bytes 192-195: warning composite temperature time, minutes
	le32(196, 1)              // bytes 196-199: critical composite temperature time, minutes
	le16(200, 300)            // bytes 200-201: temperature sensor 1, kelvin
	le16(202, 0)              // bytes 202-203: temperature sensor 2, 0 = not implemented
	le16(204, 320)            // bytes 204-205: temperature sensor 3
	return p
}

func TestDecodeNVMeSMARTLogSpecLayout(t *testing.T) {
	l, err := decodeNVMeSMARTLog(specPage())
	if err != nil {
		t.Fatal(err)
	}
	if l.DataUnitsRead.Val != [2]uint64{0, 1} {
		t.Errorf("data units read: got %v; want upper 64 bits 1", l.DataUnitsRead.Val)
	}
	h := nvmeHealthFromLog(l)
	checks := []struct {
		name      string
		got, want float64
	}{
		{"composite °C (310 K)", h.TemperatureC, 37},
		{"available spare", h.AvailableSpare, 95},
		{"spare threshold", h.SpareThreshold, 10},
		{"percentage used", h.PercentageUsed, 3},
		{"data units read (128-bit)", h.DataUnitsRead, math.Pow(2, 64)},
		{"data units written", h.DataUnitsWritten, 123456789},
		{"host reads", h.HostReads, 1000},
		{"host writes", h.HostWrites, 2000},
		{"busy minutes", h.BusyMinutes, 30},
		{"power cycles", h.PowerCycles, 7},
		{"power-on hours", h.PowerOnHours, 500},
		{"unsafe shutdowns", h.UnsafeShutdowns, 3},
		{"media errors", h.MediaErrors, 2},
		{"error log entries", h.ErrorLogEntries, 9},
		{"warning temp minutes", h.WarningTempMinute, 11},
		{"critical temp minutes", h.CriticalTempMin, 1},
		{"sensor 1 °C", h.Sensors[0], 27},
		{"sensor 3 °C", h.Sensors[2], 47},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v; want %v", c.name, c.got, c.want)
		}
	}
	if !math.IsNaN(h.Sensors[1]) {
		t.Errorf("sensor 2 (0 K = not implemented): got %v; want absent", h.Sensors[1])
	}

	// The samples: units converted, one series per warning bit.
	id := driveID{Device: "nvme0", Serial: "S1", Model: "M"}
	got := map[string]float64{}
	for _, s := range h.samples(id) {
		got[s.Name+"/"+strings.Join(s.Values[3:], ",")] = s.Value
	}
	want := map[string]float64{
		models.MetricDriveTemperature + "/":                   37,
		models.MetricDrivePowerOn + "/":                       500 * 3600,
		models.MetricNVMeDataRead + "/":                       math.Pow(2, 64) * 512000,
		models.MetricNVMeDataWritten + "/":                    123456789 * 512000,
		models.MetricNVMeControllerBusy + "/":                 1800,
		models.MetricNVMeAvailableSpare + "/":                 0.95,
		models.MetricNVMePercentageUsed + "/":                 0.03,
		models.MetricNVMeWarningTempTime + "/":                660,
		models.MetricNVMeCriticalWarning + "/spare":           1,
		models.MetricNVMeCriticalWarning + "/temperature":     0,
		models.MetricNVMeCriticalWarning + "/reliability":     1,
		models.MetricNVMeCriticalWarning + "/read_only":       0,
		models.MetricNVMeCriticalWarning + "/volatile_backup": 0,
		models.MetricNVMeCriticalWarning + "/pmr_read_only":   1,
		models.MetricNVMeTemperatureSensor + "/1":             27,
		models.MetricNVMeTemperatureSensor + "/3":             47,
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			t.Errorf("%s: got %v (present %v); want %v", k, g, ok, w)
		}
	}
	if _, ok := got[models.MetricNVMeTemperatureSensor+"/2"]; ok {
		t.Errorf("sensor 2 is not implemented but was exported")
	}
}

func TestDecodeNVMeSMARTLogRejectsShortPage(t *testing.T) {
	if _, err := decodeNVMeSMARTLog(make([]byte, 511)); err == nil || !strings.Contains(err.Error(), "511") {
		t.Errorf("got %v; want an error naming the 511-byte length", err)
	}
}

// fakeNVMe serves a SMART log page, or fails.
type fakeNVMe struct {
	page []byte
	err  error
}

func (f fakeNVMe) ReadSMART() (*smart.NvmeSMARTLog, error) {
	if f.err != nil {
		return nil, f.err
	}
	return decodeNVMeSMARTLog(f.page)
}

func (fakeNVMe) Close() error { return nil }

// countHandler counts log records at warning level and above.
type countHandler struct{ n *int }

func (h countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		*h.n++
	}
	return nil
}
func (h countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countHandler) WithGroup(string) slog.Handler      { return h }

func TestNVMeCollectorDeviceUpAndLogOnce(t *testing.T) {
	sys := fakeRoot(t, map[string]string{
		"class/nvme/nvme0/model":        "INTEL SSDPE2KX080T8\n",
		"class/nvme/nvme0/serial":       "PHLJ0001\n",
		"class/nvme/nvme0/firmware_rev": "VDV10131\n",
		"class/nvme/nvme0/nvme0n1/size": "15628053168\n",
		"class/nvme/nvme1/model":        "gone\n",
	})
	warnings := 0
	cc, _ := newNVMeCollector(Options{SysRoot: sys, DevRoot: "/nonexistent-dev"}.withDefaults(), newOnceLogger(slog.New(countHandler{&warnings})))
	c := cc.(*nvmeCollector)
	c.open = func(p string) (nvmeDevice, error) {
		if strings.HasSuffix(p, "nvme1") {
			return nil, errors.New("permission denied")
		}
		return fakeNVMe{page: specPage()}, nil
	}
	for i := 0; i < 3; i++ {
		s, err := c.Collect(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		up := map[string]float64{}
		for _, x := range s {
			if x.Name == models.MetricCollectorDeviceUp {
				up[x.Values[1]] = x.Value
			}
			if x.Name == models.MetricDriveCapacity && x.Value != 15628053168*512 {
				t.Errorf("capacity: got %v; want %v", x.Value, 15628053168*512)
			}
			if x.Name == models.MetricDriveInfo && x.Values[1] != "PHLJ0001" {
				t.Errorf("serial: got %q; want PHLJ0001", x.Values[1])
			}
		}
		if up["nvme0"] != 1 || up["nvme1"] != 0 || len(up) != 2 {
			t.Fatalf("device_up: got %v; want nvme0 1, nvme1 0", up)
		}
	}
	if warnings != 1 {
		t.Errorf("warnings over 3 scrapes: got %d; want 1 (logged once)", warnings)
	}
}

func TestNVMeCollectorRealOpenOfNonDevice(t *testing.T) {
	// A regular file where /dev/nvme0 should be: smart.go opens it but the
	// admin ioctl fails; the collector must report the device down, not
	// fail or crash.
	sys := fakeRoot(t, map[string]string{"class/nvme/nvme0/model": "x\n"})
	dev := fakeRoot(t, map[string]string{"nvme0": ""})
	s, err := collectWith(t, "nvme", Options{SysRoot: sys, DevRoot: dev})
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 1 || s[0].Name != models.MetricCollectorDeviceUp || s[0].Value != 0 {
		t.Errorf("got %v; want only device_up{nvme0} 0", s)
	}
}

func TestNVMeCollectorNotApplicable(t *testing.T) {
	_, err := collectWith(t, "nvme", Options{SysRoot: t.TempDir()})
	if !errors.Is(err, ErrNotApplicable) {
		t.Errorf("got %v; want ErrNotApplicable without /sys/class/nvme", err)
	}
}
