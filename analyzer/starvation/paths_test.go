package starvation

import (
	"testing"

	"github.com/ballast-io/ballast/models"
)

func TestPathsFromStripes(t *testing.T) {
	d := func(client, dev, fh, ds string, read uint64) models.StripeDelta {
		return models.StripeDelta{StripeKey: models.StripeKey{Client: client, DeviceID: dev, FileHandle: fh}, DS: ds,
			Read: models.StripeIO{BytesCompleted: read}}
	}
	paths, parents := PathsFromStripes([]models.StripeDelta{
		d("n1", "dev1", "a", "10.0.0.1:2049", 300),
		d("n1", "dev2", "b", "10.0.0.2:2049", 100),
		d("n1", "dev1", "a", "10.0.0.1:2049", 0), // a write-only report adds nothing
		d("n2", "dev1", "a", "10.0.0.1:2049", 50),
	})
	want := []Path{
		{Node: "n1", Subject: models.Subject{Kind: models.SubjectStripe, ID: "dev1/a"}, Share: 0.75},
		{Node: "n1", Subject: models.Subject{Kind: models.SubjectStripe, ID: "dev2/b"}, Share: 0.25},
		{Node: "n2", Subject: models.Subject{Kind: models.SubjectStripe, ID: "dev1/a"}, Share: 1},
	}
	if len(paths) != len(want) {
		t.Fatalf("got %d paths %v; want %v", len(paths), paths, want)
	}
	for i := range want {
		if paths[i] != want[i] {
			t.Errorf("path %d = %+v; want %+v", i, paths[i], want[i])
		}
	}
	dev := parents[models.Subject{Kind: models.SubjectStripe, ID: "dev1/a"}]
	if dev != (models.Subject{Kind: models.SubjectDevice, ID: "dev1"}) {
		t.Errorf("parent of stripe dev1/a = %v; want device dev1", dev)
	}
	if ds := parents[dev]; ds != (models.Subject{Kind: models.SubjectDS, ID: "10.0.0.1:2049"}) {
		t.Errorf("parent of device dev1 = %v; want ds 10.0.0.1:2049", ds)
	}
}
