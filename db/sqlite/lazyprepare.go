package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"modernc.org/sqlite"
)

// lazyDriverName is the driver of the stores sqlitetest opens in memory: a
// wrapper of modernc.org/sqlite's that parses a prepared statement on its
// first use instead of when it is prepared. A store prepares every query
// it has (about a hundred) the first time it runs one, which is nothing for
// a server but most of the cost of a test that runs a dozen of them. It is
// reached only through sqlitehook.OpenLazyPrepareFunc: production stores
// use the plain driver.
const lazyDriverName = "sqlite-duraflow-lazyprepare"

func init() {
	sql.Register(lazyDriverName, lazyDriver{d: &sqlite.Driver{}})
}

// lazyDriver opens modernc.org/sqlite connections whose prepared
// statements are parsed on first use.
type lazyDriver struct{ d driver.Driver }

// Open implements driver.Driver.
func (l lazyDriver) Open(name string) (driver.Conn, error) {
	c, err := l.d.Open(name)
	if err != nil {
		return nil, err
	}
	return &lazyConn{c: c}, nil
}

// driverConn is what database/sql and the store use of a modernc.org/sqlite
// connection.
type driverConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
	Serialize() ([]byte, error)
	Deserialize(buf []byte) error
}

// lazyConn is a connection whose PrepareContext defers the parse.
type lazyConn struct{ c driver.Conn }

func (l *lazyConn) inner() (driverConn, error) {
	c, ok := l.c.(driverConn)
	if !ok {
		return nil, fmt.Errorf("sqlite: the driver's connection %T lacks a method the store needs", l.c)
	}
	return c, nil
}

// Prepare implements driver.Conn.
func (l *lazyConn) Prepare(query string) (driver.Stmt, error) {
	return &lazyStmt{c: l, query: query}, nil
}

// PrepareContext implements driver.ConnPrepareContext.
func (l *lazyConn) PrepareContext(_ context.Context, query string) (driver.Stmt, error) {
	return &lazyStmt{c: l, query: query}, nil
}

// Close implements driver.Conn.
func (l *lazyConn) Close() error { return l.c.Close() }

// Begin implements driver.Conn.
func (l *lazyConn) Begin() (driver.Tx, error) {
	return l.BeginTx(context.Background(), driver.TxOptions{})
}

// BeginTx implements driver.ConnBeginTx.
func (l *lazyConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	c, err := l.inner()
	if err != nil {
		return nil, err
	}
	return c.BeginTx(ctx, opts)
}

// ExecContext implements driver.ExecerContext.
func (l *lazyConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	c, err := l.inner()
	if err != nil {
		return nil, err
	}
	return c.ExecContext(ctx, query, args)
}

// QueryContext implements driver.QueryerContext.
func (l *lazyConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	c, err := l.inner()
	if err != nil {
		return nil, err
	}
	return c.QueryContext(ctx, query, args)
}

// Ping implements driver.Pinger.
func (l *lazyConn) Ping(ctx context.Context) error {
	c, err := l.inner()
	if err != nil {
		return err
	}
	return c.Ping(ctx)
}

// ResetSession implements driver.SessionResetter.
func (l *lazyConn) ResetSession(ctx context.Context) error {
	c, err := l.inner()
	if err != nil {
		return err
	}
	return c.ResetSession(ctx)
}

// IsValid implements driver.Validator.
func (l *lazyConn) IsValid() bool {
	c, err := l.inner()
	return err == nil && c.IsValid()
}

// Serialize returns the image of the connection's main database.
func (l *lazyConn) Serialize() ([]byte, error) {
	c, err := l.inner()
	if err != nil {
		return nil, err
	}
	return c.Serialize()
}

// Deserialize makes buf, an image from Serialize, the connection's main
// database.
func (l *lazyConn) Deserialize(buf []byte) error {
	c, err := l.inner()
	if err != nil {
		return err
	}
	return c.Deserialize(buf)
}

// lazyStmt is a statement parsed on its first use. database/sql uses a
// driver statement from one goroutine at a time, on its connection.
type lazyStmt struct {
	c     *lazyConn
	query string
	stmt  driver.Stmt
}

var errStmtContext = errors.New("sqlite: the driver's statement lacks ExecContext or QueryContext")

func (s *lazyStmt) prepared(ctx context.Context) (driver.Stmt, error) {
	if s.stmt != nil {
		return s.stmt, nil
	}
	c, err := s.c.inner()
	if err != nil {
		return nil, err
	}
	st, err := c.PrepareContext(ctx, s.query)
	if err != nil {
		return nil, err
	}
	s.stmt = st
	return st, nil
}

// Close implements driver.Stmt.
func (s *lazyStmt) Close() error {
	if s.stmt == nil {
		return nil
	}
	return s.stmt.Close()
}

// NumInput implements driver.Stmt: unknown, as modernc.org/sqlite says.
func (s *lazyStmt) NumInput() int { return -1 }

// Exec implements driver.Stmt.
func (s *lazyStmt) Exec(args []driver.Value) (driver.Result, error) {
	return s.ExecContext(context.Background(), namedValues(args))
}

// Query implements driver.Stmt.
func (s *lazyStmt) Query(args []driver.Value) (driver.Rows, error) {
	return s.QueryContext(context.Background(), namedValues(args))
}

// ExecContext implements driver.StmtExecContext.
func (s *lazyStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	st, err := s.prepared(ctx)
	if err != nil {
		return nil, err
	}
	ex, ok := st.(driver.StmtExecContext)
	if !ok {
		return nil, errStmtContext
	}
	return ex.ExecContext(ctx, args)
}

// QueryContext implements driver.StmtQueryContext.
func (s *lazyStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	st, err := s.prepared(ctx)
	if err != nil {
		return nil, err
	}
	q, ok := st.(driver.StmtQueryContext)
	if !ok {
		return nil, errStmtContext
	}
	return q.QueryContext(ctx, args)
}

func namedValues(args []driver.Value) []driver.NamedValue {
	out := make([]driver.NamedValue, len(args))
	for i, v := range args {
		out[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	return out
}
