//go:build !unix

package pgbouncertest

import (
	"errors"
	"syscall"
)

// processAttr refuses to run PgBouncer outside Unix.
func processAttr(string) (*syscall.SysProcAttr, func(path string) error, error) {
	return nil, nil, errors.New("pgbouncertest runs PgBouncer on Unix only")
}
