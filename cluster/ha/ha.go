// Package ha makes two (or more) mds processes an active/passive pair:
// every process scrapes, stores, analyses and alerts, but only the leader
// plans or executes actions and publishes read-ahead desired state. The
// leader is elected through etcd (leases and the election recipe of
// go.etcd.io/etcd/client/v3/concurrency), not a protocol of our own.
//
// Leadership comes with an epoch, the etcd revision at which this
// process's election key was created: every later leader's is higher. The
// epoch is the fencing token that drivers check before a commit
// (FenceFile for resources on a filesystem both processes see; the
// mover's commit compare-and-swap), so a deposed leader's late commit is
// refused. docs/ha.md describes what fails how.
package ha

import (
	"context"
	"errors"
)

// Gate is what the actuator engine consults before it plans, executes or
// commits an action, and before it publishes read-ahead desired state.
// Leading reports whether this process leads now and, if so, the epoch
// (fencing token) of its term.
type Gate interface {
	Leading() (epoch uint64, ok bool)
}

// Solo is the gate of an mds that runs alone (no ha section): it always
// leads, with epoch 0, which fenced resources accept only while no elected
// leader has raised their fence.
type Solo struct{}

// Leading always reports leadership at epoch 0.
func (Solo) Leading() (uint64, bool) { return 0, true }

// ErrNotLeader is returned to a caller that wanted to act while this
// process does not lead.
var ErrNotLeader = errors.New("this mds is not the leader")

// Confirmer is a Gate that can also confirm leadership with the
// coordinator itself (a linearizable read), for a last check right before
// a commit.
type Confirmer interface {
	Gate
	Confirm(ctx context.Context, epoch uint64) error
}
