package bench_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres"
	"github.com/duraflow/duraflow/db/postgres/pgtest"
	"github.com/duraflow/duraflow/db/sqlite/sqlitetest"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/runner"
	"github.com/duraflow/duraflow/workflow"
)

// The benchmarks of the engine's hot paths, on both backends: claiming a
// batch of tasks, committing a checkpoint, and replaying a run from its
// cached steps. They time the store (and the runner, for replay) directly,
// without the workloads' creation and polling around them, on tables with
// statistics (see analyze). CI runs each once (-benchtime=1x) as a smoke;
// nothing asserts a duration.

// benchBackends are the databases each benchmark runs on: an SQLite file
// (WAL, as deployed) and a fresh Postgres schema (skipped when Postgres is
// unreachable).
var benchBackends = []struct {
	name     string
	newStore func(b *testing.B) db.Store
}{
	{"sqlite", func(b *testing.B) db.Store { return sqlitetest.NewFileStore(b) }},
	{"postgres", func(b *testing.B) db.Store { return pgtest.NewStore(b, pgtest.WithMaxConns(4)) }},
}

// analyze gives a Postgres store's tables their statistics, as autovacuum
// does on a deployed database (a fresh schema has none, and this server may
// run without autovacuum), so the planner chooses the plans production
// gets. SQLite has no automatic ANALYZE and the engine runs none, so its
// store is left as it is.
func analyze(b *testing.B, store db.Store) {
	b.Helper()
	if pg, ok := store.(*postgres.Store); ok {
		_, err := pg.Pool().Exec(b.Context(), "ANALYZE")
		require.NoError(b, err)
	}
}

// claimBatch is how many tasks one claim takes: a runner's concurrency.
const claimBatch = 16

// BenchmarkClaim measures one TaskClaim of a batch of 16 due tasks out of a
// queue of 1000. Between iterations, untimed, the tasks go back to the
// queue.
func BenchmarkClaim(b *testing.B) {
	for _, be := range benchBackends {
		b.Run(be.name, func(b *testing.B) {
			store := be.newStore(b)
			ctx := b.Context()
			createInstances(b, store, "claim", 1000)
			analyze(b, store)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				now := time.Now().UTC().Truncate(time.Microsecond)
				tasks, err := store.TaskClaim(ctx, &db.TaskClaimParams{
					Owner: "bench", WorkflowNames: []string{"claim"}, Max: claimBatch,
					Now: now, LockedUntil: now.Add(time.Minute),
				})
				b.StopTimer()
				require.NoError(b, err)
				require.Len(b, tasks, claimBatch)
				for _, c := range tasks {
					require.NoError(b, store.TaskRelease(ctx, &db.TaskReleaseParams{
						Task: db.TaskRef{ID: c.Task.ID, Version: c.Task.Version}, RunAt: now.Add(-time.Second),
					}))
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*claimBatch), "ns/task")
		})
	}
}

// BenchmarkCheckpoint measures the checkpoint of a completed step: one
// Continue checkpoint that writes a step with a 250-byte result and renews
// the lease. Sub-benchmark batch16 commits 16 of them, of 16 instances, in
// one CheckpointBatch (the group commit); its ns/step is per checkpoint.
func BenchmarkCheckpoint(b *testing.B) {
	for _, be := range benchBackends {
		b.Run(be.name, func(b *testing.B) {
			b.Run("single", func(b *testing.B) { benchmarkCheckpoint(b, be.newStore(b), 1) })
			b.Run("batch16", func(b *testing.B) { benchmarkCheckpoint(b, be.newStore(b), 16) })
		})
	}
}

func benchmarkCheckpoint(b *testing.B, store db.Store, batch int) {
	ctx := b.Context()
	createInstances(b, store, "checkpoint", batch)
	analyze(b, store)
	now := time.Now().UTC().Truncate(time.Microsecond)
	tasks, err := store.TaskClaim(ctx, &db.TaskClaimParams{
		Owner: "bench", WorkflowNames: []string{"checkpoint"}, Max: batch, Now: now, LockedUntil: now.Add(time.Minute),
	})
	require.NoError(b, err)
	require.Len(b, tasks, batch)
	result, err := json.Marshal(map[string]any{
		"instance": "s1234", "step": 0, "status": "ok", "amount": 1000, "currency": "EUR",
		"note": "a no-op step of the duraflow benchmark that returns a struct of about 250 bytes as JSON",
		"tags": []string{"bench", "steps10", "step-0"}, "at": "2026-01-02T03:04:05Z",
	})
	require.NoError(b, err)
	params := func(task *db.Task, i int) *db.CheckpointParams {
		now := time.Now().UTC().Truncate(time.Microsecond)
		return &db.CheckpointParams{
			Task: db.TaskRef{ID: task.ID, Version: task.Version}, WorkflowName: task.WorkflowName,
			InstanceID: task.InstanceID, RunNumber: task.RunNumber, Now: now,
			Steps: []db.StepWrite{{
				Key: "step-" + strconv.Itoa(i), Type: db.StepTypeDo, Status: db.StepStatusComplete,
				Attempts: 1, MaxAttempts: 6, Timeout: 10 * time.Minute, Result: result,
			}},
			Outcome: db.OutcomeContinue,
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if batch == 1 {
			_, err := store.Checkpoint(ctx, params(tasks[0].Task, i))
			require.NoError(b, err)
			continue
		}
		ps := make([]*db.CheckpointParams, batch)
		for j, c := range tasks {
			ps[j] = params(c.Task, i)
		}
		results, err := store.(db.BatchCheckpointer).CheckpointBatch(ctx, ps)
		require.NoError(b, err)
		for _, r := range results {
			require.NoError(b, r.Err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/step")
}

// replaySteps is the number of completed steps BenchmarkReplay replays.
const replaySteps = 100

// BenchmarkReplay measures replaying a run whose 100 steps completed: the
// runner claims the task, loads the instance and its steps, runs the
// workflow code, which gets each of the 100 results from the cache, reaches
// the wait it suspended at, and suspends again with one checkpoint. Between
// iterations, untimed, a pause and a resume make the instance due again.
func BenchmarkReplay(b *testing.B) {
	for _, be := range benchBackends {
		b.Run(be.name, func(b *testing.B) {
			store := be.newStore(b)
			ctx := b.Context()
			reg := workflow.NewRegistry()
			workflow.MustRegister(reg, "replay", func(_ context.Context, _ workflow.Event[json.RawMessage], step workflow.Step) (int, error) {
				for i := range replaySteps {
					if _, err := workflow.Do(step, fmt.Sprintf("step-%d", i), func(context.Context) (int, error) { return i, nil }); err != nil {
						return 0, err
					}
				}
				_, err := step.WaitForEvent("wait", workflow.WaitOptions{Type: "never", Timeout: time.Hour})
				return replaySteps, err
			})
			c, err := client.New(&client.Config{Store: store, Registry: reg})
			require.NoError(b, err)
			r, err := runner.New(&runner.Config{Store: store, Registry: reg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			require.NoError(b, err)
			_, err = c.Create(ctx, "replay", dftype.CreateRequest{ID: "r"})
			require.NoError(b, err)
			for range replaySteps + 1 {
				info, err := c.Get(ctx, "replay", "r")
				require.NoError(b, err)
				if info.Status == dftype.StatusWaiting {
					break
				}
				_, err = r.RunDue(ctx, 1)
				require.NoError(b, err)
			}
			requireStatus(b, c, dftype.StatusWaiting)
			analyze(b, store)

			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				_, err := c.Pause(ctx, "replay", "r")
				require.NoError(b, err)
				_, err = c.Resume(ctx, "replay", "r")
				require.NoError(b, err)
				b.StartTimer()
				n, err := r.RunDue(ctx, 1)
				require.NoError(b, err)
				require.Equal(b, 1, n)
			}
			b.StopTimer()
			requireStatus(b, c, dftype.StatusWaiting)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*replaySteps), "ns/cached-step")
		})
	}
}

// createInstances creates n instances of a workflow the store alone knows,
// each with a task due now.
func createInstances(b *testing.B, store db.Store, name string, n int) {
	b.Helper()
	for from := 0; from < n; from += workflow.MaxBatchSize {
		items := make([]db.InstanceCreateItem, min(workflow.MaxBatchSize, n-from))
		for i := range items {
			items[i] = db.InstanceCreateItem{ID: name + strconv.Itoa(from+i), Params: json.RawMessage("null")}
		}
		past := time.Now().UTC().Add(-time.Second).Truncate(time.Microsecond)
		_, err := store.InstanceCreateMany(b.Context(), &db.InstanceCreateManyParams{WorkflowName: name, Instances: items, Now: &past})
		require.NoError(b, err)
	}
}

func requireStatus(b *testing.B, c *client.Client, want dftype.InstanceStatus) {
	b.Helper()
	info, err := c.Get(b.Context(), "replay", "r")
	require.NoError(b, err)
	require.Equal(b, want, info.Status)
}

// BenchmarkInstanceList measures one page of 50 of the instance list of a
// workflow of 1000 instances with small params (about 60 bytes), as the
// HTTP API and the console read it: whole (no byte budget), with the
// client's byte budget (the API's lists), and without payloads (the
// console's instance list).
func BenchmarkInstanceList(b *testing.B) {
	for _, be := range benchBackends {
		b.Run(be.name, func(b *testing.B) {
			store := be.newStore(b)
			ctx := b.Context()
			for from := 0; from < 1000; from += workflow.MaxBatchSize {
				items := make([]db.InstanceCreateItem, workflow.MaxBatchSize)
				for i := range items {
					items[i] = db.InstanceCreateItem{ID: "list" + strconv.Itoa(from+i), Params: json.RawMessage(fmt.Sprintf(`{"order":%d,"customer":"customer-%d","total":12.5}`, from+i, from+i))}
				}
				now := time.Now().UTC().Add(time.Duration(from) * time.Microsecond).Truncate(time.Microsecond)
				_, err := store.InstanceCreateMany(ctx, &db.InstanceCreateManyParams{WorkflowName: "list", Instances: items, Now: &now})
				require.NoError(b, err)
			}
			analyze(b, store)
			for _, tc := range []struct {
				name string
				p    db.InstanceListParams
			}{
				{"whole", db.InstanceListParams{}},
				{"budget", db.InstanceListParams{PayloadBudget: client.DefaultPagePayloadBytes}},
				{"omit", db.InstanceListParams{OmitPayloads: true}},
			} {
				b.Run(tc.name, func(b *testing.B) {
					p := tc.p
					p.WorkflowName, p.Limit = "list", 51
					b.ReportAllocs()
					for b.Loop() {
						page, err := store.InstanceList(ctx, &p)
						if err != nil || len(page) != 51 {
							b.Fatalf("%d rows, %v", len(page), err)
						}
					}
				})
			}
		})
	}
}
