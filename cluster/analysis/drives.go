package analysis

import (
	"context"
	"math"
	"sort"
	"time"

	"github.com/ballast-io/ballast/analyzer/drivehealth"
	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/storage"
)

// smartQuery reads the NVMe health series the drive rules use, for every
// drive of every data server, in one query: the latest value of the last
// 30 s (a drive that dropped off the bus then has none, rather than five
// minutes of stale ones from the default lookback).
const smartQuery = `last_over_time({__name__=~"ballast_nvme_(critical_warning|available_spare_ratio|available_spare_threshold_ratio|percentage_used_ratio|media_errors_total|error_log_entries_total|warning_temperature_seconds_total|critical_temperature_seconds_total|unsafe_shutdowns_total)|ballast_drive_(smart_healthy|temperature_celsius|power_on_seconds_total)"}[30s]) keep_metric_names`

// criticalBits maps the bit label of ballast_nvme_critical_warning to its
// position in the NVMe critical-warning byte.
var criticalBits = map[string]int{"spare": 0, "temperature": 1, "reliability": 2, "read_only": 3, "volatile_backup": 4, "pmr_read_only": 5}

// maxDriveHistory bounds the observations kept per drive.
const maxDriveHistory = 14 * 24 * 60

// driveStage assesses every drive with analyzer/drivehealth each
// DriveEvery, from its SMART series. Drives are named "<node>/<device>"
// with the controller name the SMART series carry (ds03/nvme2). The
// analyzer returns only active findings, so the stage ends those that stop
// being returned.
type driveStage struct {
	a       *Analysis
	model   *drivehealth.Model
	rules   drivehealth.RuleOptions
	history map[string][]drivehealth.Observation
	next    time.Time
	cl      closer
}

func newDriveStage(a *Analysis) (*driveStage, error) {
	m, err := drivehealth.DefaultModel()
	if err != nil {
		return nil, err
	}
	return &driveStage{a: a, model: m, rules: drivehealth.DefaultRuleOptions(), history: map[string][]drivehealth.Observation{}}, nil
}

func (d *driveStage) Name() string { return "drivehealth" }

// readSmart turns the result of smartQuery into one observation per drive.
func readSmart(series []storage.Series, now time.Time) map[string]drivehealth.Observation {
	out := map[string]drivehealth.Observation{}
	for i := range series {
		s := &series[i]
		node, dev := s.Label("node"), s.Label("device")
		v, ok := lastValue(s)
		if node == "" || dev == "" || !ok || math.IsNaN(v) {
			continue
		}
		id := node + "/" + dev
		o, seen := out[id]
		if !seen {
			o = drivehealth.NewObservation(now, drivehealth.ProtocolNVMe)
		}
		set := func(p *float64, x float64) {
			if math.IsNaN(*p) {
				*p = x
			} else {
				*p += x
			}
		}
		switch s.Name {
		case "ballast_nvme_critical_warning":
			if b, ok := criticalBits[s.Label("bit")]; ok {
				set(&o.CriticalWarning, v*float64(int(1)<<b))
			}
		case "ballast_nvme_available_spare_ratio":
			o.AvailableSpare = 100 * v
		case "ballast_nvme_available_spare_threshold_ratio":
			o.SpareThreshold = 100 * v
		case "ballast_nvme_percentage_used_ratio":
			o.PercentageUsed = 100 * v
		case "ballast_nvme_media_errors_total":
			o.MediaErrors = v
		case "ballast_nvme_error_log_entries_total":
			o.ErrLogEntries = v
		case "ballast_nvme_warning_temperature_seconds_total":
			o.WarningTempMinutes = v / 60
		case "ballast_nvme_critical_temperature_seconds_total":
			o.CriticalTempMinutes = v / 60
		case "ballast_nvme_unsafe_shutdowns_total":
			o.UnsafeShutdowns = v
		case "ballast_drive_smart_healthy":
			o.SMARTPassed = v
		case "ballast_drive_temperature_celsius":
			o.TemperatureC = v
		case "ballast_drive_power_on_seconds_total":
			o.PowerOnHours = v / 3600
		}
		out[id] = o
	}
	return out
}

func (d *driveStage) Run(ctx context.Context, now time.Time) ([]models.Finding, error) {
	if now.Before(d.next) {
		return nil, nil
	}
	d.next = now.Add(d.a.opts.DriveEvery)
	series, err := d.a.q.Query(ctx, smartQuery, now)
	if err != nil {
		return nil, err
	}
	for id, o := range readSmart(series, now) {
		h := append(d.history[id], o)
		if len(h) > maxDriveHistory {
			h = h[len(h)-maxDriveHistory:]
		}
		d.history[id] = h
	}
	ids := make([]string, 0, len(d.history))
	for id := range d.history {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var fs []models.Finding
	for _, id := range ids {
		fs = append(fs, drivehealth.Analyze(id, d.history[id], now, d.model, d.rules)...)
	}
	return d.cl.update(now, fs), nil
}
