package collector

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	smart "github.com/anatol/smart.go"
)

// sataDevice is the part of smart.go's *SataDevice the collector uses; the
// tests put a fake behind it.
type sataDevice interface {
	Identify() (*smart.AtaIdentifyDevice, error)
	ReadSMARTData() (*smart.AtaSmartPage, error)
	ReadSMARTThresholds() (*smart.AtaSmartThresholdsPage, error)
	Close() error
}

// sataRetry is how long the nvme collector waits before trying again a
// SATA drive it could not open. smart.go's OpenSata leaks the descriptor
// when IDENTIFY fails after the open, so retrying every scrape would leak
// one descriptor per scrape.
const sataRetry = 10 * time.Minute

// openSata opens a SATA drive with smart.go; errNotSata reports a device
// that answered the SCSI INQUIRY but is not ATA (SAS, USB bridges without
// SAT), which is not an error of the collector.
func openSata(path string) (sataDevice, error) {
	d, err := smart.OpenSata(path)
	if err != nil {
		if strings.Contains(err.Error(), "not a SATA device") {
			return nil, errNotSata
		}
		return nil, err
	}
	return d, nil
}

var errNotSata = fmt.Errorf("not a SATA device")

// sataDrives lists the SCSI-disk block devices (sd*) under <sys>/block.
func sataDrives(sysRoot string) []string {
	es, err := os.ReadDir(filepath.Join(sysRoot, "block"))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range es {
		if strings.HasPrefix(e.Name(), "sd") {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// readSata reads one SATA drive's identity and attributes.
func readSata(d sataDevice, name string) (driveID, []ataAttribute, error) {
	id, err := d.Identify()
	if err != nil {
		return driveID{}, nil, fmt.Errorf("cannot identify %q: %w", name, err)
	}
	page, err := d.ReadSMARTData()
	if err != nil {
		return driveID{}, nil, fmt.Errorf("cannot read SMART data of %q: %w", name, err)
	}
	th, err := d.ReadSMARTThresholds()
	if err != nil {
		return driveID{}, nil, fmt.Errorf("cannot read SMART thresholds of %q: %w", name, err)
	}
	did := driveID{Device: name, Serial: id.SerialNumber(), Model: id.ModelNumber(), Firmware: id.FirmwareRevision(), Protocol: "ATA"}
	return did, ataFromSmartGo(page, th), nil
}

// ataFromSmartGo maps smart.go's attribute page and thresholds to
// ataAttribute, sorted by id. The raw value is smart.go's, decoded with
// its copy of smartctl's drive database (so vendor-specific raw formats
// match smartctl's "raw.value").
func ataFromSmartGo(page *smart.AtaSmartPage, th *smart.AtaSmartThresholdsPage) []ataAttribute {
	out := make([]ataAttribute, 0, len(page.Attrs))
	for id, a := range page.Attrs {
		var thresh float64
		if th != nil {
			thresh = float64(th.Thresholds[id])
		}
		name := a.Name
		if name == "" {
			name = fmt.Sprintf("Unknown_Attribute_%d", id)
		}
		out = append(out, ataAttribute{ID: int(id), Name: name, Value: float64(a.Current), Worst: float64(a.Worst), Threshold: thresh, Raw: float64(a.ValueRaw)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
