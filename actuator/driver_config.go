package actuator

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"text/template"
	"time"
)

// DeviceSpec is one device a files or exec driver may move data on or off:
// the pNFS device id (the key every finding and move uses) and what the
// MDS knows about it.
type DeviceSpec struct {
	// Device is the pNFS deviceid4, hex, as LAYOUTSTATS carries it.
	Device string `yaml:"device"`
	// Name is how operators name it (ds04/nvme4n1); default "<ds>:<device>".
	Name string `yaml:"name"`
	// DS is the data server's name; DSAddr its address as LAYOUTSTATS shows
	// it (ip:port), optional.
	DS     string `yaml:"ds"`
	DSAddr string `yaml:"ds_addr"`
	// Pool is the tier the device belongs to; moves stay inside a pool.
	Pool string `yaml:"pool"`
	// Spare devices hold no data until promoted.
	Spare bool `yaml:"spare"`
	// CapacityBytes overrides the capacity the driver reads (files: statfs
	// of Path); 0 keeps it.
	CapacityBytes int64 `yaml:"capacity_bytes"`
	// BandwidthBytes is what the device reads or writes per second at full
	// speed (copies take DeviceShare of it); 0 = unknown, copies unpaced.
	BandwidthBytes float64 `yaml:"bandwidth_bytes"`
	// Path is where the files driver sees the device's export on the MDS
	// host (the export mounted there).
	Path string `yaml:"path"`
}

// Configured is the device s describes as a driver reports it before any
// state was set: online (spare when s is), named "<ds>:<device>" when s
// names it not.
func (s DeviceSpec) Configured() Device {
	d := Device{ID: strings.ToLower(s.Device), Name: s.Name, DS: s.DS, DSAddr: s.DSAddr, Pool: s.Pool, State: StateOnline,
		CapacityBytes: s.CapacityBytes, BandwidthBytes: s.BandwidthBytes}
	if d.Name == "" {
		d.Name = s.DS + ":" + d.ID
	}
	if s.Spare {
		d.State = StateSpare
	}
	return d
}

// FilesConfig configures the files driver: data servers whose exports are
// mounted on the MDS host, one directory per device, a file's component on
// a device stored under the file's path relative to the export.
type FilesConfig struct {
	Exports []DeviceSpec `yaml:"exports"`
	// LayoutDir is the layout store: one JSON file per file (mirrors ×
	// components, generation), the fence and the moves in flight. Both mds
	// of an HA pair must reach it (a shared filesystem with working flock).
	LayoutDir string `yaml:"layout_dir"`
	// LayoutCommand is the operator's layout hook (argv); ballast appends a
	// verb and its arguments (docs/actions.md has the contract).
	LayoutCommand []string `yaml:"layout_command"`
	// HookTimeout bounds one hook call.
	HookTimeout Duration `yaml:"hook_timeout"`
	// BufferBytes is the copy and checksum buffer.
	BufferBytes int `yaml:"buffer_bytes"`
	// Restripe lets the driver restripe files (restripe_file): off by
	// default, since the layout hook must then understand the restripe
	// verb (docs/actions.md).
	Restripe bool `yaml:"restripe"`
}

// DefaultFilesConfig returns the files driver's defaults.
func DefaultFilesConfig() FilesConfig {
	return FilesConfig{HookTimeout: Duration(30 * time.Second), BufferBytes: 1 << 20}
}

// ExecConfig configures the exec driver: a command template per step, so
// that an MDS's own tools (FreeBSD pnfsdscopymr/pnfsdsfile, a vendor CLI)
// move the bytes.
type ExecConfig struct {
	Devices []DeviceSpec `yaml:"devices"`
	// Commands maps a step (locate, stripes, copy, verify, commit, cleanup,
	// abort; state, devices and takeover optional; with Restripe also restripe_copy, restripe_verify,
	// restripe_commit, restripe_cleanup, restripe_abort) to an argv whose
	// elements are Go templates over ExecStep (docs/actions.md).
	Commands map[string][]string `yaml:"commands"`
	// Timeout bounds one command.
	Timeout Duration `yaml:"timeout"`
	// KillGrace is how long a command interrupted (paused, past its
	// timeout, the mds stopping) has between SIGTERM and SIGKILL to its
	// process group.
	KillGrace Duration `yaml:"kill_grace"`
	// Restripe lets the driver restripe files (restripe_file) through the
	// restripe_* commands: off by default, so that commands written for
	// moves are never asked to restripe.
	Restripe bool `yaml:"restripe"`
}

// DefaultExecConfig returns the exec driver's defaults.
func DefaultExecConfig() ExecConfig {
	return ExecConfig{Timeout: Duration(time.Hour), KillGrace: Duration(10 * time.Second)}
}

// ExecSteps are the steps an exec config must give a command for; state
// (without it a DS state change is refused), devices (without it the
// device table is the config's) and takeover (without it a new HA leader
// adopts no move in flight) are optional.
var ExecSteps = []string{"locate", "stripes", "copy", "verify", "commit", "cleanup", "abort"}

// ExecRestripeSteps are the steps an exec config must give a command for
// when it restripes (restripe: true), and may give only then.
var ExecRestripeSteps = []string{"restripe_copy", "restripe_verify", "restripe_commit", "restripe_cleanup", "restripe_abort"}

func validateDevices(prefix string, devs []DeviceSpec, needPath bool) []error {
	var errs []error
	seen := map[string]int{}
	if len(devs) == 0 {
		errs = append(errs, fmt.Errorf("%s: must list at least one device", strings.TrimSuffix(prefix, ".")))
	}
	for i, d := range devs {
		f := fmt.Sprintf("%s[%d]", strings.TrimSuffix(prefix, "."), i)
		id := strings.ToLower(d.Device)
		if _, err := hex.DecodeString(id); err != nil || id == "" || len(id) > 32 {
			errs = append(errs, fmt.Errorf("%s.device: %q is not a pNFS device id (hex, at most 32 digits)", f, d.Device))
		} else if j, dup := seen[id]; dup {
			errs = append(errs, fmt.Errorf("%s.device: %q is already %s[%d]", f, d.Device, strings.TrimSuffix(prefix, "."), j))
		} else {
			seen[id] = i
		}
		if d.DS == "" {
			errs = append(errs, fmt.Errorf("%s.ds: must not be empty", f))
		}
		if needPath && (d.Path == "" || !filepath.IsAbs(d.Path)) {
			errs = append(errs, fmt.Errorf("%s.path: %q is not an absolute path", f, d.Path))
		}
		if d.BandwidthBytes < 0 || d.CapacityBytes < 0 {
			errs = append(errs, fmt.Errorf("%s: bandwidth_bytes %v and capacity_bytes %d must not be negative", f, d.BandwidthBytes, d.CapacityBytes))
		}
	}
	return errs
}

func (c *FilesConfig) validate(prefix string) error {
	errs := validateDevices(prefix+"exports.", c.Exports, true)
	if c.LayoutDir == "" || !filepath.IsAbs(c.LayoutDir) {
		errs = append(errs, fmt.Errorf("%slayout_dir: %q is not an absolute path", prefix, c.LayoutDir))
	}
	if len(c.LayoutCommand) == 0 || c.LayoutCommand[0] == "" {
		errs = append(errs, fmt.Errorf("%slayout_command: must name the layout hook (docs/actions.md)", prefix))
	}
	if c.HookTimeout <= 0 {
		errs = append(errs, fmt.Errorf("%shook_timeout: %s must be positive", prefix, time.Duration(c.HookTimeout)))
	}
	if c.BufferBytes < 4096 {
		errs = append(errs, fmt.Errorf("%sbuffer_bytes: %d is below the minimum of 4096", prefix, c.BufferBytes))
	}
	return errors.Join(errs...)
}

func (c *ExecConfig) validate(prefix string) error {
	errs := validateDevices(prefix+"devices.", c.Devices, false)
	for _, s := range ExecSteps {
		if len(c.Commands[s]) == 0 {
			errs = append(errs, fmt.Errorf("%scommands.%s: must give a command", prefix, s))
		}
	}
	for _, s := range ExecRestripeSteps {
		if c.Restripe && len(c.Commands[s]) == 0 {
			errs = append(errs, fmt.Errorf("%scommands.%s: must give a command (restripe is on)", prefix, s))
		}
	}
	steps := slices.Sorted(maps.Keys(c.Commands))
	for _, step := range steps {
		argv := c.Commands[step]
		switch {
		case slices.Contains(ExecRestripeSteps, step):
			if !c.Restripe {
				errs = append(errs, fmt.Errorf("%scommands.%s: given while %srestripe is off (turn it on to restripe files)", prefix, step, prefix))
				continue
			}
		case step != "state" && step != "devices" && step != "takeover" && !slices.Contains(ExecSteps, step):
			errs = append(errs, fmt.Errorf("%scommands: %q is not a step (%s, state, devices, takeover, %s)", prefix, step, strings.Join(ExecSteps, ", "), strings.Join(ExecRestripeSteps, ", ")))
			continue
		}
		for i, a := range argv {
			// parsed and tried on an empty step: a field that ExecStep
			// lacks ({{.Fiel}}) is refused here, not at the first move
			t, err := template.New("").Option("missingkey=error").Parse(a)
			if err == nil {
				err = t.Execute(io.Discard, ExecStep{})
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%scommands.%s[%d]: %q: %w", prefix, step, i, a, err))
			}
		}
	}
	if c.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("%stimeout: %s must be positive", prefix, time.Duration(c.Timeout)))
	}
	if c.KillGrace <= 0 {
		errs = append(errs, fmt.Errorf("%skill_grace: %s must be positive", prefix, time.Duration(c.KillGrace)))
	}
	return errors.Join(errs...)
}
