package dburl

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres"
	"github.com/duraflow/duraflow/db/sqlite"
)

// Backend names the kind of database a URL selects.
type Backend string

// Backends.
const (
	Postgres Backend = "postgres"
	SQLite   Backend = "sqlite"
)

// Parse says which backend a URL selects and returns the backend's own
// connection string (the pgx URL, or the SQLite file path or DSN).
func Parse(url string) (Backend, string, error) {
	u := strings.TrimSpace(url)
	switch {
	case u == "":
		return "", "", errors.New("empty database URL: use postgres://…, sqlite:path/to.db or sqlite::memory:")
	case strings.HasPrefix(u, "postgres://"), strings.HasPrefix(u, "postgresql://"):
		return Postgres, u, nil
	case u == "sqlite::memory:", u == ":memory:":
		return SQLite, ":memory:", nil
	case strings.HasPrefix(u, "sqlite://"):
		return sqliteDSN(strings.TrimPrefix(u, "sqlite://"))
	case strings.HasPrefix(u, "sqlite:"):
		return sqliteDSN(strings.TrimPrefix(u, "sqlite:"))
	case strings.HasPrefix(u, "file:"):
		return SQLite, u, nil
	case strings.Contains(u, "://"):
		scheme, _, _ := strings.Cut(u, "://")
		return "", "", fmt.Errorf("unsupported database URL scheme %q: use postgres://…, sqlite:path/to.db or sqlite::memory:", scheme)
	}
	return SQLite, u, nil
}

func sqliteDSN(path string) (Backend, string, error) {
	if path == "" {
		return "", "", errors.New("sqlite URL without a path: use sqlite:path/to.db or sqlite::memory:")
	}
	return SQLite, path, nil
}

// Open opens the store a URL names. It does not migrate; call Migrate.
func Open(ctx context.Context, url string) (db.Store, error) {
	backend, dsn, err := Parse(url)
	if err != nil {
		return nil, err
	}
	switch backend {
	case Postgres:
		s, err := postgres.Open(ctx, dsn)
		if err != nil {
			return nil, fmt.Errorf("opening PostgreSQL: %w", err)
		}
		return s, nil
	default:
		s, err := sqlite.Open(ctx, dsn)
		if err != nil {
			return nil, fmt.Errorf("opening SQLite: %w", err)
		}
		return s, nil
	}
}

// OpenMigrated opens the store a URL names and applies pending migrations.
func OpenMigrated(ctx context.Context, url string) (db.Store, error) {
	s, err := Open(ctx, url)
	if err != nil {
		return nil, err
	}
	if err := Migrate(ctx, s); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// Migrate applies the pending migrations of the store's backend.
func Migrate(ctx context.Context, s db.Store) error {
	switch st := s.(type) {
	case *postgres.Store:
		return postgres.Migrate(ctx, st.Pool())
	case *sqlite.Store:
		return sqlite.Migrate(ctx, st)
	}
	return fmt.Errorf("migrating: unsupported store type %T", s)
}

// MigrateStatus lists the migrations of the store's backend and whether each
// is applied.
func MigrateStatus(ctx context.Context, s db.Store) ([]db.MigrationStatus, error) {
	switch st := s.(type) {
	case *postgres.Store:
		return postgres.MigrateStatus(ctx, st.Pool())
	case *sqlite.Store:
		return sqlite.MigrateStatus(ctx, st)
	}
	return nil, fmt.Errorf("reading migration status: unsupported store type %T", s)
}
