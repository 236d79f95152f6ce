package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres"
	"github.com/duraflow/duraflow/db/postgres/pgtest"
	"github.com/duraflow/duraflow/dftype"
)

// recorder keeps the statements a pool runs, with their arguments.
type recorder struct {
	mu    sync.Mutex
	stmts []recorded
}

type recorded struct {
	sql  string
	args []any
}

func (r *recorder) add(sql string, args []any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stmts = append(r.stmts, recorded{sql, args})
}

func (r *recorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.add(d.SQL, d.Args)
	return ctx
}
func (r *recorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *recorder) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (r *recorder) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	r.add(d.SQL, d.Args)
}
func (r *recorder) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// TestLimitQueriesUseIndexes fills a schema with 3000 limited instances
// (3000 keys, each holding its slot, and waiters on one key), analyzes
// it, then records every statement a limited create, a waiting create, a
// claim, a releasing checkpoint, a terminate, a restart, a get and a list
// run, and EXPLAINs each that reads the limit tables, and the claim (with
// the planner settings the store runs it under): none may scan the tasks,
// the instances or the limit tables sequentially.
func TestLimitQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := pgtest.NewPool(t)
	rec := &recorder{}
	cfg := base.Config().Copy()
	cfg.ConnConfig.Tracer = rec
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	store := postgres.New(pool)

	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	limits := func(key string) []db.LimitSpec {
		return []db.LimitSpec{
			{Scope: db.WorkflowScope("wf"), Define: true, MaxRunning: 100000},
			{Scope: db.KeyScope("wf", key), Define: true, MaxRunning: 1},
		}
	}
	for b := range 6 {
		items := make([]db.InstanceCreateItem, 500)
		for i := range items {
			n := b*500 + i
			items[i] = db.InstanceCreateItem{ID: fmt.Sprintf("i%05d", n), Limits: limits(fmt.Sprintf("k%05d", n))}
		}
		_, err := store.InstanceCreateMany(ctx, &db.InstanceCreateManyParams{WorkflowName: "wf", Instances: items, Now: &now})
		require.NoError(t, err)
	}
	for i := range 20 {
		_, err := store.InstanceCreate(ctx, &db.InstanceCreateParams{WorkflowName: "wf", ID: fmt.Sprintf("w%02d", i), Limits: limits("k00000"), Now: &now})
		require.NoError(t, err)
	}
	_, err = pool.Exec(ctx, "ANALYZE")
	require.NoError(t, err)

	rec.mu.Lock()
	rec.stmts = nil
	rec.mu.Unlock()
	_, err = store.InstanceCreate(ctx, &db.InstanceCreateParams{WorkflowName: "wf", ID: "new", Limits: limits("fresh"), Now: &now})
	require.NoError(t, err)
	_, err = store.InstanceCreate(ctx, &db.InstanceCreateParams{WorkflowName: "wf", ID: "waits", Limits: limits("k00000"), Now: &now})
	require.NoError(t, err)
	claims, err := store.TaskClaim(ctx, &db.TaskClaimParams{Owner: "r", WorkflowNames: []string{"wf"}, Max: 1, Now: now, LockedUntil: now.Add(time.Minute)})
	require.NoError(t, err)
	require.Len(t, claims, 1)
	require.Equal(t, "i00000", claims[0].Task.InstanceID)
	_, err = store.Checkpoint(ctx, &db.CheckpointParams{
		Task: db.TaskRef{ID: claims[0].Task.ID, Version: claims[0].Task.Version}, WorkflowName: "wf", InstanceID: "i00000",
		RunNumber: 1, Now: now, Outcome: db.OutcomeComplete, Output: []byte(`1`), ReleaseLimits: true,
	})
	require.NoError(t, err)
	first, err := store.InstanceGet(ctx, db.InstanceRef{WorkflowName: "wf", ID: "w00"})
	require.NoError(t, err)
	require.Nil(t, first.WaitingFor, "the oldest waiter was admitted")
	_, err = store.InstanceTerminate(ctx, &db.InstanceChangeParams{WorkflowName: "wf", ID: "i00001", Now: &now})
	require.NoError(t, err)
	_, err = store.InstanceRestart(ctx, &db.InstanceChangeParams{WorkflowName: "wf", ID: "i00001", Now: &now})
	require.NoError(t, err)
	w, err := store.InstanceGet(ctx, db.InstanceRef{WorkflowName: "wf", ID: "w01"})
	require.NoError(t, err)
	require.NotNil(t, w.WaitingFor)
	_, err = store.InstanceList(ctx, &db.InstanceListParams{WorkflowName: "wf", Statuses: []dftype.InstanceStatus{dftype.StatusQueued}, Limit: 50})
	require.NoError(t, err)

	rec.mu.Lock()
	stmts := rec.stmts
	rec.mu.Unlock()
	explained := map[string]bool{}
	for _, st := range stmts {
		name := queryName(st.sql)
		if !strings.Contains(st.sql, "workflow_limit") && !strings.HasPrefix(name, "Limit") && name != "TaskClaim" {
			continue
		}
		tx, err := base.Begin(ctx)
		require.NoError(t, err)
		if name == "TaskClaim" {
			_, err = tx.Exec(ctx, "SELECT set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true), set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true)")
			require.NoError(t, err)
		}
		rows, err := tx.Query(ctx, "EXPLAIN "+st.sql, st.args...)
		require.NoError(t, err, name)
		var plan []string
		for rows.Next() {
			var line string
			require.NoError(t, rows.Scan(&line))
			plan = append(plan, line)
		}
		require.NoError(t, rows.Err())
		require.NoError(t, tx.Rollback(ctx))
		text := strings.Join(plan, "\n")
		for _, table := range []string{"workflow_task", "workflow_instance", "workflow_limit_member", "workflow_limit"} {
			require.NotContains(t, text, "Seq Scan on "+table+" ", "%s:\n%s", name, text)
		}
		explained[name] = true
	}
	for _, want := range []string{"TaskClaim", "LimitLock", "LimitEnsure", "LimitMemberList", "LimitMemberWrite", "LimitWaiting", "LimitLockWaiters", "LimitUpdate", "LimitTaskAdmit", "LimitWaitingFor"} {
		require.True(t, explained[want], "%s was not run, so not explained (explained: %v)", want, explained)
	}
}

// queryName is the sqlc name of a statement ("-- name: X :one").
func queryName(sql string) string {
	_, rest, ok := strings.Cut(sql, "-- name: ")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, " ")
	return name
}
