package client_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

type params struct {
	Name string `json:"name"`
}

func setup(t *testing.T, b testharness.Backend) (*testharness.Harness, *workflow.Binding[params, string]) {
	t.Helper()
	h := testharness.New(t, testharness.WithBackend(b))
	greet := workflow.MustRegister(h.Registry, "greet", func(ctx context.Context, ev workflow.Event[params], step workflow.Step) (string, error) {
		return "hello " + ev.Payload.Name, nil
	})
	return h, greet
}

// requireNothingWritten checks that the database holds no instance at all.
func requireNothingWritten(t *testing.T, h *testharness.Harness) {
	t.Helper()
	rows, err := h.Store.InstanceList(context.Background(), &db.InstanceListParams{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, rows)
}

func TestCreate(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h, greet := setup(t, b)
		ctx := h.Context()

		inst, err := greet.Create(ctx, workflow.CreateOptions[params]{ID: "ada", Params: params{Name: "Ada"}})
		require.NoError(t, err)
		require.Equal(t, "ada", inst.ID())
		st, err := inst.Status(ctx)
		require.NoError(t, err)
		require.Equal(t, dftype.StatusQueued, st.Status)
		require.JSONEq(t, `{"name":"Ada"}`, string(st.Info.Params))

		_, err = greet.Create(ctx, workflow.CreateOptions[params]{ID: "ada"})
		require.ErrorIs(t, err, workflow.ErrInstanceAlreadyExists)

		gen, err := greet.Create(ctx, workflow.CreateOptions[params]{Params: params{Name: "Grace"}})
		require.NoError(t, err)
		require.Len(t, gen.ID(), 32, "an empty id is generated")

		h.RunUntilIdle()
		st, err = inst.Status(ctx)
		require.NoError(t, err)
		require.Equal(t, dftype.StatusComplete, st.Status)
		require.Equal(t, "hello Ada", st.Output)

		got, err := greet.Get(ctx, "ada")
		require.NoError(t, err)
		require.Equal(t, "ada", got.ID())
		_, err = greet.Get(ctx, "nobody")
		require.ErrorIs(t, err, workflow.ErrInstanceNotFound)
	})
}

func TestCreateBatchSkipsExisting(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h, greet := setup(t, b)
		ctx := h.Context()
		_, err := greet.Create(ctx, workflow.CreateOptions[params]{ID: "b", Params: params{Name: "original"}})
		require.NoError(t, err)

		created, err := greet.CreateBatch(ctx, []workflow.CreateOptions[params]{
			{ID: "a", Params: params{Name: "A"}},
			{ID: "b", Params: params{Name: "B"}},
			{ID: "c", Params: params{Name: "C"}},
		})
		require.NoError(t, err)
		var ids []string
		for _, c := range created {
			ids = append(ids, c.ID())
		}
		require.Equal(t, []string{"a", "c"}, ids, "the existing id is skipped and left out")
		bInfo := h.Status("greet", "b")
		require.JSONEq(t, `{"name":"original"}`, string(bInfo.Params), "the existing instance is untouched")

		h.RunUntilIdle()
		for _, id := range []string{"a", "b", "c"} {
			h.RequireStatus("greet", id, dftype.StatusComplete)
		}
	})
}

func TestBadInputIsRejectedAndWritesNothing(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h, greet := setup(t, b)
		c := h.Client
		ctx := h.Context()
		big := json.RawMessage(`"` + strings.Repeat("x", workflow.MaxPayloadBytes) + `"`)

		cases := []struct {
			name string
			call func() error
			want error
		}{
			{"unknown workflow", func() error {
				_, err := c.Create(ctx, "nope", dftype.CreateRequest{ID: "x"})
				return err
			}, workflow.ErrWorkflowNotFound},
			{"invalid workflow name", func() error {
				_, err := c.Create(ctx, "bad name!", dftype.CreateRequest{ID: "x"})
				return err
			}, workflow.ErrInvalidWorkflowName},
			{"invalid id chars", func() error {
				_, err := greet.Create(ctx, workflow.CreateOptions[params]{ID: "no spaces"})
				return err
			}, workflow.ErrInvalidInstanceID},
			{"id starting with dash", func() error {
				_, err := greet.Create(ctx, workflow.CreateOptions[params]{ID: "-x"})
				return err
			}, workflow.ErrInvalidInstanceID},
			{"id too long", func() error {
				_, err := greet.Create(ctx, workflow.CreateOptions[params]{ID: strings.Repeat("a", 101)})
				return err
			}, workflow.ErrInvalidInstanceID},
			{"params too large", func() error {
				_, err := c.Create(ctx, "greet", dftype.CreateRequest{ID: "x", Params: big})
				return err
			}, workflow.ErrPayloadTooLarge},
			{"params not JSON", func() error {
				_, err := c.Create(ctx, "greet", dftype.CreateRequest{ID: "x", Params: json.RawMessage(`{nope`)})
				return err
			}, workflow.ErrInvalidRequest},
			{"batch too large", func() error {
				reqs := make([]dftype.CreateRequest, workflow.MaxBatchSize+1)
				for i := range reqs {
					reqs[i].ID = "id" + strings.Repeat("x", i%5)
				}
				_, err := c.CreateBatch(ctx, "greet", reqs)
				return err
			}, workflow.ErrInvalidRequest},
			{"batch with one bad id writes none", func() error {
				_, err := c.CreateBatch(ctx, "greet", []dftype.CreateRequest{{ID: "good"}, {ID: "bad id"}})
				return err
			}, workflow.ErrInvalidInstanceID},
			{"batch with duplicate ids", func() error {
				_, err := c.CreateBatch(ctx, "greet", []dftype.CreateRequest{{ID: "same"}, {ID: "same"}})
				return err
			}, workflow.ErrInvalidRequest},
			{"event for unknown instance", func() error {
				return c.SendEvent(ctx, "greet", "ghost", "evt", nil)
			}, workflow.ErrInstanceNotFound},
			{"pause unknown instance", func() error {
				_, err := c.Pause(ctx, "greet", "ghost")
				return err
			}, workflow.ErrInstanceNotFound},
			{"list with unknown status", func() error {
				_, err := c.List(ctx, client.ListParams{Statuses: []dftype.InstanceStatus{"sleepy"}})
				return err
			}, workflow.ErrInvalidRequest},
			{"list with malformed cursor", func() error {
				_, err := c.List(ctx, client.ListParams{Cursor: "%%%"})
				return err
			}, workflow.ErrInvalidRequest},
		}
		for _, tc := range cases {
			err := tc.call()
			require.ErrorIs(t, err, tc.want, tc.name)
			require.NotEmpty(t, err.Error())
		}
		requireNothingWritten(t, h)

		// Events: invalid types and payloads are refused and stored nowhere.
		_, err := greet.Create(ctx, workflow.CreateOptions[params]{ID: "e"})
		require.NoError(t, err)
		require.ErrorIs(t, c.SendEvent(ctx, "greet", "e", "bad type", nil), workflow.ErrInvalidEventType)
		require.ErrorIs(t, c.SendEvent(ctx, "greet", "e", strings.Repeat("t", 101), nil), workflow.ErrInvalidEventType)
		require.ErrorIs(t, c.SendEvent(ctx, "greet", "e", "ok", big), workflow.ErrPayloadTooLarge)
		require.ErrorIs(t, c.SendEvent(ctx, "greet", "e", "ok", json.RawMessage("{")), workflow.ErrInvalidRequest)
		hist := h.History("greet", "e")
		require.Empty(t, hist.Events)
	})
}

func TestListPaginates(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h, greet := setup(t, b)
		ctx := h.Context()
		for i := range 7 {
			_, err := greet.Create(ctx, workflow.CreateOptions[params]{ID: string(rune('a' + i))})
			require.NoError(t, err)
			h.Advance(1)
		}
		seen := map[string]bool{}
		cursor := ""
		pages := 0
		for {
			res, err := h.Client.List(ctx, client.ListParams{WorkflowName: "greet", PageSize: 3, Cursor: cursor})
			require.NoError(t, err)
			pages++
			for _, inst := range res.Instances {
				require.False(t, seen[inst.ID], "instance %s listed twice", inst.ID)
				seen[inst.ID] = true
			}
			if res.NextCursor == "" {
				break
			}
			cursor = res.NextCursor
		}
		require.Equal(t, 3, pages)
		require.Len(t, seen, 7)

		res, err := h.Client.List(ctx, client.ListParams{Statuses: []dftype.InstanceStatus{dftype.StatusComplete}})
		require.NoError(t, err)
		require.Empty(t, res.Instances)
	})
}

func TestCreateRecordsMetadata(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h, _ := setup(t, b)
		meta := json.RawMessage(`{"trigger":{"type":"http","requestId":"req-1"}}`)
		info, err := h.Client.Create(h.Context(), "greet", dftype.CreateRequest{ID: "a", Metadata: meta})
		require.NoError(t, err)
		require.JSONEq(t, string(meta), string(info.Metadata))
		require.JSONEq(t, string(meta), string(h.Status("greet", "a").Metadata))
		_, err = h.Client.Create(h.Context(), "greet", dftype.CreateRequest{ID: "b", Metadata: json.RawMessage(`{`)})
		require.ErrorIs(t, err, workflow.ErrInvalidRequest)
	})
}
