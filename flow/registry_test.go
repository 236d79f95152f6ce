package flow_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/flow"
	"github.com/duraflow/duraflow/internal/wfcore"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

func TestApply(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		t.Run("StoresAndRegisters", func(t *testing.T) {
			t.Parallel()
			p := newProcess(t, b)
			def := greetFlow("greet", "1.0.0")
			res := p.apply(def)
			require.Equal(t, &flow.ApplyResult{ID: "greet", Version: "1.0.0", Created: true, Latest: "1.0.0", Warnings: []flow.Problem{}}, res)
			require.True(t, p.flows.IsFlow("greet"))
			_, ok := wfcore.Lookup(p.h.Registry, "greet")
			require.True(t, ok, "registered beside the Go workflows")

			stored, err := p.h.Store.FlowGet(p.ctx(), db.FlowRef{ID: "greet", Version: "1.0.0"})
			require.NoError(t, err)
			require.Equal(t, string(def), string(stored.Definition), "byte for byte")
			require.Equal(t, "Greeter", stored.Name)
			require.Equal(t, p.h.Now(), stored.CreatedAt, "the registry's clock")
		})

		t.Run("ReapplyingTheSameJSONIsANoOp", func(t *testing.T) {
			t.Parallel()
			p := newProcess(t, b)
			def := greetFlow("greet", "1.0.0")
			p.apply(def)
			p.apply(greetFlow("greet", "1.1.0"))

			again := p.apply(def)
			require.False(t, again.Created)
			require.Equal(t, "1.1.0", again.Latest)

			var compact bytes.Buffer
			require.NoError(t, json.Compact(&compact, def))
			reformatted := p.apply(compact.Bytes())
			require.False(t, reformatted.Created, "the same JSON spaced differently")
			stored, err := p.h.Store.FlowGet(p.ctx(), db.FlowRef{ID: "greet", Version: "1.0.0"})
			require.NoError(t, err)
			require.Equal(t, string(def), string(stored.Definition), "the first bytes stay")
		})

		t.Run("AChangedDefinitionNeedsANewVersion", func(t *testing.T) {
			t.Parallel()
			p := newProcess(t, b)
			p.apply(greetFlow("greet", "1.0.0"))
			changed := bytes.Replace(greetFlow("greet", "1.0.0"), []byte(`"1 hour"`), []byte(`"2 hours"`), 1)
			_, err := p.flows.Apply(p.ctx(), changed)
			require.ErrorIs(t, err, flow.ErrVersionConflict)
			require.Contains(t, err.Error(), "new version")
		})

		t.Run("InvalidDefinitionsListEveryProblem", func(t *testing.T) {
			t.Parallel()
			p := newProcess(t, b)
			_, err := p.flows.Apply(p.ctx(), []byte(`{"id": "bad", "version": "1.0", "initialStepId": "nope",
				"steps": {"a": {"id": "a", "type": "teleport", "transitions": {"onSuccess": "missing"}}}}`))
			require.ErrorIs(t, err, flow.ErrInvalidDefinition)
			var ve *flow.ValidationError
			require.ErrorAs(t, err, &ve)
			paths := map[string]bool{}
			for _, pr := range ve.Problems {
				paths[pr.Path] = true
			}
			require.True(t, paths["version"], "%v", ve.Problems)
			require.True(t, paths["initialStepId"], "%v", ve.Problems)
			require.True(t, paths["steps.a.type"], "%v", ve.Problems)
			require.True(t, paths["steps.a.transitions.onSuccess"], "%v", ve.Problems)
			require.False(t, p.flows.IsFlow("bad"))
			list, err := p.h.Store.FlowList(p.ctx(), &db.FlowListParams{})
			require.NoError(t, err)
			require.Empty(t, list, "nothing stored")

			_, err = p.flows.Apply(p.ctx(), []byte(`{"id": "x", "surprise": 1}`))
			require.ErrorAs(t, err, &ve, "Parse is strict")
		})

		t.Run("WarningsComeBack", func(t *testing.T) {
			t.Parallel()
			p := newProcess(t, b)
			res := p.apply([]byte(`{"id": "warn", "version": "1.0.0", "initialStepId": "a", "steps": {
				"a": {"id": "a", "type": "set", "config": {"values": {"x": {"value": 1}}}},
				"orphan": {"id": "orphan", "type": "set", "config": {"values": {"y": {"value": 2}}}}}}`))
			require.True(t, res.Created)
			require.Len(t, res.Warnings, 1)
			require.Equal(t, "steps.orphan", res.Warnings[0].Path)
		})

		t.Run("AGoWorkflowKeepsItsName", func(t *testing.T) {
			t.Parallel()
			p := newProcess(t, b)
			workflow.MustRegister(p.h.Registry, "billing", func(context.Context, workflow.Event[json.RawMessage], workflow.Step) (string, error) { return "", nil })
			_, err := p.flows.Apply(p.ctx(), quickFlow("billing", "1.0.0"))
			var ve *flow.ValidationError
			require.ErrorAs(t, err, &ve)
			require.Equal(t, "id", ve.Problems[0].Path)
			require.Contains(t, ve.Problems[0].Message, "Go workflow")
		})

		t.Run("TheHostsHandlersDecide", func(t *testing.T) {
			t.Parallel()
			internal := []byte(`{"id": "probe", "version": "1.0.0", "initialStepId": "get", "steps": {
				"get": {"id": "get", "type": "http", "config": {"url": "http://127.0.0.1:9/x"}}}}`)
			p := newProcess(t, b)
			_, err := p.flows.Apply(p.ctx(), internal)
			var ve *flow.ValidationError
			require.ErrorAs(t, err, &ve, "loopback is refused by default")
			require.Equal(t, "steps.get.config.url", ve.Problems[0].Path)

			httpH, err := flow.NewHTTPHandler(&flow.HTTPHandlerConfig{Allow: []string{"127.0.0.1"}})
			require.NoError(t, err)
			hs, err := flow.NewHandlers(flow.WithHandler(httpH))
			require.NoError(t, err)
			allowed := newProcess(t, b, withHandlers(hs))
			require.True(t, allowed.apply(internal).Created)
		})

		t.Run("TooLarge", func(t *testing.T) {
			t.Parallel()
			p := newProcess(t, b)
			_, err := p.flows.Apply(p.ctx(), bytes.Repeat([]byte(" "), flow.MaxDefinitionBytes+1))
			require.ErrorIs(t, err, workflow.ErrPayloadTooLarge)
		})

		t.Run("TooDeep", func(t *testing.T) {
			t.Parallel()
			p := newProcess(t, b)
			deep := strings.Repeat("[", 2000) + strings.Repeat("]", 2000)
			def := `{"id": "deep", "version": "1.0.0", "initialStepId": "set",
  "steps": {"set": {"id": "set", "type": "set", "config": {"values": {"x": {"value": ` + deep + `}}}}}}`
			_, err := p.flows.Apply(p.ctx(), []byte(def))
			require.ErrorIs(t, err, workflow.ErrPayloadTooDeep)
			_, err = p.flows.Get(p.ctx(), "deep", "")
			require.ErrorIs(t, err, flow.ErrNotFound, "nothing is stored")
		})

		t.Run("NotPortable", func(t *testing.T) {
			t.Parallel()
			p := newProcess(t, b)
			for _, v := range []string{`"a\u0000"`, "\"\xff\"", `"\udc00"`, `1e999`} {
				def := `{"id": "odd", "version": "1.0.0", "initialStepId": "set",
  "steps": {"set": {"id": "set", "type": "set", "config": {"values": {"x": {"value": ` + v + `}}}}}}`
				_, err := p.flows.Apply(p.ctx(), []byte(def))
				require.ErrorIs(t, err, workflow.ErrInvalidRequest, v)
			}
			_, err := p.flows.Get(p.ctx(), "odd", "")
			require.ErrorIs(t, err, flow.ErrNotFound, "nothing is stored")
		})
	})
}

func TestGetListVersions(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		p := newProcess(t, b)
		for _, v := range []string{"1.9.0", "1.10.0", "2.0.0-rc.1", "1.2.3"} {
			p.apply(greetFlow("greet", v))
		}
		p.apply(quickFlow("alpha", "0.1.0"))
		p.apply(quickFlow("zulu", "3.0.0"))

		latest, err := p.flows.Get(p.ctx(), "greet", "")
		require.NoError(t, err)
		require.Equal(t, "1.10.0", latest.Version, "releases before pre-releases, then SemVer")
		require.True(t, latest.Latest)
		require.Equal(t, string(greetFlow("greet", "1.10.0")), string(latest.Definition))

		old, err := p.flows.Get(p.ctx(), "greet", "1.9.0")
		require.NoError(t, err)
		require.False(t, old.Latest)
		require.Equal(t, "Greeter", old.Name)

		_, err = p.flows.Get(p.ctx(), "greet", "1.9.1")
		require.ErrorIs(t, err, flow.ErrNotFound)
		_, err = p.flows.Get(p.ctx(), "nope", "")
		require.ErrorIs(t, err, flow.ErrNotFound)
		_, err = p.flows.Get(p.ctx(), "greet", "v1.9.0")
		require.ErrorIs(t, err, workflow.ErrInvalidRequest)

		versions, err := p.flows.Versions(p.ctx(), "greet")
		require.NoError(t, err)
		require.Equal(t, "1.10.0", versions.Latest)
		var got []string
		for _, v := range versions.Versions {
			got = append(got, v.Version)
			require.Equal(t, v.Version == "1.10.0", v.Latest)
			require.Nil(t, v.Definition)
		}
		require.Equal(t, []string{"1.2.3", "1.9.0", "1.10.0", "2.0.0-rc.1"}, got)
		_, err = p.flows.Versions(p.ctx(), "nope")
		require.ErrorIs(t, err, flow.ErrNotFound)

		page, err := p.flows.List(p.ctx(), flow.ListParams{PageSize: 2})
		require.NoError(t, err)
		require.Len(t, page.Flows, 2)
		require.Equal(t, "alpha", page.Flows[0].ID)
		require.Equal(t, "greet", page.Flows[1].ID)
		require.Equal(t, "1.10.0", page.Flows[1].Version)
		require.Equal(t, "greet", page.NextCursor)
		rest, err := p.flows.List(p.ctx(), flow.ListParams{PageSize: 2, Cursor: page.NextCursor})
		require.NoError(t, err)
		require.Len(t, rest.Flows, 1)
		require.Equal(t, "zulu", rest.Flows[0].ID)
		require.Empty(t, rest.NextCursor)
		_, err = p.flows.List(p.ctx(), flow.ListParams{PageSize: 1001})
		require.ErrorIs(t, err, workflow.ErrInvalidRequest)
		_, err = p.flows.List(p.ctx(), flow.ListParams{Cursor: "not a cursor!"})
		require.ErrorIs(t, err, workflow.ErrInvalidRequest)

		all, err := p.flows.LatestVersions(p.ctx())
		require.NoError(t, err)
		require.Equal(t, map[string]string{"alpha": "0.1.0", "greet": "1.10.0", "zulu": "3.0.0"}, all)
	})
}

// TestTheStoreOrdersVersionsAsFlowDoes checks that the store's rule for the
// latest version is the flow package's: both apply internal/flowversion.
func TestTheStoreOrdersVersionsAsFlowDoes(t *testing.T) {
	t.Parallel()
	versions := []string{
		"0.0.1", "0.1.0", "1.0.0", "1.0.1", "1.2.0", "1.9.0", "1.10.0", "1.10.0-rc.1", "1.10.0-rc.2", "1.10.0-rc.10",
		"1.10.0-alpha", "1.10.0-alpha.1", "1.10.0-alpha.beta", "1.10.0-beta", "2.0.0-0", "2.0.0-1", "2.0.0-x", "10.0.0", "9.99.99",
	}
	for _, a := range versions {
		for _, b := range versions {
			require.Equal(t, flow.CompareVersions(a, b), db.CompareFlowVersions(a, b), "%s vs %s", a, b)
		}
	}
	// Every prefix of every rotation of the list: folding with
	// FlowVersionSupersedes, as FlowPut does, ends at flow.LatestVersion.
	for start := range versions {
		rotated := append(append([]string{}, versions[start:]...), versions[:start]...)
		for n := 1; n <= len(rotated); n++ {
			set := rotated[:n]
			latest := set[0]
			for _, v := range set[1:] {
				if db.FlowVersionSupersedes(v, latest) {
					latest = v
				}
			}
			want, ok := flow.LatestVersion(set)
			require.True(t, ok)
			require.Equal(t, want, latest, "%v", set)
		}
	}
}

func TestPin(t *testing.T) {
	t.Parallel()
	for _, md := range []string{"", "null", "  ", `{}`, `{"trigger":{"type":"api"}}`, `{"flow":null}`} {
		pin, err := flow.PinOf(json.RawMessage(md))
		require.NoError(t, err, md)
		require.Nil(t, pin, md)
	}
	pin, err := flow.PinOf(json.RawMessage(`{"trigger":{},"flow":{"id":"order","version":"1.2.0"}}`))
	require.NoError(t, err)
	require.Equal(t, &flow.Pin{ID: "order", Version: "1.2.0"}, pin)
	for _, md := range []string{`[1]`, `{"flow":"1.0.0"}`, `{"flow":{"id":"x","version":"1","extra":true}}`} {
		_, err := flow.PinOf(json.RawMessage(md))
		require.Error(t, err, md)
	}

	out, err := flow.WithPin(json.RawMessage(`{"trigger":{"type":"api","source":"POST /x"},"flow":{"id":"old","version":"0"}}`),
		flow.Pin{ID: "order", Version: "1.2.0"})
	require.NoError(t, err)
	require.JSONEq(t, `{"trigger":{"type":"api","source":"POST /x"},"flow":{"id":"order","version":"1.2.0"}}`, string(out))
	for _, md := range []string{"", "null"} {
		out, err = flow.WithPin(json.RawMessage(md), flow.Pin{ID: "a", Version: "1.0.0"})
		require.NoError(t, err)
		require.JSONEq(t, `{"flow":{"id":"a","version":"1.0.0"}}`, string(out))
	}
	_, err = flow.WithPin(json.RawMessage(`[1,2]`), flow.Pin{ID: "a", Version: "1.0.0"})
	require.ErrorIs(t, err, workflow.ErrInvalidRequest)
}

func TestConfig(t *testing.T) {
	t.Parallel()
	_, err := flow.New(nil)
	require.Error(t, err)
	_, err = flow.New(&flow.Config{})
	require.Error(t, err)
	h := testharness.New(t)
	_, err = flow.New(&flow.Config{Store: h.Store, Registry: h.Registry, RefreshInterval: -1})
	require.True(t, err != nil && strings.Contains(err.Error(), "RefreshInterval"))
	r, err := flow.New(&flow.Config{Store: h.Store, Registry: h.Registry})
	require.NoError(t, err)
	require.NotNil(t, r.Handlers())
	require.NoError(t, r.Stop(h.Context()), "stopping a registry that never started")
	require.False(t, errors.Is(err, flow.ErrNotFound))
}
