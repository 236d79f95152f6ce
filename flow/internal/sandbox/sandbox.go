// Package sandbox evaluates the expressions of the transform handler of
// package flow under limits: operations, time, value size and depth. It is
// the only part of the flow feature that knows the expression library
// (expr); package flow compiles and runs expressions through it.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/builtin"
	"github.com/expr-lang/expr/vm"

	"github.com/duraflow/duraflow/flow/internal/jsonvalue"
)

// The expression sandbox. expr has no I/O of its own and we give it none:
// the environment is the flow context (plain maps, slices and scalars, no Go
// methods), and the only functions are expr's pure built-ins. What remains is
// resource use, which expr bounds only partly (ranges count against its
// memory budget; loops over the environment's arrays, string concatenation
// and nested collections do not). So a patcher wraps every node that
// computes something — operators, calls, collection literals and predicate
// bodies (the loop bodies of map, filter, reduce, ...) — in a call to
// guardFunc, which counts operations, checks the deadline and measures the
// value built (its JSON size and depth), failing the evaluation as soon as
// one limit is passed.
//
// The guard runs between operations, and nothing can stop a built-in that
// is running, so every built-in must also be bounded on its own: given
// arguments the guard let through (or the flow context, which the payload
// limits bound), none may allocate or run for much more than linear in the
// value limit. The audit of expr's built-ins (v1.17):
//
//   - predicates (all, any, none, one, filter, map, find*, count, sum,
//     groupBy, sortBy, reduce) loop in the VM, with each iteration guarded;
//   - the range operator (..) and literal arrays and maps count against
//     expr's memory budget (vm.MemoryBudget, 1e6 elements) before they are
//     built;
//   - results no bigger than their arguments, in linear or n·log n time:
//     len, type, abs, ceil, floor, round, int, float, string, trim*, upper
//     and lower (at most 3/2 of the input), indexOf, lastIndexOf, hasPrefix,
//     hasSuffix, max, min, mean, median, toBase64 (4/3), fromBase64, first,
//     last, get, take, keys, values, toPairs, fromPairs, reverse, uniq,
//     flatten, sort, the bit functions, now, duration, date, timezone;
//   - replaced here because their result can be far bigger than their
//     arguments, or their work superlinear: repeat, replace and join (size
//     checked before building), split and splitAfter (pieces counted before
//     splitting), concat (sizes summed before copying), toJSON (its
//     indentation grows with the square of the depth: written into a
//     bounded buffer, stopped when it is full), fromJSON (decoded token by
//     token with the size and depth counted) and the matches operator (a
//     linear-time regexp, but its time is the text's length times the
//     compiled pattern's size, which is checked first).
//
// The functions the sandbox adds (urlEncode, urlPathEscape) are linear too.

const (
	guardFunc   = "__guard"
	matchesFunc = "__matches"

	// maxRegexpWork bounds len(text) × instructions of the compiled pattern
	// for one matches: Go's regexp runs in time linear in both, some tens of
	// nanoseconds per unit at worst, so this is well under a second.
	maxRegexpWork = 20_000_000
)

// Sandbox holds the state of one evaluation: the operations counted and
// the first limit passed.
type Sandbox struct {
	ctx      context.Context
	timeout  time.Duration
	maxOps   int
	maxBytes int
	maxDepth int
	ops      int
	err      error // the first limit passed, reported instead of expr's wrapping
	// patterns caches the compiled patterns of matches for one evaluation,
	// so that matches inside map() compiles its pattern once, as expr does
	// for a constant pattern; at most maxCachedPatterns are kept.
	patterns map[string]*pattern
}

// Limits bound one evaluation; package flow fills them from its
// TransformHandlerConfig, which documents them and their defaults.
type Limits struct {
	// Timeout bounds the evaluation.
	Timeout time.Duration
	// MaxOperations bounds the operations the evaluation performs.
	MaxOperations int
	// MaxValueBytes bounds the JSON size of every value built.
	MaxValueBytes int
	// MaxDepth bounds the nesting of every value built.
	MaxDepth int
}

// New returns a sandbox for one evaluation (or one compilation, to
// validate an expression) under l; ctx's deadline stops the evaluation.
func New(ctx context.Context, l Limits) *Sandbox {
	return &Sandbox{ctx: ctx, timeout: l.Timeout, maxOps: l.MaxOperations, maxBytes: l.MaxValueBytes, maxDepth: l.MaxDepth}
}

// Program is a compiled expression.
type Program = vm.Program

// Compile compiles src with the sandbox's functions and guards; the AST may
// have at most maxNodes nodes.
func (sb *Sandbox) Compile(src string, maxNodes uint) (*Program, error) {
	opts, patcher := sb.options(maxNodes)
	program, err := expr.Compile(src, opts...)
	if err != nil {
		return nil, fmt.Errorf("compiling expression: %s", firstLine(err.Error()))
	}
	if patcher.err != nil {
		return nil, fmt.Errorf("compiling expression: %w", patcher.err)
	}
	return program, nil
}

// Run evaluates program, compiled by Compile of the same sandbox, with env
// as its environment, and returns its value once the guard checked it. A
// passed limit is reported as such, any other failure as expr reports it.
func (sb *Sandbox) Run(program *Program, env map[string]any) (any, error) {
	out, err := (&vm.VM{}).Run(program, env)
	if err != nil {
		if sb.err != nil {
			return nil, sb.err
		}
		return nil, fmt.Errorf("evaluating expression: %s", firstLine(err.Error()))
	}
	if _, err := sb.guard(out); err != nil {
		return nil, err
	}
	return out, nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// replacedBuiltins are expr's built-ins the sandbox disables and provides
// itself, with size checks.
var replacedBuiltins = []string{"repeat", "replace", "join", "split", "splitAfter", "concat", "toJSON", "fromJSON"}

// options returns the compile options of the sandbox; the patcher records an
// expression that calls an unknown function.
func (sb *Sandbox) options(maxNodes uint) ([]expr.Option, *guardPatcher) {
	p := &guardPatcher{}
	opts := []expr.Option{
		expr.MaxNodes(maxNodes),
		expr.Patch(p),
		expr.Function(guardFunc, func(params ...any) (any, error) { return sb.guard(params[0]) }, new(func(any) any)),
		expr.Function(matchesFunc, sb.matches, new(func(any, any) bool)),
	}
	for _, name := range replacedBuiltins {
		opts = append(opts, expr.DisableBuiltin(name))
	}
	return append(opts,
		expr.Function("repeat", sb.repeat, new(func(string, int) string)),
		expr.Function("replace", sb.replace,
			new(func(string, string, string) string), new(func(string, string, string, int) string)),
		expr.Function("join", sb.join,
			new(func([]any, string) string), new(func([]any) string),
			new(func([]string, string) string), new(func([]string) string)),
		expr.Function("split", sb.split(false), new(func(string, string) []string), new(func(string, string, int) []string)),
		expr.Function("splitAfter", sb.split(true), new(func(string, string) []string), new(func(string, string, int) []string)),
		expr.Function("concat", sb.concat, new(func(...any) []any)),
		expr.Function("toJSON", sb.toJSON, new(func(any) string)),
		expr.Function("fromJSON", sb.fromJSON, new(func(string) any)),
		expr.Function("urlEncode", sb.urlEncode, new(func(string) string)),
		expr.Function("urlPathEscape", sb.urlPathEscape, new(func(string) string)),
	), p
}

func (sb *Sandbox) fail(err error) error {
	if sb.err == nil {
		sb.err = err
	}
	return sb.err
}

// guard counts one operation, checks the deadline and the size of v, and
// returns v.
func (sb *Sandbox) guard(v any) (any, error) {
	if sb.err != nil {
		return nil, sb.err
	}
	sb.ops++
	if sb.ops > sb.maxOps {
		return nil, sb.fail(fmt.Errorf("expression stopped: it took more than %d operations (a loop too big?)", sb.maxOps))
	}
	select {
	case <-sb.ctx.Done():
		if errors.Is(sb.ctx.Err(), context.DeadlineExceeded) {
			return nil, sb.fail(fmt.Errorf("expression stopped: it ran longer than %s", sb.timeout))
		}
		return nil, sb.fail(fmt.Errorf("expression stopped: %w", sb.ctx.Err()))
	default:
	}
	if err := sb.checkValue(v); err != nil {
		return nil, err
	}
	return v, nil
}

// checkValue checks the size and depth of a value.
func (sb *Sandbox) checkValue(v any) error {
	s := sizer{limit: sb.maxBytes, maxDepth: sb.maxDepth}
	s.walk(v, 0)
	switch {
	case s.tooDeep:
		return sb.fail(fmt.Errorf("expression stopped: it built a value nested more than %d levels deep", sb.maxDepth))
	case s.n > s.limit:
		return sb.fail(fmt.Errorf("expression stopped: it built a value of more than %d bytes (%d+)", sb.maxBytes, s.n))
	}
	return nil
}

func (sb *Sandbox) checkLen(what string, n int) error {
	if n > sb.maxBytes {
		return sb.fail(fmt.Errorf("expression stopped: %s would build a string of %d bytes, the limit is %d", what, n, sb.maxBytes))
	}
	return nil
}

func (sb *Sandbox) repeat(args ...any) (any, error) {
	s, n := args[0].(string), toInt(args[1])
	if n < 0 {
		return nil, fmt.Errorf("repeat: negative count %d", n)
	}
	if err := sb.checkLen("repeat", len(s)*min(n, sb.maxBytes+1)); err != nil {
		return nil, err
	}
	return strings.Repeat(s, n), nil
}

func (sb *Sandbox) replace(args ...any) (any, error) {
	s, old, repl := args[0].(string), args[1].(string), args[2].(string)
	n := -1
	if len(args) == 4 {
		n = toInt(args[3])
	}
	count := strings.Count(s, old)
	if old == "" {
		count = utf8.RuneCountInString(s) + 1
	}
	if n >= 0 && n < count {
		count = n
	}
	if err := sb.checkLen("replace", len(s)+count*(len(repl)-len(old))); err != nil {
		return nil, err
	}
	return strings.Replace(s, old, repl, n), nil
}

func (sb *Sandbox) join(args ...any) (any, error) {
	glue := ""
	if len(args) == 2 {
		glue = args[1].(string)
	}
	var parts []string
	switch x := args[0].(type) {
	case []string:
		parts = x
	case []any:
		parts = make([]string, len(x))
		for i, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("join: element %d is a %s, not a string", i, jsonvalue.TypeName(e))
			}
			parts[i] = s
		}
	default:
		return nil, fmt.Errorf("join: cannot join a %s", jsonvalue.TypeName(args[0]))
	}
	n := len(glue) * max(len(parts)-1, 0)
	for _, p := range parts {
		n += len(p)
	}
	if err := sb.checkLen("join", n); err != nil {
		return nil, err
	}
	return strings.Join(parts, glue), nil
}

func toInt(v any) int {
	switch x := v.(type) {
	case int:
		return x
	case int64:
		return int(x)
	case float64:
		return int(x)
	}
	rv := reflect.ValueOf(v)
	if rv.CanInt() {
		return int(rv.Int())
	}
	return 0
}

// guardPatcher wraps computing nodes in guardFunc calls, and records a call
// of a function that does not exist: the environment holds JSON values only,
// so nothing else could ever be called.
type guardPatcher struct{ err error }

// sandboxFuncs are the functions the sandbox adds or replaces.
var sandboxFuncs = map[string]bool{guardFunc: true, matchesFunc: true, "urlEncode": true, "urlPathEscape": true}

func init() {
	for _, name := range replacedBuiltins {
		sandboxFuncs[name] = true
	}
}

func (p *guardPatcher) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.BinaryNode:
		if n.Operator == "matches" {
			call := &ast.CallNode{Callee: &ast.IdentifierNode{Value: matchesFunc}, Arguments: []ast.Node{n.Left, n.Right}}
			ast.Patch(node, call)
			call.Callee.SetLocation(call.Location())
		}
		wrapGuard(node)
	case *ast.UnaryNode, *ast.ArrayNode, *ast.MapNode, *ast.BuiltinNode, *ast.SliceNode:
		wrapGuard(node)
	case *ast.CallNode:
		if isGuard(n) {
			return
		}
		if id, ok := n.Callee.(*ast.IdentifierNode); ok && p.err == nil {
			if _, builtin := builtin.Index[id.Value]; !builtin && !sandboxFuncs[id.Value] {
				p.err = fmt.Errorf("unknown function %s() at offset %d: expressions can call expr's built-in functions only",
					id.Value, n.Location().From)
			}
		}
		wrapGuard(node)
	case *ast.PredicateNode:
		if c, ok := n.Node.(*ast.CallNode); !ok || !isGuard(c) {
			wrapGuard(&n.Node)
		}
	}
}

func wrapGuard(node *ast.Node) {
	call := &ast.CallNode{Callee: &ast.IdentifierNode{Value: guardFunc}, Arguments: []ast.Node{*node}}
	ast.Patch(node, call)
	call.Callee.SetLocation(call.Location())
}

func isGuard(c *ast.CallNode) bool {
	id, ok := c.Callee.(*ast.IdentifierNode)
	return ok && id.Value == guardFunc
}

// sizeOf estimates the JSON size of v, stopping as soon as it passes limit,
// so that measuring a huge value (or a small tree of shared references that
// expands hugely) costs O(limit) at most.
func sizeOf(v any, limit int) (int, bool) {
	s := sizer{limit: limit}
	s.walk(v, 0)
	return s.n, s.n > limit
}

// sizer measures a value's JSON size, up to limit, and its depth, up to
// maxDepth (0: unbounded).
type sizer struct {
	n, limit, maxDepth int
	tooDeep            bool
}

func (s *sizer) stop() bool { return s.n > s.limit || s.tooDeep }

func (s *sizer) enter(depth int) bool {
	if s.maxDepth > 0 && depth >= s.maxDepth {
		s.tooDeep = true
	}
	return !s.stop()
}

func (s *sizer) walk(v any, depth int) {
	if s.stop() {
		return
	}
	switch x := v.(type) {
	case nil:
		s.n += 4
	case bool:
		s.n += 5
	case string:
		s.n += len(x) + 2
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		s.n += 8
	case []any:
		if !s.enter(depth) {
			return
		}
		s.n += 2
		for _, e := range x {
			if s.stop() {
				return
			}
			s.walk(e, depth+1)
			s.n++
		}
	case map[string]any:
		if !s.enter(depth) {
			return
		}
		s.n += 2
		for k, e := range x {
			if s.stop() {
				return
			}
			s.n += len(k) + 4
			s.walk(e, depth+1)
		}
	default:
		s.reflectWalk(reflect.ValueOf(v), depth)
	}
}

func (s *sizer) reflectWalk(rv reflect.Value, depth int) {
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		if !s.enter(depth) {
			return
		}
		s.n += 2
		for i := range rv.Len() {
			if s.stop() {
				return
			}
			s.walk(rv.Index(i).Interface(), depth+1)
			s.n++
		}
	case reflect.Map:
		if !s.enter(depth) {
			return
		}
		s.n += 2
		it := rv.MapRange()
		for it.Next() {
			if s.stop() {
				return
			}
			s.walk(it.Key().Interface(), depth+1)
			s.walk(it.Value().Interface(), depth+1)
		}
	case reflect.String:
		s.n += rv.Len() + 2
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			s.n += 4
			return
		}
		s.walk(rv.Elem().Interface(), depth)
	default:
		s.n += 16
	}
}
