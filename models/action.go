package models

import (
	"fmt"
	"time"
)

// ActionKind names a change ballast can make to the cluster or the world.
type ActionKind string

// Action kinds that actuators know how to carry out.
const (
	ActionMoveStripe        ActionKind = "move_stripe"
	ActionSetReadAhead      ActionKind = "set_read_ahead"
	ActionEvacuateDevice    ActionKind = "evacuate_device"
	ActionPromoteSpare      ActionKind = "promote_spare"
	ActionThrottleMigration ActionKind = "throttle_migration"
	ActionNotify            ActionKind = "notify"
)

// ActionState is where an action is in its life.
type ActionState string

// Action states. An action moves Proposed → Approved → Running → Succeeded or
// Failed; DryRun actions stop at Proposed and are only recorded.
const (
	ActionProposed  ActionState = "proposed"
	ActionApproved  ActionState = "approved"
	ActionRunning   ActionState = "running"
	ActionSucceeded ActionState = "succeeded"
	ActionFailed    ActionState = "failed"
	ActionCancelled ActionState = "cancelled"
)

// Action is one change, named deterministically from what it does so that a
// restarted actuator recognises work it already journaled.
type Action struct {
	ID        string            `json:"id"`
	Kind      ActionKind        `json:"kind"`
	Subject   Subject           `json:"subject"`
	Params    map[string]string `json:"params,omitempty"`
	FindingID string            `json:"finding_id,omitempty"`
	State     ActionState       `json:"state"`
	DryRun    bool              `json:"dry_run,omitempty"`
	Created   time.Time         `json:"created"`
	Updated   time.Time         `json:"updated"`
	Reason    string            `json:"reason,omitempty"`
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
	case a.Created.IsZero():
		return fmt.Errorf("action %q has no creation time", a.ID)
	}
	return nil
}
