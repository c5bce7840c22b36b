package models

import (
	"fmt"
	"time"
)

// ActionKind names a change ballast can make to the cluster or the world.
type ActionKind string

// Action kinds that actuators know how to carry out. Rebalance, evacuate
// and promote-spare actions are plans: their stripe moves are child
// actions of kind move_stripe (Parent names the plan); a rebalance may
// also restripe a file too hot for any one device (restripe_file).
const (
	ActionMoveStripe        ActionKind = "move_stripe"
	ActionRestripeFile      ActionKind = "restripe_file"
	ActionRebalance         ActionKind = "rebalance"
	ActionSetReadAhead      ActionKind = "set_read_ahead"
	ActionEvacuateDevice    ActionKind = "evacuate_device"
	ActionPromoteSpare      ActionKind = "promote_spare"
	ActionThrottleMigration ActionKind = "throttle_migration"
	ActionNotify            ActionKind = "notify"
)

// ActionKinds lists every action kind, in the order operators read them.
var ActionKinds = []ActionKind{ActionRebalance, ActionEvacuateDevice, ActionPromoteSpare, ActionSetReadAhead,
	ActionMoveStripe, ActionRestripeFile, ActionThrottleMigration, ActionNotify}

// Valid reports whether k is one of ActionKinds.
func (k ActionKind) Valid() bool {
	for _, v := range ActionKinds {
		if k == v {
			return true
		}
	}
	return false
}

// ActionMode is how an actuator treats the actions of one kind.
type ActionMode string

// Modes, from most to least cautious.
const (
	// ModeOff: nothing is planned.
	ModeOff ActionMode = "off"
	// ModeDryRun: planned and journaled, never carried out.
	ModeDryRun ActionMode = "dry-run"
	// ModeApprove: planned, carried out after an operator approves.
	ModeApprove ActionMode = "approve"
	// ModeAuto: planned and carried out within budgets and guards.
	ModeAuto ActionMode = "auto"
)

// Valid reports whether m is one of the modes.
func (m ActionMode) Valid() bool {
	return m == ModeOff || m == ModeDryRun || m == ModeApprove || m == ModeAuto
}

// ActionState is where an action is in its life.
type ActionState string

// Action states. A plan goes proposed (dry-run: it stays there) or
// awaiting_approval → approved → running → verifying → succeeded, or ends
// failed, rolled_back, rejected or cancelled. A stripe move goes approved →
// running → succeeded (or failed, cancelled, rolled_back).
const (
	ActionProposed         ActionState = "proposed"
	ActionAwaitingApproval ActionState = "awaiting_approval"
	ActionApproved         ActionState = "approved"
	ActionRunning          ActionState = "running"
	ActionVerifying        ActionState = "verifying"
	ActionSucceeded        ActionState = "succeeded"
	ActionFailed           ActionState = "failed"
	ActionRolledBack       ActionState = "rolled_back"
	ActionRejected         ActionState = "rejected"
	ActionCancelled        ActionState = "cancelled"
)

// Terminal reports whether s is a final state.
func (s ActionState) Terminal() bool {
	switch s {
	case ActionSucceeded, ActionFailed, ActionRolledBack, ActionRejected, ActionCancelled:
		return true
	}
	return false
}

// Valid reports whether s is one of the states.
func (s ActionState) Valid() bool {
	switch s {
	case ActionProposed, ActionAwaitingApproval, ActionApproved, ActionRunning, ActionVerifying,
		ActionSucceeded, ActionFailed, ActionRolledBack, ActionRejected, ActionCancelled:
		return true
	}
	return false
}

// MovePhase is how far a stripe move has gone: copy → verify (both copies
// read back, checksums compared) → commit (layout switched if its
// generation is unchanged) → cleanup (old copy removed after a grace
// period). An abort removes the new copy; the layout never switched.
type MovePhase string

// Move phases, in order.
const (
	PhasePending   MovePhase = "pending"
	PhaseCopying   MovePhase = "copying"
	PhaseCopied    MovePhase = "copied"
	PhaseVerified  MovePhase = "verified"
	PhaseCommitted MovePhase = "committed"
	PhaseCleaned   MovePhase = "cleaned"
	PhaseAborted   MovePhase = "aborted"
)

// Move is what a move_stripe action moves: one component of one file's
// layout from one device to another.
type Move struct {
	File      string `json:"file"`
	Mirror    int    `json:"mirror"`
	Component int    `json:"component"`
	From      string `json:"from"` // device id
	To        string `json:"to"`   // device id
	// FromName and ToName are the devices as operators name them, when known.
	FromName string `json:"from_name,omitempty"`
	ToName   string `json:"to_name,omitempty"`
	Bytes    int64  `json:"bytes"`
	// Generation is the layout generation the move was planned on; the
	// commit succeeds only while it is unchanged.
	Generation uint64 `json:"generation"`
	// Heat is the stripe's load when planned, bytes/s.
	Heat        float64   `json:"heat_bytes_per_second,omitempty"`
	Phase       MovePhase `json:"phase"`
	BytesCopied int64     `json:"bytes_copied,omitempty"`
	// Checksum is the strong checksum both copies matched (algorithm:hex).
	Checksum string `json:"checksum,omitempty"`
	// Mismatches counts copies whose read-back did not match (each was
	// removed and copied again).
	Mismatches  int       `json:"mismatches,omitempty"`
	CommittedAt time.Time `json:"committed_at,omitzero"`
	// Restripe, set on a restripe_file action, rewrites the whole mirror
	// Mirror of File over more components: From and To above are then its
	// hottest old component's device and the first new one, Component is
	// that old component, and Bytes the mirror's bytes.
	Restripe *Restripe `json:"restripe,omitempty"`
}

// Restripe is a mirror's placement before and after a restripe: the
// devices of its components, in component order. The flex-files stripe
// unit spreads the file's bytes round-robin over the components, so a
// wider mirror spreads every reader's byte ranges over more devices.
type Restripe struct {
	From []string `json:"from"`
	To   []string `json:"to"`
	// ToNames are the new devices as operators name them, when known.
	ToNames []string `json:"to_names,omitempty"`
}

// ActionPlan is what a planner computed for a plan action.
type ActionPlan struct {
	Moves int `json:"moves"`
	// Restripes counts the plan's restripe_file actions (not in Moves).
	Restripes int   `json:"restripes,omitempty"`
	Bytes     int64 `json:"bytes"`
	// LowerBoundBytes is the fewest bytes any plan must move to reach the
	// target; CostRatio is Bytes ÷ LowerBoundBytes.
	LowerBoundBytes int64   `json:"lower_bound_bytes"`
	CostRatio       float64 `json:"cost_ratio,omitempty"`
	// Max/mean device load of the pool before and predicted after, and the
	// target the planner aimed at.
	MaxMeanBefore    float64 `json:"max_mean_before,omitempty"`
	MaxMeanPredicted float64 `json:"max_mean_predicted,omitempty"`
	MaxMeanTarget    float64 `json:"max_mean_target,omitempty"`
	// Notes explain what the planner could not do (e.g. a stripe alone
	// hotter than the target, a pool without headroom).
	Notes []string `json:"notes,omitempty"`
}

// ActionProgress counts a plan's moves.
type ActionProgress struct {
	MovesTotal     int   `json:"moves_total"`
	MovesDone      int   `json:"moves_done"`
	MovesFailed    int   `json:"moves_failed,omitempty"`
	MovesCancelled int   `json:"moves_cancelled,omitempty"`
	BytesMoved     int64 `json:"bytes_moved"`
}

// Verdict is the measured outcome of an action.
type Verdict string

// Verdicts.
const (
	VerdictEffective   Verdict = "effective"
	VerdictIneffective Verdict = "ineffective"
	VerdictWorse       Verdict = "worse"
	VerdictUnknown     Verdict = "unknown"
)

// ActionEffect is what verification measured: the numbers that motivated
// the action, averaged over a window before it started and after it ended.
type ActionEffect struct {
	Window     time.Duration      `json:"window_ns"`
	Before     map[string]float64 `json:"before"`
	After      map[string]float64 `json:"after,omitempty"`
	Verdict    Verdict            `json:"verdict,omitempty"`
	Reason     string             `json:"reason,omitempty"`
	MeasuredAt time.Time          `json:"measured_at,omitzero"`

	// BeforeWindow, when set, is the window Before was averaged over where
	// it is not Window: a plan started less than Window after the onset of
	// the condition that motivated it reads from the onset (at least
	// minimum samples); BeforeNote says so, and from when.
	BeforeWindow time.Duration `json:"before_window_ns,omitempty"`
	BeforeNote   string        `json:"before_note,omitempty"`
}

// ActionDecision records an operator's approval, rejection or cancellation.
type ActionDecision struct {
	Verb   string    `json:"verb"` // approve, reject, cancel
	By     string    `json:"by,omitempty"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason,omitempty"`
}

// Action is one change, named deterministically from what it does so that a
// restarted actuator recognises work it already journaled.
type Action struct {
	ID      string     `json:"id"`
	Kind    ActionKind `json:"kind"`
	Subject Subject    `json:"subject"`
	// SubjectName is the subject as operators name it (ds04/nvme4n1), when
	// known; Subject.ID stays the key the mover uses.
	SubjectName string `json:"subject_name,omitempty"`
	// Parent is the plan a move belongs to.
	Parent    string            `json:"parent,omitempty"`
	Params    map[string]string `json:"params,omitempty"`
	FindingID string            `json:"finding_id,omitempty"`

	// Onset is when the condition that motivated a plan began (the
	// earliest start of its findings): its before numbers are not read
	// from earlier. Zero where the before-window is verify.window whatever
	// the finding's age (evacuations, replacements).
	Onset time.Time `json:"onset,omitzero"`

	Mode  ActionMode  `json:"mode,omitempty"`
	State ActionState `json:"state"`
	// DryRun marks an action that must never be carried out.
	DryRun bool `json:"dry_run,omitempty"`
	// Urgent actions may move data inside a predicted checkpoint window.
	Urgent bool `json:"urgent,omitempty"`
	// Simulated marks an action carried out on the cluster twin.
	Simulated bool      `json:"simulated,omitempty"`
	Created   time.Time `json:"created"`
	Updated   time.Time `json:"updated"`
	Started   time.Time `json:"started,omitzero"`
	Finished  time.Time `json:"finished,omitzero"`
	// NotBefore defers the action (a wear-out replacement waits for
	// off-peak hours).
	NotBefore time.Time `json:"not_before,omitzero"`
	Reason    string    `json:"reason,omitempty"`
	// Blocked names the guard holding the action back, and why.
	Blocked  string          `json:"blocked,omitempty"`
	Error    string          `json:"error,omitempty"`
	Attempts int             `json:"attempts,omitempty"`
	Plan     *ActionPlan     `json:"plan,omitempty"`
	Progress *ActionProgress `json:"progress,omitempty"`
	Move     *Move           `json:"move,omitempty"`
	Effect   *ActionEffect   `json:"effect,omitempty"`
	Decision *ActionDecision `json:"decision,omitempty"`
	// RollbackOf names the action a rollback reverses.
	RollbackOf string `json:"rollback_of,omitempty"`
}

// Validate checks that a is complete enough to journal.
func (a *Action) Validate() error {
	switch {
	case a.ID == "":
		return fmt.Errorf("action has no id")
	case a.Kind == "":
		return fmt.Errorf("action %q has no kind", a.ID)
	case a.Subject.Kind == "" || a.Subject.ID == "":
		return fmt.Errorf("action %q has no subject", a.ID)
	case a.State == "":
		return fmt.Errorf("action %q has no state", a.ID)
	case !a.State.Valid():
		return fmt.Errorf("action %q has invalid state %q", a.ID, a.State)
	case a.Mode != "" && !a.Mode.Valid():
		return fmt.Errorf("action %q has invalid mode %q", a.ID, a.Mode)
	case a.Created.IsZero():
		return fmt.Errorf("action %q has no creation time", a.ID)
	case a.Kind == ActionMoveStripe && a.Move != nil && (a.Move.From == "" || a.Move.To == "" || a.Move.File == ""):
		return fmt.Errorf("action %q moves nothing: it needs a file, a source and a destination", a.ID)
	case a.Kind == ActionRestripeFile && a.Move != nil && (a.Move.File == "" || a.Move.Restripe == nil || len(a.Move.Restripe.From) == 0 || len(a.Move.Restripe.To) <= len(a.Move.Restripe.From)):
		return fmt.Errorf("action %q restripes nothing: it needs a file, its mirror's devices and more new ones", a.ID)
	}
	return nil
}
