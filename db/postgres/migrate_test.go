package postgres_test

import (
	"context"
	"io/fs"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/migrations"
	"github.com/duraflow/duraflow/db/postgres"
	"github.com/duraflow/duraflow/db/postgres/pgtest"
)

func currentSchema(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var schema string
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT current_schema()").Scan(&schema))
	return schema
}

func TestMigrate(t *testing.T) {
	t.Parallel()

	t.Run("ConcurrentStartsAndRerunsAreSafe", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		pool := pgtest.NewPool(t, pgtest.WithoutMigrations())

		status, err := postgres.MigrateStatus(ctx, pool)
		require.NoError(t, err)
		require.NotEmpty(t, status)
		for _, st := range status {
			require.False(t, st.Applied, st.Name)
			require.True(t, st.AppliedAt.IsZero())
		}

		var g errgroup.Group
		for range 3 {
			g.Go(func() error { return postgres.Migrate(ctx, pool) })
		}
		require.NoError(t, g.Wait())
		require.NoError(t, postgres.Migrate(ctx, pool), "nothing left to apply")

		status, err = postgres.MigrateStatus(ctx, pool)
		require.NoError(t, err)
		files, err := fs.Glob(migrations.Postgres(), "*.sql")
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

		// Everything, goose's own table included, lives in the pool's schema.
		var n int
		require.NoError(t, pool.QueryRow(ctx,
			`SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()
			 AND tablename IN ('goose_db_version', 'workflow_instance', 'workflow_step', 'workflow_event',
			     'workflow_task', 'workflow_hook_outbox')`,
		).Scan(&n))
		require.Equal(t, 6, n)

		// The often-updated tables leave room on their pages for HOT updates,
		// and autovacuum visits them after a fixed number of dead rows.
		for _, table := range []string{"workflow_task", "workflow_hook_outbox"} {
			var options []string
			require.NoError(t, pool.QueryRow(ctx,
				`SELECT reloptions FROM pg_class WHERE relnamespace = current_schema()::regnamespace AND relname = $1`, table,
			).Scan(&options))
			require.Equal(t, []string{
				"fillfactor=70", "autovacuum_vacuum_scale_factor=0", "autovacuum_vacuum_threshold=1000",
				"autovacuum_analyze_scale_factor=0.02", "autovacuum_vacuum_cost_delay=0",
			}, options, table)
		}
	})

	t.Run("OpenOwnsItsPool", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		schema := currentSchema(t, pgtest.NewPool(t))

		u, err := url.Parse(pgtest.DatabaseURL())
		require.NoError(t, err)
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()

		store, err := postgres.Open(ctx, u.String(), postgres.WithWakeChannel("open_wake"))
		require.NoError(t, err)
		require.Equal(t, "open_wake", store.WakeChannel(), "Open takes the options of New")
		_, err = store.InstanceCreate(ctx, &db.InstanceCreateParams{WorkflowName: "w", ID: "a"})
		require.NoError(t, err)
		require.NoError(t, store.Ping(ctx))
		require.NoError(t, store.Close())
		require.Error(t, store.Pool().Ping(ctx), "Close closed the pool Open made")
		require.Error(t, store.Ping(ctx))

		pool := pgtest.NewPool(t)
		store = postgres.New(pool)
		require.NoError(t, store.Close())
		require.NoError(t, pool.Ping(ctx), "a pool passed to New stays open")
	})
}
