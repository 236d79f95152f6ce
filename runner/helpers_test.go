package runner_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/runner"
)

func mustJSON(t testing.TB, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// runDueAsync runs r.RunDue in the background and sends how many tasks it
// ran (-1 on an error) on the returned channel.
func runDueAsync(ctx context.Context, r *runner.Runner, max int) <-chan int {
	ran := make(chan int, 1)
	go func() {
		n, err := r.RunDue(ctx, max)
		if err != nil {
			n = -1
		}
		ran <- n
	}()
	return ran
}

// awaitSignal waits until ch is closed (or sends), failing the test after
// ten seconds with what it waited for.
func awaitSignal(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}
