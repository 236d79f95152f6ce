//go:build unix

// Package procgroup runs the commands of the exec handler of package flow
// in process groups of their own, so that what a command leaves behind is
// killed with it.
package procgroup

import (
	"errors"
	"os/exec"
	"syscall"
)

// Start makes the command the leader of a process group of its own,
// and its cancellation (timeout or the attempt's end) kill the whole group:
// children it started die with it instead of living on unwatched.
func Start(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return Kill(cmd)
	}
}

// Kill kills what is left of the command's process group. The group's
// id is the command's pid, which stays reserved while any member lives.
func Kill(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}
