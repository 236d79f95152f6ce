package sqlite_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/sqlite"
	"github.com/duraflow/duraflow/db/sqlite/sqlitetest"
)

func TestOpen(t *testing.T) {
	t.Parallel()

	t.Run("FileSurvivesReopen", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		path := sqlitetest.FilePath(t)
		now := time.Date(2041, 3, 4, 10, 0, 0, 123456000, time.UTC)

		store, err := sqlite.Open(ctx, path)
		require.NoError(t, err)
		require.NoError(t, sqlite.Migrate(ctx, store))
		created, err := store.InstanceCreate(ctx, &db.InstanceCreateParams{
			WorkflowName: "w", ID: "a", Params: json.RawMessage(`{"k" : [1, 2]}`), Now: &now,
		})
		require.NoError(t, err)
		require.NoError(t, store.Close())

		store, err = sqlite.Open(ctx, "file:"+path)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, store.Close()) })
		require.NoError(t, sqlite.Migrate(ctx, store), "migrating a migrated file does nothing")
		got, err := store.InstanceGet(ctx, db.InstanceRef{WorkflowName: "w", ID: "a"})
		require.NoError(t, err)
		require.Equal(t, created.Instance, got)
	})

	t.Run("MemoryStoresAreSeparate", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		one, two := sqlitetest.NewStore(t), sqlitetest.NewStore(t)
		_, err := one.InstanceCreate(ctx, &db.InstanceCreateParams{WorkflowName: "w", ID: "a"})
		require.NoError(t, err)
		_, err = two.InstanceGet(ctx, db.InstanceRef{WorkflowName: "w", ID: "a"})
		require.ErrorIs(t, err, db.ErrNotFound)
	})

	t.Run("PingUntilClosed", func(t *testing.T) {
		t.Parallel()
		for _, dsn := range []string{":memory:", sqlitetest.FilePath(t)} {
			store, err := sqlite.Open(t.Context(), dsn)
			require.NoError(t, err)
			require.NoError(t, store.Ping(t.Context()), dsn)
			require.NoError(t, store.Close())
			require.Error(t, store.Ping(t.Context()), dsn)
		}
	})

	t.Run("BadDSN", func(t *testing.T) {
		t.Parallel()
		_, err := sqlite.Open(t.Context(), "")
		require.Error(t, err)
		_, err = sqlite.Open(t.Context(), sqlitetest.FilePath(t)+"?_time_format=nonsense")
		require.Error(t, err)
		_, err = sqlite.Open(t.Context(), "/nonexistent-dir/sub/d.db")
		require.Error(t, err)
	})

	// Stores on one file stand in for processes: only SQLite's file locks keep
	// their writers apart, and BEGIN IMMEDIATE with busy_timeout must make
	// them wait for each other instead of failing with SQLITE_BUSY.
	t.Run("ProcessesShareOneFile", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		path := sqlitetest.FilePath(t)
		now := time.Date(2041, 3, 4, 10, 0, 0, 0, time.UTC)
		stores := make([]*sqlite.Store, 3)
		for i := range stores {
			store, err := sqlite.Open(ctx, path)
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, store.Close()) })
			require.NoError(t, sqlite.Migrate(ctx, store))
			stores[i] = store
		}

		const perStore = 30
		var g errgroup.Group
		for i, store := range stores {
			g.Go(func() error {
				for n := range perStore {
					if _, err := store.InstanceCreate(ctx, &db.InstanceCreateParams{
						WorkflowName: "w", ID: fmt.Sprintf("s%d-%d", i, n), Now: &now,
					}); err != nil {
						return err
					}
				}
				return nil
			})
		}
		require.NoError(t, g.Wait())

		var (
			mu      sync.Mutex
			claimed = map[string]int{}
		)
		for i, store := range stores {
			g.Go(func() error {
				for {
					tasks, err := store.TaskClaim(ctx, &db.TaskClaimParams{
						Owner: fmt.Sprint(i), WorkflowNames: []string{"w"}, Max: 2, Now: now, LockedUntil: now.Add(time.Minute),
					})
					if err != nil || len(tasks) == 0 {
						return err
					}
					for _, c := range tasks {
						task := c.Task
						p := &db.CheckpointParams{
							Task: db.TaskRef{ID: task.ID, Version: task.Version}, WorkflowName: "w",
							InstanceID: task.InstanceID, RunNumber: 1, Now: now, Outcome: db.OutcomeComplete,
						}
						if _, err := store.Checkpoint(ctx, p); err != nil {
							return err
						}
						mu.Lock()
						claimed[task.InstanceID]++
						mu.Unlock()
					}
				}
			})
		}
		require.NoError(t, g.Wait())
		require.Len(t, claimed, len(stores)*perStore)
		for id, n := range claimed {
			require.Equal(t, 1, n, id)
		}
	})
}
