package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/internal/wfcore"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// metadataRecorder is a MetadataFunc that records its calls and stamps the
// metadata with the call number.
type metadataRecorder struct {
	mu    sync.Mutex
	calls []string // "<workflow> <metadata as given>"
	err   error
	// register, when set, is called before anything else (a flow registry
	// loading a workflow it has not registered yet).
	register func(name string)
}

func (m *metadataRecorder) metadata(_ context.Context, name string, md json.RawMessage) (json.RawMessage, error) {
	if m.register != nil {
		m.register(name)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, name+" "+string(md))
	if m.err != nil {
		return nil, m.err
	}
	return json.RawMessage(fmt.Sprintf(`{"call":%d,"given":%s}`, len(m.calls), orNull(md))), nil
}

func orNull(md json.RawMessage) string {
	if len(md) == 0 {
		return "null"
	}
	return string(md)
}

func TestMetadataFunc(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		t.Run("CreateStoresWhatItReturns", func(t *testing.T) {
			t.Parallel()
			h, _ := setup(t, b)
			rec := &metadataRecorder{}
			c, err := client.New(&client.Config{Store: h.Store, Registry: h.Registry, Clock: h.Clock, MetadataFunc: rec.metadata})
			require.NoError(t, err)

			info, err := c.Create(h.Context(), "greet", dftype.CreateRequest{ID: "a", Metadata: json.RawMessage(`{"trigger":{"type":"api"}}`)})
			require.NoError(t, err)
			require.JSONEq(t, `{"call":1,"given":{"trigger":{"type":"api"}}}`, string(info.Metadata))
			got, err := c.Get(h.Context(), "greet", "a")
			require.NoError(t, err)
			require.Equal(t, string(info.Metadata), string(got.Metadata))

			created, err := c.CreateBatch(h.Context(), "greet", []dftype.CreateRequest{
				{ID: "b1"}, {ID: "b2", Metadata: json.RawMessage(`{"x":2}`)}, {ID: "b3"},
			})
			require.NoError(t, err)
			require.Len(t, created, 3)
			require.JSONEq(t, `{"call":2,"given":null}`, string(created[0].Metadata))
			require.JSONEq(t, `{"call":3,"given":{"x":2}}`, string(created[1].Metadata))
			require.JSONEq(t, `{"call":4,"given":null}`, string(created[2].Metadata))
			require.Equal(t, []string{`greet {"trigger":{"type":"api"}}`, "greet ", `greet {"x":2}`, "greet "}, rec.calls)
		})

		t.Run("AnErrorFailsTheCreate", func(t *testing.T) {
			t.Parallel()
			h, _ := setup(t, b)
			rec := &metadataRecorder{err: fmt.Errorf("%w: no such flow version", workflow.ErrInvalidRequest)}
			c, err := client.New(&client.Config{Store: h.Store, Registry: h.Registry, Clock: h.Clock, MetadataFunc: rec.metadata})
			require.NoError(t, err)
			_, err = c.Create(h.Context(), "greet", dftype.CreateRequest{ID: "a"})
			require.ErrorIs(t, err, workflow.ErrInvalidRequest)
			_, err = c.CreateBatch(h.Context(), "greet", []dftype.CreateRequest{{ID: "b"}})
			require.ErrorIs(t, err, workflow.ErrInvalidRequest)
			requireNothingWritten(t, h)
		})

		t.Run("TooLargeMetadataIsRefused", func(t *testing.T) {
			t.Parallel()
			h, _ := setup(t, b)
			huge := func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
				return json.RawMessage(`"` + string(make([]byte, workflow.MaxPayloadBytes)) + `"`), nil
			}
			c, err := client.New(&client.Config{Store: h.Store, Registry: h.Registry, Clock: h.Clock, MetadataFunc: huge})
			require.NoError(t, err)
			_, err = c.Create(h.Context(), "greet", dftype.CreateRequest{ID: "a"})
			require.ErrorIs(t, err, workflow.ErrPayloadTooLarge)
			requireNothingWritten(t, h)
		})

		t.Run("ItRunsBeforeTheWorkflowIsLookedUp", func(t *testing.T) {
			t.Parallel()
			h, _ := setup(t, b)
			rec := &metadataRecorder{register: func(name string) {
				if name == "late" {
					if _, ok := wfcore.Lookup(h.Registry, name); !ok {
						workflow.MustRegister(h.Registry, "late", func(context.Context, workflow.Event[json.RawMessage], workflow.Step) (string, error) {
							return "late", nil
						})
					}
				}
			}}
			c, err := client.New(&client.Config{Store: h.Store, Registry: h.Registry, Clock: h.Clock, MetadataFunc: rec.metadata})
			require.NoError(t, err)
			_, err = c.Create(h.Context(), "late", dftype.CreateRequest{ID: "a"})
			require.NoError(t, err, "the hook registered the workflow before the lookup")
			_, err = c.Create(h.Context(), "missing", dftype.CreateRequest{ID: "a"})
			require.ErrorIs(t, err, workflow.ErrWorkflowNotFound)
			_, err = c.Create(h.Context(), "not a name!", dftype.CreateRequest{ID: "a"})
			require.True(t, errors.Is(err, workflow.ErrInvalidWorkflowName))
			require.Equal(t, []string{"late ", "missing "}, rec.calls, "an invalid name never reaches the hook")
			h.RunUntilIdle()
			h.RequireStatus("late", "a", dftype.StatusComplete)
		})
	})
}
