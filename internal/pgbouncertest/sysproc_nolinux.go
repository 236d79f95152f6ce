//go:build unix && !linux

package pgbouncertest

import "syscall"

// setParentDeathSignal does nothing outside Linux: a shared PgBouncer may
// outlive the test binary there.
func setParentDeathSignal(*syscall.SysProcAttr) {}
