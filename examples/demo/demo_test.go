package demo_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/examples/demo"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

type testBundle struct {
	h   *testharness.Harness
	wfs *demo.Workflows
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	// The retry tests check each backoff exactly: the jitter draw is fixed
	// at its midpoint, where it moves no wait (its spread is tested in runner).
	h := testharness.New(t, testharness.WithJitter(0.5))
	wfs, err := demo.RegisterWorkflows(h.Registry)
	require.NoError(t, err)
	return &testBundle{h: h, wfs: wfs}
}

// create creates an instance from raw JSON params, as the command line and
// the HTTP API do.
func (b *testBundle) create(t *testing.T, workflowName, id, params string) {
	t.Helper()
	_, err := b.h.Client.Create(b.h.Context(), workflowName, dftype.CreateRequest{ID: id, Params: json.RawMessage(params)})
	require.NoError(t, err)
}

// requireOutput fails unless the instance is complete with exactly the JSON
// output want.
func (b *testBundle) requireOutput(t *testing.T, workflowName, id, want string) {
	t.Helper()
	info := b.h.RequireStatus(workflowName, id, dftype.StatusComplete)
	require.JSONEq(t, want, string(info.Output))
}

func TestRegister(t *testing.T) {
	t.Parallel()
	reg := workflow.NewRegistry()
	require.NoError(t, demo.Register(reg))
	require.Equal(t, []string{"approval", "child", "flaky", "hello", "parent", "sleeper"}, reg.Names())
	require.Error(t, demo.Register(reg), "registering twice fails on the taken names")
}

func TestHello(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.create(t, demo.HelloName, "ada", `{"name":"Ada"}`)
	b.create(t, demo.HelloName, "nobody", `{}`)
	b.h.RunUntilIdle()
	b.requireOutput(t, demo.HelloName, "ada", `{"greeting":"Hello, Ada!"}`)
	b.requireOutput(t, demo.HelloName, "nobody", `{"greeting":"Hello, World!"}`)
}

func TestApproval(t *testing.T) {
	t.Parallel()

	t.Run("Approved", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.create(t, demo.ApprovalName, "a1", `{"amount":120,"timeout":"1 hour"}`)
		b.h.RunUntilIdle()
		b.h.RequireStatus(demo.ApprovalName, "a1", dftype.StatusWaiting)
		wait := b.h.History(demo.ApprovalName, "a1").Steps[1]
		require.Equal(t, "approval", wait.WaitEventType)
		require.WithinDuration(t, b.h.Now().Add(time.Hour), *wait.WakeAt, time.Millisecond, "timeout is the param's 1 hour")

		b.h.SendEvent(demo.ApprovalName, "a1", demo.ApprovalEvent, json.RawMessage(`{"approved":true}`))
		b.h.RunUntilIdle()
		b.requireOutput(t, demo.ApprovalName, "a1", `{"approved":true,"amount":120}`)

		hist := b.h.History(demo.ApprovalName, "a1")
		require.Len(t, hist.Steps, 2)
		require.Equal(t, "prepare", hist.Steps[0].Name)
		require.Equal(t, "complete", hist.Steps[0].Status)
	})

	t.Run("Rejected", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.create(t, demo.ApprovalName, "a2", `{"amount":120}`)
		b.h.RunUntilIdle()
		b.h.SendEvent(demo.ApprovalName, "a2", demo.ApprovalEvent, json.RawMessage(`{"approved":false}`))
		b.h.RunUntilIdle()
		b.requireOutput(t, demo.ApprovalName, "a2", `{"approved":false,"amount":120}`)
	})

	t.Run("TimesOut", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.create(t, demo.ApprovalName, "a3", `{"amount":120,"timeout":"1 hour"}`)
		b.h.RunUntilIdle()
		b.h.Advance(time.Hour - time.Second)
		b.h.RunUntilIdle()
		b.h.RequireStatus(demo.ApprovalName, "a3", dftype.StatusWaiting)
		b.h.Advance(time.Second)
		b.h.RunUntilIdle()
		b.requireOutput(t, demo.ApprovalName, "a3", `{"approved":false,"timedOut":true,"amount":120}`)
	})

	t.Run("DefaultTimeoutIs24Hours", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.create(t, demo.ApprovalName, "a4", `{"amount":120}`)
		b.h.RunUntilIdle()
		b.h.Advance(24*time.Hour - time.Second)
		b.h.RunUntilIdle()
		b.h.RequireStatus(demo.ApprovalName, "a4", dftype.StatusWaiting)
		b.h.Advance(time.Second)
		b.h.RunUntilIdle()
		b.requireOutput(t, demo.ApprovalName, "a4", `{"approved":false,"timedOut":true,"amount":120}`)
	})
}

func TestSleeper(t *testing.T) {
	t.Parallel()
	b := setup(t)
	start := b.h.Now()
	b.create(t, demo.SleeperName, "s1", `{"duration":"2 seconds"}`)
	b.create(t, demo.SleeperName, "s2", `{}`)
	b.h.RunDue()
	b.h.RequireStatus(demo.SleeperName, "s1", dftype.StatusWaiting)
	b.h.RunUntilIdle()
	b.requireOutput(t, demo.SleeperName, "s1", `{"slept":"2 seconds"}`)
	b.requireOutput(t, demo.SleeperName, "s2", `{"slept":"2 seconds"}`)
	require.Equal(t, start.Add(2*time.Second), b.h.Now(), "the clock moved exactly to the end of the sleep")
}

func TestFlaky(t *testing.T) {
	t.Parallel()

	t.Run("SucceedsOnThirdAttempt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		start := b.h.Now()
		b.create(t, demo.FlakyName, "f1", `{"failures":2}`)
		b.h.RunUntilIdle()
		b.requireOutput(t, demo.FlakyName, "f1", `{"attempts":3}`)
		require.Equal(t, start.Add(2*time.Second), b.h.Now(), "two retries, one second apart (constant)")

		call := b.h.History(demo.FlakyName, "f1").Steps[0]
		require.Equal(t, "call", call.Name)
		require.Equal(t, 3, call.Attempts)
		require.Equal(t, 6, call.MaxAttempts)
	})

	t.Run("NoFailures", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.create(t, demo.FlakyName, "f0", `{}`)
		b.h.RunUntilIdle()
		b.requireOutput(t, demo.FlakyName, "f0", `{"attempts":1}`)
	})

	t.Run("FiveFailuresUseEveryRetry", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.create(t, demo.FlakyName, "f5", `{"failures":5}`)
		b.h.RunUntilIdle()
		b.requireOutput(t, demo.FlakyName, "f5", `{"attempts":6}`)
	})

	t.Run("MoreFailuresThanRetriesErrors", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		start := b.h.Now()
		b.create(t, demo.FlakyName, "f6", `{"failures":6}`)
		b.h.RunUntilIdle()
		info := b.h.RequireStatus(demo.FlakyName, "f6", dftype.StatusErrored)
		require.Equal(t, "Error", info.Error.Name)
		require.Equal(t, `step "call" failed after 6 attempt(s): Error: attempt 6 fails on purpose (failures: 6)`, info.Error.Message)
		require.Equal(t, start.Add(5*time.Second), b.h.Now())
		require.Equal(t, 6, b.h.History(demo.FlakyName, "f6").Steps[0].Attempts)
	})
}

func TestParentStartsChild(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.create(t, demo.ParentName, "p1", `{}`)
	b.h.RunUntilIdle()
	b.requireOutput(t, demo.ParentName, "p1", `{"child":"p1-child"}`)
	b.requireOutput(t, demo.ChildName, "p1-child", `{"parent":"p1"}`)

	// Restarting the parent runs the step again; the existing child counts
	// as started.
	_, err := b.h.Client.Restart(b.h.Context(), demo.ParentName, "p1")
	require.NoError(t, err)
	b.h.RunUntilIdle()
	b.requireOutput(t, demo.ParentName, "p1", `{"child":"p1-child"}`)
}

func TestParentIDTooLongForChild(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := strings.Repeat("p", workflow.MaxIDLength)
	b.create(t, demo.ParentName, id, `{}`)
	b.h.RunUntilIdle()
	info := b.h.RequireStatus(demo.ParentName, id, dftype.StatusErrored)
	require.Contains(t, info.Error.Message, "too long for a child id")
}
