package pgbouncertest

import "syscall"

// setParentDeathSignal makes the kernel kill PgBouncer when the test
// binary dies, so that a shared one never outlives it.
func setParentDeathSignal(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }
