package starvation

import (
	"sort"

	"github.com/ballast-io/ballast/analyzer/hotspot"
	"github.com/ballast-io/ballast/models"
)

// PathsFromStripes derives each client node's read path from one tick of
// LAYOUTSTATS deltas: a Path per (client, stripe) with the stripe's share of
// the client's read bytes, and the parent of every stripe (its pNFS device,
// whose parent is its DS) for the Health topology. Stripe ids are
// hotspot.StripeID, device ids the deviceid, DS ids the DS address, so the
// pipeline's Health entries and hotspot findings line up with them. Clients
// that read nothing get no path.
func PathsFromStripes(deltas []models.StripeDelta) (paths []Path, parents map[models.Subject]models.Subject) {
	type key struct {
		node   string
		stripe models.Subject
	}
	bytes := map[key]float64{}
	total := map[string]float64{}
	parents = map[models.Subject]models.Subject{}
	for i := range deltas {
		d := &deltas[i]
		stripe := models.Subject{Kind: models.SubjectStripe, ID: hotspot.StripeID(d)}
		dev := models.Subject{Kind: models.SubjectDevice, ID: d.DeviceID}
		parents[stripe] = dev
		if d.DS != "" {
			parents[dev] = models.Subject{Kind: models.SubjectDS, ID: d.DS}
		}
		b := float64(d.Read.BytesCompleted)
		if b == 0 {
			b = float64(d.Read.Bytes)
		}
		if b > 0 {
			bytes[key{d.Client, stripe}] += b
			total[d.Client] += b
		}
	}
	for k, b := range bytes {
		paths = append(paths, Path{Node: k.node, Subject: k.stripe, Share: b / total[k.node]})
	}
	sort.Slice(paths, func(i, j int) bool {
		if paths[i].Node != paths[j].Node {
			return paths[i].Node < paths[j].Node
		}
		return paths[i].Subject.ID < paths[j].Subject.ID
	})
	return paths, parents
}
