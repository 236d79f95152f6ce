package flow_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/flow"
)

// TestHTTPURLEscaping shows that template values in an http step's url are
// escaped for the part of the URL they land in, so that they cannot rewrite
// its path or query, unless the placeholder opts out with "raw:".
func TestHTTPURLEscaping(t *testing.T) {
	t.Parallel()
	type seen struct {
		RequestURI string
		Path       string
		Query      map[string][]string
	}
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(seen{RequestURI: r.RequestURI, Path: r.URL.Path, Query: r.URL.Query()})
	})
	h := newHTTP(t, &flow.HTTPHandlerConfig{Allow: []string{"127.0.0.1"}})
	base := "http://127.0.0.1:" + srv.port
	request := func(t *testing.T, url, context string) (seen, error) {
		t.Helper()
		out, err := invoke(t, h, `{"url": "`+url+`"}`, context, nil)
		if err != nil {
			return seen{}, err
		}
		var res struct{ Body seen }
		require.NoError(t, json.Unmarshal([]byte(asJSON(t, out)), &res))
		return res.Body, nil
	}
	const tmpl = "/orders/${id}/items?q=${q}&n=${n}#${f}"

	t.Run("AttackValuesStayInTheirPart", func(t *testing.T) {
		t.Parallel()
		got, err := request(t, base+tmpl, `{"id": "../../admin?x=1#", "q": "a&admin=1#x", "n": 7, "f": "z"}`)
		require.NoError(t, err)
		require.Equal(t, "/orders/..%2F..%2Fadmin%3Fx=1%23/items?q=a%26admin%3D1%23x&n=7", got.RequestURI)
		require.Equal(t, "/orders/../../admin?x=1#/items", got.Path, "one path segment, decoded")
		require.Equal(t, map[string][]string{"q": {"a&admin=1#x"}, "n": {"7"}}, got.Query, "no admin parameter")
	})

	t.Run("PlainValuesAreUnchanged", func(t *testing.T) {
		t.Parallel()
		got, err := request(t, base+tmpl, `{"id": 42, "q": "shoes", "n": 7, "f": "top"}`)
		require.NoError(t, err)
		require.Equal(t, "/orders/42/items?q=shoes&n=7", got.RequestURI)
	})

	t.Run("SpacesAndUnicode", func(t *testing.T) {
		t.Parallel()
		got, err := request(t, base+tmpl, `{"id": "a b", "q": "é ü", "n": true, "f": "#"}`)
		require.NoError(t, err)
		require.Equal(t, "/orders/a%20b/items?q=%C3%A9+%C3%BC&n=true", got.RequestURI)
		require.Equal(t, "/orders/a b/items", got.Path)
	})

	t.Run("DotSegmentsAreRefused", func(t *testing.T) {
		t.Parallel()
		for _, id := range []string{".", ".."} {
			_, err := request(t, base+tmpl, `{"id": "`+id+`", "q": "", "n": 1, "f": ""}`)
			requireFailure(t, err, flow.ErrorNameInvalidInput, false)
			require.ErrorContains(t, err, "not allowed in a path")
		}
	})

	t.Run("RawOptsOut", func(t *testing.T) {
		t.Parallel()
		got, err := request(t, "${raw:base}/orders/${ raw: sub }&q=${q}", `{"base": "`+base+`/api", "sub": "a/b?x=1", "q": "c&d"}`)
		require.NoError(t, err)
		require.Equal(t, "/api/orders/a/b?x=1&q=c%26d", got.RequestURI, "raw values as they are, and a value after a raw one still escaped by where it lands")
	})

	t.Run("HostValuesAreStrict", func(t *testing.T) {
		t.Parallel()
		got, err := request(t, "http://${host}:"+srv.port+"/h", `{"host": "127.0.0.1"}`)
		require.NoError(t, err)
		require.Equal(t, "/h", got.RequestURI)
		for _, host := range []string{"evil.example@127.0.0.1", "127.0.0.1/x?", "127.0.0.1:1"} {
			_, err := request(t, "http://${host}:"+srv.port+"/h", `{"host": "`+host+`"}`)
			requireFailure(t, err, flow.ErrorNameInvalidInput, false, host)
			require.ErrorContains(t, err, "in the URL's host")
		}
	})

	t.Run("APlaceholderBeforeTheSchemeMustBeRaw", func(t *testing.T) {
		t.Parallel()
		for _, url := range []string{"${target}", "${base}/orders/${id}", "http${s}://x.example/"} {
			err := h.Validate(json.RawMessage(`{"url": "` + url + `"}`))
			require.ErrorContains(t, err, "url: ${", url)
			require.ErrorContains(t, err, "write ${raw:", url)
		}
		require.NoError(t, h.Validate(json.RawMessage(`{"url": "${raw:target}"}`)))
	})
}
