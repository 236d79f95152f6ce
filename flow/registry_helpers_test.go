package flow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/flow"
	"github.com/duraflow/duraflow/testharness"
)

// greetFlow returns a flow that waits for an event "go", then greets with
// its version in the greeting, so an output tells which version ran.
func greetFlow(id, version string) []byte {
	return fmt.Appendf(nil, `{
  "id": %q, "version": %q, "name": "Greeter",
  "initialStepId": "wait",
  "steps": {
    "wait": {"id": "wait", "type": "wait-for-event", "config": {"type": "go", "timeout": "1 hour"},
             "outputKey": "signal", "transitions": {"onSuccess": "say"}},
    "say":  {"id": "say", "type": "transform", "config": {"expression": "'v%s ' + name"}, "outputKey": "greeting"}
  },
  "output": "greeting"
}`, id, version, version)
}

// quickFlow returns a flow without waits whose output names its version.
func quickFlow(id, version string) []byte {
	return fmt.Appendf(nil, `{"id": %q, "version": %q, "initialStepId": "set",
  "steps": {"set": {"id": "set", "type": "set", "config": {"values": {"ran": {"value": %q}}}}}, "output": "ran"}`,
		id, version, version)
}

// process is one host: a harness (store, registry, client, runner), its flow
// registry, and a client whose creates pin flow versions.
type process struct {
	t      *testing.T
	h      *testharness.Harness
	flows  *flow.Registry
	client *client.Client
}

type processOption func(*flow.Config)

func withHandlers(hs *flow.Handlers) processOption {
	return func(c *flow.Config) { c.Handlers = hs }
}

// newProcess starts a host on a fresh database of backend b.
func newProcess(t *testing.T, b testharness.Backend, opts ...processOption) *process {
	t.Helper()
	return newProcessWith(t, testharness.New(t, testharness.WithBackend(b)), opts...)
}

// newProcessWith starts a host over a harness, such as one sharing the
// store of another process.
func newProcessWith(t *testing.T, h *testharness.Harness, opts ...processOption) *process {
	t.Helper()
	cfg := &flow.Config{Store: h.Store, Registry: h.Registry, Clock: h.Clock, RefreshInterval: time.Minute}
	for _, o := range opts {
		o(cfg)
	}
	flows, err := flow.New(cfg)
	require.NoError(t, err)
	c, err := client.New(&client.Config{Store: h.Store, Registry: h.Registry, Clock: h.Clock, MetadataFunc: flows.Metadata, LimitsFunc: flows.Limits})
	require.NoError(t, err)
	return &process{t: t, h: h, flows: flows, client: c}
}

// sibling starts another host on the same store, as a second process would.
func (p *process) sibling(opts ...processOption) *process {
	p.t.Helper()
	return newProcessWith(p.t, testharness.New(p.t, testharness.WithStore(p.h.Store), testharness.WithStart(p.h.Now())), opts...)
}

func (p *process) ctx() context.Context { return p.h.Context() }

func (p *process) apply(def []byte) *flow.ApplyResult {
	p.t.Helper()
	res, err := p.flows.Apply(p.ctx(), def)
	require.NoError(p.t, err)
	return res
}

func (p *process) create(name, id string, params string) *dftype.InstanceInfo {
	p.t.Helper()
	info, err := p.client.Create(p.ctx(), name, dftype.CreateRequest{ID: id, Params: json.RawMessage(params)})
	require.NoError(p.t, err)
	return info
}

// pinOf returns the version an instance is pinned to.
func (p *process) pinOf(name, id string) string {
	p.t.Helper()
	info := p.h.Status(name, id)
	pin, err := flow.PinOf(info.Metadata)
	require.NoError(p.t, err)
	require.NotNil(p.t, pin, "instance %s/%s has no flow pin: %s", name, id, info.Metadata)
	require.Equal(p.t, name, pin.ID)
	return pin.Version
}

// output returns the output of a complete instance.
func (p *process) output(name, id string) string {
	p.t.Helper()
	var out string
	p.h.RequireOutput(name, id, &out)
	return out
}
