package httpapi_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/httpapi"
)

func TestAuthenticatorTokens(t *testing.T) {
	t.Parallel()
	var tokens []httpapi.Token
	for _, spec := range []string{"admin:adm1n:*", "reader:r3ad:read", "acme:acm3:read,manage@acme,beta", "ticker:t1ck:tick"} {
		tok, err := httpapi.ParseToken(spec)
		require.NoError(t, err)
		tokens = append(tokens, tok)
	}
	a, err := httpapi.NewAuthenticator(tokens, nil)
	require.NoError(t, err)
	require.True(t, a.Enabled())
	r := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/ui/", nil)

	_, err = a.Login(r, "nope")
	require.ErrorIs(t, err, httpapi.ErrUnauthorized)
	_, err = a.Login(r, "t1ck")
	require.ErrorIs(t, err, httpapi.ErrForbidden, "a login needs the read scope")
	_, err = a.Loopback(r)
	require.ErrorIs(t, err, httpapi.ErrUnauthorized, "with tokens, loopback is no credential")

	reader, err := a.Login(r, "r3ad")
	require.NoError(t, err)
	require.Equal(t, "reader", reader.Name)
	require.NoError(t, reader.Allow(r, httpapi.ActionRead))
	require.ErrorIs(t, reader.Allow(r, httpapi.ActionManage), httpapi.ErrForbidden)
	require.False(t, reader.Can(r, httpapi.ActionEvents))
	ns, err := reader.Namespace(r)
	require.NoError(t, err)
	require.Equal(t, "default", ns)

	admin, err := a.Login(r, "adm1n")
	require.NoError(t, err)
	require.True(t, admin.Can(r, httpapi.ActionMetrics))
	require.False(t, admin.Can(r, httpapi.ActionTick), `"*" does not grant tick`)

	acme, err := a.Login(r, "acm3")
	require.NoError(t, err)
	require.Equal(t, []string{"acme", "beta"}, acme.Namespaces)
	ns, err = acme.Namespace(r)
	require.NoError(t, err)
	require.Equal(t, "acme", ns, "the first of the token's namespaces")
	ns, err = acme.Namespace(httptest.NewRequest(http.MethodGet, "http://127.0.0.1/ui/?namespace=beta", nil))
	require.NoError(t, err)
	require.Equal(t, "beta", ns)
	_, err = acme.Namespace(httptest.NewRequest(http.MethodGet, "http://127.0.0.1/ui/?namespace=default", nil))
	require.ErrorIs(t, err, httpapi.ErrForbidden)

	_, err = httpapi.NewAuthenticator([]httpapi.Token{{Name: "x"}}, nil)
	require.Error(t, err, "a token set the API refuses")
}

func TestAuthenticatorLoopback(t *testing.T) {
	t.Parallel()
	a, err := httpapi.NewAuthenticator(nil, nil)
	require.NoError(t, err)
	require.False(t, a.Enabled())
	p, err := a.Loopback(httptest.NewRequest(http.MethodGet, "http://127.0.0.1:8080/ui/", nil))
	require.NoError(t, err)
	require.True(t, p.Can(nil, httpapi.ActionManage))
	require.False(t, p.Can(nil, httpapi.ActionTick))
	_, err = a.Loopback(httptest.NewRequest(http.MethodGet, "http://rebound.example:8080/ui/", nil))
	require.ErrorIs(t, err, httpapi.ErrForbidden)
	_, err = a.Login(httptest.NewRequest(http.MethodGet, "http://127.0.0.1/ui/", nil), "anything")
	require.ErrorIs(t, err, httpapi.ErrForbidden)
}

func TestAuthenticatorAuthorizeFunc(t *testing.T) {
	t.Parallel()
	var seen []string
	authorize := func(r *http.Request, action httpapi.Action) error {
		seen = append(seen, r.Header.Get("Authorization")+" "+string(action))
		switch r.Header.Get("Authorization") {
		case "Bearer ops":
			return nil
		case "Bearer viewer":
			if action == httpapi.ActionRead {
				return nil
			}
			return httpapi.ErrForbidden
		case "Bearer broken":
			return errors.New("directory down")
		}
		return httpapi.ErrUnauthorized
	}
	a, err := httpapi.NewAuthenticator(nil, authorize)
	require.NoError(t, err)
	require.True(t, a.Enabled())
	r := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/ui/", nil)
	_, err = a.Login(r, "stranger")
	require.ErrorIs(t, err, httpapi.ErrUnauthorized)
	_, err = a.Login(r, "broken")
	require.ErrorContains(t, err, "authorizing read: directory down")
	require.False(t, errors.Is(err, httpapi.ErrForbidden) || errors.Is(err, httpapi.ErrUnauthorized))

	viewer, err := a.Login(r, "viewer")
	require.NoError(t, err)
	require.True(t, viewer.Can(r, httpapi.ActionRead))
	require.ErrorIs(t, viewer.Allow(r, httpapi.ActionManage), httpapi.ErrForbidden)
	require.Empty(t, r.Header.Get("Authorization"), "the caller's request is not changed")
	require.Contains(t, seen, "Bearer viewer manage", "every check asks the AuthorizeFunc again")
}
