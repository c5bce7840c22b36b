package drivehealth

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// Identity names the drive an observation came from.
type Identity struct {
	Model  string `json:"model"`
	Serial string `json:"serial"`
	Device string `json:"device"`
}

// smartctlJSON is the subset of `smartctl --json --xall` output the rules
// use. Pointers tell "absent" from zero.
type smartctlJSON struct {
	Smartctl struct {
		ExitStatus *int `json:"exit_status"`
	} `json:"smartctl"`
	Device struct {
		Name     string `json:"name"`
		Protocol string `json:"protocol"`
	} `json:"device"`
	ModelName     string `json:"model_name"`
	SCSIModelName string `json:"scsi_model_name"`
	SerialNumber  string `json:"serial_number"`
	LocalTime     struct {
		TimeT *int64 `json:"time_t"`
	} `json:"local_time"`
	SmartStatus *struct {
		Passed *bool `json:"passed"`
	} `json:"smart_status"`
	Temperature struct {
		Current *float64 `json:"current"`
	} `json:"temperature"`
	PowerOnTime struct {
		Hours *float64 `json:"hours"`
	} `json:"power_on_time"`
	NVMe *struct {
		CriticalWarning  *float64 `json:"critical_warning"`
		AvailableSpare   *float64 `json:"available_spare"`
		SpareThreshold   *float64 `json:"available_spare_threshold"`
		PercentageUsed   *float64 `json:"percentage_used"`
		MediaErrors      *float64 `json:"media_errors"`
		ErrLogEntries    *float64 `json:"num_err_log_entries"`
		UnsafeShutdowns  *float64 `json:"unsafe_shutdowns"`
		WarningTempTime  *float64 `json:"warning_temp_time"`
		CriticalCompTime *float64 `json:"critical_comp_time"`
		Temperature      *float64 `json:"temperature"`
		PowerOnHours     *float64 `json:"power_on_hours"`
	} `json:"nvme_smart_health_information_log"`
	ATA *struct {
		Table []struct {
			ID         int    `json:"id"`
			Value      int    `json:"value"`
			Thresh     int    `json:"thresh"`
			WhenFailed string `json:"when_failed"`
			Raw        struct {
				Value *float64 `json:"value"`
			} `json:"raw"`
		} `json:"table"`
	} `json:"ata_smart_attributes"`
	SCSIGrownDefects *float64 `json:"scsi_grown_defect_list"`
	SCSIErrors       *struct {
		Read *struct {
			TotalUncorrected *float64 `json:"total_uncorrected_errors"`
		} `json:"read"`
		Write *struct {
			TotalUncorrected *float64 `json:"total_uncorrected_errors"`
		} `json:"write"`
	} `json:"scsi_error_counter_log"`
}

// ParseSmartctl decodes one `smartctl --json` document (NVMe, ATA/SAT or
// SCSI) into an Observation. The observation time is smartctl's local_time
// when present, else fallback.
func ParseSmartctl(r io.Reader, fallback time.Time) (Observation, Identity, error) {
	var j smartctlJSON
	if err := json.NewDecoder(r).Decode(&j); err != nil {
		return Observation{}, Identity{}, fmt.Errorf("cannot decode smartctl json: %w", err)
	}
	var p Protocol
	switch strings.ToLower(j.Device.Protocol) {
	case "nvme":
		p = ProtocolNVMe
	case "ata":
		p = ProtocolATA
	case "scsi":
		p = ProtocolSCSI
	default:
		return Observation{}, Identity{}, fmt.Errorf("cannot parse smartctl json: unknown device protocol %q", j.Device.Protocol)
	}
	t := fallback
	if j.LocalTime.TimeT != nil {
		t = time.Unix(*j.LocalTime.TimeT, 0).UTC()
	}
	o := NewObservation(t, p)
	id := Identity{Model: j.ModelName, Serial: j.SerialNumber, Device: j.Device.Name}
	if id.Model == "" {
		id.Model = j.SCSIModelName
	}
	set := func(dst *float64, v *float64) {
		if v != nil {
			*dst = *v
		}
	}
	if j.SmartStatus != nil && j.SmartStatus.Passed != nil {
		o.SMARTPassed = 0
		if *j.SmartStatus.Passed {
			o.SMARTPassed = 1
		}
	}
	set(&o.TemperatureC, j.Temperature.Current)
	set(&o.PowerOnHours, j.PowerOnTime.Hours)
	if n := j.NVMe; n != nil {
		set(&o.CriticalWarning, n.CriticalWarning)
		set(&o.AvailableSpare, n.AvailableSpare)
		set(&o.SpareThreshold, n.SpareThreshold)
		set(&o.PercentageUsed, n.PercentageUsed)
		set(&o.MediaErrors, n.MediaErrors)
		set(&o.ErrLogEntries, n.ErrLogEntries)
		set(&o.UnsafeShutdowns, n.UnsafeShutdowns)
		set(&o.WarningTempMinutes, n.WarningTempTime)
		set(&o.CriticalTempMinutes, n.CriticalCompTime)
		if !known(o.TemperatureC) {
			set(&o.TemperatureC, n.Temperature)
		}
		if !known(o.PowerOnHours) {
			set(&o.PowerOnHours, n.PowerOnHours)
		}
	}
	if a := j.ATA; a != nil {
		for _, at := range a.Table {
			raw := at.Raw.Value
			switch at.ID {
			case 5:
				set(&o.Reallocated, raw)
			case 197:
				set(&o.Pending, raw)
			case 187, 198:
				if raw != nil {
					if !known(o.MediaErrors) {
						o.MediaErrors = 0
					}
					o.MediaErrors += *raw
				}
			case 194:
				if !known(o.TemperatureC) && raw != nil {
					// The low 16 bits hold the current temperature; the
					// rest are vendor min/max fields.
					o.TemperatureC = float64(int64(*raw) & 0xffff)
				}
			}
			if at.Thresh > 0 && at.Value <= at.Thresh {
				o.FailingAttributes = append(o.FailingAttributes, at.ID)
			}
		}
	}
	set(&o.Reallocated, j.SCSIGrownDefects)
	if e := j.SCSIErrors; e != nil {
		var sum float64
		var any bool
		for _, d := range []*struct {
			TotalUncorrected *float64 `json:"total_uncorrected_errors"`
		}{e.Read, e.Write} {
			if d != nil && d.TotalUncorrected != nil {
				sum += *d.TotalUncorrected
				any = true
			}
		}
		if any {
			o.MediaErrors = sum
		}
	}
	return o, id, nil
}
