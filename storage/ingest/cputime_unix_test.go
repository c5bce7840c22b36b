//go:build unix

package ingest

import "syscall"

// cpuTime is the process's user+system CPU time in ns (garbage collection
// included, which wall time per sample hides on a loaded machine, or
// spreads over idle cores on a quiet one).
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
