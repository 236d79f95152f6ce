package flow

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
// value built, failing the evaluation as soon as one limit is passed. The
// built-ins whose result can be far bigger than their arguments (repeat,
// replace, join) are replaced with versions that check the size first.

const guardFunc = "__guard"

type sandbox struct {
	ctx      context.Context
	timeout  time.Duration
	maxOps   int
	maxBytes int
	ops      int
	err      error // the first limit passed, reported instead of expr's wrapping
}

func newSandbox(ctx context.Context, cfg *TransformHandlerConfig) *sandbox {
	return &sandbox{ctx: ctx, timeout: cfg.Timeout, maxOps: cfg.MaxOperations, maxBytes: cfg.MaxValueBytes}
}

// options returns the compile options of the sandbox; the patcher records an
// expression that calls an unknown function.
func (sb *sandbox) options(maxNodes uint) ([]expr.Option, *guardPatcher) {
	p := &guardPatcher{}
	return []expr.Option{
		expr.MaxNodes(maxNodes),
		expr.Patch(p),
		expr.Function(guardFunc, func(params ...any) (any, error) { return sb.guard(params[0]) }, new(func(any) any)),
		expr.DisableBuiltin("repeat"),
		expr.DisableBuiltin("replace"),
		expr.DisableBuiltin("join"),
		expr.Function("repeat", sb.repeat, new(func(string, int) string)),
		expr.Function("replace", sb.replace,
			new(func(string, string, string) string), new(func(string, string, string, int) string)),
		expr.Function("join", sb.join,
			new(func([]any, string) string), new(func([]any) string),
			new(func([]string, string) string), new(func([]string) string)),
	}, p
}

func (sb *sandbox) fail(err error) error {
	if sb.err == nil {
		sb.err = err
	}
	return sb.err
}

// guard counts one operation, checks the deadline and the size of v, and
// returns v.
func (sb *sandbox) guard(v any) (any, error) {
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
	if n, over := sizeOf(v, sb.maxBytes); over {
		return nil, sb.fail(fmt.Errorf("expression stopped: it built a value of more than %d bytes (%d+)", sb.maxBytes, n))
	}
	return v, nil
}

func (sb *sandbox) checkLen(what string, n int) error {
	if n > sb.maxBytes {
		return sb.fail(fmt.Errorf("expression stopped: %s would build a string of %d bytes, the limit is %d", what, n, sb.maxBytes))
	}
	return nil
}

func (sb *sandbox) repeat(args ...any) (any, error) {
	s, n := args[0].(string), toInt(args[1])
	if n < 0 {
		return nil, fmt.Errorf("repeat: negative count %d", n)
	}
	if err := sb.checkLen("repeat", len(s)*min(n, sb.maxBytes+1)); err != nil {
		return nil, err
	}
	return strings.Repeat(s, n), nil
}

func (sb *sandbox) replace(args ...any) (any, error) {
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

func (sb *sandbox) join(args ...any) (any, error) {
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
				return nil, fmt.Errorf("join: element %d is a %s, not a string", i, typeName(e))
			}
			parts[i] = s
		}
	default:
		return nil, fmt.Errorf("join: cannot join a %s", typeName(args[0]))
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
var sandboxFuncs = map[string]bool{guardFunc: true, "repeat": true, "replace": true, "join": true}

func (p *guardPatcher) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.BinaryNode, *ast.UnaryNode, *ast.ArrayNode, *ast.MapNode, *ast.BuiltinNode, *ast.SliceNode:
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
	s.walk(v)
	return s.n, s.n > limit
}

type sizer struct{ n, limit int }

func (s *sizer) walk(v any) {
	if s.n > s.limit {
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
		s.n += 2
		for _, e := range x {
			if s.n > s.limit {
				return
			}
			s.walk(e)
			s.n++
		}
	case map[string]any:
		s.n += 2
		for k, e := range x {
			if s.n > s.limit {
				return
			}
			s.n += len(k) + 4
			s.walk(e)
		}
	default:
		s.reflectWalk(reflect.ValueOf(v))
	}
}

func (s *sizer) reflectWalk(rv reflect.Value) {
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		s.n += 2
		for i := range rv.Len() {
			if s.n > s.limit {
				return
			}
			s.walk(rv.Index(i).Interface())
			s.n++
		}
	case reflect.Map:
		s.n += 2
		it := rv.MapRange()
		for it.Next() {
			if s.n > s.limit {
				return
			}
			s.walk(it.Key().Interface())
			s.walk(it.Value().Interface())
		}
	case reflect.String:
		s.n += rv.Len() + 2
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			s.n += 4
			return
		}
		s.walk(rv.Elem().Interface())
	default:
		s.n += 16
	}
}
