package runner_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// lostAnswerStore commits the first checkpoint that matches lose and then
// answers it with a lost connection, as a database whose answer to a commit
// never arrives: the runner cannot tell that it committed. Every other call
// goes through.
type lostAnswerStore struct {
	db.Store
	lose func(p *db.CheckpointParams) bool

	once sync.Once
	lost atomic.Bool
}

func (s *lostAnswerStore) Checkpoint(ctx context.Context, p *db.CheckpointParams) (*db.CheckpointResult, error) {
	match := false
	if s.lose(p) {
		s.once.Do(func() { match = true })
	}
	res, err := s.Store.Checkpoint(ctx, p)
	if match && err == nil {
		s.lost.Store(true)
		return nil, fmt.Errorf("%w: connection reset by peer after the commit", db.ErrUnavailable)
	}
	return res, err
}

// TestLostCheckpointAnswers: whichever checkpoint's answer is lost after it
// committed (a step that continues the run, a suspend at a sleep, the
// consumption of a buffered event, the run's end), no completed step runs
// again, the instance ends with the right output, and a hand-back the lost
// answer causes counts no lease loss (the database was unavailable: no
// fault of the run's).
func TestLostCheckpointAnswers(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		lose func(p *db.CheckpointParams) bool
	}{
		{"step", func(p *db.CheckpointParams) bool {
			return p.Outcome == db.OutcomeContinue && len(p.Steps) == 1 && p.Steps[0].Key == "a"
		}},
		{"suspend", func(p *db.CheckpointParams) bool { return p.Outcome == db.OutcomeSuspend }},
		{"consume", func(p *db.CheckpointParams) bool { return p.ConsumeEvent != nil }},
		{"end", func(p *db.CheckpointParams) bool { return p.Outcome == db.OutcomeComplete }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
				base := testharness.New(t, testharness.WithBackend(b))
				store := &lostAnswerStore{Store: base.Store, lose: tc.lose}
				h := testharness.New(t, testharness.WithStore(store))
				var aRuns, bRuns atomic.Int32
				workflow.MustRegister(h.Registry, "lost", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
					a, err := workflow.Do(step, "a", func(context.Context) (string, error) { aRuns.Add(1); return "a", nil })
					if err != nil {
						return "", err
					}
					if err := step.Sleep("nap", time.Minute); err != nil {
						return "", err
					}
					e, err := workflow.WaitForEvent[string](step, "go", workflow.WaitOptions{Type: "go", Timeout: time.Hour})
					if err != nil {
						return "", err
					}
					return workflow.Do(step, "b", func(context.Context) (string, error) { bRuns.Add(1); return a + e + "b", nil })
				})
				_, err := h.Client.Create(h.Context(), "lost", dftype.CreateRequest{ID: "x"})
				require.NoError(t, err)
				// The event is buffered before the run waits for it, so the
				// run consumes it in a checkpoint of its own.
				h.SendEvent("lost", "x", "go", "e")
				for range 10 {
					h.RunDue()
					h.Advance(time.Minute)
					if task, err := h.Store.TaskGet(h.Context(), db.InstanceRef{WorkflowName: "lost", ID: "x"}); err == nil {
						require.Zero(t, task.LeaseLosses, "a hand-back after a lost answer counted a lease loss")
					}
					if h.Status("lost", "x").Status.Terminal() {
						break
					}
				}
				require.True(t, store.lost.Load(), "no answer was lost")
				var out string
				h.RequireOutput("lost", "x", &out)
				require.Equal(t, "aeb", out)
				require.Equal(t, int32(1), aRuns.Load(), "step a ran again")
				require.Equal(t, int32(1), bRuns.Load(), "step b ran again")
			})
		})
	}
}
