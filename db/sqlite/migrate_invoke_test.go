package sqlite_test

import (
	"testing"

	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db/migrations"
	"github.com/duraflow/duraflow/db/sqlite"
	"github.com/duraflow/duraflow/db/sqlite/sqlitetest"
)

// TestMigrateInvokeRebuildsSteps checks migration 00011, which rebuilds
// workflow_step to allow the invoke type: the rows, their ids, the id
// sequence, the cascade from the instance and the history index survive.
func TestMigrateInvokeRebuildsSteps(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	w, err := sqlite.OpenWriter(ctx, sqlitetest.FilePath(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close() })
	p, err := goose.NewProvider(goose.DialectSQLite3, w, migrations.SQLite())
	require.NoError(t, err)
	_, err = p.UpTo(ctx, 10)
	require.NoError(t, err)

	exec := func(q string, args ...any) {
		t.Helper()
		_, err := w.ExecContext(ctx, q, args...)
		require.NoError(t, err, q)
	}
	exec(`INSERT INTO workflow_instance (workflow_name, instance_id, status, created_at, updated_at, namespace, queue) VALUES ('w', 'a', 'waiting', 1, 1, 'default', 'default')`)
	exec(`INSERT INTO workflow_step (id, workflow_name, instance_id, run_number, step_key, type, status, wait_event_type, created_at, updated_at, started_at) VALUES (7, 'w', 'a', 1, 'wait', 'waitForEvent', 'waiting', 'go', 2, 2, 3)`)
	_, err = w.ExecContext(ctx, `INSERT INTO workflow_step (workflow_name, instance_id, run_number, step_key, type, status, created_at, updated_at) VALUES ('w', 'a', 1, 'child', 'invoke', 'waiting', 2, 2)`)
	require.Error(t, err, "before 00011 the type is refused")

	_, err = p.UpTo(ctx, 11)
	require.NoError(t, err)
	var (
		id        int64
		typ, key  string
		startedAt int64
	)
	require.NoError(t, w.QueryRowContext(ctx, `SELECT id, type, step_key, started_at FROM workflow_step WHERE instance_id = 'a'`).Scan(&id, &typ, &key, &startedAt))
	require.Equal(t, int64(7), id)
	require.Equal(t, "waitForEvent", typ)
	require.Equal(t, int64(3), startedAt)

	exec(`INSERT INTO workflow_step (workflow_name, instance_id, run_number, step_key, type, status, created_at, updated_at) VALUES ('w', 'a', 1, 'child', 'invoke', 'waiting', 2, 2)`)
	require.NoError(t, w.QueryRowContext(ctx, `SELECT id FROM workflow_step WHERE step_key = 'child'`).Scan(&id))
	require.Greater(t, id, int64(7), "ids keep growing after the rebuild")
	_, err = w.ExecContext(ctx, `INSERT INTO workflow_step (workflow_name, instance_id, run_number, step_key, type, status, created_at, updated_at) VALUES ('w', 'a', 1, 'x', 'bogus', 'waiting', 2, 2)`)
	require.Error(t, err, "other types are still refused")

	var index string
	require.NoError(t, w.QueryRowContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'workflow_step' AND name = 'workflow_step_run_id_idx'`).Scan(&index))
	exec(`DELETE FROM workflow_instance WHERE instance_id = 'a'`)
	var n int
	require.NoError(t, w.QueryRowContext(ctx, `SELECT count(*) FROM workflow_step`).Scan(&n))
	require.Zero(t, n, "deleting the instance still deletes its steps")

	_, err = p.UpTo(ctx, 1<<40)
	require.NoError(t, err, "the later migrations apply")
}
