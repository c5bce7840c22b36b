package collector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ballast-io/ballast/models"
)

// smartctlCollector gets drive health from smartctl, for drives behind RAID
// controllers and sites that already run it: either by running
// `smartctl --scan-open --json` and `smartctl --json --xall <dev>` under
// the collector's timeout, or by reading *.json files from a drop
// directory (outputs of `smartctl --json --xall`, or of
// `nvme smart-log -o json`, then named <device>.json).
//
// When the nvme collector is enabled too, smartctl skips NVMe drives
// (type "nvme" in its scan), so a drive is not read twice per scrape.
type smartctlCollector struct {
	path, dropDir string
	skipNVMe      bool
	log           *onceLogger
}

func newSmartctlCollector(opts Options, log *onceLogger) (Collector, error) {
	return &smartctlCollector{path: opts.SmartctlPath, dropDir: opts.SmartctlDropDir, skipNVMe: opts.nvmeEnabled, log: log}, nil
}

func (c *smartctlCollector) Collect(ctx context.Context) ([]Sample, error) {
	if c.dropDir != "" {
		return c.collectDropDir()
	}
	bin, err := exec.LookPath(c.path)
	if err != nil {
		return nil, fmt.Errorf("cannot find smartctl %q: %w", c.path, ErrNotApplicable)
	}
	scan, err := runSmartctl(ctx, bin, "--scan-open", "--json")
	if err != nil {
		return nil, err
	}
	devs, err := parseSmartctlScan(scan)
	if err != nil {
		return nil, err
	}
	// Drives are read a few at a time: smartctl --xall takes up to a
	// second per drive, and a data server has dozens.
	results := make([][]Sample, len(devs))
	sem := make(chan struct{}, smartctlParallel)
	var wg sync.WaitGroup
	for i, d := range devs {
		if c.skipNVMe && d.Type == "nvme" {
			continue // the nvme collector reads it through the ioctl already
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i] = c.readDevice(ctx, bin, d)
		}()
	}
	wg.Wait()
	var out []Sample
	for _, r := range results {
		out = append(out, r...)
	}
	return out, nil
}

// smartctlParallel bounds the smartctl processes run at once.
const smartctlParallel = 4

func (c *smartctlCollector) readDevice(ctx context.Context, bin string, d smartctlScanDevice) []Sample {
	b, err := runSmartctl(ctx, bin, "--json", "--xall", "--device", d.Type, d.Name)
	var r DriveReport
	if err == nil {
		r, err = parseSmartctlJSON(b)
	}
	name := smartctlDeviceName(d.Name, d.Type)
	if err != nil {
		c.log.warnOnce(name, err.Error(), "cannot read drive with smartctl", "device", name)
		return []Sample{deviceUp("smartctl", name, false)}
	}
	c.log.clear(name)
	return append([]Sample{deviceUp("smartctl", name, true)}, r.Samples...)
}

func (c *smartctlCollector) collectDropDir() ([]Sample, error) {
	files, err := filepath.Glob(filepath.Join(c.dropDir, "*.json"))
	if err != nil {
		return nil, fmt.Errorf("cannot list smartctl drop directory %q: %w", c.dropDir, err)
	}
	sort.Strings(files)
	var out []Sample
	for _, f := range files {
		b, err := os.ReadFile(f)
		var r DriveReport
		if err == nil {
			r, err = ParseDriveReport(b, strings.TrimSuffix(filepath.Base(f), ".json"))
		}
		if errors.Is(err, ErrNotDriveReport) {
			// A --scan listing or an error document: no drive to report.
			c.log.warnOnce(f, err.Error(), "skipping smartctl drop file", "file", f)
			continue
		}
		if err != nil {
			c.log.warnOnce(f, err.Error(), "cannot read smartctl output", "file", f)
			out = append(out, deviceUp("smartctl", filepath.Base(f), false))
			continue
		}
		c.log.clear(f)
		out = append(out, r.Samples...)
	}
	return out, nil
}

// runSmartctl runs smartctl and returns its output. smartctl's exit status
// is a bit mask: bits 0 (bad command line) and 1 (device open failed) mean
// no usable output; the others report drive problems that the JSON
// describes, so the output is still used.
func runSmartctl(ctx context.Context, bin string, args ...string) ([]byte, error) {
	out, err := exec.CommandContext(ctx, bin, args...).Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode()&3 == 0 {
		err = nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot run smartctl %v: %w", args, err)
	}
	return out, nil
}

type smartctlScanDevice struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// parseSmartctlScan parses `smartctl --scan-open --json`.
func parseSmartctlScan(b []byte) ([]smartctlScanDevice, error) {
	var v struct {
		Devices []smartctlScanDevice `json:"devices"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("cannot parse smartctl --scan-open output: %w", err)
	}
	return v.Devices, nil
}

// smartctlDeviceName turns smartctl's device name and type into the
// device label: the kernel name (nvme0, sda), with the type appended for
// drives behind a RAID controller (bus/0:megaraid,3).
func smartctlDeviceName(name, typ string) string {
	n := strings.TrimPrefix(name, "/dev/")
	if strings.Contains(typ, ",") {
		n += ":" + typ
	}
	return n
}

// smartctlReport is the part of `smartctl --json --xall` output ballast
// reads (smartctl JSON format version 1).
type smartctlReport struct {
	Smartctl struct {
		Messages []struct {
			String   string `json:"string"`
			Severity string `json:"severity"`
		} `json:"messages"`
		ExitStatus *int `json:"exit_status"`
	} `json:"smartctl"`
	// Devices is set in `smartctl --scan` output only.
	Devices   []json.RawMessage `json:"devices"`
	LocalTime *struct {
		TimeT int64 `json:"time_t"`
	} `json:"local_time"`
	Device *struct {
		Name     string `json:"name"`
		Type     string `json:"type"`
		Protocol string `json:"protocol"`
	} `json:"device"`
	ModelName     string `json:"model_name"`
	SCSIModelName string `json:"scsi_model_name"`
	Serial        string `json:"serial_number"`
	Firmware      string `json:"firmware_version"`
	SCSIRevision  string `json:"scsi_revision"`
	UserCapacity  *struct {
		Bytes float64 `json:"bytes"`
	} `json:"user_capacity"`
	SmartStatus *struct {
		Passed bool `json:"passed"`
	} `json:"smart_status"`
	Temperature *struct {
		Current *float64 `json:"current"`
	} `json:"temperature"`
	PowerOnTime *struct {
		Hours float64 `json:"hours"`
	} `json:"power_on_time"`
	PowerCycleCount *float64 `json:"power_cycle_count"`
	NVMeLog         *struct {
		CriticalWarning   float64   `json:"critical_warning"`
		Temperature       float64   `json:"temperature"`
		TemperatureSensor []float64 `json:"temperature_sensors"`
		AvailableSpare    float64   `json:"available_spare"`
		SpareThreshold    float64   `json:"available_spare_threshold"`
		PercentageUsed    float64   `json:"percentage_used"`
		DataUnitsRead     float64   `json:"data_units_read"`
		DataUnitsWritten  float64   `json:"data_units_written"`
		HostReads         float64   `json:"host_reads"`
		HostWrites        float64   `json:"host_writes"`
		BusyTime          float64   `json:"controller_busy_time"`
		PowerCycles       float64   `json:"power_cycles"`
		PowerOnHours      float64   `json:"power_on_hours"`
		UnsafeShutdowns   float64   `json:"unsafe_shutdowns"`
		MediaErrors       float64   `json:"media_errors"`
		ErrLogEntries     float64   `json:"num_err_log_entries"`
		WarningTempTime   float64   `json:"warning_temp_time"`
		CriticalCompTime  float64   `json:"critical_comp_time"`
	} `json:"nvme_smart_health_information_log"`
	ATAAttributes *struct {
		Table []struct {
			ID     int     `json:"id"`
			Name   string  `json:"name"`
			Value  float64 `json:"value"`
			Worst  float64 `json:"worst"`
			Thresh float64 `json:"thresh"`
			Raw    struct {
				Value float64 `json:"value"`
			} `json:"raw"`
		} `json:"table"`
	} `json:"ata_smart_attributes"`
	SCSIGrownDefects *float64 `json:"scsi_grown_defect_list"`
	SCSIErrorLog     map[string]struct {
		Uncorrected *float64 `json:"total_uncorrected_errors"`
	} `json:"scsi_error_counter_log"`
}

// ErrNotDriveReport marks a JSON document that holds no drive's SMART
// data: `smartctl --scan` output, a smartctl error document (the device
// could not be opened or identified) or JSON of another kind. Readers of
// drive files skip such a document with the error's reason.
var ErrNotDriveReport = errors.New("not a drive report")

// DriveReport is one drive's SMART data decoded from a smartctl or
// nvme-cli JSON document.
type DriveReport struct {
	// Device is the device label of the drive's series.
	Device string
	// Time is when smartctl read the drive (its local_time); zero when the
	// document does not say (nvme-cli).
	Time time.Time
	// Samples are the series the agent exposes for the drive.
	Samples []Sample
}

// ParseDriveReport decodes one drive document as the smartctl collector
// reads its drop directory: `smartctl --json --xall` output (it has a
// "smartctl" member) or `nvme smart-log -o json` output, whose device label
// is name since nvme-cli does not print it. It is the one smartctl decoder:
// the agent, `ballast drives score --smartctl` and the evaluation use it.
func ParseDriveReport(b []byte, name string) (DriveReport, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(b, &probe); err != nil {
		return DriveReport{}, fmt.Errorf("cannot parse drive JSON %q: %w", name, err)
	}
	if _, ok := probe["smartctl"]; ok {
		return parseSmartctlJSON(b)
	}
	if _, ok := probe["critical_warning"]; !ok {
		return DriveReport{}, fmt.Errorf("cannot use drive JSON %q: %w: neither smartctl output nor nvme smart-log output", name, ErrNotDriveReport)
	}
	h, err := parseNVMeCLISmartLog(b)
	if err != nil {
		return DriveReport{}, err
	}
	id := driveID{Device: name, Protocol: "NVMe"}
	return DriveReport{Device: name, Samples: append([]Sample{id.info(), {models.MetricDriveSmartHealthy, id.labels(), boolFloat(h.CriticalWarning == 0)}}, h.samples(id)...)}, nil
}

// parseSmartctlJSON maps one `smartctl --json --xall` output to samples:
// the drive series for every protocol, the NVMe health log for NVMe, the
// attribute table for ATA, the defect list and error counters for SCSI.
// Scan output and error documents (no device member) are ErrNotDriveReport.
func parseSmartctlJSON(b []byte) (DriveReport, error) {
	var r smartctlReport
	if err := json.Unmarshal(b, &r); err != nil {
		return DriveReport{}, fmt.Errorf("cannot parse smartctl JSON: %w", err)
	}
	if r.Devices != nil && r.Device == nil {
		return DriveReport{}, fmt.Errorf("cannot use smartctl JSON: %w: smartctl --scan output listing %d devices", ErrNotDriveReport, len(r.Devices))
	}
	if r.Device == nil || r.Device.Name == "" {
		msg := "no device member"
		for _, m := range r.Smartctl.Messages {
			msg = m.String
		}
		if r.Smartctl.ExitStatus != nil {
			msg += fmt.Sprintf(" (exit status %d)", *r.Smartctl.ExitStatus)
		}
		return DriveReport{}, fmt.Errorf("cannot use smartctl JSON: %w: %s", ErrNotDriveReport, msg)
	}
	id := driveID{
		Device:   smartctlDeviceName(r.Device.Name, r.Device.Type),
		Serial:   r.Serial,
		Model:    firstNonEmpty(r.ModelName, r.SCSIModelName),
		Firmware: firstNonEmpty(r.Firmware, r.SCSIRevision),
		Protocol: r.Device.Protocol,
	}
	l := id.labels()
	rep := DriveReport{Device: id.Device}
	if r.LocalTime != nil && r.LocalTime.TimeT > 0 {
		rep.Time = time.Unix(r.LocalTime.TimeT, 0).UTC()
	}
	out := []Sample{id.info()}
	if r.SmartStatus != nil {
		out = append(out, Sample{models.MetricDriveSmartHealthy, l, boolFloat(r.SmartStatus.Passed)})
	}
	if r.UserCapacity != nil {
		out = append(out, Sample{models.MetricDriveCapacity, l, r.UserCapacity.Bytes})
	}
	if n := r.NVMeLog; n != nil {
		h := nvmeHealth{
			CriticalWarning: uint8(n.CriticalWarning), TemperatureC: n.Temperature,
			AvailableSpare: n.AvailableSpare, SpareThreshold: n.SpareThreshold, PercentageUsed: n.PercentageUsed,
			DataUnitsRead: n.DataUnitsRead, DataUnitsWritten: n.DataUnitsWritten,
			HostReads: n.HostReads, HostWrites: n.HostWrites, BusyMinutes: n.BusyTime,
			PowerCycles: n.PowerCycles, PowerOnHours: n.PowerOnHours, UnsafeShutdowns: n.UnsafeShutdowns,
			MediaErrors: n.MediaErrors, ErrorLogEntries: n.ErrLogEntries,
			WarningTempMinute: n.WarningTempTime, CriticalTempMin: n.CriticalCompTime,
		}
		for i := range h.Sensors {
			h.Sensors[i] = math.NaN()
			// smartctl lists only the implemented sensors, from sensor 1.
			if i < len(n.TemperatureSensor) {
				h.Sensors[i] = n.TemperatureSensor[i]
			}
		}
		rep.Samples = append(out, h.samples(id)...)
		return rep, nil
	}
	if r.Temperature != nil && r.Temperature.Current != nil {
		out = append(out, Sample{models.MetricDriveTemperature, l, *r.Temperature.Current})
	}
	if r.PowerOnTime != nil {
		out = append(out, Sample{models.MetricDrivePowerOn, l, r.PowerOnTime.Hours * 3600})
	}
	if r.PowerCycleCount != nil {
		out = append(out, Sample{models.MetricDrivePowerCycles, l, *r.PowerCycleCount})
	}
	if r.ATAAttributes != nil {
		attrs := make([]ataAttribute, 0, len(r.ATAAttributes.Table))
		for _, a := range r.ATAAttributes.Table {
			attrs = append(attrs, ataAttribute{ID: a.ID, Name: a.Name, Value: a.Value, Worst: a.Worst, Threshold: a.Thresh, Raw: a.Raw.Value})
		}
		out = append(out, ataSamples(id, attrs)...)
	}
	if r.SCSIGrownDefects != nil {
		out = append(out, Sample{models.MetricSCSIGrownDefects, l, *r.SCSIGrownDefects})
	}
	for _, dir := range []string{"read", "write", "verify"} {
		if e, ok := r.SCSIErrorLog[dir]; ok && e.Uncorrected != nil {
			out = append(out, Sample{models.MetricSCSIUncorrected, id.labels(dir), *e.Uncorrected})
		}
	}
	rep.Samples = out
	return rep, nil
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// parseNVMeCLISmartLog parses `nvme smart-log -o json`. nvme-cli versions
// print numbers as JSON integers, strings or floats, so each field is read
// with flexNumber; temperatures are kelvin and converted to °C.
func parseNVMeCLISmartLog(b []byte) (nvmeHealth, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nvmeHealth{}, fmt.Errorf("cannot parse nvme smart-log JSON: %w", err)
	}
	var errs []error
	get := func(key string) float64 {
		raw, ok := m[key]
		if !ok {
			errs = append(errs, fmt.Errorf("cannot find nvme smart-log field %q", key))
			return 0
		}
		v, err := flexNumber(raw)
		if err != nil {
			errs = append(errs, fmt.Errorf("cannot parse nvme smart-log field %q: %w", key, err))
		}
		return v
	}
	h := nvmeHealth{
		CriticalWarning:   uint8(get("critical_warning")),
		TemperatureC:      get("temperature") - 273,
		AvailableSpare:    get("avail_spare"),
		SpareThreshold:    get("spare_thresh"),
		PercentageUsed:    get("percent_used"),
		DataUnitsRead:     get("data_units_read"),
		DataUnitsWritten:  get("data_units_written"),
		HostReads:         get("host_read_commands"),
		HostWrites:        get("host_write_commands"),
		BusyMinutes:       get("controller_busy_time"),
		PowerCycles:       get("power_cycles"),
		PowerOnHours:      get("power_on_hours"),
		UnsafeShutdowns:   get("unsafe_shutdowns"),
		MediaErrors:       get("media_errors"),
		ErrorLogEntries:   get("num_err_log_entries"),
		WarningTempMinute: get("warning_temp_time"),
		CriticalTempMin:   get("critical_comp_time"),
	}
	for i := range h.Sensors {
		h.Sensors[i] = math.NaN()
		key := fmt.Sprintf("temperature_sensor_%d", i+1)
		if _, ok := m[key]; ok {
			if k := get(key); k != 0 {
				h.Sensors[i] = k - 273
			}
		}
	}
	return h, errors.Join(errs...)
}

// flexNumber reads a JSON number, or a string holding one.
func flexNumber(raw json.RawMessage) (float64, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return strconv.ParseFloat(strings.TrimSpace(s), 64)
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		return 0, fmt.Errorf("want a number or a numeric string, got %s", raw)
	}
	return f, nil
}
