//go:build unix

package pgbouncertest

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// runAsUser is the OS user PgBouncer runs as when the tests run as root,
// which it refuses.
const runAsUser = "postgres"

// processAttr returns the attributes of the pgbouncer process, and what
// gives a file of its directory to the user it runs as. As root it runs as
// runAsUser, who is given dir; on Linux it is killed when the test binary
// dies.
func processAttr(dir string) (*syscall.SysProcAttr, func(path string) error, error) {
	attr := &syscall.SysProcAttr{}
	setParentDeathSignal(attr)
	if os.Geteuid() != 0 {
		return attr, func(string) error { return nil }, nil
	}
	u, err := user.Lookup(runAsUser)
	if err != nil {
		return nil, nil, fmt.Errorf("running as root, pgbouncer needs the OS user %s: %w", runAsUser, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	chown := func(path string) error {
		if err := os.Chown(path, uid, gid); err != nil {
			return fmt.Errorf("giving %s to %s: %w", path, runAsUser, err)
		}
		return nil
	}
	if err := chown(dir); err != nil {
		return nil, nil, err
	}
	// Go sets the parent-death signal after it changes the credential, so
	// the change does not clear it.
	attr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	return attr, chown, nil
}
