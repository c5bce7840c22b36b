package sim

import (
	"fmt"

	"github.com/ballast-io/ballast/actuator"
	"github.com/ballast-io/ballast/actuator/plan"
	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/sim/twin"
)

// Remediation methods `ballast eval --method` runs: ballast's own planner,
// no action at all, and the two baselines it is scored against
// (docs/evaluation.md). The baselines replace only the rebalancer; their
// plans go through the same engine, guards, mover contract and twin
// costs, and evacuations of drives at risk are ballast's in every method
// but none.
const (
	MethodBallast   = "ballast"
	MethodNone      = "none"
	MethodCount     = "count-balancer"
	MethodHotToCool = "hottest-to-coolest"
)

// Methods lists the remediation methods in report order.
var Methods = []string{MethodNone, MethodCount, MethodHotToCool, MethodBallast}

// Read-ahead methods (issue 14, docs/evaluation.md#read-ahead): ballast's
// closed loop is MethodBallast; the two static values it is scored
// against turn the loop off and leave everything else as ballast has it.
const (
	// MethodRAKernel keeps every mount at the value the scenario mounts
	// it with (Linux's default of 128 KiB where the scenario says none).
	MethodRAKernel = "static-kernel-default"
	// MethodRANfsrahead sets every mount to 15 × rsize at mount time, as
	// nfs-utils' nfsrahead does with distributions that configure it so.
	MethodRANfsrahead = "static-nfsrahead"
)

// ReadAheadMethods lists the read-ahead methods in report order.
var ReadAheadMethods = []string{MethodRAKernel, MethodRANfsrahead, MethodBallast}

// NfsraheadRsizeFactor is nfsrahead's per-version value as a multiple of
// the mount's rsize.
const NfsraheadRsizeFactor = 15

// baseline is a rebalancer that plans from every stripe of the pool.
type baseline struct {
	name string
	fn   func(*plan.Input, plan.Options) plan.Result
}

func (b baseline) Name() string     { return b.name }
func (b baseline) AllStripes() bool { return true }
func (b baseline) Rebalance(in *plan.Input, opts plan.Options) plan.Result {
	return b.fn(in, opts)
}

// MethodOptions sets opts up for a remediation method: the action mode
// (off for none) and the rebalancer (nil: ballast's).
func MethodOptions(opts *DemoOptions, method string) error {
	switch method {
	case "", MethodBallast:
	case MethodNone:
		opts.ActionMode = models.ModeOff
	case MethodCount:
		opts.Rebalancer = baseline{MethodCount, plan.CountBalance}
	case MethodHotToCool:
		opts.Rebalancer = baseline{MethodHotToCool, plan.ShareHottestDS}
	case MethodRAKernel:
		opts.ReadAheadPolicyOff = true
	case MethodRANfsrahead:
		opts.ReadAheadPolicyOff = true
		if opts.Scenario == nil {
			return fmt.Errorf("method %s needs a scenario", method)
		}
		sc := *opts.Scenario
		sc.Topology.Clients = append([]twin.ClientGroup(nil), sc.Topology.Clients...)
		for i := range sc.Topology.Clients {
			g := &sc.Topology.Clients[i]
			g.ReadAheadKB = NfsraheadRsizeFactor * g.RsizeKB
		}
		opts.Scenario = &sc
	default:
		return fmt.Errorf("unknown remediation method %q (want one of %v or %v)", method, Methods, ReadAheadMethods[:2])
	}
	return nil
}

var _ actuator.Rebalancer = baseline{}
