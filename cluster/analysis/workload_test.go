package analysis

import (
	"testing"

	"github.com/ballast-io/ballast/models"
)

// TestStorageFaults: a group is under a storage fault when any of its
// clients' streams did not deliver bytes or runs on a data server whose
// agent is down; a client with neither is not, and a client of no known
// group is its own subject.
func TestStorageFaults(t *testing.T) {
	delta := func(client, ds string, notDelivered uint64) models.StripeDelta {
		d := models.StripeDelta{StripeKey: models.StripeKey{Client: client, DeviceID: "dev-" + ds}, DS: ds}
		d.Read.Bytes, d.Read.BytesCompleted, d.Read.BytesNotDelivered = 1<<20, 1<<20-notDelivered, notDelivered
		return d
	}
	tick := []models.StripeDelta{
		delta("gpu01", "ds1", 0), delta("gpu02", "ds1", 4096), // job a: gpu02's reads fail
		delta("gpu03", "ds2", 0), delta("gpu04", "ds3", 0), // job b: gpu04 reads the lost ds3
		delta("gpu05", "ds1", 0), delta("gpu05", "ds2", 0), // job c: healthy
		delta("lone", "ds3", 0), // no group known
	}
	job := func(id string) models.Subject { return models.Subject{Kind: models.SubjectJob, ID: id} }
	groups := map[string]models.Subject{"gpu01": job("a"), "gpu02": job("a"), "gpu03": job("b"), "gpu04": job("b"), "gpu05": job("c")}
	agentDown := func(ds string) (bool, bool) {
		switch ds {
		case "ds3":
			return true, true
		case "ds2":
			return false, true
		}
		return false, false
	}
	got := storageFaults(tick, agentDown, groups)
	for s, want := range map[models.Subject]bool{job("a"): true, job("b"): true, job("c"): false, {Kind: models.SubjectClient, ID: "lone"}: true} {
		if got[s] != want {
			t.Errorf("%s: fault %v; want %v", s, got[s], want)
		}
	}
}
