package httpapi_test

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/duraflow/duraflow/dftype"
)

// This file turns the Go types of the wire into the JSON Schemas of the
// OpenAPI document (openapi.json): the schemas follow the types the server
// encodes and decodes, and their descriptions and enums come from the
// types' doc comments and constants, read from the source.

const modulePath = "github.com/duraflow/duraflow"

// obj is a JSON object of the document.
type obj = map[string]any

// goSource is what the generator reads from the module's source: doc
// comments of types and fields, and the string constants of named types.
type goSource struct {
	typeDocs  map[string]string   // "pkgpath.Type"
	fieldDocs map[string]string   // "pkgpath.Type.Field"
	consts    map[string][]string // "pkgpath.Type": values in source order
	constDocs map[string]string   // "pkgpath.Type=value": the constant's trailing comment
	parsed    map[string]bool
}

var (
	sourceOnce sync.Once
	source     *goSource
)

func readSource() *goSource {
	sourceOnce.Do(func() {
		source = &goSource{typeDocs: map[string]string{}, fieldDocs: map[string]string{}, consts: map[string][]string{}, constDocs: map[string]string{}, parsed: map[string]bool{}}
	})
	return source
}

var spaces = regexp.MustCompile(`\s+`)

func cleanDoc(s string) string { return strings.TrimSpace(spaces.ReplaceAllString(s, " ")) }

// parse reads the non-test files of the package pkgPath (of this module).
func (s *goSource) parse(pkgPath string) {
	if s.parsed[pkgPath] || !strings.HasPrefix(pkgPath, modulePath) {
		return
	}
	s.parsed[pkgPath] = true
	dir := filepath.Join("..", strings.TrimPrefix(strings.TrimPrefix(pkgPath, modulePath), "/"))
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		panic(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			panic(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, spec := range gd.Specs {
				switch sp := spec.(type) {
				case *ast.TypeSpec:
					doc := sp.Doc
					if doc == nil && len(gd.Specs) == 1 {
						doc = gd.Doc
					}
					if doc != nil {
						s.typeDocs[pkgPath+"."+sp.Name.Name] = cleanDoc(doc.Text())
					}
					st, ok := sp.Type.(*ast.StructType)
					if !ok {
						continue
					}
					for _, fld := range st.Fields.List {
						text := ""
						if fld.Doc != nil {
							text = fld.Doc.Text()
						} else if fld.Comment != nil {
							text = fld.Comment.Text()
						}
						for _, n := range fld.Names {
							s.fieldDocs[pkgPath+"."+sp.Name.Name+"."+n.Name] = cleanDoc(text)
						}
					}
				case *ast.ValueSpec:
					id, ok := sp.Type.(*ast.Ident)
					if !ok || gd.Tok != token.CONST || len(sp.Values) != len(sp.Names) {
						continue
					}
					for _, v := range sp.Values {
						lit, ok := v.(*ast.BasicLit)
						if !ok || lit.Kind != token.STRING {
							continue
						}
						val, err := strconv.Unquote(lit.Value)
						if err != nil {
							panic(err)
						}
						key := pkgPath + "." + id.Name
						s.consts[key] = append(s.consts[key], val)
						if sp.Comment != nil {
							s.constDocs[key+"="+val] = cleanDoc(sp.Comment.Text())
						}
					}
				}
			}
		}
	}
}

func typeKey(t reflect.Type) string { return t.PkgPath() + "." + t.Name() }

// typeDoc is the doc comment of a named type, "" when it has none.
func typeDoc(t reflect.Type) string {
	s := readSource()
	s.parse(t.PkgPath())
	return s.typeDocs[typeKey(t)]
}

// constsOf are the string constants of a named type, in source order.
func constsOf(t reflect.Type) []string {
	s := readSource()
	s.parse(t.PkgPath())
	return s.consts[typeKey(t)]
}

// schemaSet builds the components/schemas of the document from Go types.
type schemaSet struct {
	comps map[string]any
	names map[reflect.Type]string
	// request holds the types that are request bodies (or inside one):
	// their schemas refuse unknown fields, as the server does.
	request map[reflect.Type]bool
}

// Component names of types whose Go names would collide or mislead.
var schemaNames = map[string]string{}

// nameTypes sets the component names of the types in m (a type is given by
// a value of it).
func nameTypes(m map[string]any) {
	for name, v := range m {
		schemaNames[typeKey(reflect.TypeOf(v))] = name
	}
}

// requestRequired are the required fields of request bodies, by type (the
// Go types do not say, as every field of a response without omitempty is
// always there).
var requestRequired = map[string][]string{}

// pagedTypes are the pages whose MarshalJSON adds "hasNextPage" to their
// fields (the paging shape of every list).
var pagedTypes = map[string]bool{}

// fieldRules are the rules of request fields that the Go types do not
// carry (patterns, lengths, ranges, sizes), by "pkgpath.Type.Field": their
// keywords are added to the field's schema, or, for a {"$ref": …}, replace
// it with a reference to a schema that holds them.
var fieldRules = map[string]obj{}

// schemaDocs are descriptions of components whose Go doc comment reads
// badly flattened into one line (an example in a code block), by
// "pkgpath.Type".
var schemaDocs = map[string]string{}

// selfEncoded are the schemas of types that encode themselves (MarshalJSON
// or UnmarshalJSON), by "pkgpath.Type".
var selfEncoded = map[string]func() obj{}

// special are the schemas of types that encode themselves.
var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	timeType       = reflect.TypeFor[time.Time]()
	durationType   = reflect.TypeFor[dftype.Duration]()
)

func newSchemaSet() *schemaSet {
	return &schemaSet{comps: map[string]any{}, names: map[reflect.Type]string{}, request: map[reflect.Type]bool{}}
}

// ref returns a schema for the type of v, adding components as needed.
// request marks a request body.
func (g *schemaSet) ref(v any, request bool) obj {
	return g.of(reflect.TypeOf(v), request)
}

func (g *schemaSet) of(t reflect.Type, request bool) obj {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case rawMessageType:
		return g.anyValue()
	case timeType:
		return obj{"type": "string", "format": "date-time"}
	case durationType:
		return g.component(t, request, func() obj {
			return obj{
				"description": "A duration. Answers hold a string such as \"1m30s\" or \"10 seconds\"; requests may also send a whole number of milliseconds.",
				"type":        []any{"string", "integer"},
				"examples":    []any{"30s", "1h30m"},
			}
		})
	}
	if pagedTypes[typeKey(t)] {
		// A page whose MarshalJSON adds "hasNextPage" to its fields.
		return g.component(t, request, func() obj {
			s := g.structSchema(t, request)
			s["properties"].(obj)["hasNextPage"] = obj{"type": "boolean", "description": "Whether another page follows: pass cursor back for it."}
			s["required"] = append(s["required"].([]any), "hasNextPage")
			return s
		})
	}
	if build, ok := selfEncoded[typeKey(t)]; ok {
		return g.component(t, request, build)
	}
	if t.Implements(reflect.TypeFor[json.Marshaler]()) || reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) {
		panic(fmt.Sprintf("openapi: %s encodes itself; give it a schema in schemaSet.of", t))
	}
	switch t.Kind() {
	case reflect.String:
		if t.PkgPath() == "" {
			return obj{"type": "string"}
		}
		if vals := constsOf(t); len(vals) > 0 {
			return g.component(t, request, func() obj {
				enum := make([]any, len(vals))
				for i, v := range vals {
					enum[i] = v
				}
				return obj{"type": "string", "enum": enum, "description": enumDoc(t, vals)}
			})
		}
		return obj{"type": "string"}
	case reflect.Bool:
		return obj{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return obj{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return obj{"type": "number"}
	case reflect.Slice, reflect.Array:
		return obj{"type": "array", "items": g.of(t.Elem(), request)}
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			panic(fmt.Sprintf("openapi: map key of %s", t))
		}
		return obj{"type": "object", "additionalProperties": g.of(t.Elem(), request)}
	case reflect.Struct:
		if t.Name() == "" {
			return g.structSchema(t, request)
		}
		return g.component(t, request, func() obj { return g.structSchema(t, request) })
	case reflect.Interface:
		return g.anyValue()
	}
	panic(fmt.Sprintf("openapi: no schema for %s", t))
}

// anyValue is the schema of any JSON value: the empty schema, which every
// client generator reads as "any" (openapi-typescript's unknown, an
// untyped value in Go or Java), with a description only.
func (g *schemaSet) anyValue() obj {
	g.comps["JSONValue"] = obj{
		"description": "Any JSON value (an object, an array, a string, a number, a boolean or null), passed through as it was sent (compacted).",
	}
	return obj{"$ref": "#/components/schemas/JSONValue"}
}

// component registers the schema of a named type once and returns a $ref.
func (g *schemaSet) component(t reflect.Type, request bool, build func() obj) obj {
	if request {
		g.request[t] = true
	}
	name, ok := g.names[t]
	if !ok {
		name = schemaNames[typeKey(t)]
		if name == "" {
			name = t.Name()
		}
		for other, n := range g.names {
			if n == name {
				panic(fmt.Sprintf("openapi: %s and %s are both schema %q; name one in schemaNames", t, other, name))
			}
		}
		g.names[t] = name
		g.comps[name] = obj{} // placeholder against cycles
		s := build()
		doc := typeDoc(t)
		if d, ok := schemaDocs[typeKey(t)]; ok {
			doc = d
		}
		if doc != "" && s["description"] == nil {
			s["description"] = doc
		}
		g.comps[name] = s
	}
	if request && g.comps[name].(obj)["type"] == "object" {
		g.comps[name].(obj)["additionalProperties"] = false
	}
	return obj{"$ref": "#/components/schemas/" + name}
}

func enumDoc(t reflect.Type, vals []string) string {
	s := readSource()
	doc := typeDoc(t)
	var lines []string
	for _, v := range vals {
		if d := s.constDocs[typeKey(t)+"="+v]; d != "" {
			lines = append(lines, "- `"+v+"`: "+d)
		}
	}
	if len(lines) > 0 {
		doc += "\n\n" + strings.Join(lines, "\n")
	}
	return doc
}

// structSchema is the object schema of a struct: a property per JSON field,
// required when the field has no omitempty (answers) or when
// requestRequired names it (requests).
func (g *schemaSet) structSchema(t reflect.Type, request bool) obj {
	props := obj{}
	var required []any
	g.addFields(t, request, props, &required)
	if request {
		required = nil
		for _, f := range requestRequired[typeKey(t)] {
			if props[f] == nil {
				panic(fmt.Sprintf("openapi: %s has no field %q", t, f))
			}
			required = append(required, f)
		}
	}
	s := obj{"type": "object", "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

func (g *schemaSet) addFields(t reflect.Type, request bool, props obj, required *[]any) {
	src := readSource()
	src.parse(t.PkgPath())
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			g.addFields(ft, request, props, required)
			continue
		}
		if name == "" {
			name = f.Name
		}
		s := g.of(f.Type, request)
		if rules, ok := fieldRules[typeKey(t)+"."+f.Name]; ok {
			if _, isRef := rules["$ref"]; isRef {
				s = obj{"$ref": rules["$ref"]}
			} else {
				for k, v := range rules {
					s[k] = v
				}
			}
		}
		if doc := src.fieldDocs[typeKey(t)+"."+f.Name]; doc != "" {
			if _, isRef := s["$ref"]; isRef {
				s = obj{"$ref": s["$ref"], "description": doc} // 3.1: siblings of $ref apply
			} else {
				s["description"] = doc
			}
		}
		props[name] = s
		optional := strings.Contains(","+opts+",", ",omitempty,") || strings.Contains(","+opts+",", ",omitzero,")
		if !optional && !slices.Contains(*required, any(name)) {
			*required = append(*required, name)
		}
	}
}
