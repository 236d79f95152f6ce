package flow_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/flow"
	"github.com/duraflow/duraflow/testharness"
)

// loopFlow loops three times through work → incr → nap → check, then waits
// for an event and finishes.
const loopFlow = `{
  "id": "loop", "version": "1.0.0", "initialStepId": "init",
  "steps": {
    "init":   {"id": "init", "type": "set", "config": {"values": {"i": {"value": 0}}}, "transitions": {"onSuccess": "work"}},
    "work":   {"id": "work", "type": "count", "input": {"path": "i"}, "outputKey": "last", "transitions": {"onSuccess": "incr"}},
    "incr":   {"id": "incr", "type": "transform", "config": {"expression": "i + 1"}, "outputKey": "i", "transitions": {"onSuccess": "nap"}},
    "nap":    {"id": "nap", "type": "delay", "config": {"duration": "1 minute"}, "transitions": {"onSuccess": "check"}},
    "check":  {"id": "check", "type": "branch",
               "config": {"conditions": [{"left": {"path": "i"}, "op": "lt", "right": {"value": 3}, "next": "work"}], "default": "wait"}},
    "wait":   {"id": "wait", "type": "wait-for-event", "config": {"type": "go", "timeout": "1 day"}, "outputKey": "signal",
               "transitions": {"onSuccess": "finish"}},
    "finish": {"id": "finish", "type": "count", "input": {"path": "signal.note"}, "outputKey": "done"}
  }}`

// TestFlowReplaysAcrossRunnerRestarts runs a flow with a loop and a delay
// on every backend, starting a new runner (a new harness over the same
// store, as a restarted process would) for every step of the way, and shows
// that no completed step runs again.
func TestFlowReplaysAcrossRunnerRestarts(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		store := backend.NewStore(t)
		count := newCountHandler(0)
		compiled := compileFlow(t, loopFlow, count)

		// restart returns a fresh harness — client, runner and registry — on
		// the same store, its clock at the given time.
		restart := func(at time.Time) *testharness.Harness {
			h := testharness.New(t, testharness.WithStore(store), testharness.WithStart(at))
			_, err := flow.Register(h.Registry, compiled)
			require.NoError(t, err)
			return h
		}

		h := restart(testharness.DefaultStart)
		_, err := h.Client.Create(h.Context(), "loop", dftype.CreateRequest{ID: "l1", Params: json.RawMessage(`{"tag": "x"}`)})
		require.NoError(t, err)

		restarts := 0
		for round := 0; round < 20; round++ {
			h.RunDue()
			info := h.Status("loop", "l1")
			if info.Status != dftype.StatusWaiting {
				break
			}
			waiting := h.Waiting()
			require.Len(t, waiting, 1)
			if strings.Contains(waiting[0], ": event go until") {
				h = restart(h.Now())
				restarts++
				h.SendEvent("loop", "l1", "go", map[string]string{"note": "ship it"})
				continue
			}
			// A sleep: come back a minute later in a new process.
			h = restart(h.Now().Add(time.Minute))
			restarts++
		}
		require.Equal(t, 4, restarts, "three naps and one event wait, each resumed by a new runner")

		info := h.RequireStatus("loop", "l1", dftype.StatusComplete)
		require.JSONEq(t, `{"tag": "x", "i": 3,
			"last": {"step": "work#3", "attempt": 1, "visit": 3, "input": 2},
			"signal": {"note": "ship it"},
			"done": {"step": "finish#1", "attempt": 1, "visit": 1, "input": "ship it"}}`, string(info.Output))

		require.Equal(t, map[string]int{"work#1": 1, "work#2": 1, "work#3": 1, "finish#1": 1}, count.snapshot(),
			"every handler step ran exactly once across all replays")

		var names []string
		for _, s := range h.History("loop", "l1").Steps {
			names = append(names, s.Name)
			require.Equal(t, "complete", s.Status, s.Name)
		}
		require.Equal(t, []string{
			"init#1",
			"work#1", "incr#1", "nap#1", "check#1",
			"work#2", "incr#2", "nap#2", "check#2",
			"work#3", "incr#3", "nap#3", "check#3",
			"wait#1", "finish#1",
		}, names)
	})
}
