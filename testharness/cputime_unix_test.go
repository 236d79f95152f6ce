//go:build unix

package testharness_test

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user and system) the test process has
// used, which the machine's other load moves much less than wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
