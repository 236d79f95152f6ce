package postgres_test

import (
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres"
	"github.com/duraflow/duraflow/db/postgres/pgtest"
)

// TestQueryExecModes checks which of pgx's query exec modes the store
// accepts: the two that send parameters typed by their Go types are
// refused by Open, Ping and Migrate, since they would send every JSON
// value as bytea.
func TestQueryExecModes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := pgtest.NewSchema(t)
	for _, mode := range []string{"cache_statement", "cache_describe", "describe_exec"} {
		s, err := postgres.Open(ctx, schema.URL+"&default_query_exec_mode="+mode, postgres.WithWakeChannel(schema.WakeChannel))
		require.NoError(t, err, mode)
		require.NoError(t, s.Ping(ctx), mode)
		_, err = s.InstanceCreate(ctx, &db.InstanceCreateParams{WorkflowName: "w", ID: mode, Params: json.RawMessage(`{"a":1}`)})
		require.NoError(t, err, mode)
		inst, err := s.InstanceGet(ctx, db.InstanceRef{WorkflowName: "w", ID: mode})
		require.NoError(t, err, mode)
		require.JSONEq(t, `{"a":1}`, string(inst.Params), mode)
		require.NoError(t, s.Close())
	}
	for _, mode := range []string{"exec", "simple_protocol"} {
		url := schema.URL + "&default_query_exec_mode=" + mode
		_, err := postgres.Open(ctx, url)
		require.ErrorContains(t, err, "default_query_exec_mode="+mode+" is not supported", mode)

		config, err := pgxpool.ParseConfig(url)
		require.NoError(t, err)
		pool, err := pgxpool.NewWithConfig(ctx, config)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		require.ErrorContains(t, postgres.New(pool).Ping(ctx), "is not supported", mode)
		require.ErrorContains(t, postgres.Migrate(ctx, pool), "is not supported", mode)
	}
}
