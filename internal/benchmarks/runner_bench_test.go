package benchmarks

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres/pgtest"
	"github.com/duraflow/duraflow/db/sqlite/sqlitetest"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/dispatcher"
	"github.com/duraflow/duraflow/runner"
	"github.com/duraflow/duraflow/workflow"
)

// concurrency is the runner's MaxConcurrency in every benchmark.
const concurrency = 16

// backends are the databases every benchmark runs on: an SQLite file (the
// embedded default, WAL) and a fresh Postgres schema (skipped when Postgres
// is unreachable).
var backends = []struct {
	name     string
	newStore func(b *testing.B) db.Store
}{
	{"sqlite", func(b *testing.B) db.Store { return sqlitetest.NewFileStore(b) }},
	{"postgres", func(b *testing.B) db.Store { return pgtest.NewStore(b, pgtest.WithMaxConns(concurrency+4)) }},
}

// BenchmarkEmptyWorkflow measures how many workflows without steps one runner
// completes per second: claim, load, run and the completing checkpoint.
func BenchmarkEmptyWorkflow(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) { benchmarkWorkflows(b, be.newStore(b), 0) })
	}
}

// BenchmarkTenStepWorkflow measures one runner's throughput on a workflow of
// ten no-op step.Do calls, each of which commits a checkpoint.
func BenchmarkTenStepWorkflow(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) { benchmarkWorkflows(b, be.newStore(b), 10) })
	}
}

// benchmarkWorkflows creates b.N instances of a workflow of the given number
// of no-op steps, then starts a runner and measures the time until every
// instance is complete. Instance creation is not measured.
func benchmarkWorkflows(b *testing.B, store db.Store, steps int) {
	ctx := b.Context()

	name := fmt.Sprintf("steps-%d", steps)
	reg := workflow.NewRegistry()
	wf := workflow.MustRegister(reg, name, func(ctx context.Context, _ workflow.Event[struct{}], step workflow.Step) (int, error) {
		sum := 0
		for i := range steps {
			n, err := workflow.Do(step, fmt.Sprintf("step-%d", i), func(context.Context) (int, error) { return i, nil })
			if err != nil {
				return 0, err
			}
			sum += n
		}
		return sum, nil
	})
	local := dispatcher.NewLocal()
	c, err := client.New(&client.Config{Store: store, Registry: reg, WakeFunc: local.Wake})
	require.NoError(b, err)
	reg.Bind(c) // a client built alone: the typed bindings go through it
	r, err := runner.New(&runner.Config{
		Store: store, Registry: reg, MaxConcurrency: concurrency, WakeFunc: local.Wake,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.NoError(b, err)
	local.Add(r)

	for i := 0; i < b.N; i += workflow.MaxBatchSize {
		batch := make([]workflow.CreateOptions[struct{}], min(workflow.MaxBatchSize, b.N-i))
		for j := range batch {
			batch[j].ID = fmt.Sprintf("i%d", i+j)
		}
		_, err := wf.CreateBatch(ctx, batch)
		require.NoError(b, err)
	}

	b.ResetTimer()
	start := time.Now()
	require.NoError(b, r.Start(ctx))
	waitAllTerminal(b, store, name)
	elapsed := time.Since(start)
	b.StopTimer()

	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(b, r.Stop(stopCtx))

	notComplete, err := store.InstanceList(ctx, &db.InstanceListParams{
		WorkflowName: name, Statuses: []dftype.InstanceStatus{dftype.StatusErrored, dftype.StatusTerminated}, Limit: 1,
	})
	require.NoError(b, err)
	require.Empty(b, notComplete, "every instance must complete")

	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "workflows/s")
	if steps > 0 {
		b.ReportMetric(float64(b.N*steps)/elapsed.Seconds(), "steps/s")
	}
}

// waitAllTerminal polls the store until no instance of the workflow is left
// that is not terminal.
func waitAllTerminal(b *testing.B, store db.Store, name string) {
	b.Helper()
	ctx, cancel := context.WithTimeout(b.Context(), 10*time.Minute)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		left, err := store.InstanceList(ctx, &db.InstanceListParams{
			WorkflowName: name,
			Statuses:     []dftype.InstanceStatus{dftype.StatusQueued, dftype.StatusRunning, dftype.StatusWaiting, dftype.StatusWaitingForPause, dftype.StatusPaused},
			Limit:        1,
		})
		require.NoError(b, err)
		if len(left) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			b.Fatalf("instances of %s still running: %v", name, ctx.Err())
		case <-tick.C:
		}
	}
}
