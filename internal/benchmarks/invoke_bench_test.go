package benchmarks

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dispatcher"
	"github.com/duraflow/duraflow/runner"
	"github.com/duraflow/duraflow/workflow"
)

// BenchmarkInvokeRoundTrip measures the round trip of an Invoke step, one
// parent at a time on an idle runner: from the parent's step before the
// invoke (which records the time) through the child's start, run and end,
// the parent's wake-up and replay, to the step after the invoke. It
// reports the p50 and p99 of that latency.
func BenchmarkInvokeRoundTrip(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) { benchmarkInvokeRoundTrip(b, be.newStore(b)) })
	}
}

func benchmarkInvokeRoundTrip(b *testing.B, store db.Store) {
	ctx := b.Context()
	reg := workflow.NewRegistry()
	done := make(chan time.Duration, 1)
	workflow.MustRegister(reg, "child", func(ctx context.Context, ev workflow.Event[int], step workflow.Step) (int, error) {
		return ev.Payload + 1, nil
	})
	parent := workflow.MustRegister(reg, "parent", func(ctx context.Context, ev workflow.Event[int], step workflow.Step) (int, error) {
		start, err := workflow.Do(step, "start", func(context.Context) (int64, error) { return time.Now().UnixNano(), nil })
		if err != nil {
			return 0, err
		}
		n, err := workflow.Invoke[int](step, "child", workflow.InvokeOptions{Workflow: "child", Params: ev.Payload})
		if err != nil {
			return 0, err
		}
		_, err = workflow.Do(step, "end", func(context.Context) (int, error) {
			done <- time.Duration(time.Now().UnixNano() - start)
			return n, nil
		})
		return n, err
	})
	local := dispatcher.NewLocal()
	c, err := client.New(&client.Config{Store: store, Registry: reg, WakeFunc: local.Wake})
	require.NoError(b, err)
	reg.Bind(c)
	r, err := runner.New(&runner.Config{
		Store: store, Registry: reg, MaxConcurrency: concurrency, WakeFunc: local.Wake,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.NoError(b, err)
	local.Add(r)
	require.NoError(b, r.Start(ctx))
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(b, r.Stop(stopCtx))
	}()

	latencies := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		_, err := parent.Create(ctx, workflow.CreateOptions[int]{ID: fmt.Sprintf("p%d", i), Params: i})
		require.NoError(b, err)
		select {
		case d := <-done:
			latencies = append(latencies, d)
		case <-time.After(time.Minute):
			b.Fatalf("parent p%d did not resume", i)
		}
	}
	b.StopTimer()
	slices.Sort(latencies)
	at := func(q float64) float64 {
		return float64(latencies[min(len(latencies)-1, int(q*float64(len(latencies))))].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op")
}
