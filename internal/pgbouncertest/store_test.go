package pgbouncertest_test

import (
	"testing"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres/pgtest"
	"github.com/duraflow/duraflow/db/storetest"
	"github.com/duraflow/duraflow/internal/pgbouncertest"
)

// TestStore runs the conformance suite on the Postgres backend through a
// PgBouncer in transaction mode, as deployments behind a pooler run: pgx's
// cache_describe query exec mode, each schema reached as a role of its
// own (pgtest.WithPgBouncer). It lives here, in a test binary of its own,
// rather than beside db/postgres's TestStore, so that the two suites run
// side by side.
func TestStore(t *testing.T) {
	t.Parallel()
	b := pgbouncertest.Start(t, pgtest.DatabaseURL())
	storetest.Run(t, func(t *testing.T) db.Store { return pgtest.NewStore(t, pgtest.WithPgBouncer(b.Addr())) })
}
