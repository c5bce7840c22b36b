//go:build unix

package twin

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time (user + system) this process has used, so
// that benchmarks can report a speed that does not depend on how many
// other processes share the machine.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
