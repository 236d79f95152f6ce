//go:build unix && !linux

package main_test

import "os/exec"

// setParentDeathSignal does nothing where Pdeathsig does not exist; the
// test's cleanup stops the processes.
func setParentDeathSignal(*exec.Cmd) {}
