package actuator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/template"
	"time"

	"github.com/ballast-io/ballast/models"
)

// The exec driver (actuators.driver: exec) runs an operator's command for
// every step of a move: the MDS's own tools (FreeBSD pnfsdscopymr and
// pnfsdsfile, a vendor CLI) copy, check and switch the bytes; ballast
// decides, journals and compares. The command's contract (argv templates,
// environment, stdin, output, exit codes) is in docs/actions.md ("The exec
// driver").

// Exit codes of an exec driver command other than 0 (done) that mean
// something; any other code, a signal or the timeout is a retryable error.
const (
	ExecExitRefused   = 3  // the layout moved on (ErrGenerationChanged)
	ExecExitNotFound  = 4  // no such file or device (ErrNotFound)
	ExecExitPermanent = 5  // no retry will fix it
	ExecExitUnderWay  = 75 // copy, verify: not done yet, ask again later
)

// ExecStep is what one command of the exec driver is given: the fields of
// its argv templates ({{.File}}), the same values as BALLAST_*
// environment variables, and the object as JSON on its stdin.
type ExecStep struct {
	// Step is the command's key (locate, devices, copy, restripe_commit…).
	Step string `json:"step"`
	// Move names the move or restripe, the same on every step of it and
	// across restarts: FILE#MIRROR.COMPONENT:FROM>TO@GENERATION, a
	// restripe's FILE#MIRROR:FROM,…>TO,…@GENERATION.
	Move      string `json:"move,omitempty"`
	File      string `json:"file,omitempty"`
	Mirror    int    `json:"mirror"`
	Component int    `json:"component"`
	// From and To are device ids (a restripe's: the old and new devices
	// of the mirror in component order, joined by commas); FromDS and
	// ToDS their data servers (a restripe's: its first components').
	From     string `json:"from,omitempty"`
	To       string `json:"to,omitempty"`
	FromName string `json:"from_name,omitempty"`
	ToName   string `json:"to_name,omitempty"`
	FromDS   string `json:"from_ds,omitempty"`
	ToDS     string `json:"to_ds,omitempty"`
	// Generation is the layout generation the move works from;
	// NewGeneration (Generation + 1) what its commit makes.
	Generation    uint64 `json:"generation"`
	NewGeneration uint64 `json:"new_generation"`
	// Epoch is the committing leader's fencing token (commit steps).
	Epoch uint64 `json:"epoch"`
	// Bytes is the component's size (a restripe's: the mirror's).
	Bytes int64 `json:"bytes"`
	// Rate paces a copy, whole bytes/s (0: unpaced); Urgent marks a
	// drive about to fail.
	Rate   int64 `json:"rate"`
	Urgent bool  `json:"urgent"`
	// Device and DS are what stripes and state are asked about; State the
	// state to set.
	Device string `json:"device,omitempty"`
	DS     string `json:"ds,omitempty"`
	State  string `json:"state,omitempty"`
	// FromDevices and ToDevices are a restripe's old and new devices, in
	// component order (From and To joined).
	FromDevices []string `json:"from_devices,omitempty"`
	ToDevices   []string `json:"to_devices,omitempty"`
	// InFlight (copy steps, JSON only) is the move as the engine journals
	// it, its action id and its plan: an MDS whose state both mds of an
	// HA pair reach keeps it while the move is in flight (copy begun,
	// not cleaned up or aborted) and gives it back to the takeover
	// command, for a new leader to adopt the move (Successor).
	InFlight *InFlight `json:"in_flight,omitempty"`
}

// ExecOptions configure the exec driver.
type ExecOptions struct {
	Config ExecConfig
	Logger *slog.Logger
}

// ExecDriver is the exec mover driver: a command per step (ExecConfig).
// It keeps no state of its own beyond the device states SetState set (in
// memory; a devices command, when given, reports the MDS's own) and the
// moves paused (in memory): the
// MDS's layout, which locate reads, says where every move stands, and the
// engine's journal the rest.
type ExecDriver struct {
	cfg    ExecConfig
	log    *slog.Logger
	tmpl   map[string][]*template.Template
	devs   map[string]DeviceSpec
	order  []string
	mu     sync.Mutex
	states map[string]DeviceState
	// paused holds the moves (ExecStep.Move) whose data movement is
	// paused (Pause); in memory only: after a restart the engine pauses
	// again. running interrupts the copy or verify command under way of
	// a move.
	paused  map[string]bool
	running map[string]func()
}

var (
	_ Pauser    = (*ExecDriver)(nil)
	_ Successor = (*ExecDriver)(nil)
)

// NewExecDriver checks the config and parses its templates; it runs
// nothing.
func NewExecDriver(o ExecOptions) (*ExecDriver, error) {
	if err := o.Config.validate("actuators.exec."); err != nil {
		return nil, err
	}
	d := &ExecDriver{cfg: o.Config, log: o.Logger, tmpl: map[string][]*template.Template{}, devs: map[string]DeviceSpec{}, states: map[string]DeviceState{},
		paused: map[string]bool{}, running: map[string]func(){}}
	if d.log == nil {
		d.log = slog.Default()
	}
	for step, argv := range o.Config.Commands {
		for i, a := range argv {
			t, err := template.New(fmt.Sprintf("%s[%d]", step, i)).Option("missingkey=error").Parse(a)
			if err != nil {
				return nil, fmt.Errorf("actuators.exec.commands.%s[%d]: %q: %w", step, i, a, err)
			}
			d.tmpl[step] = append(d.tmpl[step], t)
		}
	}
	for _, s := range o.Config.Devices {
		id := strings.ToLower(s.Device)
		d.devs[id] = s
		d.order = append(d.order, id)
	}
	return d, nil
}

// Capabilities implements Mover.
func (d *ExecDriver) Capabilities() Capabilities {
	return Capabilities{Name: DriverExec, SetState: len(d.tmpl["state"]) > 0, Restripe: d.cfg.Restripe}
}

// ExecDevice is what the optional devices command prints of a device;
// empty and zero fields keep what the config says.
type ExecDevice struct {
	Device        string      `json:"device"`
	State         DeviceState `json:"state,omitempty"`
	CapacityBytes int64       `json:"capacity_bytes,omitempty"`
	UsedBytes     int64       `json:"used_bytes,omitempty"`
}

// Devices lists the configured devices, in the states SetState gave them;
// with a devices command, as it reports them (state, capacity, use).
func (d *ExecDriver) Devices(ctx context.Context) ([]Device, error) {
	var seen map[string]ExecDevice
	if len(d.tmpl["devices"]) > 0 {
		out, err := d.run(ctx, ExecStep{Step: "devices"})
		if err != nil {
			return nil, err
		}
		var ds []ExecDevice
		if err := decodeObjects(out, &ds); err != nil {
			return nil, fmt.Errorf("cannot parse the devices command's output: %w", err)
		}
		seen = map[string]ExecDevice{}
		for _, x := range ds {
			seen[strings.ToLower(x.Device)] = x
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]Device, 0, len(d.order))
	for _, id := range d.order {
		dev := d.devs[id].Configured()
		if st, ok := d.states[id]; ok {
			dev.State = st
		}
		if x, ok := seen[id]; ok {
			if x.State != "" {
				dev.State = x.State
			}
			if x.CapacityBytes > 0 && dev.CapacityBytes == 0 {
				dev.CapacityBytes = x.CapacityBytes
			}
			dev.UsedBytes = x.UsedBytes
		}
		out = append(out, dev)
	}
	return out, nil
}

// decodeObjects appends to *dst the JSON objects of out: an array of
// them, or one after another.
func decodeObjects[T any](out []byte, dst *[]T) error {
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		var some []T
		var err error
		if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '[' {
			err = json.Unmarshal(raw, &some)
		} else {
			some = make([]T, 1)
			err = json.Unmarshal(raw, &some[0])
		}
		if err != nil {
			return err
		}
		*dst = append(*dst, some...)
	}
}

// Stripes runs the stripes command: JSON StripeRef objects on stdout (an
// array, or one object after another).
func (d *ExecDriver) Stripes(ctx context.Context, device string) ([]StripeRef, error) {
	out, err := d.run(ctx, ExecStep{Step: "stripes", Device: device, DS: d.devs[strings.ToLower(device)].DS})
	if err != nil {
		return nil, err
	}
	var refs []StripeRef
	if err := decodeObjects(out, &refs); err != nil {
		return nil, fmt.Errorf("cannot parse the stripes of device %q (JSON objects): %w", device, err)
	}
	for i := range refs {
		if refs[i].Device == "" {
			refs[i].Device = device
		}
	}
	return refs, nil
}

// Locate runs the locate command: the file's layout as JSON on stdout.
func (d *ExecDriver) Locate(ctx context.Context, file string) (Layout, error) {
	out, err := d.run(ctx, ExecStep{Step: "locate", File: file})
	if err != nil {
		return Layout{}, err
	}
	var l Layout
	if err := json.Unmarshal(out, &l); err != nil {
		return Layout{}, fmt.Errorf("cannot parse the layout of %q: %w", file, err)
	}
	if l.File == "" {
		l.File = file
	}
	if len(l.Mirrors) == 0 {
		return Layout{}, fmt.Errorf("locate printed a layout of %q without mirrors", file)
	}
	return l, nil
}

// moveStep fills the fields of move m for step.
func (d *ExecDriver) moveStep(step string, m models.Move) ExecStep {
	s := ExecStep{Step: step, File: m.File, Mirror: m.Mirror, Component: m.Component, From: m.From, To: m.To,
		FromName: m.FromName, ToName: m.ToName, FromDS: d.devs[strings.ToLower(m.From)].DS, ToDS: d.devs[strings.ToLower(m.To)].DS,
		Generation: m.Generation, NewGeneration: m.Generation + 1, Bytes: m.Bytes}
	if r := m.Restripe; r != nil {
		s.FromDevices, s.ToDevices = r.From, r.To
		s.From, s.To = strings.Join(r.From, ","), strings.Join(r.To, ",")
		if len(r.From) > 0 && len(r.To) > 0 {
			s.FromDS, s.ToDS = d.devs[strings.ToLower(r.From[0])].DS, d.devs[strings.ToLower(r.To[0])].DS
		}
		s.ToName = strings.Join(r.ToNames, ",")
		s.Move = fmt.Sprintf("%s#%d:%s>%s@%d", m.File, m.Mirror, s.From, s.To, m.Generation)
	} else {
		s.Move = fmt.Sprintf("%s#%d.%d:%s>%s@%d", m.File, m.Mirror, m.Component, m.From, m.To, m.Generation)
	}
	return s
}

// Pause implements Pauser. Pausing a move interrupts its copy or verify
// command under way (SIGTERM to the command's process group, SIGKILL
// after kill_grace), which then reports not done unless it exits 0 (it
// finished) or 3, 4 or 5 (its answer stands); while the move is paused
// its copy and verify commands are not run and report not done. After
// the resume the engine runs the step again: a copy command must go on
// from what it kept, or start over (docs/actions.md, "The exec driver").
func (d *ExecDriver) Pause(_ context.Context, _ string, m models.Move, paused bool) error {
	key := d.moveStep("", m).Move
	d.mu.Lock()
	defer d.mu.Unlock()
	if !paused {
		delete(d.paused, key)
		return nil
	}
	d.paused[key] = true
	if stop := d.running[key]; stop != nil {
		d.log.Info("exec driver: interrupting a paused move's command", "move", key)
		stop()
	}
	return nil
}

// unpause forgets m's pause: an aborted move copied again later starts
// unpaused.
func (d *ExecDriver) unpause(m models.Move) {
	d.mu.Lock()
	delete(d.paused, d.moveStep("", m).Move)
	d.mu.Unlock()
}

// pausable says whether step moves data (Pause stops it).
func pausable(step string) bool {
	return step == "copy" || step == "verify" || step == "restripe_copy" || step == "restripe_verify"
}

// copyCmd runs a copy step: exit 0 done, ExecExitUnderWay not yet.
func (d *ExecDriver) copyCmd(ctx context.Context, step string, r CopyRequest) (Progress, error) {
	s := d.moveStep(step, r.Move)
	s.Rate, s.Urgent = int64(math.Ceil(r.RateLimit)), r.Urgent
	s.InFlight = &InFlight{ID: r.ID, Move: r.Move, Plan: r.Plan}
	if _, err := d.run(ctx, s); errors.Is(err, errUnderWay) {
		return Progress{}, nil
	} else if err != nil {
		return Progress{}, err
	}
	return Progress{Done: true, Bytes: r.Move.Bytes}, nil
}

// verifyCmd runs a verify step: the command prints the checksum of the
// source and of the copy ("algorithm:hex", one a line); ballast compares
// them.
func (d *ExecDriver) verifyCmd(ctx context.Context, step string, m models.Move) (VerifyResult, error) {
	out, err := d.run(ctx, d.moveStep(step, m))
	if errors.Is(err, errUnderWay) {
		return VerifyResult{}, nil
	} else if err != nil {
		return VerifyResult{}, err
	}
	sums := strings.Fields(string(out))
	if len(sums) != 2 {
		return VerifyResult{}, fmt.Errorf("%s printed %q; want two checksums (source, copy)", step, outputTail(out))
	}
	return VerifyResult{Done: true, Match: sums[0] == sums[1], Checksum: sums[0], CopyChecksum: sums[1]}, nil
}

// Copy implements Mover: the copy command.
func (d *ExecDriver) Copy(ctx context.Context, r CopyRequest) (Progress, error) {
	return d.copyCmd(ctx, "copy", r)
}

// Verify implements Mover: the verify command.
func (d *ExecDriver) Verify(ctx context.Context, m models.Move) (VerifyResult, error) {
	return d.verifyCmd(ctx, "verify", m)
}

// Commit implements Mover: the commit command, given the leader's epoch.
func (d *ExecDriver) Commit(ctx context.Context, m models.Move, epoch uint64) error {
	s := d.moveStep("commit", m)
	s.Epoch = epoch
	_, err := d.run(ctx, s)
	return err
}

// Cleanup implements Mover: the cleanup command.
func (d *ExecDriver) Cleanup(ctx context.Context, m models.Move) error {
	_, err := d.run(ctx, d.moveStep("cleanup", m))
	return err
}

// Abort implements Mover: the abort command.
func (d *ExecDriver) Abort(ctx context.Context, m models.Move) error {
	d.unpause(m)
	_, err := d.run(ctx, d.moveStep("abort", m))
	return err
}

// TakeOver implements Successor through the optional takeover command,
// run once when this mds leads with a new epoch (.Epoch): the MDS raises
// its fence to the epoch (from then on it refuses a commit of a lower
// one, exit 3) and prints the moves in flight: the JSON objects the copy
// steps of those moves were given on stdin (their in_flight member), an
// array or one after another. Without the command there is nothing to
// take over (each mds resumes its own journal).
func (d *ExecDriver) TakeOver(ctx context.Context, epoch uint64) ([]InFlight, error) {
	if len(d.tmpl["takeover"]) == 0 {
		return nil, nil
	}
	out, err := d.run(ctx, ExecStep{Step: "takeover", Epoch: epoch})
	if err != nil {
		return nil, err
	}
	var steps []ExecStep
	if err := decodeObjects(out, &steps); err != nil {
		return nil, fmt.Errorf("cannot parse the takeover command's output (the copy steps' JSON): %w", err)
	}
	var fl []InFlight
	for _, s := range steps {
		if s.InFlight != nil && s.InFlight.ID != "" {
			fl = append(fl, *s.InFlight)
		}
	}
	return fl, nil
}

// SetState implements Mover: the state command, when configured.
func (d *ExecDriver) SetState(ctx context.Context, sub models.Subject, st DeviceState) error {
	if len(d.tmpl["state"]) == 0 {
		return Permanent(errors.New("actuators.exec.commands.state is not configured: the exec driver cannot set a device's state"))
	}
	s := ExecStep{Step: "state", State: string(st)}
	var ids []string
	switch sub.Kind {
	case models.SubjectDevice:
		s.Device, s.DS = sub.ID, d.devs[strings.ToLower(sub.ID)].DS
		ids = []string{strings.ToLower(sub.ID)}
	case models.SubjectDS:
		s.DS = sub.ID
		for _, id := range d.order {
			if d.devs[id].DS == sub.ID {
				ids = append(ids, id)
			}
		}
	default:
		return Permanent(fmt.Errorf("cannot set the state of a %s", sub.Kind))
	}
	if _, err := d.run(ctx, s); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, id := range ids {
		d.states[id] = st
	}
	return nil
}

// The restripe steps (actuators.exec.restripe: true): their own commands,
// so that a script written for moves is never handed a restripe.

func (d *ExecDriver) restriping() error {
	if !d.cfg.Restripe {
		return Permanent(errors.New("actuators.exec.restripe is off: the exec driver does not restripe files"))
	}
	return nil
}

// CopyRestripe implements Restriper: the restripe_copy command.
func (d *ExecDriver) CopyRestripe(ctx context.Context, r CopyRequest) (Progress, error) {
	if err := d.restriping(); err != nil {
		return Progress{}, err
	}
	return d.copyCmd(ctx, "restripe_copy", r)
}

// VerifyRestripe implements Restriper: the restripe_verify command.
func (d *ExecDriver) VerifyRestripe(ctx context.Context, m models.Move) (VerifyResult, error) {
	if err := d.restriping(); err != nil {
		return VerifyResult{}, err
	}
	return d.verifyCmd(ctx, "restripe_verify", m)
}

// CommitRestripe implements Restriper: the restripe_commit command.
func (d *ExecDriver) CommitRestripe(ctx context.Context, m models.Move, epoch uint64) error {
	if err := d.restriping(); err != nil {
		return err
	}
	s := d.moveStep("restripe_commit", m)
	s.Epoch = epoch
	_, err := d.run(ctx, s)
	return err
}

// CleanupRestripe implements Restriper: the restripe_cleanup command.
func (d *ExecDriver) CleanupRestripe(ctx context.Context, m models.Move) error {
	if err := d.restriping(); err != nil {
		return err
	}
	_, err := d.run(ctx, d.moveStep("restripe_cleanup", m))
	return err
}

// AbortRestripe implements Restriper: the restripe_abort command.
func (d *ExecDriver) AbortRestripe(ctx context.Context, m models.Move) error {
	if err := d.restriping(); err != nil {
		return err
	}
	d.unpause(m)
	_, err := d.run(ctx, d.moveStep("restripe_abort", m))
	return err
}

var errUnderWay = errors.New("under way")

// errPausedStep is the cause of a command's interruption by Pause.
var errPausedStep = errors.New("paused")

// run runs step's command with s in its argv, environment and stdin,
// within the timeout, and maps its exit code (ExecExit…). An interrupted
// command (paused, past the timeout, ctx done: the mds stopping) gets
// SIGTERM on its process group, and SIGKILL kill_grace later if any of
// the group is left; exit 0 is done even then. A copy or verify command
// interrupted by Pause, or not started because its move is paused, is
// not done (errUnderWay) unless it answers 0, 3, 4 or 5.
func (d *ExecDriver) run(ctx context.Context, s ExecStep) ([]byte, error) {
	ts := d.tmpl[s.Step]
	if len(ts) == 0 {
		return nil, Permanent(fmt.Errorf("actuators.exec.commands.%s is not configured", s.Step))
	}
	argv := make([]string, len(ts))
	for i, t := range ts {
		var b strings.Builder
		if err := t.Execute(&b, s); err != nil {
			return nil, Permanent(fmt.Errorf("cannot expand actuators.exec.commands.%s[%d]: %w", s.Step, i, err))
		}
		argv[i] = b.String()
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(d.cfg.Timeout))
	defer cancel()
	ctx, interrupt := context.WithCancelCause(ctx)
	defer interrupt(nil)
	if pausable(s.Step) {
		d.mu.Lock()
		if d.paused[s.Move] {
			d.mu.Unlock()
			return nil, errUnderWay
		}
		d.running[s.Move] = func() { interrupt(errPausedStep) }
		d.mu.Unlock()
		defer func() {
			d.mu.Lock()
			delete(d.running, s.Move)
			d.mu.Unlock()
		}()
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	// the command's children (a script's cp, dd) are signalled with it
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	grace := time.Duration(d.cfg.KillGrace)
	var killer atomic.Pointer[time.Timer]
	cmd.Cancel = func() error {
		pg := -cmd.Process.Pid
		_ = syscall.Kill(pg, syscall.SIGTERM)
		killer.Store(time.AfterFunc(grace, func() { _ = syscall.Kill(pg, syscall.SIGKILL) }))
		return nil
	}
	// after the group's SIGKILL: stop waiting for a pipe a runaway holds
	cmd.WaitDelay = grace + time.Second
	var body bytes.Buffer
	enc := json.NewEncoder(&body) // one line, ">" as it is (the move's name)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	cmd.Stdin = &body
	cmd.Env = append(os.Environ(), execEnv(&s)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	d.log.Debug("exec driver: running a step", "step", s.Step, "move", s.Move, "command", argv[0])
	err := cmd.Run()
	if k := killer.Load(); k != nil && k.Stop() {
		// the leader exited within the grace: what of its group is left
		// (a child that ignored SIGTERM) goes now
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	var ee *exec.ExitError
	what := s.Step + " " + s.File + s.Device + s.DS
	paused := errors.Is(context.Cause(ctx), errPausedStep)
	code := -1
	if cmd.ProcessState != nil {
		code = cmd.ProcessState.ExitCode()
	}
	msg := outputTail(stderr.Bytes())
	switch {
	case err == nil || code == 0:
		return stdout.Bytes(), nil
	case paused && code != ExecExitRefused && code != ExecExitNotFound && code != ExecExitPermanent:
		d.log.Info("exec driver: a paused move's command stopped", "step", s.Step, "move", s.Move, "exit", code, "stderr", msg)
		return nil, errUnderWay
	case ctx.Err() != nil && !paused:
		return nil, fmt.Errorf("exec driver: %s: %s: %w", what, argv[0], ctx.Err())
	case !errors.As(err, &ee):
		return nil, fmt.Errorf("exec driver: cannot run %s: %w", argv[0], err)
	}
	switch code {
	case ExecExitRefused:
		return nil, fmt.Errorf("exec driver: %s refused (exit 3): %s: %w", what, msg, ErrGenerationChanged)
	case ExecExitNotFound:
		return nil, fmt.Errorf("exec driver: %s (exit 4): %s: %w", what, msg, ErrNotFound)
	case ExecExitPermanent:
		return nil, Permanent(fmt.Errorf("exec driver: %s failed for good (exit 5): %s", what, msg))
	case ExecExitUnderWay:
		if pausable(s.Step) {
			return nil, errUnderWay
		}
	}
	return nil, fmt.Errorf("exec driver: %s: %s: %w: %s", what, argv[0], err, msg)
}

// execEnv is s as BALLAST_* variables.
func execEnv(s *ExecStep) []string {
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	return []string{
		"BALLAST_STEP=" + s.Step, "BALLAST_MOVE=" + s.Move, "BALLAST_FILE=" + s.File,
		"BALLAST_MIRROR=" + strconv.Itoa(s.Mirror), "BALLAST_COMPONENT=" + strconv.Itoa(s.Component),
		"BALLAST_FROM=" + s.From, "BALLAST_TO=" + s.To, "BALLAST_FROM_DS=" + s.FromDS, "BALLAST_TO_DS=" + s.ToDS,
		"BALLAST_GENERATION=" + u(s.Generation), "BALLAST_NEW_GENERATION=" + u(s.NewGeneration), "BALLAST_EPOCH=" + u(s.Epoch),
		"BALLAST_BYTES=" + strconv.FormatInt(s.Bytes, 10), "BALLAST_RATE=" + strconv.FormatInt(s.Rate, 10),
		"BALLAST_URGENT=" + strconv.FormatBool(s.Urgent),
		"BALLAST_DEVICE=" + s.Device, "BALLAST_DS=" + s.DS, "BALLAST_STATE=" + s.State,
	}
}

func outputTail(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 512 {
		s = "…" + s[len(s)-512:]
	}
	return s
}
