package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/migrations"
)

// Migrate applies every pending migration to the schema the pool's
// search_path names first; goose keeps its version table there too, so
// several schemas of one database migrate independently. A Postgres advisory
// lock keyed by that schema makes concurrent starts wait for each other
// instead of racing. The lock is held by a transaction (see
// migrationLocker), so Migrate works through a pooler in transaction mode
// (PgBouncer) as on a direct connection.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	if err := checkExecMode(pool.Config().ConnConfig); err != nil {
		return fmt.Errorf("migrating: %w", err)
	}
	provider, err := newProvider(ctx, pool)
	if err != nil {
		return fmt.Errorf("migrating: %w", poolerHint(err))
	}
	defer provider.Close()
	if _, err := provider.Up(ctx); err != nil {
		return fmt.Errorf("migrating: %w", poolerHint(err))
	}
	return nil
}

// MigrateStatus reports every known migration and whether it was applied to
// the pool's schema.
func MigrateStatus(ctx context.Context, pool *pgxpool.Pool) ([]db.MigrationStatus, error) {
	provider, err := newProvider(ctx, pool)
	if err != nil {
		return nil, fmt.Errorf("reading migration status: %w", poolerHint(err))
	}
	defer provider.Close()
	statuses, err := provider.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading migration status: %w", poolerHint(err))
	}
	list := make([]db.MigrationStatus, len(statuses))
	for i, st := range statuses {
		list[i] = db.MigrationStatus{
			Version:   st.Source.Version,
			Name:      st.Source.Path,
			Applied:   st.State == goose.StateApplied,
			AppliedAt: st.AppliedAt.UTC(),
		}
		if !list[i].Applied {
			list[i].AppliedAt = time.Time{}
		}
	}
	return list, nil
}

// isPlainIdentifier reports whether s is one unquoted SQL identifier, the
// only search_path whose schema current_schema() must name.
func isPlainIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// newProvider returns a goose provider over pool whose lock is specific to
// the pool's current schema. The caller closes it; that closes the
// database/sql wrapper only, never the pool.
func newProvider(ctx context.Context, pool *pgxpool.Pool) (*goose.Provider, error) {
	var schema *string
	if err := pool.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		return nil, fmt.Errorf("reading current schema: %w", err)
	}
	if schema == nil {
		return nil, fmt.Errorf("no schema of the search_path exists")
	}
	if want := pool.Config().ConnConfig.RuntimeParams["search_path"]; isPlainIdentifier(want) && strings.ToLower(want) != *schema {
		// A pooler that drops startup parameters it does not know
		// (PgBouncer's ignore_startup_parameters) leaves the role's.
		return nil, fmt.Errorf("the connection's search_path %q was not applied: the current schema is %q "+
			"(a pooler that ignores the search_path startup parameter? see \"Behind PgBouncer\" in docs/operations.md)", want, *schema)
	}
	sqlDB := stdlib.OpenDBFromPool(pool)
	provider, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.Postgres(),
		goose.WithLocker(newMigrationLocker(pool.Config().ConnConfig, *schema)),
	)
	if err != nil {
		_ = sqlDB.Close()
		return nil, err
	}
	return provider, nil
}
