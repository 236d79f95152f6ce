package sqlite

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
)

// TestLazyPrepare checks the driver of the in-memory test stores: a
// statement is parsed when it first runs, so a bad one fails then, and a
// store whose queries were prepared before it was migrated works once it is.
func TestLazyPrepare(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := open(ctx, ":memory:", lazyDriverName)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })

	bad, err := s.write.PrepareContext(ctx, "SELEKT 1")
	require.NoError(t, err, "nothing is parsed at prepare")
	_, err = bad.ExecContext(ctx)
	require.ErrorContains(t, err, "syntax error")
	require.NoError(t, bad.Close())

	_, err = s.InstanceGet(ctx, db.InstanceRef{WorkflowName: "wf", ID: "a"})
	require.Error(t, err, "no tables yet")
	require.NotNil(t, s.prepared.Load(), "the queries were prepared (lazily) before the tables existed")

	require.NoError(t, Migrate(ctx, s))
	_, err = s.InstanceGet(ctx, db.InstanceRef{WorkflowName: "wf", ID: "a"})
	require.ErrorIs(t, err, db.ErrNotFound, "the same prepared query works once the table exists")

	one, err := s.write.PrepareContext(ctx, "SELECT ? + 1")
	require.NoError(t, err)
	for i := range 3 {
		var got int
		require.NoError(t, one.QueryRowContext(ctx, i).Scan(&got))
		require.Equal(t, i+1, got)
	}
	require.NoError(t, one.Close())
}
