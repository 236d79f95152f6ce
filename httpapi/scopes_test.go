package httpapi_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/httpapi"
)

// TestScopesListEveryAction: Scopes, which the command's help texts print,
// names every Action constant declared in auth.go and then "*", and each
// of them is a scope ParseToken accepts.
func TestScopesListEveryAction(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "auth.go", nil, 0)
	require.NoError(t, err)
	var declared []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Action" {
				continue
			}
			for _, v := range vs.Values {
				lit := v.(*ast.BasicLit)
				name, err := strconv.Unquote(lit.Value)
				require.NoError(t, err)
				declared = append(declared, name)
			}
		}
	}
	require.NotEmpty(t, declared)
	require.Equal(t, append(declared, "*"), httpapi.Scopes())

	for _, s := range httpapi.Scopes() {
		tok, err := httpapi.ParseToken("t:secret:" + s)
		require.NoError(t, err, s)
		require.NotEmpty(t, tok.Scopes, s)
	}
	_, err = httpapi.ParseToken("t:secret:reed")
	require.ErrorContains(t, err, `unknown scope "reed" (want read, create, manage, events, flows, schedules, tick, metrics or *)`)
}
