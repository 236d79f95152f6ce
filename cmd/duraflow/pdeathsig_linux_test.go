package main_test

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal kills the process when the test process dies, so a
// crashed test leaves no server behind.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
