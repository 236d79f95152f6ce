package cli_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/cli"
	dfclient "github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/dburl"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/workflow"
)

// TestWorkerMaxLeaseLosses: --max-lease-losses (or
// DURAFLOW_MAX_LEASE_LOSSES) reaches the runner: a task that lost its runner
// twice is ended at the limit 2, where the default 5 would run its step.
func TestWorkerMaxLeaseLosses(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"Flag", []string{"--max-lease-losses", "2"}, nil},
		{"Environment", nil, map[string]string{"DURAFLOW_MAX_LEASE_LOSSES": "2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			url := sqliteDB(t)
			store, err := dburl.OpenMigrated(ctx, url)
			require.NoError(t, err)
			t.Cleanup(func() { _ = store.Close() })
			register := func(reg *workflow.Registry) error {
				_, err := workflow.Register(reg, "loop", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
					return workflow.Do(step, "boom", func(ctx context.Context) (string, error) { return "survived", nil })
				})
				return err
			}
			reg := workflow.NewRegistry()
			require.NoError(t, register(reg))
			c, err := dfclient.New(&dfclient.Config{Store: store, Registry: reg})
			require.NoError(t, err)
			_, err = c.Create(ctx, "loop", dftype.CreateRequest{ID: "x"})
			require.NoError(t, err)
			// Two runners claimed it and died in its step: their leases
			// expired without a checkpoint.
			for range 2 {
				now := time.Now().UTC().Truncate(time.Microsecond)
				tasks, err := store.TaskClaim(ctx, &db.TaskClaimParams{
					Owner: "dead", WorkflowNames: []string{"loop"}, Max: 1, Now: now, LockedUntil: now.Add(-time.Second),
				})
				require.NoError(t, err)
				require.Len(t, tasks, 1)
			}

			env := map[string]string{"DURAFLOW_DATABASE_URL": url}
			for k, v := range tc.env {
				env[k] = v
			}
			stderr := newLines()
			done := make(chan int, 1)
			args := append([]string{"worker", "--log-format", "json", "--poll-interval", "50ms"}, tc.args...)
			go func() {
				done <- cli.Run(ctx, args, cli.WithWorkflows(register),
					cli.WithOutput(&strings.Builder{}, stderr), cli.WithLookupEnv(envMap(env)))
			}()
			stderr.waitLine(t, 10*time.Second, func(l string) bool { _, ok := logLine(l, "ending a crash loop"); return ok })
			cancel()
			require.Equal(t, cli.ExitOK, <-done, stderr.String())

			info, err := c.Get(context.Background(), "loop", "x")
			require.NoError(t, err)
			require.Equal(t, dftype.StatusErrored, info.Status)
			require.Equal(t, `step "boom" lost its runner 2 times`, info.Error.Message)
		})
	}
}
