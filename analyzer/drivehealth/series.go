package drivehealth

import (
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ballast-io/ballast/models"
)

// Readings turns the SMART series ballast's agents expose (docs/metrics.md:
// ballast_drive_*, ballast_nvme_*, ballast_ata_attribute_* and
// ballast_scsi_*) into observation histories, one per drive. It is the one
// mapping from those series to Observations: the mds stage reads them from
// the store, the capacity report from the query API, `drives score
// --smartctl` from smartctl files decoded by the agent's own collector and
// the Backblaze reader from a CSV's smart_N_raw columns (as ATA attribute
// series), so every path judges the same fields the same way.
//
// The zero value is ready to use.
type Readings struct {
	drives map[string]map[int64]*snapshot
}

// snapshot gathers one drive's readings at one time.
type snapshot struct {
	o Observation
	// protocol from ballast_drive_info; hint from the series families seen.
	protocol, hint Protocol
	// ataTemp and ataHours are ATA 194 and 9, used when the drive series
	// (temperature, power-on time) are absent, as from smart.go's SATA path.
	ataTemp, ataHours float64
	attrs             map[int]*ataLevels
}

// newSnapshot starts an all-unknown snapshot at t; p, when not empty, is
// the protocol the source already knows.
func newSnapshot(t time.Time, p Protocol) *snapshot {
	return &snapshot{o: NewObservation(t, p), protocol: p, ataTemp: math.NaN(), ataHours: math.NaN()}
}

// ataLevels is an ATA attribute's normalised value and vendor threshold.
type ataLevels struct{ value, thresh float64 }

// Add records one value of series name (labels as exposed) of drive at t.
// Series the mapping does not use are ignored, as are NaN values (a
// staleness marker or a missing reading).
func (r *Readings) Add(drive string, t time.Time, name string, labels []models.Label, v float64) {
	if math.IsNaN(v) || !usedSeries(name) {
		return
	}
	if r.drives == nil {
		r.drives = map[string]map[int64]*snapshot{}
	}
	byTime := r.drives[drive]
	if byTime == nil {
		byTime = map[int64]*snapshot{}
		r.drives[drive] = byTime
	}
	s := byTime[t.UnixNano()]
	if s == nil {
		s = newSnapshot(t, "")
		byTime[t.UnixNano()] = s
	}
	s.add(name, labels, v)
}

// Histories returns every drive's observations, sorted by time.
func (r *Readings) Histories() map[string][]Observation {
	out := make(map[string][]Observation, len(r.drives))
	for d, byTime := range r.drives {
		h := make([]Observation, 0, len(byTime))
		for _, s := range byTime {
			h = append(h, s.observation())
		}
		sort.Slice(h, func(i, j int) bool { return h[i].Time.Before(h[j].Time) })
		out[d] = h
	}
	return out
}

// Len is the number of drives seen.
func (r *Readings) Len() int { return len(r.drives) }

// SeriesNames lists every series Readings uses, for callers that select
// them from a store.
var SeriesNames = []string{
	models.MetricDriveInfo, models.MetricDriveSmartHealthy, models.MetricDriveTemperature, models.MetricDrivePowerOn,
	models.MetricNVMeCriticalWarning, models.MetricNVMeAvailableSpare, models.MetricNVMeAvailableSpareThresh,
	models.MetricNVMePercentageUsed, models.MetricNVMeMediaErrors, models.MetricNVMeErrorLogEntries,
	models.MetricNVMeWarningTempTime, models.MetricNVMeCriticalTempTime, models.MetricNVMeUnsafeShutdowns,
	models.MetricATAAttributeValue, models.MetricATAAttributeThresh, models.MetricATAAttributeRaw,
	models.MetricSCSIGrownDefects, models.MetricSCSIUncorrected,
}

// EvidenceSeries and EvidenceATAAttributes are the few series that carry
// a drive's failure evidence between full readings: its SMART verdict
// (which for NVMe is "no critical-warning bit set"), its media errors and
// SCSI grown defects, and the ATA attributes of reallocated, pending and
// uncorrectable sectors (ballast_ata_attribute_raw with these
// attribute_id). Read through Readings, they give a partial observation
// for EvidenceChanged: a caller can watch them every scrape at a fraction
// of the cost of every series.
var (
	EvidenceSeries = []string{
		models.MetricDriveSmartHealthy, models.MetricNVMeMediaErrors,
		models.MetricSCSIGrownDefects, models.MetricSCSIUncorrected,
	}
	EvidenceATAAttributes = []int{5, 187, 197, 198}
)

var usedSet = func() map[string]bool {
	m := make(map[string]bool, len(SeriesNames))
	for _, n := range SeriesNames {
		m[n] = true
	}
	return m
}()

func usedSeries(name string) bool { return usedSet[name] }

// addTo adds v to a field that may still be unknown (NaN).
func addTo(p *float64, v float64) {
	if math.IsNaN(*p) {
		*p = 0
	}
	*p += v
}

func (s *snapshot) add(name string, labels []models.Label, v float64) {
	o := &s.o
	switch name {
	case models.MetricDriveInfo:
		switch strings.ToLower(models.LabelValue(labels, "protocol")) {
		case "nvme":
			s.protocol = ProtocolNVMe
		case "ata", "sata":
			s.protocol = ProtocolATA
		case "scsi", "sas":
			s.protocol = ProtocolSCSI
		}
	case models.MetricDriveSmartHealthy:
		o.SMARTPassed = v
	case models.MetricDriveTemperature:
		o.TemperatureC = v
	case models.MetricDrivePowerOn:
		o.PowerOnHours = v / 3600
	case models.MetricNVMeCriticalWarning:
		s.hint = ProtocolNVMe
		for bit, n := range models.NVMeCriticalWarningBits {
			if n == models.LabelValue(labels, "bit") {
				addTo(&o.CriticalWarning, 0)
				if v > 0 {
					o.CriticalWarning += float64(int(1) << bit)
				}
			}
		}
	case models.MetricNVMeAvailableSpare:
		s.hint, o.AvailableSpare = ProtocolNVMe, 100*v
	case models.MetricNVMeAvailableSpareThresh:
		s.hint, o.SpareThreshold = ProtocolNVMe, 100*v
	case models.MetricNVMePercentageUsed:
		s.hint, o.PercentageUsed = ProtocolNVMe, 100*v
	case models.MetricNVMeMediaErrors:
		s.hint, o.MediaErrors = ProtocolNVMe, v
	case models.MetricNVMeErrorLogEntries:
		s.hint, o.ErrLogEntries = ProtocolNVMe, v
	case models.MetricNVMeWarningTempTime:
		s.hint, o.WarningTempMinutes = ProtocolNVMe, v/60
	case models.MetricNVMeCriticalTempTime:
		s.hint, o.CriticalTempMinutes = ProtocolNVMe, v/60
	case models.MetricNVMeUnsafeShutdowns:
		s.hint, o.UnsafeShutdowns = ProtocolNVMe, v
	case models.MetricATAAttributeRaw, models.MetricATAAttributeValue, models.MetricATAAttributeThresh:
		s.hint = ProtocolATA
		id, err := strconv.Atoi(models.LabelValue(labels, "attribute_id"))
		if err != nil {
			return
		}
		if name == models.MetricATAAttributeRaw {
			s.ataRaw(id, v)
			return
		}
		if s.attrs == nil {
			s.attrs = map[int]*ataLevels{}
		}
		a := s.attrs[id]
		if a == nil {
			a = &ataLevels{value: math.NaN(), thresh: math.NaN()}
			s.attrs[id] = a
		}
		if name == models.MetricATAAttributeValue {
			a.value = v
		} else {
			a.thresh = v
		}
	case models.MetricSCSIGrownDefects:
		s.hint, o.Reallocated = ProtocolSCSI, v
	case models.MetricSCSIUncorrected:
		// Read, write and verify uncorrected errors are all data the drive
		// could not return: their sum is the SCSI media-error count.
		s.hint = ProtocolSCSI
		addTo(&o.MediaErrors, v)
	}
}

// ataRaw maps an ATA attribute's raw value to the observation. Only these
// ids have a meaning common to every vendor (smartmontools' drivedb and
// the Backblaze data use them the same way); 187 and 198 are both
// uncorrectable reads and add up.
func (s *snapshot) ataRaw(id int, v float64) {
	o := &s.o
	switch id {
	case 5:
		o.Reallocated = v
	case 197:
		o.Pending = v
	case 187, 198:
		addTo(&o.MediaErrors, v)
	case 194:
		// The low 16 bits hold the current temperature; the rest are
		// vendor minimum/maximum fields.
		s.ataTemp = float64(int64(v) & 0xffff)
	case 9:
		s.ataHours = v
	}
}

func (s *snapshot) observation() Observation {
	o := s.o
	o.Protocol = s.protocol
	if o.Protocol == "" {
		o.Protocol = s.hint
	}
	if !known(o.TemperatureC) {
		o.TemperatureC = s.ataTemp
	}
	if !known(o.PowerOnHours) {
		o.PowerOnHours = s.ataHours
	}
	for id, a := range s.attrs {
		// A threshold of 0 means "never fails" (vendors use it for
		// informational attributes).
		if a.thresh > 0 && known(a.value) && a.value <= a.thresh {
			o.FailingAttributes = append(o.FailingAttributes, id)
		}
	}
	sort.Ints(o.FailingAttributes)
	return o
}

// NodeDevice names a drive from its series' labels as the mds does:
// "<node>/<device>" (ds03/nvme2), or "" when either label is missing.
func NodeDevice(labels []models.Label) string {
	node, dev := models.LabelValue(labels, "node"), models.LabelValue(labels, "device")
	if node == "" || dev == "" {
		return ""
	}
	return node + "/" + dev
}
