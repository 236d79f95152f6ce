package httpapi

import (
	"html/template"
	"net/http"
	"runtime/debug"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/duraflow/duraflow/apiclient"
)

// DocsURL is where the index (GET <prefix>) sends readers for the
// documentation.
const DocsURL = "https://github.com/duraflow/duraflow/tree/main/docs"

// buildVersion is the main module's version in the binary's build
// information, or "dev".
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// index is the answer of GET <prefix>.
func (s *Server) index() apiclient.APIIndex {
	out := apiclient.APIIndex{
		Name: "Duraflow", Version: s.cfg.Version, OpenAPI: s.prefixed("/openapi.json"), Docs: DocsURL,
		Console: s.cfg.ConsolePath, Routes: []apiclient.IndexRoute{},
	}
	for _, r := range s.routes {
		out.Routes = append(out.Routes, apiclient.IndexRoute{Method: r.Method, Path: r.Path, Scope: string(r.Action)})
	}
	return out
}

// serveIndex answers GET <prefix> and <prefix>/: the index as JSON, or as
// a page for a browser (a request that accepts text/html).
func (s *Server) serveIndex(c echo.Context) error {
	if _, err := query(c, nil); err != nil {
		return err
	}
	idx := s.index()
	if !strings.Contains(c.Request().Header.Get("Accept"), "text/html") {
		return reply(c, http.StatusOK, idx)
	}
	w := c.Response()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	return indexPage.Execute(w, idx)
}

var indexPage = template.Must(template.New("index").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Name}} API</title></head>
<body>
<h1>{{.Name}} API</h1>
<p>Version {{.Version}}.
<a href="{{.OpenAPI}}">OpenAPI document</a> ·
<a href="{{.Docs}}">Documentation</a>{{if .Console}} ·
<a href="{{.Console}}">Console</a>{{end}}</p>
<table>
<tr><th>Method</th><th>Path</th><th>Scope</th></tr>
{{range .Routes}}<tr><td>{{.Method}}</td><td><code>{{.Path}}</code></td><td>{{.Scope}}</td></tr>
{{end}}</table>
</body></html>
`))
