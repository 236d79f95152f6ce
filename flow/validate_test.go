package flow_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/flow"
	"github.com/duraflow/duraflow/workflow"
)

// validFlow exercises every built-in step type except exec.
const validFlow = `{
  "id": "order",
  "version": "1.2.0",
  "name": "Order",
  "initialStepId": "prepare",
  "steps": {
    "prepare": {"id": "prepare", "type": "set", "config": {"values": {"attempt": {"value": 0}}},
                "transitions": {"onSuccess": "fetch"}},
    "fetch": {"id": "fetch", "type": "http", "config": {"url": "https://shop.example.com/orders/${orderId}"},
              "outputKey": "order", "retries": {"limit": 2, "delay": "1 second", "backoff": "constant"},
              "timeout": "30 seconds", "transitions": {"onSuccess": "upper", "onFailure": "failed"}},
    "upper": {"id": "upper", "type": "transform", "config": {"preset": "upper"}, "input": {"path": "order.body.name"},
              "outputKey": "name", "transitions": {"onSuccess": "check"}},
    "check": {"id": "check", "type": "branch",
              "config": {"conditions": [{"left": {"path": "order.body.total"}, "op": "gt", "right": {"value": 100}, "next": "approve"}],
                         "default": "$end"}},
    "approve": {"id": "approve", "type": "wait-for-event", "config": {"type": "approval", "timeout": "1 hour"},
                "outputKey": "approval", "transitions": {"onSuccess": "pause", "onFailure": "failed"}},
    "pause": {"id": "pause", "type": "delay", "config": {"duration": "10 seconds"}},
    "failed": {"id": "failed", "type": "set", "config": {"values": {"status": {"value": "failed"}}}}
  },
  "output": "order.body"
}`

func TestParseAndValidateAcceptAValidFlow(t *testing.T) {
	t.Parallel()
	def, err := flow.Parse([]byte(validFlow))
	require.NoError(t, err)
	require.Equal(t, "order", def.ID)
	require.Equal(t, "Order", def.Name)
	require.Equal(t, 2, *def.Steps["fetch"].Retries.Limit)
	require.Equal(t, workflow.RetryPolicy{Limit: 2, Delay: 1e9, Backoff: workflow.BackoffConstant}, def.Steps["fetch"].Retries.Policy())
	require.Equal(t, "order.body.name", def.Steps["upper"].Input.Path)
	warnings, err := flow.Validate(def, nil)
	require.NoError(t, err)
	require.Empty(t, warnings)

	// A definition survives a JSON round trip.
	out, err := json.Marshal(def)
	require.NoError(t, err)
	again, err := flow.Parse(out)
	require.NoError(t, err)
	out2, err := json.Marshal(again)
	require.NoError(t, err)
	require.JSONEq(t, string(out), string(out2))
	require.JSONEq(t, validFlow, string(out))
}

// mutate returns validFlow changed by f, which edits it as generic JSON.
func mutate(t *testing.T, f func(def map[string]any)) string {
	t.Helper()
	var def map[string]any
	require.NoError(t, json.Unmarshal([]byte(validFlow), &def))
	f(def)
	out, err := json.Marshal(def)
	require.NoError(t, err)
	return string(out)
}

func step(def map[string]any, id string) map[string]any {
	return def["steps"].(map[string]any)[id].(map[string]any)
}

func obj(js string) map[string]any {
	var m map[string]any
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		panic(err)
	}
	return m
}

// problemsOf parses and validates a definition and returns its problems.
func problemsOf(t *testing.T, js string, hs *flow.Handlers) []flow.Problem {
	t.Helper()
	def, err := flow.Parse([]byte(js))
	if err == nil {
		_, err = flow.Validate(def, hs)
	}
	if err == nil {
		return nil
	}
	require.ErrorIs(t, err, flow.ErrInvalidDefinition)
	require.ErrorIs(t, err, workflow.ErrInvalidRequest, "the HTTP API maps it to 400")
	var ve *flow.ValidationError
	require.True(t, errors.As(err, &ve))
	require.NotEmpty(t, ve.Problems)
	return ve.Problems
}

func TestValidationMessages(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		js     string
		path   string
		prefix string // the message contains it
	}{
		// Parse: shape.
		{"NotJSON", `{"id": `, "", "invalid JSON"},
		{"Empty", ``, "", "definition is empty"},
		{"UnknownTopLevelField", mutate(t, func(d map[string]any) { d["owner"] = "x" }), "owner", `unknown field "owner"`},
		{"UnknownStepField", mutate(t, func(d map[string]any) { step(d, "fetch")["retry"] = 3 }), "steps.fetch.retry", `unknown field "retry"`},
		{"FieldNamesAreCaseSensitive", mutate(t, func(d map[string]any) { step(d, "prepare")["transitions"] = obj(`{"OnSuccess": "fetch"}`) }), "steps.prepare.transitions.OnSuccess", `unknown field "OnSuccess"`},
		{"UnknownRetriesField", mutate(t, func(d map[string]any) { step(d, "fetch")["retries"] = obj(`{"limit": 1, "max": 2}`) }), "steps.fetch.retries.max", `unknown field "max"`},
		{"WrongType", mutate(t, func(d map[string]any) { d["version"] = 1 }), "version", "must be a string"},
		{"RetryLimitNotInteger", mutate(t, func(d map[string]any) { step(d, "fetch")["retries"] = obj(`{"limit": "3"}`) }), "steps.fetch.retries.limit", "must be an integer"},
		{"BadDuration", mutate(t, func(d map[string]any) { step(d, "fetch")["timeout"] = "soon" }), "steps.fetch.timeout", `invalid duration "soon"`},
		{"StepsNotAnObject", mutate(t, func(d map[string]any) { d["steps"] = []any{} }), "steps", "must be an object"},
		{"BadSelector", mutate(t, func(d map[string]any) { step(d, "upper")["input"] = obj(`{"path": "a", "key": "b"}`) }), "steps.upper.input", "exactly one of"},
		{"BadSelectorField", mutate(t, func(d map[string]any) { step(d, "upper")["input"] = obj(`{"jsonpath": "$.a"}`) }), "steps.upper.input.jsonpath", `unknown field "jsonpath"`},

		// Validate: the definition.
		{"MissingID", mutate(t, func(d map[string]any) { delete(d, "id") }), "id", "is required"},
		{"InvalidID", mutate(t, func(d map[string]any) { d["id"] = "order flow" }), "id", `"order flow" must be 1 to 64 characters`},
		{"MissingVersion", mutate(t, func(d map[string]any) { delete(d, "version") }), "version", "is required"},
		{"InvalidVersion", mutate(t, func(d map[string]any) { d["version"] = "1.2" }), "version", `invalid version "1.2"`},
		{"VPrefixVersion", mutate(t, func(d map[string]any) { d["version"] = "v1.2.0" }), "version", `without the "v" prefix`},
		{"MissingInitialStep", mutate(t, func(d map[string]any) { delete(d, "initialStepId") }), "initialStepId", "is required"},
		{"UnknownInitialStep", mutate(t, func(d map[string]any) { d["initialStepId"] = "start" }), "initialStepId", `no step "start"`},
		{"NoSteps", mutate(t, func(d map[string]any) { d["steps"] = obj(`{}`); d["initialStepId"] = "x" }), "steps", "at least one step"},
		{"BadOutputPath", mutate(t, func(d map[string]any) { d["output"] = "order..body" }), "output", "empty segment"},

		// Validate: steps.
		{"KeyDiffersFromID", mutate(t, func(d map[string]any) { step(d, "pause")["id"] = "wait" }), "steps.pause.id", `"wait" differs from the step's key "pause"`},
		{"MissingStepID", mutate(t, func(d map[string]any) { delete(step(d, "pause"), "id") }), "steps.pause.id", "is required"},
		{"InvalidStepID", mutate(t, func(d map[string]any) {
			d["steps"].(map[string]any)["bad#id"] = obj(`{"id": "bad#id", "type": "delay", "config": {"duration": "1 second"}}`)
			step(d, "failed")["transitions"] = obj(`{"onSuccess": "bad#id"}`)
		}), "steps.bad#id", `step id "bad#id" must be`},
		{"NullStep", mutate(t, func(d map[string]any) { d["steps"].(map[string]any)["ghost"] = nil }), "steps.ghost", "must be an object"},
		{"MissingType", mutate(t, func(d map[string]any) { delete(step(d, "pause"), "type") }), "steps.pause.type", "is required (one of branch, delay, exec, http, picky, set, subflow, transform, wait-for-event)"},
		{"UnknownType", mutate(t, func(d map[string]any) { step(d, "pause")["type"] = "sleep" }), "steps.pause.type", `unknown step type "sleep" (known: branch, delay, exec, http, picky, set, subflow, transform, wait-for-event)`},
		{"TransitionToMissingStep", mutate(t, func(d map[string]any) { step(d, "prepare")["transitions"] = obj(`{"onSuccess": "fetsh"}`) }), "steps.prepare.transitions.onSuccess", `no step "fetsh"`},
		{"OnFailureToMissingStep", mutate(t, func(d map[string]any) {
			step(d, "fetch")["transitions"] = obj(`{"onSuccess": "upper", "onFailure": "oops"}`)
		}), "steps.fetch.transitions.onFailure", `no step "oops"`},
		{"BadOutputKey", mutate(t, func(d map[string]any) { step(d, "fetch")["outputKey"] = ".order" }), "steps.fetch.outputKey", "empty segment"},
		{"NegativeRetries", mutate(t, func(d map[string]any) { step(d, "fetch")["retries"] = obj(`{"limit": -1}`) }), "steps.fetch.retries.limit", "must not be negative"},
		{"UnknownBackoff", mutate(t, func(d map[string]any) { step(d, "fetch")["retries"] = obj(`{"backoff": "random"}`) }), "steps.fetch.retries.backoff", `unknown backoff "random"`},
		{"ZeroTimeout", mutate(t, func(d map[string]any) { step(d, "fetch")["timeout"] = "0 seconds" }), "steps.fetch.timeout", "must be positive"},

		// Step kinds.
		{"DelayWithOutputKey", mutate(t, func(d map[string]any) { step(d, "pause")["outputKey"] = "x" }), "steps.pause.outputKey", "a delay step has no output"},
		{"DelayWithOnFailure", mutate(t, func(d map[string]any) { step(d, "pause")["transitions"] = obj(`{"onFailure": "failed"}`) }), "steps.pause.transitions.onFailure", "a delay step cannot fail"},
		{"DelayWithRetries", mutate(t, func(d map[string]any) { step(d, "pause")["retries"] = obj(`{"limit": 1}`) }), "steps.pause.retries", "a delay step is not retried"},
		{"DelayWithTimeout", mutate(t, func(d map[string]any) { step(d, "pause")["timeout"] = "1 second" }), "steps.pause.timeout", "a delay step has no attempt timeout"},
		{"WaitWithRetries", mutate(t, func(d map[string]any) { step(d, "approve")["retries"] = obj(`{"limit": 1}`) }), "steps.approve.retries", "a wait-for-event step is not retried"},
		{"WaitWithStepTimeout", mutate(t, func(d map[string]any) { step(d, "approve")["timeout"] = "1 hour" }), "steps.approve.timeout", "set the wait's timeout in config.timeout"},
		{"BranchWithOnSuccess", mutate(t, func(d map[string]any) { step(d, "check")["transitions"] = obj(`{"onSuccess": "pause"}`) }), "steps.check.transitions.onSuccess", "use config.default instead"},
		{"BranchToMissingStep", mutate(t, func(d map[string]any) {
			step(d, "check")["config"] = obj(`{"conditions": [{"left": {"path": "a"}, "op": "exists", "next": "approve"}, {"left": {"path": "a"}, "op": "exists", "next": "aprove"}]}`)
		}), "steps.check.config.conditions[1].next", `no step "aprove"`},
		{"BranchDefaultToMissingStep", mutate(t, func(d map[string]any) { step(d, "check")["config"].(map[string]any)["default"] = "nowhere" }), "steps.check.config.default", `no step "nowhere"`},

		// Handler configs.
		{"UnknownConfigField", mutate(t, func(d map[string]any) { step(d, "pause")["config"] = obj(`{"duration": "1 second", "jitter": true}`) }), "steps.pause.config.jitter", `unknown field "jitter"`},
		{"DelayWithoutDuration", mutate(t, func(d map[string]any) { step(d, "pause")["config"] = obj(`{}`) }), "steps.pause.config.duration", "is required"},
		{"DelayBadDuration", mutate(t, func(d map[string]any) { step(d, "pause")["config"] = obj(`{"duration": "10 fortnights"}`) }), "steps.pause.config.duration", `unknown unit "fortnights"`},
		{"DelayTooLong", mutate(t, func(d map[string]any) { step(d, "pause")["config"] = obj(`{"duration": "400 days"}`) }), "steps.pause.config.duration", "longer than 365 days"},
		{"DelayBadTemplate", mutate(t, func(d map[string]any) { step(d, "pause")["config"] = obj(`{"duration": "${wait"}`) }), "steps.pause.config.duration", "is not closed"},
		{"WaitWithoutType", mutate(t, func(d map[string]any) { step(d, "approve")["config"] = obj(`{"timeout": "1 hour"}`) }), "steps.approve.config.type", "is required"},
		{"WaitBadType", mutate(t, func(d map[string]any) { step(d, "approve")["config"] = obj(`{"type": "an approval"}`) }), "steps.approve.config.type", "invalid event type"},
		{"WaitTimeoutTooShort", mutate(t, func(d map[string]any) {
			step(d, "approve")["config"] = obj(`{"type": "a", "timeout": "10 milliseconds"}`)
		}), "steps.approve.config.timeout", "between 1 second and 365 days"},
		{"SetNothing", mutate(t, func(d map[string]any) { step(d, "prepare")["config"] = obj(`{"values": {}}`) }), "steps.prepare.config.values", "sets nothing"},
		{"SetBadPath", mutate(t, func(d map[string]any) { step(d, "prepare")["config"] = obj(`{"values": {"a.": {"value": 1}}}`) }), "steps.prepare.config.values.a.", "empty segment"},
		{"SetBadSelector", mutate(t, func(d map[string]any) {
			step(d, "prepare")["config"] = obj(`{"values": {"a": {"value": 1, "key": "b"}}}`)
		}), "steps.prepare.config.values.a", "exactly one of"},
		{"SetNullSelector", mutate(t, func(d map[string]any) { step(d, "prepare")["config"] = obj(`{"values": {"a": null}}`) }), "steps.prepare.config.values.a", "must be a selector"},
		{"BranchNoConditions", mutate(t, func(d map[string]any) { step(d, "check")["config"] = obj(`{"conditions": [], "default": "approve"}`) }), "steps.check.config.conditions", "at least one condition"},
		{"BranchUnknownOp", mutate(t, func(d map[string]any) {
			step(d, "check")["config"] = obj(`{"conditions": [{"left": {"path": "a"}, "op": "like", "right": {"value": 1}, "next": "approve"}]}`)
		}), "steps.check.config.conditions[0].op", `unknown operator "like"`},
		{"BranchMissingOp", mutate(t, func(d map[string]any) {
			step(d, "check")["config"] = obj(`{"conditions": [{"left": {"path": "a"}, "next": "approve"}]}`)
		}), "steps.check.config.conditions[0].op", "is required"},
		{"BranchMissingLeft", mutate(t, func(d map[string]any) {
			step(d, "check")["config"] = obj(`{"conditions": [{"op": "exists", "next": "approve"}]}`)
		}), "steps.check.config.conditions[0].left", "is required"},
		{"BranchMissingRight", mutate(t, func(d map[string]any) {
			step(d, "check")["config"] = obj(`{"conditions": [{"left": {"path": "a"}, "op": "eq", "next": "approve"}]}`)
		}), "steps.check.config.conditions[0].right", "is required for eq"},
		{"BranchExistsWithRight", mutate(t, func(d map[string]any) {
			step(d, "check")["config"] = obj(`{"conditions": [{"left": {"path": "a"}, "op": "exists", "right": {"value": 1}, "next": "approve"}]}`)
		}), "steps.check.config.conditions[0].right", "exists takes no right side"},
		{"BranchInNeedsArray", mutate(t, func(d map[string]any) {
			step(d, "check")["config"] = obj(`{"conditions": [{"left": {"path": "a"}, "op": "in", "right": {"value": "abc"}, "next": "approve"}]}`)
		}), "steps.check.config.conditions[0].right.value", "in needs an array, not a string"},
		{"BranchMissingNext", mutate(t, func(d map[string]any) {
			step(d, "check")["config"] = obj(`{"conditions": [{"left": {"path": "a"}, "op": "exists"}]}`)
		}), "steps.check.config.conditions[0].next", "is required"},
		{"TransformNothing", mutate(t, func(d map[string]any) { step(d, "upper")["config"] = obj(`{}`) }), "steps.upper.config", `needs "preset" or "expression"`},
		{"TransformBoth", mutate(t, func(d map[string]any) { step(d, "upper")["config"] = obj(`{"preset": "upper", "expression": "1"}`) }), "steps.upper.config", "choose one"},
		{"TransformUnknownPreset", mutate(t, func(d map[string]any) { step(d, "upper")["config"] = obj(`{"preset": "capitalize"}`) }), "steps.upper.config.preset", `unknown preset "capitalize"`},
		{"TransformBadExpression", mutate(t, func(d map[string]any) { step(d, "upper")["config"] = obj(`{"expression": "1 +"}`) }), "steps.upper.config.expression", "compiling expression"},
		{"TransformUnknownFunction", mutate(t, func(d map[string]any) { step(d, "upper")["config"] = obj(`{"expression": "getenv('HOME')"}`) }), "steps.upper.config.expression", "unknown function getenv()"},
		{"HTTPWithoutURL", mutate(t, func(d map[string]any) { step(d, "fetch")["config"] = obj(`{"method": "GET"}`) }), "steps.fetch.config.url", "is required"},
		{"HTTPBadScheme", mutate(t, func(d map[string]any) { step(d, "fetch")["config"] = obj(`{"url": "file:///etc/passwd"}`) }), "steps.fetch.config.url", "only http and https URLs"},
		{"HTTPBadTemplatedScheme", mutate(t, func(d map[string]any) { step(d, "fetch")["config"] = obj(`{"url": "gopher://x/${a}"}`) }), "steps.fetch.config.url", "only http and https URLs"},
		{"HTTPInternalIPLiteral", mutate(t, func(d map[string]any) {
			step(d, "fetch")["config"] = obj(`{"url": "http://169.254.169.254/latest/meta-data"}`)
		}), "steps.fetch.config.url", "a cloud metadata address"},
		{"HTTPUnknownMethod", mutate(t, func(d map[string]any) {
			step(d, "fetch")["config"] = obj(`{"url": "https://x.example", "method": "FETCH"}`)
		}), "steps.fetch.config.method", `unknown method "FETCH"`},
		{"HTTPHostHeader", mutate(t, func(d map[string]any) {
			step(d, "fetch")["config"] = obj(`{"url": "https://x.example", "headers": {"Host": "internal"}}`)
		}), "steps.fetch.config.headers.Host", "cannot be set"},
		{"HTTPBadHeaderName", mutate(t, func(d map[string]any) {
			step(d, "fetch")["config"] = obj(`{"url": "https://x.example", "headers": {"X Bad": "1"}}`)
		}), "steps.fetch.config.headers.X Bad", "not a valid header name"},
		{"HTTPBadHeaderTemplate", mutate(t, func(d map[string]any) {
			step(d, "fetch")["config"] = obj(`{"url": "https://x.example", "headers": {"X-Id": "${id"}}`)
		}), "steps.fetch.config.headers.X-Id", "is not closed"},
		{"HTTPBadBody", mutate(t, func(d map[string]any) {
			step(d, "fetch")["config"] = obj(`{"url": "https://x.example", "body": {"path": ""}}`)
		}), "steps.fetch.config.body", "a selector needs one of"},
		{"ExecNotAllowListed", mutate(t, func(d map[string]any) {
			step(d, "fetch")["type"] = "exec"
			step(d, "fetch")["config"] = obj(`{"command": "rm"}`)
		}), "steps.fetch.config.command", `command "rm" is not allow-listed on this host (allowed: none)`},
		{"ConfigNotAnObject", mutate(t, func(d map[string]any) { step(d, "pause")["config"] = "10 seconds" }), "steps.pause.config", "must be an object"},
		{"HTTPNegativeTimeout", mutate(t, func(d map[string]any) {
			step(d, "fetch")["config"] = obj(`{"url": "https://x.example", "timeout": -5}`)
		}), "steps.fetch.config.timeout", "must not be negative"},
		{"ExecBadArgTemplate", mutate(t, func(d map[string]any) {
			step(d, "fetch")["type"] = "exec"
			step(d, "fetch")["config"] = obj(`{"command": "x", "args": ["${a"]}`)
		}), "steps.fetch.config.args[0]", "is not closed"},
		{"HostHandlerPlainError", mutate(t, func(d map[string]any) {
			step(d, "pause")["type"] = "picky"
			step(d, "pause")["config"] = obj(`{"n": 1}`)
		}), "steps.pause.config", "picky wants n = 2"},
		{"HostHandlerProblems", mutate(t, func(d map[string]any) {
			step(d, "pause")["type"] = "picky"
			step(d, "pause")["config"] = obj(`{"n": 2, "m": 1}`)
		}), "steps.pause.config.m", `unknown field "m"`},
		{"ExecWithoutCommand", mutate(t, func(d map[string]any) { step(d, "fetch")["type"] = "exec"; step(d, "fetch")["config"] = obj(`{}`) }), "steps.fetch.config.command", "is required"},
	}
	hs := builtins(t, flow.WithHandler(pickyHandler{}))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			problems := problemsOf(t, tc.js, hs)
			for _, p := range problems {
				if p.Path == tc.path && strings.Contains(p.Message, tc.prefix) {
					return
				}
			}
			t.Fatalf("no problem at %q containing %q in:\n%s", tc.path, tc.prefix, formatProblems(problems))
		})
	}
}

// pickyHandler is a host handler with its own validation.
type pickyHandler struct{}

func (pickyHandler) Type() string { return "picky" }

func (pickyHandler) Validate(config json.RawMessage) error {
	var c struct {
		N int `json:"n"`
	}
	if err := flow.DecodeConfig(config, &c); err != nil {
		return err
	}
	if c.N != 2 {
		return errors.New("picky wants n = 2")
	}
	return nil
}

func (pickyHandler) Run(context.Context, *flow.Invocation) (any, error) { return nil, nil }

func formatProblems(ps []flow.Problem) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString("  " + p.String() + "\n")
	}
	return b.String()
}

func TestValidationReportsEveryProblem(t *testing.T) {
	t.Parallel()
	js := `{"id": "bad id", "version": "one", "initialStepId": "a", "steps": {
		"a": {"id": "b", "type": "nope", "transitions": {"onSuccess": "c"}},
		"d": {"id": "d", "type": "delay", "config": {"duration": "forever"}}}}`
	problems := problemsOf(t, js, nil)
	var paths []string
	for _, p := range problems {
		paths = append(paths, p.Path)
	}
	require.Equal(t, []string{"id", "steps.a.id", "steps.a.transitions.onSuccess", "steps.a.type", "steps.d.config.duration", "version"}, paths, formatProblems(problems))

	def, err := flow.Parse([]byte(js))
	require.NoError(t, err)
	_, err = flow.Validate(def, nil)
	var ve *flow.ValidationError
	require.True(t, errors.As(err, &ve))
	require.Equal(t, []flow.Problem{{Path: "steps.d", Message: `step "d" is unreachable from the initial step "a"`}}, ve.Warnings)
	require.Contains(t, err.Error(), `invalid flow definition: id: "bad id" must be`)

	// Parse reports every shape problem too.
	problems = problemsOf(t, `{"id": 1, "version": 2, "extra": true, "steps": {"a": {"id": "a", "type": "set", "timeout": "x", "bogus": 1}}}`, nil)
	paths = nil
	for _, p := range problems {
		paths = append(paths, p.Path)
	}
	require.Equal(t, []string{"extra", "id", "steps.a.bogus", "steps.a.timeout", "version"}, paths, formatProblems(problems))
}

func TestValidateWarnsAboutUnreachableSteps(t *testing.T) {
	t.Parallel()
	js := mutate(t, func(d map[string]any) {
		d["steps"].(map[string]any)["orphan"] = obj(`{"id": "orphan", "type": "delay", "config": {"duration": "1 second"}, "transitions": {"onSuccess": "orphan2"}}`)
		d["steps"].(map[string]any)["orphan2"] = obj(`{"id": "orphan2", "type": "delay", "config": {"duration": "1 second"}}`)
	})
	def, err := flow.Parse([]byte(js))
	require.NoError(t, err)
	warnings, err := flow.Validate(def, nil)
	require.NoError(t, err, "unreachable steps are warnings, not problems")
	require.Equal(t, []flow.Problem{
		{Path: "steps.orphan", Message: `step "orphan" is unreachable from the initial step "prepare"`},
		{Path: "steps.orphan2", Message: `step "orphan2" is unreachable from the initial step "prepare"`},
	}, warnings)

	// Compile accepts it too.
	_, err = flow.Compile(def, nil)
	require.NoError(t, err)
}

func TestValidateNil(t *testing.T) {
	t.Parallel()
	_, err := flow.Validate(nil, nil)
	require.ErrorIs(t, err, flow.ErrInvalidDefinition)
	_, err = flow.Compile(nil, nil)
	require.ErrorIs(t, err, flow.ErrInvalidDefinition)
}

func TestParseLimitsSize(t *testing.T) {
	t.Parallel()
	huge := `{"id": "x", "name": "` + strings.Repeat("a", flow.MaxDefinitionBytes) + `"}`
	_, err := flow.Parse([]byte(huge))
	require.ErrorContains(t, err, "the limit is 1048576")
}

func TestDecodeConfig(t *testing.T) {
	t.Parallel()
	type inner struct {
		N int `json:"n"`
	}
	type cfg struct {
		Name  string          `json:"name"`
		Items []inner         `json:"items"`
		Sel   *flow.Selector  `json:"sel"`
		Dur   dftype.Duration `json:"dur"`
	}
	var c cfg
	require.NoError(t, flow.DecodeConfig(json.RawMessage(`{"name": "a", "items": [{"n": 1}], "sel": {"key": "k"}, "dur": "2 seconds"}`), &c))
	require.Equal(t, "a", c.Name)
	require.Equal(t, 1, c.Items[0].N)
	require.Equal(t, "k", c.Sel.Key)
	require.NoError(t, flow.DecodeConfig(nil, &c), "no config is {}")

	err := flow.DecodeConfig(json.RawMessage(`{"name": 1, "items": [{"n": 1}, {"m": 2}], "sel": {"nope": 1}, "dur": "x"}`), &c)
	var ve *flow.ValidationError
	require.True(t, errors.As(err, &ve))
	require.Equal(t, []string{"dur", "items[1].m", "name", "sel.nope"}, func() []string {
		var out []string
		for _, p := range ve.Problems {
			out = append(out, p.Path)
		}
		return out
	}())
}
