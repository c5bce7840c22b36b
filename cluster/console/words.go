package console

import (
	"net/url"
	"strings"
)

// titles say in plain words what each finding kind means.
var titles = map[string]string{
	"gpu_starvation":      "GPUs are waiting for storage",
	"hotspot":             "Hot spot: far more load here than on its peers",
	"drive_failure_risk":  "Drive likely to fail",
	"drive_wearout":       "Drive wearing out",
	"checkpoint_burst":    "Checkpoint write burst",
	"checkpoint_forecast": "Checkpoints come on a schedule: next burst predicted",
	"workload_shift":      "The workload changed",
	"workload_profile":    "Workload profile",
	"capacity_threshold":  "Filling up",
}

// Title returns the plain-words title of a finding kind (the kind itself,
// de-underscored, for a kind it does not know).
func Title(kind string) string {
	if t, ok := titles[kind]; ok {
		return t
	}
	return strings.ReplaceAll(kind, "_", " ")
}

// causeNames say in plain words what a cause kind of lost GPU time is.
var causeNames = map[string]string{
	"device":      "slow or overloaded drive",
	"stripe":      "hot stripe",
	"ds":          "data server",
	"port":        "network port",
	"checkpoint":  "checkpoint pause",
	"not-storage": "not storage (idle on healthy paths)",
}

// CauseName returns the plain-words name of a cause kind.
func CauseName(kind string) string {
	if n, ok := causeNames[kind]; ok {
		return n
	}
	return kind
}

func cloneValues(q url.Values) url.Values {
	v := url.Values{}
	for k, vs := range q {
		v[k] = append([]string(nil), vs...)
	}
	return v
}
