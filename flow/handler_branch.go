package flow

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// TypeBranch is the step type of the built-in branch handler.
const TypeBranch = "branch"

// Branch operators.
const (
	OpEq        = "eq"        // left equals right; numbers by value (1 == 1.0), objects and arrays deeply
	OpNeq       = "neq"       // not eq
	OpGt        = "gt"        // left > right: two numbers, or two strings (byte order)
	OpGte       = "gte"       // left >= right
	OpLt        = "lt"        // left < right
	OpLte       = "lte"       // left <= right
	OpExists    = "exists"    // left is present and not null; takes no right
	OpNotExists = "notExists" // left is missing or null; takes no right
	OpIn        = "in"        // right is an array with an element eq to left
)

var branchOps = []string{OpEq, OpNeq, OpGt, OpGte, OpLt, OpLte, OpExists, OpNotExists, OpIn}

// BranchConfig is the config of a branch step. Its conditions are tried in
// order and the first that holds chooses the next step; when none holds the
// flow goes to Default, and without one the step fails with NO_MATCH (which
// onFailure may catch). A branch has no transitions.onSuccess. Ordering
// operators on values that are not two numbers or two strings, and in on a
// right side that is not an array, do not hold.
//
// The step records its decision as its result — {"next": "big", "condition":
// 0} or {"next": "small", "default": true} — so a replay takes the same
// branch, and the outputKey (if any) stores that record.
//
//	{"conditions": [
//	   {"left": {"path": "order.total"}, "op": "gt", "right": {"value": 100}, "next": "review"},
//	   {"left": {"path": "order.coupon"}, "op": "exists", "next": "discount"}],
//	 "default": "ship"}
type BranchConfig struct {
	// Conditions are tried in order.
	Conditions []BranchCondition `json:"conditions"`
	// Default is the next step when no condition holds; End ends the flow.
	Default string `json:"default,omitempty"`
}

// BranchCondition is one condition of a branch.
type BranchCondition struct {
	// Left selects the value tested.
	Left *Selector `json:"left"`
	// Op is one of eq, neq, gt, gte, lt, lte, exists, notExists and in.
	Op string `json:"op"`
	// Right selects the value compared with; exists and notExists take none.
	Right *Selector `json:"right,omitempty"`
	// Next is the step that follows when the condition holds; End ends the flow.
	Next string `json:"next"`
}

// BranchResult is the recorded decision of a branch step.
type BranchResult struct {
	// Next is the chosen step id (or End).
	Next string `json:"next"`
	// Condition is the index of the condition that held.
	Condition *int `json:"condition,omitempty"`
	// Default is true when no condition held and Default was taken.
	Default bool `json:"default,omitempty"`
}

type branchHandler struct{}

func (branchHandler) Type() string { return TypeBranch }

func (branchHandler) Validate(config json.RawMessage) error {
	var c BranchConfig
	if err := DecodeConfig(config, &c); err != nil {
		return err
	}
	var problems []Problem
	add := func(path, format string, args ...any) {
		problems = append(problems, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	if len(c.Conditions) == 0 {
		add("conditions", "a branch needs at least one condition")
	}
	for i, cond := range c.Conditions {
		p := fmt.Sprintf("conditions[%d]", i)
		if cond.Left == nil {
			add(p+".left", "is required")
		}
		if cond.Next == "" {
			add(p+".next", "is required (a step id, or %q to end the flow)", End)
		}
		switch cond.Op {
		case "":
			add(p+".op", "is required (one of %s)", strings.Join(branchOps, ", "))
		case OpExists, OpNotExists:
			if cond.Right != nil {
				add(p+".right", "%s takes no right side", cond.Op)
			}
		case OpEq, OpNeq, OpGt, OpGte, OpLt, OpLte, OpIn:
			if cond.Right == nil {
				add(p+".right", "is required for %s", cond.Op)
			} else if cond.Op == OpIn && cond.Right.Value != nil {
				if v, err := decodeValue(cond.Right.Value); err == nil {
					if _, ok := v.([]any); !ok {
						add(p+".right.value", "in needs an array, not a %s", typeName(v))
					}
				}
			}
		default:
			add(p+".op", "unknown operator %q (use %s)", cond.Op, strings.Join(branchOps, ", "))
		}
	}
	return newValidationError(problems, nil)
}

func (branchHandler) targets(config json.RawMessage) []target {
	var c BranchConfig
	if DecodeConfig(config, &c) != nil {
		return nil
	}
	var out []target
	for i, cond := range c.Conditions {
		if cond.Next != "" {
			out = append(out, target{path: fmt.Sprintf("conditions[%d].next", i), id: cond.Next})
		}
	}
	if c.Default != "" {
		out = append(out, target{path: "default", id: c.Default})
	}
	return out
}

func (branchHandler) next(result json.RawMessage) (string, error) {
	var r BranchResult
	if err := json.Unmarshal(result, &r); err != nil || r.Next == "" {
		return "", fmt.Errorf("branch result %s names no next step", result)
	}
	return r.Next, nil
}

func (branchHandler) Run(_ context.Context, inv *Invocation) (any, error) {
	var c BranchConfig
	if err := DecodeConfig(inv.Config, &c); err != nil {
		return nil, failure(ErrorNameInvalidConfig, "%v", err)
	}
	for i, cond := range c.Conditions {
		ok, err := evalCondition(cond, inv.Context)
		if err != nil {
			return nil, fmt.Errorf("conditions[%d]: %w", i, err)
		}
		if ok {
			return BranchResult{Next: cond.Next, Condition: &i}, nil
		}
	}
	if c.Default != "" {
		return BranchResult{Next: c.Default, Default: true}, nil
	}
	return nil, failure(ErrorNameNoMatch, "no condition of branch step %q matched and it has no default", inv.StepID)
}

// evalCondition tells whether one condition holds in the context ctx.
func evalCondition(c BranchCondition, ctx map[string]any) (bool, error) {
	left, found, err := c.Left.Select(ctx)
	if err != nil {
		return false, err
	}
	switch c.Op {
	case OpExists:
		return found && left != nil, nil
	case OpNotExists:
		return !found || left == nil, nil
	}
	right, _, err := c.Right.Select(ctx)
	if err != nil {
		return false, err
	}
	switch c.Op {
	case OpEq:
		return jsonEqual(left, right), nil
	case OpNeq:
		return !jsonEqual(left, right), nil
	case OpIn:
		arr, ok := right.([]any)
		if !ok {
			return false, nil
		}
		for _, e := range arr {
			if jsonEqual(left, e) {
				return true, nil
			}
		}
		return false, nil
	}
	cmp, ok := compareValues(left, right)
	if !ok {
		return false, nil
	}
	switch c.Op {
	case OpGt:
		return cmp > 0, nil
	case OpGte:
		return cmp >= 0, nil
	case OpLt:
		return cmp < 0, nil
	case OpLte:
		return cmp <= 0, nil
	}
	return false, failure(ErrorNameInvalidConfig, "unknown operator %q", c.Op)
}
