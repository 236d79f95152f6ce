package sqlitetest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/sqlite"
	"github.com/duraflow/duraflow/db/sqlite/sqlitetest"
)

// TestNewStoreIsMigratedAndIsolated checks the copies of the migrated image:
// each is fully migrated, as a migrated file is, and has rows of its own.
func TestNewStoreIsMigratedAndIsolated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := sqlitetest.NewStore(t), sqlitetest.NewStore(t)
	file := sqlitetest.NewFileStore(t)

	want, err := sqlite.MigrateStatus(ctx, file)
	require.NoError(t, err)
	for _, s := range []*sqlite.Store{a, b} {
		got, err := sqlite.MigrateStatus(ctx, s)
		require.NoError(t, err)
		require.Len(t, got, len(want))
		for i := range got {
			require.Equal(t, want[i].Version, got[i].Version)
			require.True(t, got[i].Applied, "migration %d", got[i].Version)
		}
		require.NoError(t, sqlite.Migrate(ctx, s), "nothing is left to apply")
	}

	now := time.Date(2031, 5, 1, 0, 0, 0, 0, time.UTC)
	_, err = a.InstanceCreate(ctx, &db.InstanceCreateParams{WorkflowName: "wf", ID: "only-in-a", Now: &now})
	require.NoError(t, err)
	_, err = a.InstanceGet(ctx, db.InstanceRef{WorkflowName: "wf", ID: "only-in-a"})
	require.NoError(t, err)
	_, err = b.InstanceGet(ctx, db.InstanceRef{WorkflowName: "wf", ID: "only-in-a"})
	require.ErrorIs(t, err, db.ErrNotFound)
}
