package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/testharness"
)

// TestIndex: GET <prefix> and <prefix>/ answer the index: the version, the
// server's routes with their scopes, the OpenAPI document's path and the
// docs; the console link only when a console is mounted; a page for a
// browser; behind the read scope.
func TestIndex(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setupOn(t, backend, "", withTokens("reader:r3ad:read", "sender:s3nd:events"), func(c *httpapi.Config, _ *testharness.Harness) {
			c.Version = "v9.8.7"
		})
		for _, path := range []string{"/api", "/api/"} {
			var idx apiclient.APIIndex
			b.call(t, http.MethodGet, path, "", "Authorization: Bearer r3ad").requireOK(t, http.StatusOK, &idx)
			require.Equal(t, "Duraflow", idx.Name)
			require.Equal(t, "v9.8.7", idx.Version)
			require.Equal(t, "/api/openapi.json", idx.OpenAPI)
			require.Equal(t, httpapi.DocsURL, idx.Docs)
			require.Empty(t, idx.Console, "no console is mounted")
			require.Len(t, idx.Routes, len(b.server.Routes()))
			require.Contains(t, idx.Routes, apiclient.IndexRoute{Method: "POST", Path: "/api/workflows/:name/instances/:id/events", Scope: "events"})
			require.Contains(t, idx.Routes, apiclient.IndexRoute{Method: "GET", Path: "/healthz"})
			require.Contains(t, idx.Routes, apiclient.IndexRoute{Method: "GET", Path: "/api", Scope: "read"})
		}
		b.call(t, http.MethodGet, "/api", "").requireError(t, http.StatusUnauthorized, apiclient.CodeUnauthorized)
		b.call(t, http.MethodGet, "/api", "", "Authorization: Bearer s3nd").requireError(t, http.StatusForbidden, apiclient.CodeForbidden)
		b.call(t, http.MethodGet, "/api?x=1", "", "Authorization: Bearer r3ad").requireError(t, http.StatusBadRequest, apiclient.CodeInvalidRequest, `"x"`)

		// A browser gets a page with the same links.
		r := b.call(t, http.MethodGet, "/api/", "", "Authorization: Bearer r3ad", "Accept: text/html,application/xhtml+xml")
		require.Equal(t, http.StatusOK, r.status, string(r.body))
		require.Equal(t, "text/html; charset=utf-8", r.header.Get("Content-Type"))
		page := string(r.body)
		require.Contains(t, page, `<a href="/api/openapi.json">OpenAPI document</a>`)
		require.Contains(t, page, `<a href="`+httpapi.DocsURL+`">Documentation</a>`)
		require.Contains(t, page, `<code>/api/workflows/:name/instances</code>`)
		require.NotContains(t, page, "Console")
	})
}

// TestIndexConsoleAndPrefix: with a console mounted the index links to it;
// under another prefix, or at the root, the index is at the prefix.
func TestIndexConsoleAndPrefix(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ prefix, index, openapi string }{
		{"/v1", "/v1", "/v1/openapi.json"},
		{"/", "/", "/openapi.json"},
	} {
		b := setup(t, "", func(c *httpapi.Config, _ *testharness.Harness) {
			c.Prefix, c.ConsolePath = tc.prefix, "/console/"
		})
		var idx apiclient.APIIndex
		b.call(t, http.MethodGet, tc.index, "").requireOK(t, http.StatusOK, &idx)
		require.Equal(t, tc.openapi, idx.OpenAPI, tc.prefix)
		require.Equal(t, "/console/", idx.Console, tc.prefix)
		require.NotEmpty(t, idx.Version)
		for _, r := range idx.Routes {
			require.False(t, strings.HasPrefix(r.Path, "/api"), "%s: %s", tc.prefix, r.Path)
		}
		r := b.call(t, http.MethodGet, tc.index, "", "Accept: text/html")
		require.Contains(t, string(r.body), `<a href="/console/">Console</a>`)
		var got apiclient.APIIndex
		idxPtr, err := apiclient.New(b.srv.URL, "", b.srv.Client()).WithPrefix(tc.prefix).Index(b.ctx)
		require.NoError(t, err, tc.prefix)
		got = *idxPtr
		require.Equal(t, idx, got, "the typed client reads the same index")
	}
}
