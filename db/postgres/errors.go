package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/duraflow/duraflow/db"
)

// pgUniqueViolation is the SQLSTATE of a unique constraint violation.
const pgUniqueViolation = "23505"

// SQLSTATE classes of errors that the values of a statement caused, and
// that the same statement would cause again: data exceptions (invalid JSON
// or text, a value out of range), integrity constraint violations (a check,
// a foreign key, a not-null), and program limits (a value or a nesting too
// large for the server).
const (
	pgClassDataException      = "22"
	pgClassIntegrityViolation = "23"
	pgClassProgramLimit       = "54"
)

// SQLSTATEs of a server that cannot serve now and will again: the
// connection exception class, a shutdown that ends the session (a fast or
// immediate stop, a crash of another backend), a server that accepts no
// connection yet (starting up, recovering, shutting down), and too many
// connections.
const (
	pgClassConnectionException = "08"
	pgAdminShutdown            = "57P01"
	pgCrashShutdown            = "57P02"
	pgCannotConnectNow         = "57P03"
	pgTooManyConnections       = "53300"
)

// SQLSTATEs of a named prepared statement the server does not have, or
// has already: what pgx's statement cache (its default query exec mode,
// cache_statement) meets behind a pooler in transaction mode, which runs
// a client's transactions on whichever server connection is free.
const (
	pgInvalidStatementName       = "26000"
	pgDuplicatePreparedStatement = "42P05"
)

// poolerHint returns err, when it is a prepared statement the server lost
// or already had, wrapped with what to change; any other err unchanged.
// Duraflow prepares no statement of its own: such an error comes from
// pgx's statement cache on a connection that does not keep its server
// connection.
func poolerHint(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || (pgErr.Code != pgInvalidStatementName && pgErr.Code != pgDuplicatePreparedStatement) {
		return err
	}
	return fmt.Errorf("%w; the connection goes through a pooler in transaction mode (PgBouncer?) that does not keep "+
		"prepared statements: add default_query_exec_mode=cache_describe to the database URL "+
		"(see \"Behind PgBouncer\" in docs/operations.md)", err)
}

// interpretError maps driver errors onto db's sentinel errors, so that no
// driver error type escapes the package as a condition callers test for.
// An error the values of a write caused wraps db.ErrInvalidData; one that
// says the database cannot be reached or cannot serve now (unavailable)
// wraps db.ErrUnavailable; a prepared statement lost behind a pooler says
// what to change (poolerHint); every other error (a timeout, a
// serialization failure) is returned as it is, and may be transient.
func interpretError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return db.ErrNotFound
	}
	if unavailable(err) {
		return fmt.Errorf("%w: %w", db.ErrUnavailable, err)
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	if pgErr.Code == pgUniqueViolation {
		return db.ErrAlreadyExists
	}
	if len(pgErr.Code) == 5 {
		switch pgErr.Code[:2] {
		case pgClassDataException, pgClassIntegrityViolation, pgClassProgramLimit:
			return fmt.Errorf("%w: %w", db.ErrInvalidData, err)
		}
	}
	return poolerHint(err)
}

// unavailable reports whether err says that the server could not serve the
// call: it answered with one of the SQLSTATEs above, or it did not answer
// at all (no connection could be made, the connection broke or was closed
// under the call). The caller's own context ending is not an outage.
func unavailable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		switch pgErr.Code {
		case pgAdminShutdown, pgCrashShutdown, pgCannotConnectNow, pgTooManyConnections:
			return true
		}
		return strings.HasPrefix(pgErr.Code, pgClassConnectionException)
	}
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		return true
	}
	if _, ok := errors.AsType[net.Error](err); ok {
		return true
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, pgconn.ErrConnClosed) ||
		pgconn.SafeToRetry(err)
}
