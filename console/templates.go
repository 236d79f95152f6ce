package console

import (
	"fmt"
	"html/template"
	"net/url"
	"strings"
	"time"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/workflow"
)

// pageNames are the templates under templates/, each rendered inside
// layout.html.
var pageNames = []string{"overview", "workflows", "workflow", "instances", "instance", "lifecycle", "confirm", "schedules", "workers", "login", "error"}

var funcs = template.FuncMap{
	"time": func(t any) string {
		switch v := t.(type) {
		case time.Time:
			if v.IsZero() {
				return ""
			}
			return v.UTC().Format("2006-01-02 15:04:05.000")
		case *time.Time:
			if v == nil {
				return ""
			}
			return v.UTC().Format("2006-01-02 15:04:05.000")
		}
		return fmt.Sprint(t)
	},
	"dur":  func(a, b time.Time) string { return b.Sub(a).Round(time.Millisecond).String() },
	"path": url.PathEscape,
	"q":    url.QueryEscape,
	// nsv is the namespace a link carries: none for the default one.
	"nsv": func(ns string) string {
		if ns == workflow.DefaultNamespace {
			return ""
		}
		return ns
	},
	"count": func(m map[dftype.InstanceStatus]int64, s dftype.InstanceStatus) int64 { return m[s] },
	"join":  strings.Join,
	"mul":   func(a, b int) int { return a * b },
	"title": func(s string) string {
		if s == "" {
			return s
		}
		return strings.ToUpper(s[:1]) + s[1:]
	},
}

func parseTemplates() (map[string]*template.Template, error) {
	out := map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: parsing template %s: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}
