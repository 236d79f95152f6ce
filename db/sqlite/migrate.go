package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/migrations"
)

// migrateAttempts bounds how often Migrate tries again after losing a race
// against another process.
const migrateAttempts = 3

// Migrate applies every pending migration to the store's database; goose
// keeps its version table in the same database. Each migration runs in one
// BEGIN IMMEDIATE transaction on the store's write connection, so concurrent
// Migrate calls of one process run one after the other and nothing is ever
// half applied. Another process migrating the same file at the same time can
// apply a migration between this call's look at the version table and its
// transaction; the transaction then fails and rolls back, and Migrate looks
// again: it succeeds once nothing is left to apply.
func Migrate(ctx context.Context, s *Store) error {
	provider, err := newProvider(s)
	if err != nil {
		return fmt.Errorf("migrating: %w", err)
	}
	for attempt := 1; ; attempt++ {
		_, err := provider.Up(ctx)
		if err == nil {
			return nil
		}
		if pending, perr := provider.HasPending(ctx); perr == nil && !pending {
			return nil // another process applied them
		}
		if attempt == migrateAttempts || ctx.Err() != nil {
			return fmt.Errorf("migrating: %w", err)
		}
	}
}

// MigrateStatus reports every known migration and whether it was applied to
// the store's database.
func MigrateStatus(ctx context.Context, s *Store) ([]db.MigrationStatus, error) {
	provider, err := newProvider(s)
	if err != nil {
		return nil, fmt.Errorf("reading migration status: %w", err)
	}
	statuses, err := provider.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading migration status: %w", err)
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

// newProvider returns a goose provider over the store's write connection.
// The provider holds no resources of its own: closing it would close the
// store's connection, so it is never closed.
func newProvider(s *Store) (*goose.Provider, error) {
	return goose.NewProvider(goose.DialectSQLite3, s.write, migrations.SQLite())
}
