package devstub_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/flow"
	"github.com/duraflow/duraflow/internal/devstub"
)

func TestStart(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"0.0.0.0:0", "10.0.0.1:0", "localhost:0", "nonsense"} {
		_, err := devstub.Start(addr)
		require.Error(t, err, addr)
	}
	s, err := devstub.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Shutdown(context.Background())) })
	require.True(t, strings.HasPrefix(s.URL(), "http://127.0.0.1:"))
	resp, err := http.Get(s.URL() + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

func TestReserve(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(devstub.Handler())
	t.Cleanup(srv.Close)
	post := func(body string) (int, devstub.ReserveResponse) {
		resp, err := http.Post(srv.URL+"/inventory/reserve", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		var out devstub.ReserveResponse
		if resp.StatusCode == http.StatusOK {
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		}
		return resp.StatusCode, out
	}
	code, res := post(`{"orderId":"A-1","items":[{"sku":"book","qty":2}],"totalCents":2500}`)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, devstub.ReserveResponse{Reserved: true, Reservation: "R-A-1", Missing: []string{}}, res)
	_, res = post(`{"orderId":"A-2","items":[{"sku":"book","qty":11},{"sku":"unobtainium","qty":1},{"sku":"pen","qty":1}]}`)
	require.Equal(t, devstub.ReserveResponse{Missing: []string{"book", "unobtainium"}}, res)
	code, _ = post(`{"items":[]}`)
	require.Equal(t, http.StatusBadRequest, code)
	code, _ = post(`nope`)
	require.Equal(t, http.StatusBadRequest, code)
	resp, err := http.Get(srv.URL + "/elsewhere")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

func TestReleaseAndCharge(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(devstub.Handler())
	t.Cleanup(srv.Close)
	post := func(path, body string, out any) int {
		resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
		}
		return resp.StatusCode
	}
	var rel devstub.ReleaseResponse
	require.Equal(t, http.StatusOK, post("/inventory/release", `{"reservation":"R-A-1"}`, &rel))
	require.Equal(t, devstub.ReleaseResponse{Released: true, Reservation: "R-A-1"}, rel)
	require.Equal(t, http.StatusBadRequest, post("/inventory/release", `{}`, &rel))

	var ch devstub.ChargeResponse
	require.Equal(t, http.StatusOK, post("/payments/charge", `{"orderId":"A-1","amountCents":3700,"card":"4242"}`, &ch))
	require.Equal(t, devstub.ChargeResponse{Charged: true, PaymentID: "P-A-1", AmountCents: 3700}, ch)
	require.Equal(t, http.StatusPaymentRequired, post("/payments/charge", `{"orderId":"A-1","amountCents":3700,"card":"declined"}`, &ch))
	require.Equal(t, http.StatusBadRequest, post("/payments/charge", `{"orderId":"A-1"}`, &ch))
}

// TestHTTPHandlerConfig shows that flows reach the stub by its name, and no
// other internal address: not loopback on the stub's own port, not another
// loopback service.
func TestHTTPHandlerConfig(t *testing.T) {
	t.Parallel()
	stub, err := devstub.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, stub.Shutdown(context.Background())) })
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	}))
	t.Cleanup(other.Close)

	h, err := flow.NewHTTPHandler(devstub.HTTPHandlerConfig(stub.Addr(), nil))
	require.NoError(t, err)
	get := func(url string) (any, error) {
		cfg, err := json.Marshal(map[string]any{"method": "POST", "url": url, "body": map[string]any{"value": map[string]any{
			"orderId": "A-9", "items": []any{map[string]any{"sku": "book", "qty": 1}},
		}}})
		require.NoError(t, err)
		return h.Run(t.Context(), &flow.Invocation{FlowID: "f", FlowVersion: "1.0.0", StepID: "s", Visit: 1, Config: cfg, Context: map[string]any{}})
	}

	out, err := get("http://" + devstub.Host + "/inventory/reserve")
	require.NoError(t, err)
	res := out.(flow.HTTPResult)
	require.Equal(t, http.StatusOK, res.Status)
	require.Equal(t, map[string]any{"reserved": true, "reservation": "R-A-9", "missing": []any{}}, res.Body)

	for _, url := range []string{stub.URL() + "/inventory/reserve", other.URL, "http://localhost" + strings.TrimPrefix(other.URL, "http://127.0.0.1"), "http://169.254.169.254/"} {
		_, err := get(url)
		var refused *flow.AddressNotAllowedError
		require.True(t, errors.As(err, &refused), "%s: %v", url, err)
	}

	// What --http-allow lists is reachable too.
	h, err = flow.NewHTTPHandler(devstub.HTTPHandlerConfig(stub.Addr(), []string{"127.0.0.1"}))
	require.NoError(t, err)
	out, err = get(other.URL)
	var httpErr interface{ ErrorName() string }
	require.True(t, errors.As(err, &httpErr), "%v", err)
	require.Equal(t, flow.ErrorNameHTTP, httpErr.ErrorName(), "the teapot answered")
	require.Nil(t, out)
}

func TestUsesStub(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, def string
		want      bool
	}{
		{"HTTPStepToTheStub", `{"steps":{"a":{"type":"http","config":{"url":"http://stub.localhost/inventory/reserve"}}}}`, true},
		{"HostInAnyCase", `{"steps":{"a":{"type":"http","config":{"url":"http://STUB.localhost./x"}}}}`, true},
		{"ElsewhereOnly", `{"steps":{"a":{"type":"http","config":{"url":"https://example.com/stub.localhost"}}}}`, false},
		{"NamedInTextOnly", `{"description":"calls http://stub.localhost in dev","steps":{"a":{"type":"transform","config":{"expression":"1"}}}}`, false},
		{"NotJSON", `{`, false},
	} {
		require.Equal(t, tc.want, devstub.UsesStub([]byte(tc.def)), tc.name)
	}
}
