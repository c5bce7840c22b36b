package alert

import (
	"net/url"
	"strings"

	"github.com/ballast-io/ballast/models"
)

// Grafana dashboard UIDs the dashboard_url annotation links to. They are
// the UIDs of the provisioned dashboards under grafana/dashboards; this is
// the one place alerting names them.
const (
	DashboardOverview = "ballast-overview"
	DashboardDrives   = "ballast-drives"
	DashboardStripes  = "ballast-stripes"
	DashboardGPUs     = "ballast-gpus"
	DashboardCapacity = "ballast-capacity"
	DashboardActions  = "ballast-actions"
)

// dashboardOf picks the dashboard for a finding or alert kind.
func dashboardOf(kind string) string {
	switch {
	case strings.HasPrefix(kind, "drive_"):
		return DashboardDrives
	case kind == "hotspot":
		return DashboardStripes
	case kind == "gpu_starvation", strings.HasPrefix(kind, "checkpoint_"), strings.HasPrefix(kind, "workload_"):
		return DashboardGPUs
	case strings.HasPrefix(kind, "capacity_"):
		return DashboardCapacity
	case strings.HasPrefix(kind, "action_"):
		return DashboardActions
	}
	return DashboardOverview
}

// DashboardURL links to the dashboard of kind on the Grafana at base, with
// the subject in the dashboard's `subject` variable.
func DashboardURL(base, kind string, s models.Subject) string {
	q := url.Values{"var-subject": {s.String()}}
	return strings.TrimRight(base, "/") + "/d/" + dashboardOf(kind) + "?" + q.Encode()
}
