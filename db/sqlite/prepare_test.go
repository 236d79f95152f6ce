package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
)

func TestQueriesArePreparedOnceTheSchemaExists(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, "file:"+filepath.Join(t.TempDir(), "p.db"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })

	// Before Migrate the tables are missing: nothing can be prepared, and the
	// store runs its queries unprepared (and fails only on the missing table).
	require.Same(t, s.queries, s.queriesFor(ctx, true))
	require.Nil(t, s.prepared.Load())

	require.NoError(t, Migrate(ctx, s))
	s.prepareMu.Lock()
	s.prepareAfter = time.Time{} // skip the wait after the failed attempt
	s.prepareMu.Unlock()

	now := time.Now().UTC()
	_, err = s.InstanceCreate(ctx, &db.InstanceCreateParams{WorkflowName: "w", ID: "x", Now: &now})
	require.NoError(t, err)
	p := s.prepared.Load()
	require.NotNil(t, p, "the first call after Migrate prepares the queries")
	require.NotSame(t, p.write, p.read, "a file store prepares on its write connection and its read pool")
	require.Same(t, p.write, s.queriesFor(ctx, true))
	require.Same(t, p.read, s.queriesFor(ctx, false))

	inst, err := s.InstanceGet(ctx, db.InstanceRef{WorkflowName: "w", ID: "x"})
	require.NoError(t, err)
	require.Equal(t, "x", inst.ID)
}
