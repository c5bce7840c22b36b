package actuator

import (
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/ballast-io/ballast/models"
)

func TestConfigValidateNamesFieldAndValue(t *testing.T) {
	for _, tc := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.Driver = "ftp" }, `actuators.driver: "ftp" is not one of`},
		{func(c *Config) { c.Mode = "yolo" }, `actuators.mode: "yolo" is not one of off, dry-run, approve, auto`},
		{func(c *Config) { c.Mode = models.ModeAuto }, `actuators.mode: "auto" for rebalance needs a driver`},
		{func(c *Config) { c.Modes = map[models.ActionKind]models.ActionMode{"move_stripe": models.ModeOff} }, `actuators.modes: "move_stripe" is not a planned kind`},
		{func(c *Config) { c.ReadAhead.Pins = []ReadAheadPin{{Node: "gpu01", MountPoint: "data", KB: 1024}} }, `actuators.readahead.pins[0].mountpoint: "data" is not an absolute path`},
		{func(c *Config) { c.ReadAhead.MaxChangesPerHour = 0 }, `actuators.readahead.max_changes_per_hour: 0 must be at least 1`},
		{func(c *Config) { c.Budgets.MaxConcurrentMoves = 0 }, `actuators.budgets.max_concurrent_moves: 0 must be at least 1`},
		{func(c *Config) { c.Budgets.DeviceShare = 1.5 }, `actuators.budgets.device_share: 1.5 is outside (0, 1]`},
		{func(c *Config) { c.Rebalance.TargetMaxMean = 0.9 }, `actuators.rebalance.target_max_mean: 0.9 must be at least 1`},
		{func(c *Config) { c.Evacuate.OffPeak = "1am-5am" }, `actuators.evacuate.off_peak: "1am-5am" is not "HH:MM-HH:MM"`},
		{func(c *Config) { c.Verify.Window = 0 }, `actuators.verify.window: 0s is below the minimum of 1s`},
		{func(c *Config) { c.Driver = DriverFiles }, `actuators.files.exports: must list at least one device`},
		{func(c *Config) {
			c.Driver = DriverFiles
			c.Files.Exports = []DeviceSpec{{Device: "xyz", DS: "ds1", Path: "rel"}}
			c.Files.LayoutCommand = []string{"hook"}
		}, `actuators.files.exports[0].device: "xyz" is not a pNFS device id`},
		{func(c *Config) {
			c.Driver = DriverFiles
			c.Files.Exports = []DeviceSpec{{Device: "aa", DS: "ds1", Path: "/srv/a"}}
			c.Files.LayoutCommand = []string{"hook"}
			c.Files.LayoutDir = "layouts"
		}, `actuators.files.layout_dir: "layouts" is not an absolute path`},
		{func(c *Config) {
			c.Driver = DriverExec
			c.Exec.Devices = []DeviceSpec{{Device: "aa", DS: "ds1"}}
			c.Exec.Commands = map[string][]string{"copy": {"cp", "{{.From"}}
		}, `actuators.exec.commands.locate: must give a command`},
		{func(c *Config) {
			execConfig(c)
			c.Exec.Commands["restripe_copy"] = []string{"cp"}
		}, `actuators.exec.commands.restripe_copy: given while actuators.exec.restripe is off`},
		{func(c *Config) {
			execConfig(c)
			c.Exec.Restripe = true
		}, `actuators.exec.commands.restripe_commit: must give a command (restripe is on)`},
		{func(c *Config) {
			execConfig(c)
			c.Exec.Commands["copy"] = []string{"cp", "{{.Fiel}}"}
		}, `actuators.exec.commands.copy[1]: "{{.Fiel}}": template: :1:2: executing "" at <.Fiel>: can't evaluate field Fiel`},
	} {
		c := DefaultConfig()
		tc.edit(&c)
		err := c.Validate("actuators.")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v; want an error containing %q", err, tc.want)
		}
	}
	c := DefaultConfig()
	if err := c.Validate("actuators."); err != nil {
		t.Errorf("defaults: %v", err)
	}
	execConfig(&c)
	c.Exec.Restripe = true
	for _, s := range ExecRestripeSteps {
		c.Exec.Commands[s] = []string{"mds-" + s, "{{.From}}", "{{.To}}"}
	}
	if err := c.Validate("actuators."); err != nil {
		t.Errorf("an exec config that restripes: %v", err)
	}
}

// execConfig makes c a valid exec driver config.
func execConfig(c *Config) {
	c.Driver = DriverExec
	c.Exec.Devices = []DeviceSpec{{Device: "aa", DS: "ds1"}}
	c.Exec.Commands = map[string][]string{}
	for _, s := range ExecSteps {
		c.Exec.Commands[s] = []string{"mds-" + s, "{{.File}}"}
	}
}

func TestConfigYAML(t *testing.T) {
	c := DefaultConfig()
	src := "mode: dry-run\nmodes: {evacuate_device: dry-run}\nbudgets: {cooldown: 1d, max_bytes_per_hour: 1000000}\nevacuate: {off_peak: \"22:00-04:00\"}\n"
	dec := yaml.NewDecoder(strings.NewReader(src))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatal(err)
	}
	if time.Duration(c.Budgets.Cooldown) != 24*time.Hour || c.Budgets.MaxBytesPerHour != 1e6 || c.ModeOf(models.ActionEvacuateDevice) != models.ModeDryRun {
		t.Errorf("decoded %+v", c.Budgets)
	}
	if err := c.Validate(""); err != nil {
		t.Error(err)
	}
	// 23:30 is inside a window that wraps midnight; 12:00 waits for 22:00
	at := func(h, m int) time.Time { return time.Date(2026, 5, 1, h, m, 0, 0, time.UTC) }
	if got := nextOffPeak(c.Evacuate.OffPeak, at(23, 30)); !got.Equal(at(23, 30)) {
		t.Errorf("23:30: got %s; want now", got)
	}
	if got := nextOffPeak(c.Evacuate.OffPeak, at(12, 0)); !got.Equal(at(22, 0)) {
		t.Errorf("12:00: got %s; want 22:00", got)
	}
}
