package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/duraflow/duraflow/db"
)

// openTest opens and migrates a store for a test of this package's
// internals; sqlitetest cannot be used here, it imports the package.
func openTest(t *testing.T, dsn string) *Store {
	t.Helper()
	s, err := Open(t.Context(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	require.NoError(t, Migrate(t.Context(), s))
	return s
}

func pragmaValue(t *testing.T, sqlDB *sql.DB, name string) string {
	t.Helper()
	var v string
	require.NoError(t, sqlDB.QueryRowContext(t.Context(), "PRAGMA "+name).Scan(&v))
	return v
}

func TestConnections(t *testing.T) {
	t.Parallel()

	t.Run("FilePragmas", func(t *testing.T) {
		t.Parallel()
		s := openTest(t, filepath.Join(t.TempDir(), "d.db"))
		require.False(t, s.memory)
		require.Equal(t, 1, s.write.Stats().MaxOpenConnections)
		require.Greater(t, s.read.Stats().MaxOpenConnections, 1)

		for _, sqlDB := range []*sql.DB{s.write, s.read} {
			require.Equal(t, "wal", pragmaValue(t, sqlDB, "journal_mode"))
			require.Equal(t, "10000", pragmaValue(t, sqlDB, "busy_timeout"))
			require.Equal(t, "1", pragmaValue(t, sqlDB, "foreign_keys"))
		}
		require.Equal(t, "1", pragmaValue(t, s.write, "synchronous"), "NORMAL")
		require.Equal(t, "0", pragmaValue(t, s.write, "query_only"))
		require.Equal(t, "1", pragmaValue(t, s.read, "query_only"))

		_, err := s.read.ExecContext(t.Context(), "DELETE FROM workflow_task")
		require.Error(t, err, "the read pool cannot write")
	})

	t.Run("UserPragmaOverridesDefault", func(t *testing.T) {
		t.Parallel()
		s := openTest(t, "file:"+filepath.Join(t.TempDir(), "d.db")+"?_pragma=synchronous(FULL)")
		require.Equal(t, "2", pragmaValue(t, s.write, "synchronous"), "FULL")
		require.Equal(t, "wal", pragmaValue(t, s.write, "journal_mode"))
	})

	t.Run("MemoryIsOneConnection", func(t *testing.T) {
		t.Parallel()
		s := openTest(t, ":memory:")
		require.True(t, s.memory)
		require.Same(t, s.write, s.read)
		require.Equal(t, 1, s.write.Stats().MaxOpenConnections)
		require.Equal(t, "1", pragmaValue(t, s.write, "foreign_keys"))
		require.Equal(t, "10000", pragmaValue(t, s.write, "busy_timeout"))

		// Concurrent reads and writes all see the one database.
		ctx := t.Context()
		var g errgroup.Group
		for i := range 8 {
			g.Go(func() error {
				id := string(rune('a' + i))
				if _, err := s.InstanceCreate(ctx, &db.InstanceCreateParams{WorkflowName: "w", ID: id}); err != nil {
					return err
				}
				_, err := s.InstanceGet(ctx, db.InstanceRef{WorkflowName: "w", ID: id})
				return err
			})
		}
		require.NoError(t, g.Wait())
		list, err := s.InstanceList(ctx, &db.InstanceListParams{})
		require.NoError(t, err)
		require.Len(t, list, 8)
	})

	t.Run("SchemaConstraints", func(t *testing.T) {
		t.Parallel()
		s := openTest(t, ":memory:")
		ctx := t.Context()
		_, err := s.InstanceCreate(ctx, &db.InstanceCreateParams{WorkflowName: "w", ID: "bad", Params: json.RawMessage(`{"a":`)})
		require.Error(t, err, "JSON is checked, as Postgres's json type does")
		require.NotErrorIs(t, err, db.ErrAlreadyExists)

		_, err = s.write.ExecContext(ctx, `INSERT INTO workflow_instance (workflow_name, instance_id, status, created_at, updated_at)
			VALUES ('w', 'x', 'queued', '2041-03-04T10:00:00Z', 0)`)
		require.Error(t, err, "STRICT tables reject a time stored as text")

		_, err = s.InstanceCreate(ctx, &db.InstanceCreateParams{WorkflowName: "w", ID: "a"})
		require.NoError(t, err)
		_, err = s.EventSend(ctx, &db.EventSendParams{WorkflowName: "w", InstanceID: "a", Type: "t"})
		require.NoError(t, err)
		_, err = s.write.ExecContext(ctx, `DELETE FROM workflow_instance WHERE instance_id = 'a'`)
		require.NoError(t, err)
		_, err = s.TaskGet(ctx, db.InstanceRef{WorkflowName: "w", ID: "a"})
		require.ErrorIs(t, err, db.ErrNotFound, "foreign keys cascade")
		events, err := s.EventList(ctx, &db.EventListParams{WorkflowName: "w", InstanceID: "a"})
		require.NoError(t, err)
		require.Empty(t, events)
	})

	t.Run("DatabaseClock", func(t *testing.T) {
		t.Parallel()
		s := openTest(t, ":memory:")
		ctx := context.Background()
		res, err := s.InstanceCreate(ctx, &db.InstanceCreateParams{WorkflowName: "w", ID: "a"})
		inst := res.Instance
		require.NoError(t, err)
		task, err := s.TaskGet(ctx, db.InstanceRef{WorkflowName: "w", ID: "a"})
		require.NoError(t, err)
		require.Equal(t, inst.CreatedAt, task.RunAt, "one clock reading per transaction")
		require.Zero(t, inst.CreatedAt.Nanosecond()%1000)
	})
}
