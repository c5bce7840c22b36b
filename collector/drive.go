package collector

import (
	"strconv"

	"github.com/ballast-io/ballast/models"
)

// driveID identifies a drive in every drive series; nvme and smartctl fill
// it the same way so that both sources yield the same series.
type driveID struct {
	Device   string // kernel name: nvme0 (the controller), sda
	Serial   string
	Model    string
	Firmware string
	Protocol string // NVMe, ATA, SCSI
}

func (d driveID) labels(extra ...string) []string {
	return append([]string{d.Device, d.Serial, d.Model}, extra...)
}

func (d driveID) info() Sample {
	return Sample{models.MetricDriveInfo, []string{d.Device, d.Serial, d.Model, d.Firmware, d.Protocol}, 1}
}

// nvmeHealth is the NVMe SMART/Health log (log page 02h) in base units,
// whatever its source: the ioctl (via smart.go), smartctl's JSON or
// nvme-cli's JSON.
type nvmeHealth struct {
	CriticalWarning   uint8
	TemperatureC      float64    // composite, °C
	Sensors           [8]float64 // °C; NaN where the sensor is not implemented
	AvailableSpare    float64    // percent
	SpareThreshold    float64    // percent
	PercentageUsed    float64    // percent
	DataUnitsRead     float64    // units of 1000 x 512 bytes
	DataUnitsWritten  float64
	HostReads         float64
	HostWrites        float64
	BusyMinutes       float64
	PowerCycles       float64
	PowerOnHours      float64
	UnsafeShutdowns   float64
	MediaErrors       float64
	ErrorLogEntries   float64
	WarningTempMinute float64
	CriticalTempMin   float64
}

// nvmeDataUnit is the size of the SMART log's data unit: 1000 units of 512
// bytes (NVMe Base Specification, Data Units Read).
const nvmeDataUnit = 512 * 1000

// samples maps h to the drive and NVMe series of id.
func (h nvmeHealth) samples(id driveID) []Sample {
	l := id.labels()
	out := []Sample{
		{models.MetricDriveTemperature, l, h.TemperatureC},
		{models.MetricDrivePowerOn, l, h.PowerOnHours * 3600},
		{models.MetricDrivePowerCycles, l, h.PowerCycles},
	}
	for bit, name := range models.NVMeCriticalWarningBits {
		out = append(out, Sample{models.MetricNVMeCriticalWarning, id.labels(name), float64(h.CriticalWarning >> bit & 1)})
	}
	for i, t := range h.Sensors {
		if t == t { // not NaN
			out = append(out, Sample{models.MetricNVMeTemperatureSensor, id.labels(strconv.Itoa(i + 1)), t})
		}
	}
	return append(out,
		Sample{models.MetricNVMeAvailableSpare, l, h.AvailableSpare / 100},
		Sample{models.MetricNVMeAvailableSpareThresh, l, h.SpareThreshold / 100},
		Sample{models.MetricNVMePercentageUsed, l, h.PercentageUsed / 100},
		Sample{models.MetricNVMeDataRead, l, h.DataUnitsRead * nvmeDataUnit},
		Sample{models.MetricNVMeDataWritten, l, h.DataUnitsWritten * nvmeDataUnit},
		Sample{models.MetricNVMeHostReadCommands, l, h.HostReads},
		Sample{models.MetricNVMeHostWriteCommands, l, h.HostWrites},
		Sample{models.MetricNVMeControllerBusy, l, h.BusyMinutes * 60},
		Sample{models.MetricNVMeUnsafeShutdowns, l, h.UnsafeShutdowns},
		Sample{models.MetricNVMeMediaErrors, l, h.MediaErrors},
		Sample{models.MetricNVMeErrorLogEntries, l, h.ErrorLogEntries},
		Sample{models.MetricNVMeWarningTempTime, l, h.WarningTempMinute * 60},
		Sample{models.MetricNVMeCriticalTempTime, l, h.CriticalTempMin * 60},
	)
}

// ataAttribute is one ATA SMART attribute, from smart.go or smartctl.
type ataAttribute struct {
	ID                      int
	Name                    string
	Value, Worst, Threshold float64
	Raw                     float64
}

func ataSamples(id driveID, attrs []ataAttribute) []Sample {
	var out []Sample
	for _, a := range attrs {
		l := id.labels(strconv.Itoa(a.ID), a.Name)
		out = append(out,
			Sample{models.MetricATAAttributeValue, l, a.Value},
			Sample{models.MetricATAAttributeWorst, l, a.Worst},
			Sample{models.MetricATAAttributeThresh, l, a.Threshold},
			Sample{models.MetricATAAttributeRaw, l, a.Raw},
		)
	}
	return out
}

// deviceUp is the collector_device_up sample of one device.
func deviceUp(collector, device string, up bool) Sample {
	v := 0.0
	if up {
		v = 1
	}
	return Sample{models.MetricCollectorDeviceUp, []string{collector, device}, v}
}
