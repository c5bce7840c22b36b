package cluster

import (
	"log/slog"
	"os"
	"strings"

	"github.com/ballast-io/ballast/models"
)

// EnvTestSteps names the test-only environment variable the crash tests
// set (docs/actions.md, "Crash tests"): "log" logs every journaled move
// state ("test step"); "stop:PHASE" also stops the step that journaled a
// move in PHASE (pending, copying, copied, verified, committed, cleaned,
// aborted) for good, so that the test kills the mds exactly at that step
// boundary. Never set it in production.
const EnvTestSteps = "BALLAST_TEST_STEPS"

// testStepHook returns the engine's StepHook for EnvTestSteps, or nil.
func testStepHook(log *slog.Logger) func(models.Action) {
	v := os.Getenv(EnvTestSteps)
	if v == "" {
		return nil
	}
	stop, _ := strings.CutPrefix(v, "stop:")
	if v == "log" {
		stop = ""
	}
	log.Warn("test-only step hook is on; never use it in production", "env", EnvTestSteps, "value", v)
	return func(a models.Action) {
		log.Info("test step", "action", a.ID, "file", a.Move.File, "phase", string(a.Move.Phase), "state", string(a.State))
		if stop != "" && string(a.Move.Phase) == stop {
			log.Info("test step stopped", "action", a.ID, "phase", stop)
			select {} // until the test kills the process
		}
	}
}
