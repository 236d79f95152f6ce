package sqlite

import (
	"database/sql"
	"errors"
	"fmt"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/duraflow/duraflow/db"
)

// interpretError maps driver errors onto db's sentinel errors, so that no
// driver error type escapes the package as a condition callers test for.
// An error the values of a write caused (a check such as json_valid, a
// not-null or foreign key constraint, a value too big or of the wrong type)
// wraps db.ErrInvalidData; a database locked by another connection past
// the busy timeout (SQLITE_BUSY, SQLITE_LOCKED and their extended codes)
// wraps db.ErrUnavailable; every other error (I/O) is returned as it is,
// and may be transient.
func interpretError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return db.ErrNotFound
	}
	if errors.Is(err, sql.ErrTxDone) {
		// The caller's transaction (BindTx) ended before the call.
		return fmt.Errorf("%w: %w", db.ErrTxDone, err)
	}
	var liteErr *sqlite.Error
	if !errors.As(err, &liteErr) {
		return err
	}
	switch code := liteErr.Code(); {
	case code == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY, code == sqlite3.SQLITE_CONSTRAINT_UNIQUE:
		return db.ErrAlreadyExists
	case code&0xff == sqlite3.SQLITE_CONSTRAINT, code == sqlite3.SQLITE_TOOBIG, code == sqlite3.SQLITE_MISMATCH:
		return fmt.Errorf("%w: %w", db.ErrInvalidData, err)
	case code&0xff == sqlite3.SQLITE_BUSY, code&0xff == sqlite3.SQLITE_LOCKED:
		return fmt.Errorf("%w: %w", db.ErrUnavailable, err)
	}
	return err
}
