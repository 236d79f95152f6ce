package flow

import (
	"context"
	"encoding/json"
	"fmt"
)

// TypeSet is the step type of the built-in set handler.
const TypeSet = "set"

// SetConfig is the config of a set step, which sets context values from
// selectors. Each key is a dot path. Without an outputKey the values are
// merged into the context, in sorted key order (so "a" is set before "a.b");
// with one, the object of values is stored there instead.
//
//	{"values": {"status": {"value": "paid"}, "order.total": {"path": "quote.amount"},
//	            "greeting": {"template": "Hello, ${user.name}!"}}}
type SetConfig struct {
	// Values maps dot paths to the selectors of their values.
	Values map[string]*Selector `json:"values"`
}

type setHandler struct{}

func (setHandler) Type() string { return TypeSet }

func (setHandler) mergesIntoContext() {}

func (setHandler) Validate(config json.RawMessage) error {
	var c SetConfig
	if err := DecodeConfig(config, &c); err != nil {
		return err
	}
	var problems []Problem
	if len(c.Values) == 0 {
		problems = append(problems, Problem{Path: "values", Message: "sets nothing: give at least one key"})
	}
	for _, k := range sortedKeys(c.Values) {
		if _, err := parsePath(k); err != nil {
			problems = append(problems, Problem{Path: joinPath("values", k), Message: err.Error()})
		}
		if c.Values[k] == nil {
			problems = append(problems, Problem{Path: joinPath("values", k), Message: "must be a selector"})
		}
	}
	return newValidationError(problems, nil)
}

func (setHandler) Run(_ context.Context, inv *Invocation) (any, error) {
	var c SetConfig
	if err := DecodeConfig(inv.Config, &c); err != nil {
		return nil, failure(ErrorNameInvalidConfig, "%v", err)
	}
	out := make(map[string]any, len(c.Values))
	for _, k := range sortedKeys(c.Values) {
		v, err := inv.Select(c.Values[k])
		if err != nil {
			return nil, fmt.Errorf("values.%s: %w", k, err)
		}
		out[k] = v
	}
	return out, nil
}
