//go:build unix

package flow

import (
	"errors"
	"os/exec"
	"syscall"
)

// startInGroup makes the command the leader of a process group of its own,
// and its cancellation (timeout or the attempt's end) kill the whole group:
// children it started die with it instead of living on unwatched.
func startInGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return killGroup(cmd)
	}
}

// killGroup kills what is left of the command's process group. The group's
// id is the command's pid, which stays reserved while any member lives.
func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}
