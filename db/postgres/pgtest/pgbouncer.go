package pgtest

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// newRole creates the login role of a schema reached through the PgBouncer
// at addr (WithPgBouncer): named as the schema, a superuser as the tests'
// user is, whose search_path is the schema. It is dropped when the test
// ends. It returns the URL that logs in as the role through PgBouncer: the
// database of dbURL, with pgx's cache_describe query exec mode.
func newRole(t testing.TB, ctx context.Context, dbURL, addr, schema string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("pgtest: through PgBouncer, %s must be a postgres:// URL, not %s", EnvDatabaseURL, redact(dbURL))
	}
	role := pgx.Identifier{schema}.Sanitize()
	if err := execAdmin(ctx, dbURL, "CREATE ROLE "+role+" LOGIN SUPERUSER; ALTER ROLE "+role+" SET search_path = "+role); err != nil {
		t.Fatalf("pgtest: creating role %s: %v", schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// PgBouncer keeps the role's idle server connections a while: end
		// them, so that its max_db_connections go to the next tests' roles.
		// (The schema name is a safe literal: a prefix and hex digits.)
		if err := execAdmin(ctx, dbURL, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '"+schema+"'; "+
			"DROP ROLE IF EXISTS "+role); err != nil {
			t.Errorf("pgtest: dropping role %s: %v", schema, err)
		}
	})
	u.Host = addr
	u.User = url.User(schema)
	q := u.Query()
	q.Del("search_path")
	q.Set("sslmode", "disable")
	q.Set("default_query_exec_mode", "cache_describe")
	u.RawQuery = q.Encode()
	return u.String()
}
