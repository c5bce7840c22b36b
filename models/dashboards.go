package models

import (
	"net/url"
	"strings"
)

// Grafana dashboards that ballast provisions (grafana/dashboards/*.json).
// Their UIDs are stable: alerts (the dashboardURL annotation), the console
// and the dashboards' own links point at them, so a UID never changes once
// released. docs/grafana.md lists them with their variables.
const (
	DashboardOverview    = "ballast-overview"    // cluster overview: GPU utilisation, GPU-hours lost, findings, actions
	DashboardDataServers = "ballast-ds-drives"   // data servers and drives: load, latency, heat map, SMART health and risk
	DashboardStripes     = "ballast-stripes"     // stripes and hotspots
	DashboardCheckpoints = "ballast-checkpoints" // checkpoints: observed and forecast bursts
	DashboardNFSClients  = "ballast-nfs-clients" // NFS clients: per-mount throughput, read-ahead, workload
	DashboardCapacity    = "ballast-capacity"    // capacity forecasts with bands
	DashboardActions     = "ballast-actions"     // actions: timeline, effect
	DashboardSelf        = "ballast-self"        // ballast itself: ingest, scrape health, pipeline ticks, storage
)

// Dashboard variables (URL parameters var-NAME) the provisioned dashboards
// share. Values are label values of the stored series: cluster and pool
// are target labels set in the scrape configuration, ds is a data server's
// node name, drive a drive's kernel name on it, job a client group
// (job_group) or client node.
const (
	DashboardVarCluster = "cluster"
	DashboardVarPool    = "pool"
	DashboardVarDS      = "ds"
	DashboardVarDrive   = "drive"
	DashboardVarJob     = "job"
)

// dashboardOfKind maps finding kinds to the dashboard that shows them.
var dashboardOfKind = map[string]string{
	"drive_failure_risk":  DashboardDataServers,
	"drive_wearout":       DashboardDataServers,
	"hotspot":             DashboardStripes,
	"gpu_starvation":      DashboardOverview,
	"checkpoint_burst":    DashboardCheckpoints,
	"checkpoint_forecast": DashboardCheckpoints,
	"checkpoint_failed":   DashboardCheckpoints,
	"workload_shift":      DashboardNFSClients,
	"workload_profile":    DashboardNFSClients,
	"capacity_threshold":  DashboardCapacity,
}

// DashboardFor returns the UID of the dashboard that shows findings of kind
// (the overview for a kind it does not know) and the variables that point
// it at the finding's subject: a drive "ds07/nvme3n1" gives ds=ds07 and
// drive=nvme3n1, a data server gives ds, a client group job.
func DashboardFor(kind string, s Subject) (uid string, vars url.Values) {
	uid, ok := dashboardOfKind[kind]
	if !ok {
		uid = DashboardOverview
	}
	vars = url.Values{}
	switch s.Kind {
	case SubjectDevice:
		// Drives are "node/device"; a pNFS device id (hex) names no drive.
		if ds, drive, ok := strings.Cut(s.ID, "/"); ok {
			vars.Set("var-"+DashboardVarDS, ds)
			vars.Set("var-"+DashboardVarDrive, drive)
		}
	case SubjectDS:
		vars.Set("var-"+DashboardVarDS, s.ID)
	case SubjectJob, SubjectClient:
		vars.Set("var-"+DashboardVarJob, s.ID)
	case SubjectPool:
		vars.Set("var-"+DashboardVarPool, s.ID)
	}
	return uid, vars
}

// DashboardPath returns the path of a dashboard under a Grafana base URL,
// "/d/UID" plus its variables, e.g. "/d/ballast-ds-drives?var-drive=nvme3n1&var-ds=ds07".
func DashboardPath(uid string, vars url.Values) string {
	p := "/d/" + uid
	if len(vars) > 0 {
		p += "?" + vars.Encode()
	}
	return p
}
