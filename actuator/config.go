package actuator

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ballast-io/ballast/internal/units"
	"github.com/ballast-io/ballast/models"
)

// Drivers a config can name.
const (
	DriverNone  = ""
	DriverTwin  = "twin"
	DriverFiles = "files"
	DriverExec  = "exec"
)

// PlanKinds are the action kinds the engine plans, each with its own mode.
var PlanKinds = []models.ActionKind{models.ActionRebalance, models.ActionEvacuateDevice, models.ActionPromoteSpare}

// Duration is the config files' duration: Go syntax plus d and w units.
type Duration = units.Duration

// Config is the `actuators:` section of the mds config. DefaultConfig
// documents every default (docs/config.md lists them).
type Config struct {
	// Driver moves the bytes: "" (none: no device list or placements, so
	// no data move is planned; read-ahead still is), twin (the demo's
	// simulated cluster), files or exec.
	Driver string `yaml:"driver"`
	// Mode applies to every planned kind without its own entry in Modes.
	Mode models.ActionMode `yaml:"mode"`
	// Modes overrides Mode per kind (rebalance, evacuate_device,
	// promote_spare, set_read_ahead).
	Modes map[models.ActionKind]models.ActionMode `yaml:"modes"`
	// PlanEvery is how often the planners look at findings and load.
	PlanEvery Duration `yaml:"plan_every"`
	// ApprovalTimeout cancels a plan nobody approved or rejected in time.
	ApprovalTimeout Duration    `yaml:"approval_timeout"`
	Budgets         Budgets     `yaml:"budgets"`
	Rebalance       Rebalance   `yaml:"rebalance"`
	Evacuate        Evacuate    `yaml:"evacuate"`
	Verify          Verify      `yaml:"verify"`
	Move            MoveOpts    `yaml:"move"`
	Files           FilesConfig `yaml:"files"`
	Exec            ExecConfig  `yaml:"exec"`
	// ReadAhead configures read-ahead tuning on GPU nodes (set_read_ahead;
	// docs/readahead.md).
	ReadAhead ReadAheadConfig `yaml:"readahead"`
}

// Budgets and guards bound what the engine may do at once.
type Budgets struct {
	// MaxConcurrentMoves is how many stripe copies run at once.
	MaxConcurrentMoves int `yaml:"max_concurrent_moves"`
	// MaxBytesPerHour bounds the bytes of moves started in any hour.
	MaxBytesPerHour int64 `yaml:"max_bytes_per_hour"`
	// DeviceShare and DSShare are the shares of a device's and a data
	// server's bandwidth that migration may take (copies are paced to it).
	DeviceShare float64 `yaml:"device_share"`
	DSShare     float64 `yaml:"ds_share"`
	// MaxMovesPerDevice is how many copies may read or write one device at
	// once.
	MaxMovesPerDevice int `yaml:"max_moves_per_device"`
	// MaxEvacuatingDevices and MaxDrainingDS bound evacuations running at
	// once; never fewer devices (data servers) stay in a pool than its
	// widest layout (its mirror count) needs.
	MaxEvacuatingDevices int `yaml:"max_evacuating_devices"`
	MaxDrainingDS        int `yaml:"max_draining_ds"`
	// Cooldown is how long after an action on a subject ends before
	// another is planned for it.
	Cooldown Duration `yaml:"cooldown"`
	// CheckpointMargin widens every predicted checkpoint window; no
	// non-urgent move starts in it (or would still run in it).
	CheckpointMargin Duration `yaml:"checkpoint_margin"`
	// CheckpointUnforecastHold: after a client group's first checkpoint
	// burst, until a checkpoint_forecast predicts its next one, its next
	// burst may start at any time; non-urgent evacuations and spare
	// promotions move no data meanwhile, for at most this long after that
	// first burst (0: never held).
	CheckpointUnforecastHold Duration `yaml:"checkpoint_unforecast_hold"`
}

// Rebalance configures the load-aware rebalancer.
type Rebalance struct {
	// TargetMaxMean is the max/mean device (and DS) load to reach.
	TargetMaxMean float64 `yaml:"target_max_mean"`
	// MinGain skips a plan that would lower the hot devices' load by less
	// than this share.
	MinGain float64 `yaml:"min_gain"`
	// Headroom is the share of a destination's capacity kept free.
	Headroom float64 `yaml:"headroom"`
	// HeatHalfLife smooths per-stripe heat from LAYOUTSTATS.
	HeatHalfLife Duration `yaml:"heat_half_life"`
	// Restripe lets a rebalance rewrite a file whose components are each
	// hotter than the target over more devices (restripe_file), when the
	// driver can (twin); off, such a file is only noted.
	Restripe bool `yaml:"restripe"`
	// MaxStripeWidth bounds the components of a restriped mirror (0: as
	// many as the pool has legal devices).
	MaxStripeWidth int `yaml:"max_stripe_width"`
}

// Evacuate configures evacuation and spare promotion.
type Evacuate struct {
	// UseSpares promotes a spare of the same data server when there is one.
	UseSpares bool `yaml:"use_spares"`
	// UrgentWithin marks an evacuation urgent when the predicted failure
	// window opens within this time (a critical finding always is).
	UrgentWithin Duration `yaml:"urgent_within"`
	// OffPeak is the daily window (UTC, "HH:MM-HH:MM") in which wear-out
	// replacements may start; empty means any time.
	OffPeak string `yaml:"off_peak"`
}

// Verify configures the measurement of an action's effect.
type Verify struct {
	// Window is how long the numbers are averaged before the action starts
	// and after it ends (after a plan with commits, from Options.RateHold
	// past its last commit at the earliest).
	Window Duration `yaml:"window"`
	// Rollback reverses a rebalance whose effect is worse.
	Rollback bool `yaml:"rollback"`
	// WorseGPUDrop is the drop of GPU utilisation (absolute, 0..1) of the
	// affected clients that makes an action worse.
	WorseGPUDrop float64 `yaml:"worse_gpu_drop"`
}

// MoveOpts configure one stripe move.
type MoveOpts struct {
	// Grace is how long the old copy stays after the commit.
	Grace Duration `yaml:"grace"`
	// MaxAttempts of a failing step before the move fails.
	MaxAttempts int `yaml:"max_attempts"`
	// Backoff is the first retry delay; it doubles up to MaxBackoff.
	Backoff    Duration `yaml:"backoff"`
	MaxBackoff Duration `yaml:"max_backoff"`
}

// DefaultConfig returns the defaults of a real cluster: no driver, every
// kind in dry-run.
func DefaultConfig() Config {
	return Config{
		Mode:            models.ModeDryRun,
		PlanEvery:       Duration(time.Minute),
		ApprovalTimeout: Duration(24 * time.Hour),
		Budgets: Budgets{
			MaxConcurrentMoves:   4,
			MaxBytesPerHour:      2e12,
			DeviceShare:          0.25,
			DSShare:              0.25,
			MaxMovesPerDevice:    2,
			MaxEvacuatingDevices: 2,
			MaxDrainingDS:        1,
			Cooldown:             Duration(30 * time.Minute),
			CheckpointMargin:     Duration(30 * time.Second),
			// a forecast needs three bursts: two periods of up to 30 min
			CheckpointUnforecastHold: Duration(time.Hour),
		},
		Rebalance: Rebalance{TargetMaxMean: 1.05, MinGain: 0.1, Headroom: 0.1, HeatHalfLife: Duration(time.Minute), Restripe: true},
		Evacuate:  Evacuate{UseSpares: true, UrgentWithin: Duration(7 * 24 * time.Hour)},
		Verify:    Verify{Window: Duration(5 * time.Minute), Rollback: true, WorseGPUDrop: 0.05},
		Move:      MoveOpts{Grace: Duration(10 * time.Minute), MaxAttempts: 5, Backoff: Duration(10 * time.Second), MaxBackoff: Duration(5 * time.Minute)},
		Files:     DefaultFilesConfig(),
		Exec:      DefaultExecConfig(),
		ReadAhead: defaultReadAheadConfig(),
	}
}

// ModeOf returns the mode of kind.
func (c *Config) ModeOf(kind models.ActionKind) models.ActionMode {
	if m, ok := c.Modes[kind]; ok {
		return m
	}
	return c.Mode
}

// Validate reports every bad field, naming it (under prefix, e.g.
// "actuators.") and its value.
func (c *Config) Validate(prefix string) error {
	var errs []error
	bad := func(field string, v any, why string) {
		errs = append(errs, fmt.Errorf("%s%s: %v %s", prefix, field, v, why))
	}
	switch c.Driver {
	case DriverNone, DriverTwin, DriverFiles, DriverExec:
	default:
		bad("driver", strconv.Quote(c.Driver), `is not one of "", twin, files, exec`)
	}
	if !c.Mode.Valid() {
		bad("mode", strconv.Quote(string(c.Mode)), "is not one of off, dry-run, approve, auto")
	}
	kinds := make([]string, 0, len(c.Modes))
	for k := range c.Modes {
		kinds = append(kinds, string(k))
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		m := c.Modes[models.ActionKind(k)]
		known := false
		for _, pk := range PlanKinds {
			known = known || pk == models.ActionKind(k)
		}
		known = known || models.ActionKind(k) == models.ActionSetReadAhead
		if !known {
			bad("modes", strconv.Quote(k), "is not a planned kind (rebalance, evacuate_device, promote_spare, set_read_ahead)")
		} else if !m.Valid() {
			bad("modes."+k, strconv.Quote(string(m)), "is not one of off, dry-run, approve, auto")
		}
	}
	if c.Driver == DriverNone {
		for _, k := range PlanKinds {
			if m := c.ModeOf(k); m == models.ModeApprove || m == models.ModeAuto {
				bad("mode", strconv.Quote(string(m)), fmt.Sprintf("for %s needs a driver to move data (actuators.driver: files or exec); without one use dry-run", k))
				break
			}
		}
	}
	if c.PlanEvery < Duration(time.Second) {
		bad("plan_every", time.Duration(c.PlanEvery), "is below the minimum of 1s")
	}
	if c.ApprovalTimeout <= 0 {
		bad("approval_timeout", time.Duration(c.ApprovalTimeout), "must be positive")
	}
	b := &c.Budgets
	positive := func(field string, v int) {
		if v < 1 {
			bad(field, v, "must be at least 1")
		}
	}
	positive("budgets.max_concurrent_moves", b.MaxConcurrentMoves)
	positive("budgets.max_moves_per_device", b.MaxMovesPerDevice)
	positive("budgets.max_evacuating_devices", b.MaxEvacuatingDevices)
	positive("budgets.max_draining_ds", b.MaxDrainingDS)
	if b.MaxBytesPerHour < 1 {
		bad("budgets.max_bytes_per_hour", b.MaxBytesPerHour, "must be positive")
	}
	share := func(field string, v float64) {
		if !(v > 0 && v <= 1) {
			bad(field, v, "is outside (0, 1]")
		}
	}
	share("budgets.device_share", b.DeviceShare)
	share("budgets.ds_share", b.DSShare)
	if b.Cooldown < 0 {
		bad("budgets.cooldown", time.Duration(b.Cooldown), "is negative")
	}
	if b.CheckpointMargin < 0 {
		bad("budgets.checkpoint_margin", time.Duration(b.CheckpointMargin), "is negative")
	}
	if b.CheckpointUnforecastHold < 0 {
		bad("budgets.checkpoint_unforecast_hold", time.Duration(b.CheckpointUnforecastHold), "is negative")
	}
	r := &c.Rebalance
	if !(r.TargetMaxMean >= 1) {
		bad("rebalance.target_max_mean", r.TargetMaxMean, "must be at least 1")
	}
	if !(r.MinGain >= 0 && r.MinGain < 1) {
		bad("rebalance.min_gain", r.MinGain, "is outside [0, 1)")
	}
	if !(r.Headroom >= 0 && r.Headroom < 1) {
		bad("rebalance.headroom", r.Headroom, "is outside [0, 1)")
	}
	if r.HeatHalfLife <= 0 {
		bad("rebalance.heat_half_life", time.Duration(r.HeatHalfLife), "must be positive")
	}
	if r.MaxStripeWidth < 0 {
		bad("rebalance.max_stripe_width", r.MaxStripeWidth, "is negative (0: no bound)")
	}
	if c.Evacuate.UrgentWithin < 0 {
		bad("evacuate.urgent_within", time.Duration(c.Evacuate.UrgentWithin), "is negative")
	}
	if _, _, err := ParseOffPeak(c.Evacuate.OffPeak); err != nil {
		bad("evacuate.off_peak", strconv.Quote(c.Evacuate.OffPeak), err.Error())
	}
	if c.Verify.Window < Duration(time.Second) {
		bad("verify.window", time.Duration(c.Verify.Window), "is below the minimum of 1s")
	}
	if !(c.Verify.WorseGPUDrop > 0 && c.Verify.WorseGPUDrop < 1) {
		bad("verify.worse_gpu_drop", c.Verify.WorseGPUDrop, "is outside (0, 1)")
	}
	m := &c.Move
	if m.Grace < 0 {
		bad("move.grace", time.Duration(m.Grace), "is negative")
	}
	positive("move.max_attempts", m.MaxAttempts)
	if m.Backoff <= 0 || m.MaxBackoff < m.Backoff {
		bad("move.backoff", time.Duration(m.Backoff), fmt.Sprintf("must be positive and at most move.max_backoff (%s)", time.Duration(m.MaxBackoff)))
	}
	errs = append(errs, c.ReadAhead.validate(prefix+"readahead.")...)
	if c.Driver == DriverFiles {
		errs = append(errs, c.Files.validate(prefix+"files."))
	}
	if c.Driver == DriverExec {
		errs = append(errs, c.Exec.validate(prefix+"exec."))
	}
	return errors.Join(errs...)
}

// ParseOffPeak reads "HH:MM-HH:MM" (UTC) into minutes of the day; the
// window may wrap midnight. Empty is the whole day (from = to = 0).
func ParseOffPeak(s string) (from, to int, err error) {
	if s == "" {
		return 0, 0, nil
	}
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		return 0, 0, errors.New(`is not "HH:MM-HH:MM"`)
	}
	parse := func(x string) (int, error) {
		t, err := time.Parse("15:04", strings.TrimSpace(x))
		if err != nil {
			return 0, errors.New(`is not "HH:MM-HH:MM"`)
		}
		return t.Hour()*60 + t.Minute(), nil
	}
	if from, err = parse(a); err != nil {
		return 0, 0, err
	}
	if to, err = parse(b); err != nil {
		return 0, 0, err
	}
	if from == to {
		return 0, 0, errors.New("is an empty window (leave it empty for any time)")
	}
	return from, to, nil
}

// nextOffPeak returns now when now is inside the off-peak window, else the
// window's next start.
func nextOffPeak(spec string, now time.Time) time.Time {
	from, to, err := ParseOffPeak(spec)
	if err != nil || from == to {
		return now
	}
	u := now.UTC()
	min := u.Hour()*60 + u.Minute()
	in := (from < to && min >= from && min < to) || (from > to && (min >= from || min < to))
	if in {
		return now
	}
	day := time.Date(u.Year(), u.Month(), u.Day(), 0, 0, 0, 0, time.UTC)
	start := day.Add(time.Duration(from) * time.Minute)
	if !start.After(u) {
		start = start.Add(24 * time.Hour)
	}
	return start
}
