package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// countingStore counts the payload bytes the lists of the store return,
// which is what a read holds: params, metadata, outputs and error messages
// of instances, results and error messages of steps, event payloads.
type countingStore struct {
	db.Store
	mu    sync.Mutex
	bytes int
}

func (s *countingStore) add(n int) {
	s.mu.Lock()
	s.bytes += n
	s.mu.Unlock()
}

// take returns the bytes counted since the last take.
func (s *countingStore) take() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.bytes
	s.bytes = 0
	return n
}

func (s *countingStore) InstanceList(ctx context.Context, p *db.InstanceListParams) ([]*db.Instance, error) {
	rows, err := s.Store.InstanceList(ctx, p)
	for _, r := range rows {
		s.add(len(r.Params) + len(r.Metadata) + len(r.Output) + len(r.ErrorMessage))
	}
	return rows, err
}

func (s *countingStore) StepList(ctx context.Context, p *db.StepListParams) ([]*db.Step, error) {
	rows, err := s.Store.StepList(ctx, p)
	for _, r := range rows {
		s.add(len(r.Result) + len(r.ErrorMessage))
	}
	return rows, err
}

func (s *countingStore) EventList(ctx context.Context, p *db.EventListParams) ([]*db.Event, error) {
	rows, err := s.Store.EventList(ctx, p)
	for _, r := range rows {
		s.add(len(r.Payload))
	}
	return rows, err
}

// bigValue is a JSON string of n bytes.
func bigValue(n int) json.RawMessage {
	return json.RawMessage(`"` + strings.Repeat("x", n-2) + `"`)
}

// TestListHoldsItsByteBudget: a page of instances reads no more payload
// bytes than its budget and one instance's, however many instances its
// page size asks for (the list used to read every instance of the page
// whole: 6 MiB here), and paging on with its cursor returns every instance
// once, in order.
func TestListHoldsItsByteBudget(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		workflow.MustRegister(h.Registry, "big", func(ctx context.Context, ev workflow.Event[json.RawMessage], step workflow.Step) (string, error) {
			return "", nil
		})
		const n, size = 30, 200 << 10
		for i := range n {
			_, err := h.Client.Create(h.Context(), "big", dftype.CreateRequest{ID: fmt.Sprintf("b%02d", i), Params: bigValue(size)})
			require.NoError(t, err)
			h.Advance(1) // one update time each: the list's order is theirs
		}
		store := &countingStore{Store: h.Store}
		c, err := client.New(&client.Config{Store: store, Registry: h.Registry, Clock: h.Clock})
		require.NoError(t, err)

		for _, tc := range []struct {
			budget, perPage int
		}{
			{0, client.DefaultPagePayloadBytes/size + 1},
			{500 << 10, 3},
			{1, 1},
		} {
			var seen []string
			p := client.ListParams{WorkflowName: "big", PageSize: 1000, MaxPayloadBytes: tc.budget}
			for range n + 1 {
				page, err := c.List(h.Context(), p)
				require.NoError(t, err)
				held := store.take()
				require.LessOrEqual(t, held, cmp(tc.budget, client.DefaultPagePayloadBytes)+size, "budget %d", tc.budget)
				require.LessOrEqual(t, len(page.Instances), tc.perPage)
				for _, in := range page.Instances {
					require.Len(t, in.Params, size, "every instance of a page is whole")
					seen = append(seen, in.ID)
				}
				if page.NextCursor == "" {
					break
				}
				p.Cursor = page.NextCursor
			}
			want := make([]string, n)
			for i := range want {
				want[i] = fmt.Sprintf("b%02d", n-1-i)
			}
			require.Equal(t, want, seen, "budget %d", tc.budget)
		}

		// Without payloads the page is whole and reads none.
		page, err := c.List(h.Context(), client.ListParams{WorkflowName: "big", PageSize: 1000, OmitPayloads: true})
		require.NoError(t, err)
		require.Len(t, page.Instances, n)
		require.Empty(t, page.NextCursor)
		require.Zero(t, store.take())
		require.Nil(t, page.Instances[0].Params)

		_, err = c.List(h.Context(), client.ListParams{MaxPayloadBytes: -1})
		require.ErrorIs(t, err, workflow.ErrInvalidRequest)
	})
}

// TestHistoryHoldsItsByteBudget: a page of history reads no more payload
// bytes (step results, then event payloads) than its budget and one step's
// or event's, whatever its page size (it used to read every step and
// event of the page whole: 10 MiB here), and paging on returns every step
// and event once, in order.
func TestHistoryHoldsItsByteBudget(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		const steps, events, size = 25, 25, 200 << 10
		workflow.MustRegister(h.Registry, "big", func(ctx context.Context, ev workflow.Event[json.RawMessage], step workflow.Step) (string, error) {
			for i := range steps {
				if _, err := workflow.Do(step, fmt.Sprintf("s%02d", i), func(ctx context.Context) (json.RawMessage, error) {
					return bigValue(size), nil
				}); err != nil {
					return "", err
				}
			}
			return workflow.WaitForEvent[string](step, "wait", workflow.WaitOptions{Type: "go"})
		})
		_, err := h.Client.Create(h.Context(), "big", dftype.CreateRequest{ID: "h"})
		require.NoError(t, err)
		h.RunUntilIdle()
		for range events {
			require.NoError(t, h.Client.SendEvent(h.Context(), "big", "h", "other", bigValue(size)))
		}
		store := &countingStore{Store: h.Store}
		c, err := client.New(&client.Config{Store: store, Registry: h.Registry, Clock: h.Clock})
		require.NoError(t, err)

		for _, tc := range []struct {
			budget, pageSize int
		}{{0, 1000}, {0, 0}, {700 << 10, 1000}, {1, 7}} {
			var gotSteps []string
			gotEvents := 0
			p := client.HistoryParams{PageSize: tc.pageSize, MaxPayloadBytes: tc.budget}
			pages := 0
			for ; pages <= steps+events; pages++ {
				page, err := c.History(h.Context(), "big", "h", p)
				require.NoError(t, err)
				require.LessOrEqual(t, store.take(), cmp(tc.budget, client.DefaultPagePayloadBytes)+size, "budget %d", tc.budget)
				for _, s := range page.Steps {
					if s.Type == "do" {
						require.Len(t, s.Result, size)
					}
					gotSteps = append(gotSteps, s.Name)
				}
				for _, e := range page.Events {
					require.Len(t, e.Payload, size)
					gotEvents++
				}
				if page.NextCursor == "" {
					break
				}
				p.Cursor = page.NextCursor
			}
			require.Len(t, gotSteps, steps+1, "budget %d", tc.budget)
			for i := range steps {
				require.Equal(t, fmt.Sprintf("s%02d", i), gotSteps[i])
			}
			require.Equal(t, events, gotEvents, "budget %d", tc.budget)
			if tc.budget == 1 {
				// One step or event of 200 KiB a page; the wait, which
				// has no result, shares the first event's.
				require.Equal(t, steps+events, pages+1)
			}
		}
	})
}

// cmp is v, or def for 0.
func cmp(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}
