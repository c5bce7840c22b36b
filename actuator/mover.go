package actuator

import (
	"context"
	"errors"
	"fmt"

	"github.com/ballast-io/ballast/models"
)

// DeviceState is what a device or data server is doing.
type DeviceState string

// Device and data-server states a mover reports or sets.
const (
	StateOnline   DeviceState = "online"   // holds data and takes new data
	StateDraining DeviceState = "draining" // holds data, takes none; being emptied
	StateOffline  DeviceState = "offline"  // serves nothing
	StateSpare    DeviceState = "spare"    // in the chassis, outside every pool
	StateFailed   DeviceState = "failed"   // cannot be read
)

// Device is one device as the MDS knows it. ID (the pNFS device id) is the
// key every move uses; Name is for people.
type Device struct {
	ID     string      `json:"id"`
	Name   string      `json:"name"`
	DS     string      `json:"ds"`
	DSAddr string      `json:"ds_addr,omitempty"`
	Pool   string      `json:"pool"`
	State  DeviceState `json:"state"`
	// CapacityBytes and UsedBytes size the device; used includes copies
	// not yet cleaned up.
	CapacityBytes int64 `json:"capacity_bytes"`
	UsedBytes     int64 `json:"used_bytes"`
	// BandwidthBytes is the device's own speed, bytes/s (0 unknown);
	// DSBandwidthBytes its data server's NIC (0 unknown).
	BandwidthBytes   float64 `json:"bandwidth_bytes,omitempty"`
	DSBandwidthBytes float64 `json:"ds_bandwidth_bytes,omitempty"`
}

// Component is where one piece of a file lives.
type Component struct {
	Device string `json:"device"`
	// Handle is the component's file handle on its data server (hex), the
	// one LAYOUTSTATS reports carry; it joins per-stripe heat to the file.
	Handle string `json:"handle,omitempty"`
	Bytes  int64  `json:"bytes"`
	// Path is the component's file on its device, relative to the
	// device's export, when it is not the file's own path (the files
	// driver names a restriped mirror's components so; "" = the file's).
	Path string `json:"path,omitempty"`
}

// Layout is a file's placement: mirrors × components, and the generation
// the MDS bumps on every change.
type Layout struct {
	File       string        `json:"file"`
	Generation uint64        `json:"generation"`
	Mirrors    [][]Component `json:"mirrors"`
	// StripeUnit is the flex-files stripe unit, bytes: a mirror's bytes
	// are dealt round-robin over its components in units of it (0:
	// unknown; a restripe needs it).
	StripeUnit int64 `json:"stripe_unit,omitempty"`
}

// At returns the component at (mirror, component), or false.
func (l *Layout) At(mirror, component int) (Component, bool) {
	if mirror < 0 || mirror >= len(l.Mirrors) || component < 0 || component >= len(l.Mirrors[mirror]) {
		return Component{}, false
	}
	return l.Mirrors[mirror][component], true
}

// StripeRef is one component held by a device.
type StripeRef struct {
	File      string `json:"file"`
	Mirror    int    `json:"mirror"`
	Component int    `json:"component"`
	Device    string `json:"device"`
	Handle    string `json:"handle,omitempty"`
	Bytes     int64  `json:"bytes"`
	// Busy marks a component that cannot move now (its file is being
	// written).
	Busy bool `json:"busy,omitempty"`
}

// Capabilities say what a driver can do.
type Capabilities struct {
	Name string `json:"name"`
	// Simulated drivers act on the cluster twin, not on a real cluster.
	Simulated bool `json:"simulated,omitempty"`
	// Async drivers return from Copy and Verify before the work is done;
	// the engine polls them.
	Async bool `json:"async,omitempty"`
	// SetState says SetState is supported (spare promotion, draining).
	SetState bool `json:"set_state,omitempty"`
	// Restripe says the driver is a Restriper: the planner proposes
	// restripes only to a driver that can carry them out.
	Restripe bool `json:"restripe,omitempty"`
}

// Catalog answers where things are. Read-only: a dry run only calls these.
type Catalog interface {
	// Devices lists every device of the MDS's device table.
	Devices(ctx context.Context) ([]Device, error)
	// Stripes lists the components a device holds.
	Stripes(ctx context.Context, device string) ([]StripeRef, error)
	// Locate returns a file's layout and generation.
	Locate(ctx context.Context, file string) (Layout, error)
}

// CopyRequest asks for one component to be copied to its destination.
type CopyRequest struct {
	ID   string
	Move models.Move
	// RateLimit paces the copy, bytes/s (0 = unpaced).
	RateLimit float64
	Urgent    bool
	// Plan is the move's plan (its id, kind and subject): a driver whose
	// state both mds of an HA pair reach records it with the move in
	// flight, so that a new leader can take the move over (Successor).
	Plan models.Action
}

// Progress reports an asynchronous step.
type Progress struct {
	Done  bool
	Bytes int64
}

// VerifyResult is what reading both copies back found.
type VerifyResult struct {
	Done  bool
	Match bool
	// Checksum is "algorithm:hex" of the source; CopyChecksum of the copy.
	Checksum     string
	CopyChecksum string
}

// Mover carries stripe moves out: copy to a new slot (the old copy
// untouched), verify, commit only if the layout generation is unchanged,
// clean up the old copy, or abort (remove the new copy). Every call must be
// idempotent: after a crash the engine repeats the step it had not
// journaled as finished.
type Mover interface {
	Catalog
	Capabilities() Capabilities
	Copy(ctx context.Context, r CopyRequest) (Progress, error)
	Verify(ctx context.Context, m models.Move) (VerifyResult, error)
	// Commit switches the layout from m.From to m.To if its generation is
	// still m.Generation (and fence is the current leader's), else returns
	// ErrGenerationChanged.
	Commit(ctx context.Context, m models.Move, fence uint64) error
	Cleanup(ctx context.Context, m models.Move) error
	Abort(ctx context.Context, m models.Move) error
	// SetState sets a device's or data server's state (a spare goes
	// online, a device drains).
	SetState(ctx context.Context, s models.Subject, st DeviceState) error
}

// Pauser is a Mover that can hold a move's data movement while it is
// under way and let it go on later: the engine pauses a non-urgent move's
// copy and read-back while a checkpoint window is open (a forecast window
// reached, or a burst seen under way) and resumes it when the window ends.
// A paused move moves no bytes: an asynchronous driver stops its copy or
// read-back where it is; a synchronous one returns from a Copy or Verify
// in progress as not done (keeping what it copied, so that the next call
// after the resume goes on from there) and does nothing while paused.
// Pausing must not change what the move produces: a paused and resumed
// copy ends byte-identical to one that never paused. Pause is idempotent;
// id is the move's action id (CopyRequest.ID). A driver without it lets a
// copy it has under way finish. The engine also pauses the moves of a
// plan an operator cancelled, so that their copies stop before the abort.
type Pauser interface {
	Pause(ctx context.Context, id string, m models.Move, paused bool) error
}

// Restriper is a Mover that can rewrite one mirror of a file over more
// components (models.Restripe): the same contract as a move, for the
// whole mirror at once. CopyRestripe writes the mirror's bytes into new
// components on Restripe.To (the old ones untouched, the layout still
// pointing at them); VerifyRestripe reads the file back through the old
// components and through the new ones and compares a strong checksum of
// each; CommitRestripe switches the mirror from Restripe.From to
// Restripe.To in one step, only if the layout generation is still
// m.Generation (else ErrGenerationChanged); CleanupRestripe removes the
// old components; AbortRestripe removes the new ones. Each call is
// idempotent, as a move's. A Pauser pauses a restripe's copy and
// read-back as a move's (m.Restripe set).
type Restriper interface {
	CopyRestripe(ctx context.Context, r CopyRequest) (Progress, error)
	VerifyRestripe(ctx context.Context, m models.Move) (VerifyResult, error)
	CommitRestripe(ctx context.Context, m models.Move, fence uint64) error
	CleanupRestripe(ctx context.Context, m models.Move) error
	AbortRestripe(ctx context.Context, m models.Move) error
}

// Successor is a Mover whose state both mds of an HA pair reach (the files
// driver's layout store; the MDS itself for the exec driver with a
// takeover command). The engine calls TakeOver when this mds becomes
// leader with a new epoch, before it takes any step: the driver fences
// every older epoch out (a deposed leader's late commit is refused from
// then on) and returns the moves a previous leader left in flight, which
// the engine adopts and resumes or aborts.
type Successor interface {
	TakeOver(ctx context.Context, epoch uint64) ([]InFlight, error)
}

// InFlight is a move a driver has started (copy begun) and not finished
// (cleaned up or aborted): the move and its plan as the leader that
// started it journaled them.
type InFlight struct {
	ID   string        `json:"id"`
	Move models.Move   `json:"move"`
	Plan models.Action `json:"plan"`
}

// ErrGenerationChanged is returned by Commit when the layout moved on since
// the move was planned: the move is aborted and replanned.
var ErrGenerationChanged = errors.New("layout generation changed")

// ErrNotFound is returned for a file or device the mover does not know.
var ErrNotFound = errors.New("not found")

// permanent marks an error that no retry will fix.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent marks err as not worth retrying.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanent{err}
}

// IsPermanent reports whether err was marked permanent (or is a changed
// generation or a missing file, which no retry fixes).
func IsPermanent(err error) bool {
	var p permanent
	return errors.As(err, &p) || errors.Is(err, ErrGenerationChanged) || errors.Is(err, ErrNotFound)
}

// NoMover is the catalog-less stand-in when no driver is configured:
// planners can only propose, and every step fails permanently.
type noMover struct{}

func (noMover) Capabilities() Capabilities { return Capabilities{Name: "none"} }
func (noMover) Devices(context.Context) ([]Device, error) {
	return nil, nil
}
func (noMover) Stripes(context.Context, string) ([]StripeRef, error) { return nil, errNoDriver }
func (noMover) Locate(context.Context, string) (Layout, error)       { return Layout{}, errNoDriver }
func (noMover) Copy(context.Context, CopyRequest) (Progress, error)  { return Progress{}, errNoDriver }
func (noMover) Verify(context.Context, models.Move) (VerifyResult, error) {
	return VerifyResult{}, errNoDriver
}
func (noMover) Commit(context.Context, models.Move, uint64) error { return errNoDriver }
func (noMover) Cleanup(context.Context, models.Move) error        { return errNoDriver }
func (noMover) Abort(context.Context, models.Move) error          { return errNoDriver }
func (noMover) SetState(context.Context, models.Subject, DeviceState) error {
	return errNoDriver
}

var errNoDriver = Permanent(fmt.Errorf("no mover driver is configured (actuators.driver)"))
