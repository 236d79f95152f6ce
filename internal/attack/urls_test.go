//go:build attack

package attack_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// recorder is an allow-listed upstream on 127.0.0.2 that answers every
// request and keeps the request target it was sent, as it was on the wire.
type recorder struct {
	base string // http://127.0.0.2:port
	mu   sync.Mutex
	seen []*http.Request
}

func newRecorder(t *testing.T) *recorder {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.2:0")
	require.NoError(t, err, "listening on 127.0.0.2 (the allow-listed upstream)")
	rec := &recorder{base: "http://" + l.Addr().String()}
	// A bare handler, no ServeMux: a path with dot segments is neither
	// cleaned nor redirected, so what arrives is what the step sent.
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.mu.Lock()
		rec.seen = append(rec.seen, r.Clone(r.Context()))
		rec.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	})}}
	srv.Start()
	t.Cleanup(srv.Close)
	return rec
}

// take returns the requests received since the last take.
func (rec *recorder) take() []*http.Request {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	out := rec.seen
	rec.seen = nil
	return out
}

// TestURLTemplateEscaping runs http steps whose URL puts params in a path
// segment and in a query value: whatever the value, the upstream
// sees exactly one path segment under /items/ holding the value and exactly
// one query parameter q holding it. "${raw:x}" passes a value through as it
// is, and urlEncode in a transform escapes a value for a query.
func TestURLTemplateEscaping(t *testing.T) {
	t.Parallel()
	s := sqliteServer(t)
	up := newRecorder(t)

	const escaped = "url-escaped"
	s.applyFlow(t, httpFlow(escaped, up.base+"/items/${id}?q=${q}"))

	values := []string{"../../admin?x=1#", "a/b", "x&admin=1", "%2e%2e", "a b+c", "?#&=;/", "é/日本", ".../", "a%2Fb"}
	for _, v := range values {
		inst := s.runFlow(t, escaped, fmt.Sprintf(`{"id":%s,"q":%s}`, jsonString(v), jsonString(v)), 15*time.Second)
		require.Equal(t, "complete", inst.Status, "%q: %+v", v, inst.Error)
		got := up.take()
		require.Len(t, got, 1, "%q: one step, never retried, sends one request", v)
		r := got[0]
		t.Logf("%q: %s", v, r.RequestURI)

		// The request target as it was on the wire.
		path, rawQuery, _ := strings.Cut(r.RequestURI, "?")
		segments := strings.Split(strings.TrimPrefix(path, "/"), "/")
		require.Len(t, segments, 2, "%q: the upstream saw the path %s, not one segment under /items/", v, r.RequestURI)
		require.Equal(t, "items", segments[0], "%q: request %s", v, r.RequestURI)
		seg, err := url.PathUnescape(segments[1])
		require.NoError(t, err, "%q: request %s", v, r.RequestURI)
		require.Equal(t, v, seg, "%q: the path segment is not the value (request %s)", v, r.RequestURI)

		require.NotContains(t, segments[1], "%2e%2e", "%q: an escaped dot segment reached the upstream as one (request %s)", v, r.RequestURI)
		query, err := url.ParseQuery(rawQuery)
		require.NoError(t, err, "%q: request %s", v, r.RequestURI)
		require.Equal(t, url.Values{"q": {v}}, query, "%q: the upstream saw other query parameters (request %s)", v, r.RequestURI)
	}

	// A path segment that is "." or ".." is refused: no escaping makes it
	// one segment. Nothing is sent.
	for _, v := range []string{"..", "."} {
		inst := s.runFlow(t, escaped, fmt.Sprintf(`{"id":%s,"q":"x"}`, jsonString(v)), 15*time.Second)
		require.Equal(t, "errored", inst.Status, "%q", v)
		require.NotNil(t, inst.Error, v)
		require.Equal(t, "INVALID_INPUT", inst.Error.Name, "%q: %s", v, inst.Error.Message)
		require.Empty(t, up.take(), "%q: a refused URL was sent", v)
	}

	// ${raw:id} opts out: the value's "/" splits the path, as the author
	// asked; the query value next to it is still escaped.
	const raw = "url-raw"
	s.applyFlow(t, httpFlow(raw, up.base+"/items/${raw:id}?q=${q}"))
	inst := s.runFlow(t, raw, `{"id":"a/b","q":"x&admin=1"}`, 15*time.Second)
	require.Equal(t, "complete", inst.Status, "%+v", inst.Error)
	got := up.take()
	require.Len(t, got, 1)
	require.True(t, strings.HasPrefix(got[0].RequestURI, "/items/a/b?"), "${raw:id} must pass the value through (request %s)", got[0].RequestURI)
	require.Equal(t, url.Values{"q": {"x&admin=1"}}, got[0].URL.Query(), "request %s", got[0].RequestURI)

	// urlEncode in a transform escapes for a query: its result, inserted
	// raw, is one query value.
	const encoded = "url-encode"
	v := "x&admin=1 ?#/é"
	def := fmt.Sprintf(`{"id":%q,"version":"1.0.0","initialStepId":"enc","steps":{
		"enc":{"id":"enc","type":"transform","config":{"expression":"urlEncode(q)"},"outputKey":"qe","transitions":{"onSuccess":"call"},"retries":{"limit":0}},
		"call":{"id":"call","type":"http","config":{"url":%s,"timeout":"5 seconds"},"retries":{"limit":0}}}}`,
		encoded, jsonString(up.base+"/items/x?q=${raw:qe}"))
	s.applyFlow(t, def)
	inst = s.runFlow(t, encoded, fmt.Sprintf(`{"q":%s}`, jsonString(v)), 15*time.Second)
	require.Equal(t, "complete", inst.Status, "%+v", inst.Error)
	require.Contains(t, string(inst.Output), jsonString(url.QueryEscape(v)), "urlEncode(q) is url.QueryEscape(q)")
	got = up.take()
	require.Len(t, got, 1)
	require.Equal(t, url.Values{"q": {v}}, got[0].URL.Query(), "request %s", got[0].RequestURI)
	require.Equal(t, "/items/x?q="+url.QueryEscape(v), got[0].RequestURI)
	s.requireHealthy(t)
}
