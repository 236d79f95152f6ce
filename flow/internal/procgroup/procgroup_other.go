//go:build !unix

package procgroup

import "os/exec"

// Start keeps exec's default on systems without process groups: the
// cancellation kills the command itself.
func Start(cmd *exec.Cmd) {}

// Kill has nothing more to kill without process groups.
func Kill(cmd *exec.Cmd) error { return nil }
