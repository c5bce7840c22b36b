package analysis

import (
	"github.com/ballast-io/ballast/analyzer/capacity"
	"github.com/ballast-io/ballast/analyzer/checkpoint"
	"github.com/ballast-io/ballast/analyzer/drivehealth"
	"github.com/ballast-io/ballast/analyzer/hotspot"
	"github.com/ballast-io/ballast/analyzer/starvation"
	"github.com/ballast-io/ballast/analyzer/workload"
)

// Kinds returns every finding kind the stages raise, for config
// validation (alert routes name kinds) and documentation.
func Kinds() []string {
	return []string{
		hotspot.Kind, checkpoint.KindBurst, checkpoint.KindForecast, checkpoint.KindFailed, workload.KindShift, workload.KindProfile,
		starvation.Kind, drivehealth.KindFailureRisk, drivehealth.KindWearout, capacity.KindThreshold,
	}
}
