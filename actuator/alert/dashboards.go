package alert

import (
	"strings"

	"github.com/ballast-io/ballast/models"
)

// DashboardURL links to the Grafana dashboard (at base) that shows alerts
// of kind about s: models.DashboardFor for findings, the actions dashboard
// for action alerts, with the dashboard's variables set to the subject.
func DashboardURL(base, kind string, s models.Subject) string {
	uid, vars := models.DashboardFor(kind, s)
	if strings.HasPrefix(kind, "action_") {
		uid = models.DashboardActions
	}
	return strings.TrimRight(base, "/") + models.DashboardPath(uid, vars)
}
