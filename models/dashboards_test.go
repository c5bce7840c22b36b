package models

import "testing"

func TestDashboardFor(t *testing.T) {
	for _, c := range []struct {
		kind string
		s    Subject
		want string
	}{
		{"drive_failure_risk", Subject{SubjectDevice, "ds07/nvme3n1"}, "/d/ballast-ds-drives?var-drive=nvme3n1&var-ds=ds07"},
		{"hotspot", Subject{SubjectDevice, "62616c6c"}, "/d/ballast-stripes"},
		{"checkpoint_forecast", Subject{SubjectJob, "train-a"}, "/d/ballast-checkpoints?var-job=train-a"},
		{"capacity_threshold", Subject{SubjectPool, "fast"}, "/d/ballast-capacity?var-pool=fast"},
		{"something_new", Subject{SubjectDS, "ds01"}, "/d/ballast-overview?var-ds=ds01"},
	} {
		if got := DashboardPath(DashboardFor(c.kind, c.s)); got != c.want {
			t.Errorf("DashboardFor(%s, %s): got %s; want %s", c.kind, c.s, got, c.want)
		}
	}
}
