//go:build !unix

package flow

import "os/exec"

// startInGroup keeps exec's default on systems without process groups: the
// cancellation kills the command itself.
func startInGroup(cmd *exec.Cmd) {}

// killGroup has nothing more to kill without process groups.
func killGroup(cmd *exec.Cmd) error { return nil }
