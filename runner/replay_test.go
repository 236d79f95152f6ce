package runner_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

type counterParams struct {
	N int `json:"n"`
}

type counterOutput struct {
	Sum   int      `json:"sum"`
	Seen  []string `json:"seen"`
	Event string   `json:"event"`
}

func TestReplayNeverRerunsCompletedSteps(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		var calls [5]atomic.Int32
		wf := workflow.MustRegister(h.Registry, "counter", func(ctx context.Context, ev workflow.Event[counterParams], step workflow.Step) (counterOutput, error) {
			out := counterOutput{}
			for i := 0; i < 5; i++ {
				v, err := workflow.Do(step, fmt.Sprintf("add-%d", i), func(ctx context.Context) (int, error) {
					calls[i].Add(1)
					return ev.Payload.N * (i + 1), nil
				})
				if err != nil {
					return out, err
				}
				out.Sum += v
				out.Seen = append(out.Seen, fmt.Sprint(v))
				// Suspend between every step so each one is replayed.
				if err := step.Sleep(fmt.Sprintf("nap-%d", i), time.Minute); err != nil {
					return out, err
				}
			}
			e, err := workflow.WaitForEvent[string](step, "final", workflow.WaitOptions{Type: "go"})
			if err != nil {
				return out, err
			}
			out.Event = e
			return out, nil
		})

		inst, err := wf.Create(h.Context(), workflow.CreateOptions[counterParams]{ID: "c1", Params: counterParams{N: 3}})
		require.NoError(t, err)
		start := h.Now()
		h.RunUntilIdle()
		h.RequireStatus("counter", "c1", dftype.StatusWaiting)
		require.Equal(t, start.Add(5*time.Minute), h.Now(), "five one-minute sleeps")

		require.NoError(t, inst.SendEvent(h.Context(), "go", "done"))
		h.RunUntilIdle()

		st, err := inst.Status(h.Context())
		require.NoError(t, err)
		require.Equal(t, dftype.StatusComplete, st.Status)
		require.Equal(t, counterOutput{Sum: 3 + 6 + 9 + 12 + 15, Seen: []string{"3", "6", "9", "12", "15"}, Event: "done"}, st.Output)
		for i := range calls {
			require.EqualValues(t, 1, calls[i].Load(), "step add-%d ran more than once across %d replays", i, 6)
		}
	})
}
