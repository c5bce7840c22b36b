package models

// Read-ahead desired state: what a client agent reports of its mounts and
// what the mds wants them set to. One POST /api/v1/readahead/sync carries
// the report and answers the desired state (docs/readahead.md).

// ReadAheadMount is one mount a client agent manages.
type ReadAheadMount struct {
	MountPoint string `json:"mountpoint"`
	// BDI is the mount's backing device info, major:minor (mountinfo field 3).
	BDI    string `json:"bdi"`
	FSType string `json:"fstype"`
	Source string `json:"source,omitempty"`
	// CurrentKB is read_ahead_kb as read back from sysfs; OriginalKB is the
	// value the agent found before it first wrote (what it restores).
	CurrentKB  int64 `json:"current_kb"`
	OriginalKB int64 `json:"original_kb"`
	// Action is the id of the action whose value the agent last applied or
	// refused; Refused says why it refused it (its bounds).
	Action  string `json:"action,omitempty"`
	Refused string `json:"refused,omitempty"`
	Error   string `json:"error,omitempty"`
}

// ReadAheadBounds are the limits the agent enforces whatever the mds asks.
type ReadAheadBounds struct {
	MinKB     int64 `json:"min_kb"`
	MaxKB     int64 `json:"max_kb"`
	MaxStepKB int64 `json:"max_step_kb"`
}

// ReadAheadReport is what a client agent sends on every sync.
type ReadAheadReport struct {
	Node   string           `json:"node"`
	Bounds ReadAheadBounds  `json:"bounds"`
	Mounts []ReadAheadMount `json:"mounts"`
}

// ReadAheadTarget is the value the mds wants for one mount. A mount
// without a target is to hold the value the agent found at start-up.
type ReadAheadTarget struct {
	MountPoint string `json:"mountpoint"`
	KB         int64  `json:"kb"`
	Action     string `json:"action,omitempty"`
	// DryRun targets are shown, never written.
	DryRun bool `json:"dry_run,omitempty"`
}

// ReadAheadDesired is the mds's answer to a sync: the whole desired state
// of the node's mounts.
type ReadAheadDesired struct {
	Node    string            `json:"node"`
	Targets []ReadAheadTarget `json:"targets"`
}
