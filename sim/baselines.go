package sim

import (
	"fmt"

	"github.com/ballast-io/ballast/actuator"
	"github.com/ballast-io/ballast/actuator/plan"
	"github.com/ballast-io/ballast/models"
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
	default:
		return fmt.Errorf("unknown remediation method %q (want one of %v)", method, Methods)
	}
	return nil
}

var _ actuator.Rebalancer = baseline{}
