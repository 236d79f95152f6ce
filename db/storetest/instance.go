package storetest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
)

func testInstance(t *testing.T, newStore func(t *testing.T) db.Store) {
	t.Run("CreateInsertsQueuedInstanceAndDueTask", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)

		// Whitespace and key order must survive: replay sees what the first run saw.
		params := "{\"z\": 1,  \"a\" : [1, 2.50, \"\\u00e9\"]}\n"
		instRes, err := b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{
			WorkflowName: workflowName,
			ID:           "inv-1",
			Params:       json.RawMessage(params),
			Now:          new(b.now),
		})
		require.NoError(t, err)
		inst := instRes.Instance
		require.Equal(t, workflowName, inst.WorkflowName)
		require.Equal(t, "inv-1", inst.ID)
		require.Equal(t, dftype.StatusQueued, inst.Status)
		requireJSON(t, params, inst.Params)
		require.Nil(t, inst.Output)
		require.Equal(t, 1, inst.RunNumber)
		require.False(t, inst.PauseRequested)
		requireTime(t, b.now, inst.CreatedAt)
		requireTime(t, b.now, inst.UpdatedAt)
		require.Nil(t, inst.StartedAt)
		require.Nil(t, inst.CompletedAt)

		got := b.get(t, "inv-1")
		require.Equal(t, inst, got)
		requireJSON(t, params, got.Params)

		task := b.task(t, "inv-1")
		require.Equal(t, db.TaskKindRun, task.Kind)
		require.Equal(t, db.TaskStatusPending, task.Status)
		require.Equal(t, 1, task.RunNumber)
		require.Equal(t, int64(0), task.Version)
		require.Equal(t, 0, task.Attempts)
		requireTime(t, b.now, task.RunAt)
		require.Empty(t, task.LockOwner)
		require.Nil(t, task.LockedUntil)
	})

	t.Run("CreateWithoutParamsOrNow", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)

		instRes, err := b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{WorkflowName: workflowName, ID: "a"})
		require.NoError(t, err)
		inst := instRes.Instance
		require.Nil(t, inst.Params)
		require.False(t, inst.CreatedAt.IsZero(), "database clock used")
		require.Equal(t, time.UTC, inst.CreatedAt.Location())
		require.Nil(t, b.get(t, "a").Params)
	})

	t.Run("MetadataIsKeptByteForByte", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		meta := json.RawMessage(`{"trigger": {"type":"http", "requestId":"r-1"},  "flowVersion":"1.10.0"}`)
		instRes, err := b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{
			WorkflowName: workflowName, ID: "m", Params: json.RawMessage(`{}`), Metadata: meta, Now: new(b.now),
		})
		require.NoError(t, err)
		inst := instRes.Instance
		require.Equal(t, string(meta), string(inst.Metadata))
		require.Equal(t, string(meta), string(b.get(t, "m").Metadata))
		require.Nil(t, b.create(t, "plain").Metadata, "no metadata stays NULL")

		createdRes, err := b.store.InstanceCreateMany(b.ctx, &db.InstanceCreateManyParams{
			WorkflowName: workflowName, Now: new(b.now),
			Instances: []db.InstanceCreateItem{{ID: "m1", Metadata: meta}, {ID: "m2"}},
		})
		require.NoError(t, err)
		created := instances(createdRes)
		require.Len(t, created, 2)
		require.Equal(t, string(meta), string(created[0].Metadata))
		require.Nil(t, created[1].Metadata)
		require.Equal(t, string(meta), string(b.get(t, "m1").Metadata))
	})

	t.Run("CreateDuplicate", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		first := b.create(t, "dup")

		_, err := b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{
			WorkflowName: workflowName,
			ID:           "dup",
			Params:       json.RawMessage(`{"second":true}`),
			Now:          new(b.at(time.Minute)),
		})
		require.ErrorIs(t, err, db.ErrAlreadyExists)
		require.Equal(t, first, b.get(t, "dup"), "the existing instance is untouched")

		// The same id under another workflow is another instance.
		b.createAt(t, otherName, "dup", b.now)
	})

	t.Run("GetNotFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.createAt(t, otherName, "x", b.now)

		_, err := b.store.InstanceGet(b.ctx, db.InstanceRef{WorkflowName: workflowName, ID: "x"})
		require.ErrorIs(t, err, db.ErrNotFound)
		_, err = b.store.TaskGet(b.ctx, db.InstanceRef{WorkflowName: workflowName, ID: "x"})
		require.ErrorIs(t, err, db.ErrNotFound)
		_, err = b.store.RunLoad(b.ctx, db.InstanceRef{WorkflowName: workflowName, ID: "x"})
		require.ErrorIs(t, err, db.ErrNotFound)
	})

	t.Run("CreateManySkipsExistingAndKeepsInputOrder", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		existing := b.create(t, "b")

		createdRes, err := b.store.InstanceCreateMany(b.ctx, &db.InstanceCreateManyParams{
			WorkflowName: workflowName,
			Instances: []db.InstanceCreateItem{
				{ID: "c", Params: json.RawMessage(`{"n": 3}`)},
				{ID: "b", Params: json.RawMessage(`{"n": 2}`)},
				{ID: "a"},
				{ID: "c", Params: json.RawMessage(`{"n": "again"}`)},
			},
			Now: new(b.at(time.Second)),
		})
		require.NoError(t, err)
		created := instances(createdRes)
		require.Equal(t, []string{"c", "a"}, ids(created))
		requireJSON(t, `{"n": 3}`, created[0].Params)
		require.Nil(t, created[1].Params)
		for _, inst := range created {
			require.Equal(t, dftype.StatusQueued, inst.Status)
			require.Equal(t, 1, inst.RunNumber)
			requireTime(t, b.at(time.Second), inst.CreatedAt)

			task := b.task(t, inst.ID)
			require.Equal(t, db.TaskKindRun, task.Kind)
			require.Equal(t, db.TaskStatusPending, task.Status)
			requireTime(t, b.at(time.Second), task.RunAt)
		}
		require.Equal(t, existing, b.get(t, "b"), "existing instance untouched")
		requireJSON(t, `{"n": 3}`, b.get(t, "c").Params)

		createdRes, err = b.store.InstanceCreateMany(b.ctx, &db.InstanceCreateManyParams{
			WorkflowName: workflowName,
			Instances:    []db.InstanceCreateItem{{ID: "a"}, {ID: "b"}},
			Now:          new(b.now),
		})
		require.NoError(t, err)
		created = instances(createdRes)
		require.Empty(t, created)

		createdRes, err = b.store.InstanceCreateMany(b.ctx, &db.InstanceCreateManyParams{WorkflowName: workflowName})
		require.NoError(t, err)
		created = instances(createdRes)
		require.Empty(t, created)
	})

	t.Run("RunLoadReturnsCurrentRunSteps", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "r")
		task := b.claim(t, "r")
		p := b.checkpoint(task)
		p.Steps = []db.StepWrite{
			{Key: "one", Type: db.StepTypeDo, Status: db.StepStatusComplete, Attempts: 1, Result: json.RawMessage(`1`)},
			{Key: "two", Type: db.StepTypeDo, Status: db.StepStatusComplete, Attempts: 1, Result: json.RawMessage(`2`)},
		}
		_, err := b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)

		state, err := b.store.RunLoad(b.ctx, db.InstanceRef{WorkflowName: workflowName, ID: "r"})
		require.NoError(t, err)
		require.Equal(t, dftype.StatusRunning, state.Instance.Status)
		require.Len(t, state.Steps, 2)
		requireJSON(t, `2`, state.Steps["two"].Result)
		require.Equal(t, "two", state.Steps["two"].Key)

		_, err = b.store.InstanceRestart(b.ctx, b.change("r"))
		require.NoError(t, err)
		state, err = b.store.RunLoad(b.ctx, db.InstanceRef{WorkflowName: workflowName, ID: "r"})
		require.NoError(t, err)
		require.Equal(t, 2, state.Instance.RunNumber)
		require.Empty(t, state.Steps, "steps of the old run are not replayed")
		require.Len(t, b.steps(t, "r", 1), 2, "old run kept for audit")
	})
}

func testInstanceList(t *testing.T, newStore func(t *testing.T) db.Store) {
	// Instances i0..i5 updated one second apart (i5 newest), i2 and i4 paused
	// later, plus one instance of another workflow.
	setupList := func(t *testing.T) *testBundle {
		b := setup(t, newStore)
		for i := range 6 {
			b.createAt(t, workflowName, fmt.Sprintf("i%d", i), b.at(time.Duration(i)*time.Second))
		}
		b.createAt(t, otherName, "o1", b.at(3*time.Second+time.Millisecond))
		return b
	}

	pages := func(t *testing.T, b *testBundle, p db.InstanceListParams) [][]string {
		t.Helper()
		var out [][]string
		for range 20 {
			page, err := b.store.InstanceList(b.ctx, &p)
			require.NoError(t, err)
			if len(page) == 0 {
				return out
			}
			out = append(out, ids(page))
			last := page[len(page)-1]
			p.Cursor = &db.InstanceCursor{UpdatedAt: last.UpdatedAt, WorkflowName: last.WorkflowName, ID: last.ID}
		}
		require.FailNow(t, "pagination does not end")
		return nil
	}

	t.Run("NewestFirstAcrossPages", func(t *testing.T) {
		t.Parallel()
		b := setupList(t)
		require.Equal(t, [][]string{{"i5", "i4"}, {"i3", "i2"}, {"i1", "i0"}},
			pages(t, b, db.InstanceListParams{WorkflowName: workflowName, Limit: 2}))
		require.Equal(t, [][]string{{"i5", "i4", "o1", "i3"}, {"i2", "i1", "i0"}},
			pages(t, b, db.InstanceListParams{Limit: 4}), "every workflow")
	})

	t.Run("StatusFilter", func(t *testing.T) {
		t.Parallel()
		b := setupList(t)
		for _, id := range []string{"i4", "i2"} {
			p := b.change(id)
			p.Now = new(b.at(time.Minute))
			_, err := b.store.InstancePause(b.ctx, p)
			require.NoError(t, err)
		}
		require.Equal(t, [][]string{{"i4"}, {"i2"}},
			pages(t, b, db.InstanceListParams{WorkflowName: workflowName, Statuses: []dftype.InstanceStatus{dftype.StatusPaused}, Limit: 1}),
			"same updated_at: ordered by id, newest first")
		require.Equal(t, [][]string{{"i5", "i3", "i1"}, {"i0"}},
			pages(t, b, db.InstanceListParams{WorkflowName: workflowName, Statuses: []dftype.InstanceStatus{dftype.StatusQueued}, Limit: 3}))
		require.Equal(t, [][]string{{"i5", "o1", "i3", "i1", "i0"}},
			pages(t, b, db.InstanceListParams{Statuses: []dftype.InstanceStatus{dftype.StatusQueued, dftype.StatusComplete}}))
		require.Empty(t, pages(t, b, db.InstanceListParams{Statuses: []dftype.InstanceStatus{dftype.StatusErrored}}))
	})

	t.Run("TiesOnUpdatedAtPageByKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		for _, id := range []string{"c", "a", "e", "b", "d"} {
			b.create(t, id)
		}
		b.createAt(t, "aaa", "z", b.now)
		require.Equal(t, [][]string{{"e", "d"}, {"c", "b"}, {"a", "z"}},
			pages(t, b, db.InstanceListParams{Limit: 2}))
	})

	t.Run("DefaultLimit", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		items := make([]db.InstanceCreateItem, 60)
		for i := range items {
			items[i].ID = fmt.Sprintf("id-%02d", i)
		}
		createdRes, err := b.store.InstanceCreateMany(b.ctx, &db.InstanceCreateManyParams{
			WorkflowName: workflowName, Instances: items, Now: new(b.now),
		})
		require.NoError(t, err)
		created := instances(createdRes)
		require.Len(t, created, 60)

		page, err := b.store.InstanceList(b.ctx, &db.InstanceListParams{})
		require.NoError(t, err)
		require.Len(t, page, 50)
		require.Equal(t, "id-59", page[0].ID)
	})
}
