//go:build !unix

package twin

import "time"

// cpuTime is not available here; benchmarks then report wall-clock speed
// only.
func cpuTime() time.Duration { return 0 }
