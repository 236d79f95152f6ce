package duraflow_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/duraflow/duraflow"
	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/db/dburl"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/workflow"
)

// onDemand builds a host on a fresh in-memory database whose runner runs
// only when the example calls RunDue, on a fake clock the example moves.
func onDemand(ctx context.Context, reg *workflow.Registry) (*duraflow.Host, *clock.Mock, func()) {
	store, err := dburl.OpenMigrated(ctx, "sqlite::memory:")
	if err != nil {
		log.Fatal(err)
	}
	clk := clock.NewMock()
	clk.Set(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC))
	host, err := duraflow.New(store, &duraflow.Config{
		Registry: reg, Clock: clk, Logger: quietLogger,
		RunMode: duraflow.RunOnDemand, DisableScheduler: true, PollOnly: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	return host, clk, func() { _ = store.Close() }
}

// Example_deadline ends a sleeping instance at its deadline
// (workflow.WithDeadline): the sleep would last two hours, the deadline is
// one hour after the create.
func Example_deadline() {
	ctx := context.Background()
	reg := workflow.NewRegistry()
	workflow.MustRegister(reg, "nap", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
		if err := step.Sleep("long nap", 2*time.Hour); err != nil {
			return "", err
		}
		return "rested", nil
	}, workflow.WithDeadline(time.Hour))
	host, clk, done := onDemand(ctx, reg)
	defer done()

	info, err := host.Client().Create(ctx, "nap", dftype.CreateRequest{ID: "n1"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("deadline:", info.DeadlineAt.Format(time.Kitchen))
	_, _ = host.Runner().RunDue(ctx, 10) // sleeps: its task is due at the deadline, not at the sleep's end
	clk.Add(time.Hour)
	_, _ = host.Runner().RunDue(ctx, 10)
	got, _ := host.Client().Get(ctx, "nap", "n1")
	fmt.Println(got.Status, got.Error.Name)
	// Output:
	// deadline: 10:00AM
	// errored DeadlineExceeded
}

// Example_workflowRetry runs a failed run again (workflow.WithWorkflowRetry):
// the step that completed is replayed from history, the step that failed
// runs again.
func Example_workflowRetry() {
	ctx := context.Background()
	reg := workflow.NewRegistry()
	calls := map[string]int{}
	workflow.MustRegister(reg, "order", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
		if _, err := workflow.Do(step, "reserve", func(ctx context.Context) (bool, error) {
			calls["reserve"]++
			return true, nil
		}); err != nil {
			return "", err
		}
		return workflow.Do(step, "ship", func(ctx context.Context) (string, error) {
			calls["ship"]++
			if calls["ship"] == 1 {
				return "", errors.New("carrier down")
			}
			return "shipped", nil
		}, workflow.WithNoRetries())
	}, workflow.WithWorkflowRetry(workflow.RetryPolicy{Limit: 3, Delay: time.Minute, NoJitter: true}))
	host, clk, done := onDemand(ctx, reg)
	defer done()

	if _, err := host.Client().Create(ctx, "order", dftype.CreateRequest{ID: "o1"}); err != nil {
		log.Fatal(err)
	}
	_, _ = host.Runner().RunDue(ctx, 10)
	got, _ := host.Client().Get(ctx, "order", "o1")
	fmt.Println(got.Status, "run attempt", got.RunAttempt)
	clk.Add(time.Minute)
	_, _ = host.Runner().RunDue(ctx, 10)
	got, _ = host.Client().Get(ctx, "order", "o1")
	fmt.Println(got.Status, string(got.Output), "run attempt", got.RunAttempt)
	fmt.Println("reserve ran", calls["reserve"], "time(s), ship ran", calls["ship"], "time(s)")
	// Output:
	// waiting run attempt 2
	// complete "shipped" run attempt 2
	// reserve ran 1 time(s), ship ran 2 time(s)
}

// Example_attempts shows every attempt of a step in history, and a policy
// without a limit recorded as unlimited.
func Example_attempts() {
	ctx := context.Background()
	reg := workflow.NewRegistry()
	workflow.MustRegister(reg, "charge", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (int, error) {
		return workflow.Do(step, "call", func(ctx context.Context) (int, error) {
			if workflow.Attempt(ctx) < 3 {
				return 0, fmt.Errorf("attempt %d: gateway busy", workflow.Attempt(ctx))
			}
			return 42, nil
		}, workflow.WithRetries(workflow.RetryPolicy{
			Limit: workflow.UnlimitedRetries, Delay: 10 * time.Second, MaxDelay: time.Minute,
		}))
	})
	host, clk, done := onDemand(ctx, reg)
	defer done()
	if _, err := host.Client().Create(ctx, "charge", dftype.CreateRequest{ID: "c1"}); err != nil {
		log.Fatal(err)
	}
	for range 3 {
		_, _ = host.Runner().RunDue(ctx, 10)
		clk.Add(time.Minute) // past any jittered wait (at most MaxDelay)
	}
	h, err := host.Client().History(ctx, "charge", "c1", client.HistoryParams{})
	if err != nil {
		log.Fatal(err)
	}
	st := h.Steps[0]
	fmt.Println(st.Status, "max attempts:", st.MaxAttempts == workflow.UnlimitedAttempts)
	for _, a := range st.AttemptLog {
		msg := ""
		if a.Error != nil {
			msg = a.Error.Message
		}
		fmt.Println(a.Attempt, a.Status, msg)
	}
	// Output:
	// complete max attempts: true
	// 1 failed attempt 1: gateway busy
	// 2 failed attempt 2: gateway busy
	// 3 complete
}
