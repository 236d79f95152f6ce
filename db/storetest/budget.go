package storetest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
)

// payload returns a JSON string of exactly n bytes (n >= 2).
func payload(n int) json.RawMessage {
	return json.RawMessage(`"` + strings.Repeat("x", n-2) + `"`)
}

// testPayloadBudget pins the byte budget of the lists (InstanceList,
// StepList and EventList PayloadBudget, InstanceList OmitPayloads): a row
// carries its payloads while those of the rows before it in the page add up
// to less than the budget, the first always; the others come in order,
// without them, flagged, and otherwise whole.
func testPayloadBudget(t *testing.T, newStore func(t *testing.T) db.Store) {
	t.Run("InstanceList", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		// i0..i4, i4 newest: params of 100 bytes, and i3 metadata of 50.
		for i := range 5 {
			p := &db.InstanceCreateParams{
				WorkflowName: workflowName, ID: fmt.Sprintf("i%d", i), Params: payload(100),
				Now: new(b.at(time.Duration(i) * time.Second)),
			}
			if i == 3 {
				p.Metadata = payload(50)
			}
			_, err := b.store.InstanceCreate(b.ctx, p)
			require.NoError(t, err)
		}
		whole, err := b.store.InstanceList(b.ctx, &db.InstanceListParams{Limit: 10})
		require.NoError(t, err)
		require.Equal(t, []string{"i4", "i3", "i2", "i1", "i0"}, ids(whole))

		list := func(p db.InstanceListParams) []*db.Instance {
			t.Helper()
			page, err := b.store.InstanceList(b.ctx, &p)
			require.NoError(t, err)
			require.Equal(t, ids(whole[:len(page)]), ids(page), "the budget changes no order")
			return page
		}
		// requireKept checks that the first kept rows of page are whole and
		// the others whole but for their payloads, which are flagged.
		requireKept := func(page []*db.Instance, kept int) {
			t.Helper()
			for i, inst := range page {
				want := *whole[i]
				if i >= kept {
					want.Params, want.Metadata, want.Output, want.ErrorMessage = nil, nil, nil, ""
					want.PayloadsOmitted = true
				}
				require.Equal(t, &want, inst, "row %d (%s)", i, inst.ID)
			}
		}
		// Before each row: i4 0, i3 100, i2 250, i1 350.
		requireKept(list(db.InstanceListParams{Limit: 10, PayloadBudget: 250}), 2)
		requireKept(list(db.InstanceListParams{Limit: 10, PayloadBudget: 251}), 3)
		requireKept(list(db.InstanceListParams{Limit: 10, PayloadBudget: 1}), 1)
		requireKept(list(db.InstanceListParams{Limit: 10, PayloadBudget: 1 << 30}), 5)
		requireKept(list(db.InstanceListParams{Limit: 2, PayloadBudget: 1}), 1)
		requireKept(list(db.InstanceListParams{Limit: 10, OmitPayloads: true}), 0)
		requireKept(list(db.InstanceListParams{Limit: 10, OmitPayloads: true, PayloadBudget: 1 << 30}), 0)

		// The budget counts from the page's own first row, after a cursor,
		// and with the filters.
		page := list(db.InstanceListParams{Limit: 10, PayloadBudget: 150})
		require.Len(t, page, 5)
		cur := &db.InstanceCursor{UpdatedAt: page[1].UpdatedAt, WorkflowName: page[1].WorkflowName, ID: page[1].ID}
		next, err := b.store.InstanceList(b.ctx, &db.InstanceListParams{Limit: 10, PayloadBudget: 150, Cursor: cur})
		require.NoError(t, err)
		require.Equal(t, []string{"i2", "i1", "i0"}, ids(next))
		require.Equal(t, whole[2], next[0])
		require.Equal(t, whole[3], next[1])
		require.True(t, next[2].PayloadsOmitted)
		filtered, err := b.store.InstanceList(b.ctx, &db.InstanceListParams{WorkflowName: workflowName, Namespace: "default", Limit: 10, PayloadBudget: 1})
		require.NoError(t, err)
		require.Len(t, filtered, 5)
		require.False(t, filtered[0].PayloadsOmitted)
		require.True(t, filtered[1].PayloadsOmitted)
	})

	t.Run("StepList", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		task := b.claim(t, "a")
		// s0, s1: results of 100 bytes; s2: an error of 60 bytes; s3: 100.
		p := b.checkpoint(task)
		for i, w := range []db.StepWrite{
			{Result: payload(100)}, {Result: payload(100)},
			{Status: db.StepStatusErrored, ErrorName: "E", ErrorMessage: strings.Repeat("m", 60)}, {Result: payload(100)},
		} {
			w.Key, w.Type = fmt.Sprintf("s%d", i), db.StepTypeDo
			if w.Status == "" {
				w.Status = db.StepStatusComplete
			}
			p.Steps = append(p.Steps, w)
		}
		_, err := b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		whole := b.steps(t, "a", 1)
		require.Len(t, whole, 4)

		requireKept := func(budget, limit, kept int, after int64) {
			t.Helper()
			page, err := b.store.StepList(b.ctx, &db.StepListParams{
				WorkflowName: workflowName, InstanceID: "a", RunNumber: 1, AfterID: after, Limit: limit, PayloadBudget: budget,
			})
			require.NoError(t, err)
			var from []*db.Step
			for _, s := range whole {
				if s.ID > after {
					from = append(from, s)
				}
			}
			if limit > 0 && len(from) > limit {
				from = from[:limit]
			}
			require.Len(t, page, len(from))
			for i, step := range page {
				want := *from[i]
				if i >= kept {
					want.Result, want.ErrorMessage, want.PayloadsOmitted = nil, "", true
				}
				require.Equal(t, &want, step, "budget %d, row %d", budget, i)
			}
		}
		// Before each step: s0 0, s1 100, s2 200, s3 260.
		requireKept(200, 10, 2, 0)
		requireKept(201, 10, 3, 0)
		requireKept(261, 10, 4, 0)
		requireKept(1, 10, 1, 0)
		requireKept(1, 0, 1, 0)
		requireKept(101, 2, 2, 0)
		requireKept(61, 10, 2, whole[1].ID)
	})

	t.Run("EventList", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		for range 3 {
			b.send(t, "a", "e", string(payload(100)))
		}
		_, err := b.store.InstanceRestart(b.ctx, b.change("a"))
		require.NoError(t, err)
		b.send(t, "a", "e", string(payload(100)))
		b.send(t, "a", "e", string(payload(100)))

		requireKept := func(run, budget, limit, kept, rows int) {
			t.Helper()
			whole := b.events(t, "a", run)
			page, err := b.store.EventList(b.ctx, &db.EventListParams{
				WorkflowName: workflowName, InstanceID: "a", RunNumber: run, Limit: limit, PayloadBudget: budget,
			})
			require.NoError(t, err)
			require.Len(t, page, rows)
			for i, ev := range page {
				want := *whole[i]
				if i >= kept {
					want.Payload, want.PayloadOmitted = nil, true
				}
				require.Equal(t, &want, ev, "run %d, budget %d, row %d", run, budget, i)
			}
		}
		requireKept(0, 200, 10, 2, 5)
		requireKept(0, 201, 10, 3, 5)
		requireKept(0, 1, 2, 1, 2)
		requireKept(1, 150, 0, 2, 3)
		requireKept(2, 1, 10, 1, 2)
		requireKept(2, 1<<30, 10, 2, 2)
	})
}
