package twin

import (
	"strings"
	"testing"
)

// TestLayoutStatsReportsIOErrors: in node-loss, the clients report the
// writes that failed on the lost DS — NFS4ERR_NXIO on its devices only,
// never on the healthy devices the stalled streams also stripe over — in
// valid LAYOUTSTATS batches; in capacity-pressure the full devices answer
// NFS4ERR_NOSPC.
func TestLayoutStatsReportsIOErrors(t *testing.T) {
	run := func(scenario string, minutes int) map[string]map[string]bool {
		tw, err := New(mustLoad(t, scenario), 1, epoch)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]map[string]bool{} // status → devices
		for i := 0; i < minutes*4; i++ {
			tw.Run(15)
			for _, b := range tw.LayoutStats() {
				if err := b.Validate(); err != nil {
					t.Fatalf("%s: invalid batch of %s: %v", scenario, b.ClientID, err)
				}
				for _, e := range b.Errors {
					if !e.FirstTime.IsZero() && e.LastTime.After(b.ReportTime) {
						t.Fatalf("%s: error window ends %s after the report %s", scenario, e.LastTime, b.ReportTime)
					}
					for _, de := range e.Errors {
						if got[de.Status] == nil {
							got[de.Status] = map[string]bool{}
						}
						got[de.Status][tw.DeviceName(de.DeviceID)+" "+de.Opnum] = true
					}
				}
			}
		}
		return got
	}
	nl := run("node-loss", 25)
	lost := ""
	tw, _ := New(mustLoad(t, "node-loss"), 1, epoch)
	tw.Run(25 * 60)
	for _, r := range tw.Truth() {
		if r.Kind == "node_loss" {
			lost = r.Subject.ID
		}
	}
	if lost == "" || len(nl["NFS4ERR_NXIO"]) == 0 {
		t.Fatalf("node-loss: lost DS %q, errors %v; want NXIO errors", lost, nl)
	}
	writes := 0
	for d := range nl["NFS4ERR_NXIO"] {
		if !strings.HasPrefix(d, lost+"/") {
			t.Errorf("node-loss: NXIO on %s, not on the lost %s", d, lost)
		}
		if strings.HasSuffix(d, "OP_WRITE") {
			writes++
		}
	}
	if writes == 0 {
		t.Errorf("node-loss: no failed write reported: %v", nl)
	}
	cp := run("capacity-pressure", 70)
	if len(cp["NFS4ERR_NOSPC"]) == 0 {
		t.Errorf("capacity-pressure: errors %v; want NOSPC", cp)
	}
}
