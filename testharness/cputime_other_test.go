//go:build !unix

package testharness_test

import "time"

// processCPU is unknown here: the cpu-ns metrics read 0.
func processCPU() time.Duration { return 0 }
