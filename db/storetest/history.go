package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
)

func testHistory(t *testing.T, newStore func(t *testing.T) db.Store) {
	t.Run("StepIDsAndPages", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		b.createAt(t, workflowName, "other", b.at(time.Second))
		task := b.claim(t, "a")

		// s0..s4 over three checkpoints, with a step of another instance
		// between them, so that ids are not consecutive.
		write := func(task *db.Task, keys ...string) {
			p := b.checkpoint(task)
			for _, key := range keys {
				p.Steps = append(p.Steps, db.StepWrite{Key: key, Type: db.StepTypeDo, Status: db.StepStatusComplete, Result: json.RawMessage(`1`)})
			}
			_, err := b.store.Checkpoint(b.ctx, p)
			require.NoError(t, err)
		}
		write(task, "s0", "s1")
		other := b.claimIDAt(t, "other", b.at(time.Second))
		write(other, "x")
		write(task, "s2")
		write(task, "s3", "s4")

		all := b.steps(t, "a", 1)
		require.Equal(t, []string{"s0", "s1", "s2", "s3", "s4"}, stepKeys(all))
		require.NotZero(t, all[0].ID)
		for i := 1; i < len(all); i++ {
			require.Greater(t, all[i].ID, all[i-1].ID, "ids follow creation order")
		}
		state, err := b.store.RunLoad(b.ctx, db.InstanceRef{WorkflowName: workflowName, ID: "a"})
		require.NoError(t, err)
		for _, step := range all {
			require.Equal(t, step, state.Steps[step.Key], "RunLoad fills the id too")
		}

		require.Equal(t, [][]string{{"s0", "s1"}, {"s2", "s3"}, {"s4"}}, stepPages(t, b, "a", 1, 2))
		require.Equal(t, [][]string{{"s0", "s1", "s2", "s3", "s4"}}, stepPages(t, b, "a", 1, 5))
		require.Equal(t, [][]string{{"s0", "s1", "s2", "s3", "s4"}}, stepPages(t, b, "a", 1, 0), "limit 0 lists every step")

		page, err := b.store.StepList(b.ctx, &db.StepListParams{
			WorkflowName: workflowName, InstanceID: "a", RunNumber: 1, AfterID: all[1].ID,
		})
		require.NoError(t, err)
		require.Equal(t, all[2:], page, "after an id, without a limit")
		page, err = b.store.StepList(b.ctx, &db.StepListParams{
			WorkflowName: workflowName, InstanceID: "a", RunNumber: 1, AfterID: all[4].ID, Limit: 10,
		})
		require.NoError(t, err)
		require.Empty(t, page)

		// Overwriting a step keeps its id and its place.
		p := b.checkpoint(task)
		p.Now = b.at(time.Second)
		p.Steps = []db.StepWrite{{Key: "s1", Type: db.StepTypeDo, Status: db.StepStatusErrored, ErrorName: "E"}}
		_, err = b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		again := b.steps(t, "a", 1)
		require.Equal(t, all[1].ID, again[1].ID)
		require.Equal(t, db.StepStatusErrored, again[1].Status)

		// Another run pages on its own.
		_, err = b.store.InstanceRestart(b.ctx, b.change("a"))
		require.NoError(t, err)
		task = b.claim(t, "a")
		write(task, "r2")
		require.Equal(t, [][]string{{"r2"}}, stepPages(t, b, "a", 2, 2))
		require.Equal(t, [][]string{{"s0", "s1"}, {"s2", "s3"}, {"s4"}}, stepPages(t, b, "a", 1, 2))
		require.Greater(t, b.steps(t, "a", 2)[0].ID, all[4].ID)
	})

	t.Run("EventPages", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		b.create(t, "other")
		b.send(t, "a", "e", `1`)
		b.send(t, "other", "e", `0`)
		b.send(t, "a", "e", `2`)
		_, err := b.store.InstanceRestart(b.ctx, b.change("a"))
		require.NoError(t, err)
		b.send(t, "a", "e", `3`)
		b.send(t, "a", "e", `4`)
		b.send(t, "a", "e", `5`)

		all := b.events(t, "a", 0)
		require.Equal(t, []string{"1", "2", "3", "4", "5"}, eventPayloads(all))
		for i := 1; i < len(all); i++ {
			require.Greater(t, all[i].ID, all[i-1].ID)
		}

		require.Equal(t, [][]string{{"1", "2"}, {"3", "4"}, {"5"}}, eventPages(t, b, "a", 0, 2), "every run")
		require.Equal(t, [][]string{{"1", "2", "3", "4", "5"}}, eventPages(t, b, "a", 0, 0), "limit 0 lists every event")
		require.Equal(t, [][]string{{"1"}, {"2"}}, eventPages(t, b, "a", 1, 1))
		require.Equal(t, [][]string{{"3", "4"}, {"5"}}, eventPages(t, b, "a", 2, 2))
		require.Empty(t, eventPages(t, b, "a", 3, 2))

		page, err := b.store.EventList(b.ctx, &db.EventListParams{
			WorkflowName: workflowName, InstanceID: "a", AfterID: all[1].ID, Limit: 2,
		})
		require.NoError(t, err)
		require.Equal(t, all[2:4], page, "a page across runs")
		page, err = b.store.EventList(b.ctx, &db.EventListParams{
			WorkflowName: workflowName, InstanceID: "a", RunNumber: 2, AfterID: all[0].ID,
		})
		require.NoError(t, err)
		require.Equal(t, all[2:], page, "an id of another run is only a position")
	})
}

// stepPages pages through the steps of one run, limit at a time, and returns
// the step keys of each page.
func stepPages(t *testing.T, b *testBundle, id string, run, limit int) [][]string {
	t.Helper()
	p := db.StepListParams{WorkflowName: workflowName, InstanceID: id, RunNumber: run, Limit: limit}
	var out [][]string
	for range 20 {
		page, err := b.store.StepList(b.ctx, &p)
		require.NoError(t, err)
		if len(page) == 0 {
			return out
		}
		if limit > 0 {
			require.LessOrEqual(t, len(page), limit)
		}
		out = append(out, stepKeys(page))
		p.AfterID = page[len(page)-1].ID
	}
	require.FailNow(t, "pagination does not end")
	return nil
}

// eventPages pages through the events of an instance (run 0: every run),
// limit at a time, and returns the payloads of each page.
func eventPages(t *testing.T, b *testBundle, id string, run, limit int) [][]string {
	t.Helper()
	p := db.EventListParams{WorkflowName: workflowName, InstanceID: id, RunNumber: run, Limit: limit}
	var out [][]string
	for range 20 {
		page, err := b.store.EventList(b.ctx, &p)
		require.NoError(t, err)
		if len(page) == 0 {
			return out
		}
		if limit > 0 {
			require.LessOrEqual(t, len(page), limit)
		}
		out = append(out, eventPayloads(page))
		p.AfterID = page[len(page)-1].ID
	}
	require.FailNow(t, "pagination does not end")
	return nil
}

func stepKeys(list []*db.Step) []string {
	out := make([]string, len(list))
	for i, step := range list {
		out[i] = step.Key
	}
	return out
}

func eventPayloads(list []*db.Event) []string {
	out := make([]string, len(list))
	for i, ev := range list {
		out[i] = string(ev.Payload)
	}
	return out
}
