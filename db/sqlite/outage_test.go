package sqlite_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/sqlite/sqlitetest"
)

// TestUnavailableWhileLocked holds the write lock of a database file on
// another connection, as another process's long write transaction would:
// the store's writes fail with db.ErrUnavailable once its busy timeout
// passes, its reads go on, and its writes succeed again once the lock is
// released.
func TestUnavailableWhileLocked(t *testing.T) {
	t.Parallel()
	path := sqlitetest.FilePath(t)
	store := sqlitetest.NewFileStoreAt(t, path, sqlitetest.WithBusyTimeout(20*time.Millisecond))
	ctx := t.Context()
	create := func(id string) error {
		_, err := store.InstanceCreate(ctx, &db.InstanceCreateParams{WorkflowName: "w", ID: id, Params: json.RawMessage(`{}`)})
		return err
	}
	claim := func() error {
		now := time.Now()
		_, err := store.TaskClaim(ctx, &db.TaskClaimParams{Owner: "r", WorkflowNames: []string{"w"}, Max: 1, Now: now, LockedUntil: now.Add(time.Minute)})
		return err
	}
	require.NoError(t, create("before"))

	unlock := sqlitetest.LockWrites(t, path)
	require.ErrorIs(t, create("during"), db.ErrUnavailable)
	require.ErrorIs(t, claim(), db.ErrUnavailable)
	_, err := store.InstanceGet(ctx, db.InstanceRef{WorkflowName: "w", ID: "before"})
	require.NoError(t, err, "reads go on while another connection holds the write lock")
	require.NoError(t, store.Ping(ctx))

	unlock()
	require.NoError(t, create("after"))
	require.NoError(t, claim())
	_, err = store.InstanceGet(ctx, db.InstanceRef{WorkflowName: "w", ID: "during"})
	require.ErrorIs(t, err, db.ErrNotFound, "the refused create wrote nothing")
}
