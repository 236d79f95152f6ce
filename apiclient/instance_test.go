package apiclient_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/dftype"
)

// fullInfo is an InstanceInfo with every field set.
func fullInfo(t *testing.T) *dftype.InstanceInfo {
	t.Helper()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	later := at.Add(time.Hour)
	info := &dftype.InstanceInfo{
		WorkflowName: "wf", ID: "i-1", Status: dftype.StatusErrored,
		Params: json.RawMessage(`{"p":1}`), Metadata: json.RawMessage(`{"m":1}`), Output: json.RawMessage(`{"o":1}`),
		Error:     &dftype.ErrorInfo{Name: "Boom", Message: "it broke"},
		RunNumber: 2, CreatedAt: at, UpdatedAt: later, StartedAt: &at, CompletedAt: &later,
		Namespace: "ns", Queue: "q", Priority: 7, DedupeKey: "k", Unserved: true, Deduplicated: true,
		Parent:     &dftype.ParentRef{WorkflowName: "p", InstanceID: "pi", RunNumber: 1, StepKey: "s", Policy: dftype.ParentTerminate, Depth: 1},
		Children:   []*dftype.ChildRef{{WorkflowName: "c", ID: "ci", Status: dftype.StatusComplete, RunNumber: 1, StepKey: "s"}},
		DeadlineAt: &later, RunAttempt: 3,
		WaitingFor: &dftype.WaitingFor{Kind: "concurrency", Scope: "queue", Name: "q", Max: 1},
		Pending: []*dftype.PendingStep{{Step: "call", Kind: dftype.PendingRetry, Until: &later, Attempt: 2, MaxAttempts: 3,
			Error: &dftype.ErrorInfo{Name: "Error", Message: "no"}}},
	}
	v := reflect.ValueOf(info).Elem()
	for i := range v.NumField() {
		require.False(t, v.Field(i).IsZero(), "fullInfo leaves %s unset: set it, and carry it in apiclient.Instance", v.Type().Field(i).Name)
	}
	return info
}

// Every field of an InstanceInfo survives the wire form, so a field added
// to one and not the other fails here.
func TestInstanceCarriesEveryField(t *testing.T) {
	info := fullInfo(t)
	require.Equal(t, info, apiclient.NewInstance(info).Info())

	b, err := json.Marshal(apiclient.NewInstance(info))
	require.NoError(t, err)
	var back apiclient.Instance
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, info, back.Info())

	require.Nil(t, apiclient.NewInstance(nil))
	require.Nil(t, (*apiclient.Instance)(nil).Info())
}

// The wire form has the status, error and output under details, and every
// other field of InstanceInfo under its own name at the top.
func TestInstanceJSONShape(t *testing.T) {
	info := fullInfo(t)
	b, err := json.Marshal(apiclient.NewInstance(info))
	require.NoError(t, err)
	var got map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b, &got))
	require.JSONEq(t, `{"status":"errored","error":{"name":"Boom","message":"it broke"},"output":{"o":1}}`, string(got["details"]))

	flat, err := json.Marshal(info)
	require.NoError(t, err)
	var want map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(flat, &want))
	for _, k := range []string{"status", "error", "output"} {
		require.Contains(t, want, k)
		delete(want, k)
		require.NotContains(t, got, k)
	}
	delete(got, "details")
	require.Equal(t, want, got)

	// A queued instance has neither error nor output.
	b, err = json.Marshal(apiclient.NewInstance(&dftype.InstanceInfo{ID: "x", Status: dftype.StatusQueued}))
	require.NoError(t, err)
	require.Contains(t, string(b), `"id":"x","details":{"status":"queued"},`)
}
