package collector

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	smart "github.com/anatol/smart.go"

	"github.com/ballast-io/ballast/models"
)

// fakeSata serves an attribute page as smart.go would decode it.
type fakeSata struct{}

func (fakeSata) Identify() (*smart.AtaIdentifyDevice, error) {
	var id smart.AtaIdentifyDevice
	// ATA strings are byte-swapped per 16-bit word (ATA8-ACS IDENTIFY).
	copy(id.SerialNumberRaw[:], "1S2R4365            ") // "S1R23456"
	copy(id.ModelNumberRaw[:], "TS3M000X00DM                            ")
	return &id, nil
}

func (fakeSata) ReadSMARTData() (*smart.AtaSmartPage, error) {
	return &smart.AtaSmartPage{Attrs: map[uint8]smart.AtaSmartAttr{
		5:   {Id: 5, Name: "Reallocated_Sector_Ct", Current: 100, Worst: 100, ValueRaw: 8},
		194: {Id: 194, Name: "Temperature_Celsius", Current: 36, Worst: 50, ValueRaw: 36},
		9:   {Id: 9, Name: "Power_On_Hours", Current: 90, Worst: 90, ValueRaw: 9000},
	}}, nil
}

func (fakeSata) ReadSMARTThresholds() (*smart.AtaSmartThresholdsPage, error) {
	return &smart.AtaSmartThresholdsPage{Thresholds: map[uint8]uint8{5: 36, 9: 0, 194: 0}}, nil
}

func (fakeSata) Close() error { return nil }

func TestNVMeCollectorReadsSataDrives(t *testing.T) {
	sys := fakeRoot(t, map[string]string{
		"block/sda/size":     "1\n",
		"block/sdb/size":     "1\n", // SAS: not ATA
		"block/sdc/size":     "1\n", // cannot be opened
		"block/vda/size":     "1\n", // not an sd* disk: never tried
		"block/nvme0n1/size": "1\n",
	})
	now := time.Unix(0, 0)
	cc, _ := newNVMeCollector(Options{SysRoot: sys, DevRoot: "/dev-fake", Now: func() time.Time { return now }}.withDefaults(), newOnceLogger(Options{}.withDefaults().Logger))
	c := cc.(*nvmeCollector)
	opens := map[string]int{}
	c.openSata = func(p string) (sataDevice, error) {
		opens[p]++
		switch {
		case strings.HasSuffix(p, "sda"):
			return fakeSata{}, nil
		case strings.HasSuffix(p, "sdb"):
			return nil, errNotSata
		}
		return nil, errors.New("sendCDB ATA IDENTIFY: input/output error")
	}
	for i := 0; i < 3; i++ {
		s, err := c.Collect(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		up := map[string]float64{}
		raw := map[string]float64{}
		for _, x := range s {
			switch x.Name {
			case models.MetricCollectorDeviceUp:
				up[x.Values[1]] = x.Value
			case models.MetricATAAttributeRaw:
				raw[x.Values[3]+" "+x.Values[4]] = x.Value
			case models.MetricATAAttributeThresh:
				if x.Values[3] == "5" && x.Value != 36 {
					t.Errorf("threshold of attribute 5: got %v; want 36", x.Value)
				}
			case models.MetricDriveInfo:
				if x.Values[1] != "S1R23456" {
					t.Errorf("serial: got %q; want S1R23456", x.Values[1])
				}
			}
		}
		if len(up) != 2 || up["sda"] != 1 || up["sdc"] != 0 {
			t.Errorf("device_up: got %v; want sda 1, sdc 0 and nothing for sdb (SAS), vda", up)
		}
		if raw["5 Reallocated_Sector_Ct"] != 8 || raw["9 Power_On_Hours"] != 9000 {
			t.Errorf("raw values: got %v", raw)
		}
		now = now.Add(time.Minute)
	}
	if opens["/dev-fake/sdc"] != 1 || opens["/dev-fake/sdb"] != 1 || opens["/dev-fake/sda"] != 3 {
		t.Errorf("opens: got %v; want sdc and sdb once within the retry window, sda every scrape", opens)
	}
	now = now.Add(sataRetry)
	if _, err := c.Collect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if opens["/dev-fake/sdc"] != 2 {
		t.Errorf("sdc opens after the retry window: got %d; want 2", opens["/dev-fake/sdc"])
	}
}
