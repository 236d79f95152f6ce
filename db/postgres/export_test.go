package postgres

import (
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pressly/goose/v3/lock"
)

// PlanSettings exposes the planner settings of the claim and the group
// commit to the plan tests.
var PlanSettings = planSettings

// InterpretError exposes the error mapping to the error tests.
var InterpretError = interpretError

// MigrationLocker returns the lock Migrate takes on the pool's schema, and
// its advisory lock key.
func MigrationLocker(pool *pgxpool.Pool, schema string) (lock.Locker, int64) {
	return newMigrationLocker(pool.Config().ConnConfig, schema), migrationLockID(schema)
}
