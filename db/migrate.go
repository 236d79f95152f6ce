package db

import "time"

// MigrationStatus is the state of one migration of a backend's schema.
type MigrationStatus struct {
	// Version is the migration's version, the number its file name starts with.
	Version int64
	// Name is the migration's file name.
	Name string
	// Applied reports whether the migration has been applied.
	Applied bool
	// AppliedAt is when it was applied; zero when it was not.
	AppliedAt time.Time
}
