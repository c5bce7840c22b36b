package cluster

import (
	"flag"
	"fmt"
)

// setFlag sets one of VictoriaMetrics' global flags, the only way its lib
// packages are configured.
func setFlag(name, value string) error {
	if !flag.CommandLine.Parsed() {
		if err := flag.CommandLine.Parse(nil); err != nil {
			return fmt.Errorf("cannot initialise flags: %w", err)
		}
	}
	if flag.CommandLine.Lookup(name) == nil {
		return fmt.Errorf("cannot configure: flag -%s does not exist in this build", name)
	}
	if err := flag.Set(name, value); err != nil {
		return fmt.Errorf("cannot set -%s=%q: %w", name, value, err)
	}
	return nil
}
