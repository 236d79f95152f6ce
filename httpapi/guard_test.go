package httpapi_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/httpapi"
)

func TestGuard(t *testing.T) {
	t.Parallel()
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	serve := func(t *testing.T, h http.Handler, host, bearer string) (int, string) {
		t.Helper()
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		r.Host = host
		if bearer != "" {
			r.Header.Set("Authorization", "Bearer "+bearer)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code, w.Body.String()
	}

	t.Run("Tokens", func(t *testing.T) {
		t.Parallel()
		h, err := httpapi.Guard([]httpapi.Token{
			httpapi.NewToken("prom", "scrape", httpapi.ActionMetrics),
			httpapi.NewToken("reader", "read-only", httpapi.ActionRead),
		}, nil, httpapi.ActionMetrics, ok)
		require.NoError(t, err)
		code, body := serve(t, h, "metrics.example:9464", "scrape")
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, "ok", body)
		code, body = serve(t, h, "metrics.example:9464", "read-only")
		require.Equal(t, http.StatusForbidden, code)
		require.Contains(t, body, `"code":"FORBIDDEN"`)
		require.Contains(t, body, `lacks the \"metrics\" scope`)
		code, body = serve(t, h, "127.0.0.1:9464", "")
		require.Equal(t, http.StatusUnauthorized, code, "loopback is no pass when tokens are configured")
		require.Contains(t, body, `"code":"UNAUTHORIZED"`)
		code, _ = serve(t, h, "127.0.0.1:9464", "wrong")
		require.Equal(t, http.StatusUnauthorized, code)
	})

	t.Run("LoopbackWithoutAuth", func(t *testing.T) {
		t.Parallel()
		h, err := httpapi.Guard(nil, nil, httpapi.ActionMetrics, ok)
		require.NoError(t, err)
		code, _ := serve(t, h, "127.0.0.1:9464", "")
		require.Equal(t, http.StatusOK, code)
		code, _ = serve(t, h, "[::1]:9464", "")
		require.Equal(t, http.StatusOK, code)
		code, body := serve(t, h, "metrics.example:9464", "")
		require.Equal(t, http.StatusForbidden, code)
		require.Contains(t, body, "only loopback hosts")
	})

	t.Run("AuthorizeFunc", func(t *testing.T) {
		t.Parallel()
		var asked httpapi.Action
		h, err := httpapi.Guard(nil, func(_ *http.Request, a httpapi.Action) error {
			asked = a
			return httpapi.ErrForbidden
		}, httpapi.ActionMetrics, ok)
		require.NoError(t, err)
		code, _ := serve(t, h, "127.0.0.1:9464", "")
		require.Equal(t, http.StatusForbidden, code)
		require.Equal(t, httpapi.ActionMetrics, asked)
		h, err = httpapi.Guard(nil, func(*http.Request, httpapi.Action) error { return errors.New("boom") }, httpapi.ActionMetrics, ok)
		require.NoError(t, err)
		code, _ = serve(t, h, "127.0.0.1:9464", "")
		require.Equal(t, http.StatusInternalServerError, code)
	})

	t.Run("BadTokens", func(t *testing.T) {
		t.Parallel()
		_, err := httpapi.Guard([]httpapi.Token{{Name: "x"}}, nil, httpapi.ActionMetrics, ok)
		require.ErrorContains(t, err, "has no hash")
	})
}
