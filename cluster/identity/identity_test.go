package identity

import (
	"strings"
	"testing"

	"github.com/ballast-io/ballast/models"
)

const (
	id1 = "62616c6c617374000000000000000001"
	id2 = "62616c6c617374000000000000000002"
	id3 = "62616c6c617374000000000000000003"
	id4 = "62616c6c617374000000000000000004"
)

func TestValidateNamesFieldAndValue(t *testing.T) {
	for _, c := range []struct {
		devs []Device
		dss  []DataServer
		want string
	}{
		{[]Device{{ID: "", DS: "ds01"}}, nil, "devices[0].id: must not be empty"},
		{[]Device{{ID: "abc", DS: "ds01"}}, nil, `devices[0].id: "abc" is not a pNFS device id (32 hex digits)`},
		{[]Device{{ID: strings.Repeat("zz", 16), DS: "ds01"}}, nil, `devices[0].id: "zzzz`},
		{[]Device{{ID: id1, DS: "ds01"}, {ID: strings.ToUpper(id1), DS: "ds02"}}, nil, `devices[1].id: "62616C6C617374000000000000000001" is already devices[0]`},
		{[]Device{{ID: id1, DS: ""}}, nil, `devices[0].ds: "" must not be empty`},
		{[]Device{{ID: id1, DS: "ds01", Drive: "a/b"}}, nil, `devices[0].drive: "a/b" must not contain`},
		{[]Device{{ID: id1, DS: "ds01", Export: "export/x"}}, nil, `devices[0].export: "export/x" is not a clean absolute path`},
		{nil, []DataServer{{Name: "ds01", Addresses: []string{"10.0.0.1"}}}, `data_servers[0].addresses[0]: "10.0.0.1" is not HOST:PORT`},
		{nil, []DataServer{{Name: "ds01", Addresses: []string{"10.0.0.1:2049"}}, {Name: "ds02", Addresses: []string{"10.0.0.1:2049"}}}, `data_servers[1].addresses[0]: "10.0.0.1:2049" is already an address of "ds01"`},
		{nil, []DataServer{{Name: "ds01"}, {Name: "ds01"}}, `data_servers[1].name: "ds01" is listed twice`},
	} {
		err := Validate(c.devs, c.dss)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%v, %v) = %v; want an error containing %q", c.devs, c.dss, err, c.want)
		}
	}
	if err := Validate([]Device{{ID: id1, DS: "ds01", Drive: "nvme0n1"}, {ID: id2, DS: "ds01", Export: "/export/b"}},
		[]DataServer{{Name: "ds01", Addresses: []string{"10.0.0.1:2049", "[fd00::1]:2049"}}}); err != nil {
		t.Errorf("Validate of a good table: %v", err)
	}
}

func delta(id, addr string) models.StripeDelta {
	return models.StripeDelta{StripeKey: models.StripeKey{Client: "gpu00", DeviceID: id, FileHandle: "0a0b"}, DS: addr}
}

func TestTableNamesDevicesAndDataServers(t *testing.T) {
	tb := New([]Device{
		{ID: id1, DS: "ds01", Drive: "nvme0n1"},
		{ID: strings.ToUpper(id2), DS: "ds01", Export: "/export/nvme1n1"},
		{ID: id3, DS: "ds02"},
	}, nil)
	// Before anything is learned: drive, export, DS only, unknown.
	for id, want := range map[string]string{id1: "ds01/nvme0n1", id2: "ds01:/export/nvme1n1", id3: "ds02:" + id3, id4: id4} {
		if got := tb.DeviceName(id); got != want {
			t.Errorf("DeviceName(%s) = %q; want %q", id, got, want)
		}
	}
	// The DS agent's filesystem series resolve the export.
	tb.ObserveMount("ds01", "/export/nvme1n1", "nvme1n1")
	if got := tb.DeviceName(id2); got != "ds01/nvme1n1" {
		t.Errorf("DeviceName(%s) after the mount = %q; want ds01/nvme1n1", id2, got)
	}
	// LAYOUTSTATS teach the DS addresses; an unknown device under a known
	// address is placed on that DS.
	ds := []models.StripeDelta{delta(id1, "10.0.0.1:2049"), delta(id3, "10.0.0.2:2049"), delta(id4, "10.0.0.1:2049"), delta(id4, "10.0.0.9:2049")}
	tb.Rename(ds)
	want := []models.StripeDelta{delta("ds01/nvme0n1", "ds01"), delta("ds02:"+id3, "ds02"), delta("ds01:"+id4, "ds01"), delta("ds01:"+id4, "10.0.0.9:2049")}
	for i := range ds {
		if ds[i].DeviceID != want[i].DeviceID || ds[i].DS != want[i].DS {
			t.Errorf("delta %d renamed to %s @ %s; want %s @ %s", i, ds[i].DeviceID, ds[i].DS, want[i].DeviceID, want[i].DS)
		}
	}
	if got := tb.DSName("10.0.0.2:2049"); got != "ds02" {
		t.Errorf("DSName = %q; want ds02", got)
	}
	ev := tb.Evidence(models.Subject{Kind: models.SubjectDS, ID: "ds01"})
	if len(ev) != 1 || ev[0].Name != "ds_address" || !strings.Contains(ev[0].Note, "10.0.0.1:2049") {
		t.Errorf("DS evidence %+v; want its address 10.0.0.1:2049", ev)
	}
	ev = tb.Evidence(models.Subject{Kind: models.SubjectStripe, ID: "ds01/nvme0n1/0a0b"})
	if len(ev) != 1 || ev[0].Name != "pnfs_device_id" || ev[0].Series != `{deviceid="`+id1+`"}` {
		t.Errorf("stripe evidence %+v; want the device id %s", ev, id1)
	}
	rows := tb.Rows()
	if len(rows) != 4 || !rows[1].Learned && !rows[2].Learned {
		t.Errorf("rows %+v; want 3 configured and 1 learned", rows)
	}
}

func TestDriveNameJoinsControllerToItsNamespace(t *testing.T) {
	tb := New([]Device{{ID: id1, DS: "ds01", Drive: "nvme0n1"}}, nil)
	tb.ObserveMount("ds02", "/export/a", "nvme3n1")
	tb.ObserveMount("ds02", "/export/b", "nvme4n1")
	tb.ObserveMount("ds02", "/export/c", "nvme4n2")
	for _, c := range []struct{ node, dev, want string }{
		{"ds01", "nvme0", "ds01/nvme0n1"},   // from the table
		{"ds02", "nvme3", "ds02/nvme3n1"},   // from the mounts
		{"ds02", "nvme4", "ds02/nvme4"},     // two namespaces: keep the controller
		{"ds02", "nvme31", "ds02/nvme31"},   // not a prefix match of nvme3n1
		{"ds02", "sda", "ds02/sda"},         // not NVMe
		{"ds03", "nvme0", "ds03/nvme0"},     // nothing known on ds03
		{"", "nvme0", "nvme0"},              // no node
		{"ds01", "nvme0n1", "ds01/nvme0n1"}, // already a namespace
	} {
		if got := tb.DriveName(c.node, c.dev); got != c.want {
			t.Errorf("DriveName(%q, %q) = %q; want %q", c.node, c.dev, got, c.want)
		}
	}
}

func TestAgentDown(t *testing.T) {
	tb := New(nil, nil)
	if _, known := tb.AgentDown("ds01"); known {
		t.Errorf("AgentDown of an unseen agent is known; want unknown")
	}
	tb.ObserveAgent("ds01", false)
	tb.ObserveAgent("ds02", true)
	if down, known := tb.AgentDown("ds01"); !down || !known {
		t.Errorf("AgentDown(ds01) = %v, %v; want down, known", down, known)
	}
	if down, known := tb.AgentDown("ds02"); down || !known {
		t.Errorf("AgentDown(ds02) = %v, %v; want up, known", down, known)
	}
}
