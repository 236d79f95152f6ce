package flow_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/flow"
	"github.com/duraflow/duraflow/testharness"
)

// namedFailure is a retryable error with a recorded name, as a host
// handler's errors (or the http handler's) have.
type namedFailure struct{ name string }

func (e *namedFailure) Error() string     { return e.name + " happened" }
func (e *namedFailure) ErrorName() string { return e.name }

// failHandler is a step type that fails every attempt with the error name
// its config gives, counting its calls.
type failHandler struct{ calls atomic.Int32 }

func (h *failHandler) Type() string                   { return "fail" }
func (h *failHandler) Validate(json.RawMessage) error { return nil }
func (h *failHandler) Run(ctx context.Context, inv *flow.Invocation) (any, error) {
	h.calls.Add(1)
	var c struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(inv.Config, &c); err != nil {
		return nil, err
	}
	return nil, &namedFailure{name: c.Name}
}

func failFlow(t *testing.T, errName, retries string) *flow.Definition {
	t.Helper()
	def, err := flow.Parse([]byte(`{"id": "pay", "version": "1.0.0", "initialStepId": "charge",
		"steps": {"charge": {"id": "charge", "type": "fail", "config": {"name": "` + errName + `"},
			"retries": ` + retries + `}}}`))
	require.NoError(t, err)
	return def
}

func TestFlowNonRetryableErrorNames(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		retries := `{"limit": 3, "delay": "1 second", "backoff": "constant", "jitter": false,
			"nonRetryable": ["CardDeclined", "Fraud"]}`
		for _, tc := range []struct {
			errName string
			calls   int32
		}{
			{"CardDeclined", 1}, // listed: fails at once
			{"Fraud", 1},
			{"Timeout", 4}, // not listed: the first attempt and 3 retries
		} {
			t.Run(tc.errName, func(t *testing.T) {
				t.Parallel()
				h := testharness.New(t, testharness.WithBackend(b))
				fh := &failHandler{}
				hs, err := flow.NewHandlers(flow.WithHandler(fh))
				require.NoError(t, err)
				f, err := flow.Compile(failFlow(t, tc.errName, retries), hs)
				require.NoError(t, err)
				_, err = flow.Register(h.Registry, f)
				require.NoError(t, err)
				_, err = h.Client.Create(h.Context(), "pay", dftype.CreateRequest{ID: "x"})
				require.NoError(t, err)
				start := h.Now()
				h.RunUntilIdle()
				got := h.RequireStatus("pay", "x", dftype.StatusErrored)
				require.Contains(t, got.Error.Message, tc.errName)
				require.Equal(t, tc.calls, fh.calls.Load())
				require.Equal(t, start.Add(time.Duration(tc.calls-1)*time.Second), h.Now())
				st := h.History("pay", "x").Steps[0]
				require.Len(t, st.AttemptLog, int(tc.calls), "every attempt is in history")
				require.Equal(t, 4, st.MaxAttempts)
			})
		}
	})
}

func TestFlowRetryFieldsValidated(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ def, path string }{
		{`"retries": {"maxDelay": -5}`, "steps.charge.retries.maxDelay"},
		{`"retries": {"nonRetryable": [""]}`, "steps.charge.retries.nonRetryable[0]"},
	} {
		def, err := flow.Parse([]byte(`{"id": "pay", "version": "1.0.0", "initialStepId": "charge",
			"steps": {"charge": {"id": "charge", "type": "fail", ` + tc.def + `}}}`))
		require.NoError(t, err)
		hs, err := flow.NewHandlers(flow.WithHandler(&failHandler{}))
		require.NoError(t, err)
		_, err = flow.Validate(def, hs)
		var ve *flow.ValidationError
		require.True(t, errors.As(err, &ve), "%v", err)
		require.Equal(t, tc.path, ve.Problems[0].Path)
	}
	for _, tc := range []struct{ def, path string }{
		{`"deadline": "0 seconds"`, "deadline"},
		{`"retry": {"limit": -1}`, "retry.limit"},
		{`"retry": {"maxDelay": -5}`, "retry.maxDelay"},
	} {
		def, err := flow.Parse([]byte(`{"id": "pay", "version": "1.0.0", "initialStepId": "charge", ` + tc.def + `,
			"steps": {"charge": {"id": "charge", "type": "fail"}}}`))
		require.NoError(t, err)
		hs, err := flow.NewHandlers(flow.WithHandler(&failHandler{}))
		require.NoError(t, err)
		_, err = flow.Validate(def, hs)
		var ve *flow.ValidationError
		require.True(t, errors.As(err, &ve), "%s: %v", tc.def, err)
		require.Equal(t, tc.path, ve.Problems[0].Path)
	}
}

func TestFlowDeadlineAndWorkflowRetry(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		fh := &failHandler{}
		hs, err := flow.NewHandlers(flow.WithHandler(fh))
		require.NoError(t, err)
		def, err := flow.Parse([]byte(`{"id": "pay", "version": "1.0.0", "initialStepId": "charge",
			"deadline": "1 hour", "retry": {"limit": 1, "delay": "1 minute", "jitter": false},
			"steps": {"charge": {"id": "charge", "type": "fail", "config": {"name": "Down"}, "retries": {"limit": 0}}}}`))
		require.NoError(t, err)
		f, err := flow.Compile(def, hs)
		require.NoError(t, err)
		_, err = flow.Register(h.Registry, f)
		require.NoError(t, err)
		start := h.Now()
		info, err := h.Client.Create(h.Context(), "pay", dftype.CreateRequest{ID: "x"})
		require.NoError(t, err)
		require.Equal(t, start.Add(time.Hour), *info.DeadlineAt)
		h.RunUntilIdle()
		got := h.RequireStatus("pay", "x", dftype.StatusErrored)
		require.Equal(t, 2, got.RunAttempt)
		require.EqualValues(t, 2, fh.calls.Load(), "the run was retried once")
	})
}

// TestStoredFlowSettingsFollowTheVersion shows that a stored flow's
// "deadline" and "retry" are those of the version an instance pins.
func TestStoredFlowSettingsFollowTheVersion(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		fh := &failHandler{}
		hs, err := flow.NewHandlers(flow.WithHandler(fh))
		require.NoError(t, err)
		p := newProcess(t, b, func(c *flow.Config) { c.Handlers = hs })
		p.apply([]byte(`{"id": "pay", "version": "1.0.0", "initialStepId": "charge",
			"deadline": "1 hour", "retry": {"limit": 1, "delay": "1 minute", "jitter": false},
			"steps": {"charge": {"id": "charge", "type": "fail", "config": {"name": "Down"}, "retries": {"limit": 0}}}}`))
		start := p.h.Now()
		a := p.create("pay", "a", `{}`)
		require.Equal(t, start.Add(time.Hour), *a.DeadlineAt)
		p.apply([]byte(`{"id": "pay", "version": "2.0.0", "initialStepId": "charge",
			"steps": {"charge": {"id": "charge", "type": "fail", "config": {"name": "Down"}, "retries": {"limit": 0}}}}`))
		bInfo := p.create("pay", "b", `{}`)
		require.Nil(t, bInfo.DeadlineAt, "version 2 has no deadline")

		p.h.RunUntilIdle()
		require.Equal(t, 2, p.h.RequireStatus("pay", "a", dftype.StatusErrored).RunAttempt, "version 1 retries the run once")
		require.Equal(t, 1, p.h.RequireStatus("pay", "b", dftype.StatusErrored).RunAttempt, "version 2 does not")
		require.EqualValues(t, 3, fh.calls.Load())
	})
}
