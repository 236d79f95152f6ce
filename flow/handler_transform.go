package flow

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/duraflow/duraflow/flow/internal/sandbox"
	"github.com/duraflow/duraflow/workflow"
)

// TypeTransform is the step type of the built-in transform handler.
const TypeTransform = "transform"

// Transform presets, applied to the step's input.
const (
	PresetUpper         = "upper"          // a string in upper case
	PresetLower         = "lower"          // a string in lower case
	PresetTrim          = "trim"           // a string without leading and trailing white space
	PresetJSONParse     = "json.parse"     // the JSON value a string holds
	PresetJSONStringify = "json.stringify" // any value as a JSON string
)

var transformPresets = []string{PresetUpper, PresetLower, PresetTrim, PresetJSONParse, PresetJSONStringify}

// TransformConfig is the config of a transform step: exactly one of a preset,
// applied to the step's input, or an expression in the expr language
// (https://expr-lang.org), evaluated with the flow context as its
// environment, whose value is the step's output.
//
//	{"preset": "upper"}
//	{"expression": "{total: sum(map(order.items, #.price * #.qty)), count: len(order.items)}"}
//
// Expressions are sandboxed: they see the flow context and expr's pure
// built-in functions, plus urlEncode(s) (url.QueryEscape) and
// urlPathEscape(s) (url.PathEscape), and nothing else — no environment
// variables, files, network, clock-driven waits or Go methods of the host.
// Their size, AST nodes, operations, the size and depth of the values they
// build and their running time are limited (see TransformHandlerConfig),
// and checked during the evaluation: the built-ins that could build far
// more than their arguments check the size first. A step that hits a limit
// fails with EXPRESSION_ERROR and is not retried. Numbers in the context are
// ints when they are integers that fit in 64 bits and float64 otherwise.
type TransformConfig struct {
	// Preset is one of upper, lower, trim, json.parse and json.stringify.
	Preset string `json:"preset,omitempty"`
	// Expression is an expr expression.
	Expression string `json:"expression,omitempty"`
}

// TransformHandlerConfig limits the expressions of the transform handler.
type TransformHandlerConfig struct {
	// MaxExpressionBytes bounds the source of an expression.
	//
	// Defaults to 4096.
	MaxExpressionBytes int
	// MaxNodes bounds the AST nodes of an expression (expr.MaxNodes), which
	// stops expressions nested too deep or too big to check.
	//
	// Defaults to 1000.
	MaxNodes uint
	// MaxOperations bounds the operations one evaluation performs: each
	// operator, call, literal collection and each iteration of a predicate
	// (map, filter, reduce, ...) counts one.
	//
	// Defaults to 1,000,000.
	MaxOperations int
	// MaxValueBytes bounds the JSON size of every value an expression builds
	// and of its result, so that repeated doubling can't exhaust memory.
	//
	// Defaults to workflow.MaxPayloadBytes (1 MiB).
	MaxValueBytes int
	// MaxDepth bounds the nesting of every value an expression builds (and
	// of what toJSON and fromJSON read), so that a loop can't nest a value
	// deep enough to make the built-ins that walk it recurse without end.
	// A value deeper than workflow.MaxPayloadDepth could not be stored as a
	// step result anyway.
	//
	// Defaults to workflow.MaxPayloadDepth (256).
	MaxDepth int
	// Timeout bounds one evaluation.
	//
	// Defaults to 1 second.
	Timeout time.Duration
}

// WithDefaults returns a copy of the config with zero fields filled with their
// defaults.
func (c *TransformHandlerConfig) WithDefaults() *TransformHandlerConfig {
	var out TransformHandlerConfig
	if c != nil {
		out = *c
	}
	out.MaxExpressionBytes = cmp.Or(out.MaxExpressionBytes, 4096)
	out.MaxNodes = cmp.Or(out.MaxNodes, 1000)
	out.MaxOperations = cmp.Or(out.MaxOperations, 1_000_000)
	out.MaxValueBytes = cmp.Or(out.MaxValueBytes, workflow.MaxPayloadBytes)
	out.MaxDepth = cmp.Or(out.MaxDepth, workflow.MaxPayloadDepth)
	out.Timeout = cmp.Or(out.Timeout, time.Second)
	return &out
}

func (c *TransformHandlerConfig) validate() error {
	if c.MaxExpressionBytes < 0 || c.MaxOperations < 0 || c.MaxValueBytes < 0 || c.MaxDepth < 0 || c.Timeout < 0 {
		return errors.New("flow: TransformHandlerConfig: limits must not be negative")
	}
	return nil
}

// TransformHandler is the built-in transform handler.
type TransformHandler struct {
	cfg *TransformHandlerConfig
}

// NewTransformHandler returns a transform handler with the given limits (nil
// takes the defaults).
func NewTransformHandler(cfg *TransformHandlerConfig) (*TransformHandler, error) {
	c := cfg.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	return &TransformHandler{cfg: c}, nil
}

// Type returns "transform".
func (h *TransformHandler) Type() string { return TypeTransform }

// Validate checks the config and compiles the expression.
func (h *TransformHandler) Validate(config json.RawMessage) error {
	var c TransformConfig
	if err := DecodeConfig(config, &c); err != nil {
		return err
	}
	switch {
	case c.Preset == "" && c.Expression == "":
		return &ValidationError{Problems: []Problem{{Message: `needs "preset" or "expression"`}}}
	case c.Preset != "" && c.Expression != "":
		return &ValidationError{Problems: []Problem{{Message: `has both "preset" and "expression": choose one`}}}
	case c.Preset != "":
		if !isPreset(c.Preset) {
			return &ValidationError{Problems: []Problem{{Path: "preset", Message: fmt.Sprintf("unknown preset %q (use %s)", c.Preset, strings.Join(transformPresets, ", "))}}}
		}
		return nil
	}
	if _, err := h.compile(c.Expression, sandbox.New(context.Background(), h.limits())); err != nil {
		return &ValidationError{Problems: []Problem{{Path: "expression", Message: err.Error()}}}
	}
	return nil
}

// Run applies the preset to the input or evaluates the expression.
func (h *TransformHandler) Run(ctx context.Context, inv *Invocation) (any, error) {
	var c TransformConfig
	if err := DecodeConfig(inv.Config, &c); err != nil {
		return nil, failure(ErrorNameInvalidConfig, "%v", err)
	}
	if c.Preset != "" {
		return applyPreset(c.Preset, inv.Input)
	}
	v, err := h.Eval(ctx, c.Expression, inv.Context)
	if err != nil {
		return nil, err
	}
	return v, nil
}

// Eval evaluates an expression with env as its environment, under the
// handler's limits, and returns its value as JSON. Errors are
// EXPRESSION_ERROR failures.
func (h *TransformHandler) Eval(ctx context.Context, expression string, env map[string]any) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	sb := sandbox.New(ctx, h.limits())
	program, err := h.compile(expression, sb)
	if err != nil {
		return nil, failure(ErrorNameExpression, "%v", err)
	}
	out, err := sb.Run(program, exprEnv(env))
	if err != nil {
		return nil, failure(ErrorNameExpression, "%v", err)
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return nil, failure(ErrorNameExpression, "the expression's value is not JSON: %v", err)
	}
	return raw, nil
}

func (h *TransformHandler) compile(src string, sb *sandbox.Sandbox) (*sandbox.Program, error) {
	if len(src) > h.cfg.MaxExpressionBytes {
		return nil, fmt.Errorf("expression is %d bytes, the limit is %d", len(src), h.cfg.MaxExpressionBytes)
	}
	return sb.Compile(src, h.cfg.MaxNodes)
}

// limits are the sandbox's limits of one evaluation.
func (h *TransformHandler) limits() sandbox.Limits {
	return sandbox.Limits{Timeout: h.cfg.Timeout, MaxOperations: h.cfg.MaxOperations, MaxValueBytes: h.cfg.MaxValueBytes, MaxDepth: h.cfg.MaxDepth}
}

func isPreset(p string) bool {
	for _, q := range transformPresets {
		if p == q {
			return true
		}
	}
	return false
}

func applyPreset(preset string, in any) (any, error) {
	if preset == PresetJSONStringify {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, failure(ErrorNameInvalidInput, "json.stringify: %v", err)
		}
		return string(b), nil
	}
	s, ok := in.(string)
	if !ok {
		return nil, failure(ErrorNameInvalidInput, "preset %s needs a string input, not a %s", preset, typeName(in))
	}
	switch preset {
	case PresetUpper:
		return strings.ToUpper(s), nil
	case PresetLower:
		return strings.ToLower(s), nil
	case PresetTrim:
		return strings.TrimSpace(s), nil
	case PresetJSONParse:
		v, err := decodeValue([]byte(s))
		if err != nil {
			return nil, failure(ErrorNameInvalidInput, "json.parse: %v", err)
		}
		return v, nil
	}
	return nil, failure(ErrorNameInvalidConfig, "unknown preset %q", preset)
}

// exprEnv converts the context for expr: json.Number becomes int or float64,
// so that arithmetic and comparisons work.
func exprEnv(ctx map[string]any) map[string]any {
	out, _ := exprValue(ctx).(map[string]any)
	if out == nil {
		out = map[string]any{}
	}
	return out
}

func exprValue(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(x.String(), 10, 0); err == nil {
			return int(i)
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = exprValue(e)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = exprValue(e)
		}
		return s
	}
	return v
}
