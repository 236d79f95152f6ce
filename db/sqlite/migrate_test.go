package sqlite_test

import (
	"io/fs"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/migrations"
	"github.com/duraflow/duraflow/db/sqlite"
	"github.com/duraflow/duraflow/db/sqlite/sqlitetest"
)

func TestMigrate(t *testing.T) {
	t.Parallel()

	t.Run("ConcurrentStartsAndRerunsAreSafe", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		store := sqlitetest.NewFileStore(t, sqlitetest.WithoutMigrations())

		status, err := sqlite.MigrateStatus(ctx, store)
		require.NoError(t, err)
		require.NotEmpty(t, status)
		for _, st := range status {
			require.False(t, st.Applied, st.Name)
			require.True(t, st.AppliedAt.IsZero())
		}

		var g errgroup.Group
		for range 3 {
			g.Go(func() error { return sqlite.Migrate(ctx, store) })
		}
		require.NoError(t, g.Wait())
		require.NoError(t, sqlite.Migrate(ctx, store), "nothing left to apply")

		status, err = sqlite.MigrateStatus(ctx, store)
		require.NoError(t, err)
		files, err := fs.Glob(migrations.SQLite(), "*.sql")
		require.NoError(t, err)
		require.Len(t, status, len(files), "one status per embedded migration")
		for i, name := range files {
			// Versions are the files' numbers (branches merged in parallel may leave gaps).
			version, err := strconv.ParseInt(name[:strings.IndexByte(name, '_')], 10, 64)
			require.NoError(t, err)
			require.Equal(t, version, status[i].Version)
			require.Equal(t, name, status[i].Name)
		}
		require.Equal(t, "00001_init.sql", status[0].Name)
		require.Equal(t, "00002_hook_outbox.sql", status[1].Name)
		for _, st := range status {
			require.True(t, st.Applied, st.Name)
			require.False(t, st.AppliedAt.IsZero())
		}
		_, err = store.InstanceCreate(ctx, &db.InstanceCreateParams{WorkflowName: "w", ID: "a"})
		require.NoError(t, err)
	})

	// Stores on one file stand in for processes: each has connections of its
	// own, so only SQLite's file locks keep them apart.
	t.Run("ConcurrentProcessesOnOneFile", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		path := sqlitetest.FilePath(t)
		stores := make([]*sqlite.Store, 4)
		for i := range stores {
			store, err := sqlite.Open(ctx, path)
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, store.Close()) })
			stores[i] = store
		}

		var g errgroup.Group
		for _, store := range stores {
			g.Go(func() error { return sqlite.Migrate(ctx, store) })
		}
		require.NoError(t, g.Wait())

		for _, store := range stores {
			status, err := sqlite.MigrateStatus(ctx, store)
			require.NoError(t, err)
			for _, st := range status {
				require.True(t, st.Applied, st.Name)
			}
		}
		_, err := stores[0].InstanceCreate(ctx, &db.InstanceCreateParams{WorkflowName: "w", ID: "a"})
		require.NoError(t, err)
		_, err = stores[1].InstanceGet(ctx, db.InstanceRef{WorkflowName: "w", ID: "a"})
		require.NoError(t, err)
	})
}
