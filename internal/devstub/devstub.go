// Package devstub is the stub HTTP service that duraflow dev serves for the
// example flows, and the configuration of the http step handler that lets
// flows reach that stub and nothing else internal.
//
// The http handler refuses loopback and other internal addresses. Dev does
// not lift that for all of loopback: flows address the stub by the name
// Host ("http://stub.localhost/inventory/reserve"), which the handler's
// resolver maps to a loopback address nothing else uses and its dialer
// sends to the stub's own listener, whatever port that listener got. Only
// Host is allow-listed, so every other loopback, private or metadata
// address stays refused, the API of dev itself included. Serve and worker
// have no stub.
//
// The package knows nothing of the command line; cli wires it into dev, and
// the example flows' tests use it directly.
package devstub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/duraflow/duraflow/flow"
	"github.com/duraflow/duraflow/httpapi"
)

// Host is the name flows use for the stub.
const Host = "stub.localhost"

// stubIP is what Host resolves to for http steps: a loopback address that
// nothing listens on, so a connection to it can only mean the stub.
var stubIP = netip.MustParseAddr("127.77.0.1")

// Stock is how many of each item the stub's inventory holds; an item not
// listed has DefaultStock.
var Stock = map[string]int{"unobtainium": 0}

// DefaultStock is the stock of every item not in Stock.
const DefaultStock = 10

// Handler returns the stub service:
//
//	POST /inventory/reserve  {"orderId":"A-1","items":[{"sku":"book","qty":2},…]}
//	  → 200 {"reserved":true,"reservation":"R-A-1","missing":[]}
//	  → 200 {"reserved":false,"missing":["unobtainium"]} when an item is short
//	POST /inventory/release  {"reservation":"R-A-1"}
//	  → 200 {"released":true,"reservation":"R-A-1"}
//	POST /payments/charge    {"orderId":"A-1","amountCents":3700,"card":"4242"}
//	  → 200 {"charged":true,"paymentId":"P-A-1","amountCents":3700}
//	  → 402 {"error":"card declined"} for the card DeclinedCard
//	GET  /healthz            → 200 {"ok":true}
//
// The stub keeps no state: a release or a charge is answered, not
// recorded.
func Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /inventory/reserve", reserve)
	mux.HandleFunc("POST /inventory/release", release)
	mux.HandleFunc("POST /payments/charge", charge)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such route: " + r.Method + " " + r.URL.Path})
	})
	return mux
}

// ReserveRequest is the body of POST /inventory/reserve; other fields are
// ignored.
type ReserveRequest struct {
	OrderID string `json:"orderId"`
	Items   []struct {
		SKU string `json:"sku"`
		Qty int    `json:"qty"`
	} `json:"items"`
}

// ReserveResponse is its answer.
type ReserveResponse struct {
	Reserved    bool     `json:"reserved"`
	Reservation string   `json:"reservation,omitempty"`
	Missing     []string `json:"missing"`
}

func reserve(w http.ResponseWriter, r *http.Request) {
	var req ReserveRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "the body must be a JSON order: " + err.Error()})
		return
	}
	if req.OrderID == "" || len(req.Items) == 0 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "an order needs an orderId and items"})
		return
	}
	res := ReserveResponse{Missing: []string{}}
	for _, it := range req.Items {
		stock, ok := Stock[it.SKU]
		if !ok {
			stock = DefaultStock
		}
		if it.Qty > stock {
			res.Missing = append(res.Missing, it.SKU)
		}
	}
	res.Reserved = len(res.Missing) == 0
	if res.Reserved {
		res.Reservation = "R-" + req.OrderID
	}
	writeJSON(w, http.StatusOK, res)
}

// ReleaseRequest is the body of POST /inventory/release.
type ReleaseRequest struct {
	Reservation string `json:"reservation"`
}

// ReleaseResponse is its answer.
type ReleaseResponse struct {
	Released    bool   `json:"released"`
	Reservation string `json:"reservation"`
}

func release(w http.ResponseWriter, r *http.Request) {
	var req ReleaseRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&req); err != nil || req.Reservation == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "the body must name a reservation"})
		return
	}
	writeJSON(w, http.StatusOK, ReleaseResponse{Released: true, Reservation: req.Reservation})
}

// DeclinedCard is the card the stub's payment service declines.
const DeclinedCard = "declined"

// ChargeRequest is the body of POST /payments/charge.
type ChargeRequest struct {
	OrderID     string `json:"orderId"`
	AmountCents int    `json:"amountCents"`
	Card        string `json:"card"`
}

// ChargeResponse is its answer.
type ChargeResponse struct {
	Charged     bool   `json:"charged"`
	PaymentID   string `json:"paymentId"`
	AmountCents int    `json:"amountCents"`
}

func charge(w http.ResponseWriter, r *http.Request) {
	var req ChargeRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&req); err != nil || req.OrderID == "" || req.Card == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "a charge needs an orderId, an amountCents and a card"})
		return
	}
	if req.Card == DeclinedCard {
		writeJSON(w, http.StatusPaymentRequired, map[string]string{"error": "card declined"})
		return
	}
	writeJSON(w, http.StatusOK, ChargeResponse{Charged: true, PaymentID: "P-" + req.OrderID, AmountCents: req.AmountCents})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Server is the stub serving on a loopback listener of its own.
type Server struct {
	ln  net.Listener
	srv *http.Server
}

// Start serves the stub on addr, which must be a loopback address
// ("127.0.0.1:0" picks a free port).
func Start(addr string) (*Server, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("devstub: address %q: %w", addr, err)
	}
	if ip, err := netip.ParseAddr(host); err != nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("devstub: address %q is not a loopback IP address", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("devstub: listening on %s: %w", addr, err)
	}
	// The API server's default bounds (see httpapi.Config), so a slow client
	// never holds a connection for long; the stub has no body deadline of
	// its own, so ReadTimeout bounds the whole request.
	s := &Server{ln: ln, srv: &http.Server{
		Handler:           Handler(),
		ReadHeaderTimeout: httpapi.DefaultReadHeaderTimeout,
		ReadTimeout:       httpapi.DefaultReadHeaderTimeout + httpapi.DefaultBodyTimeout,
		WriteTimeout:      httpapi.DefaultWriteTimeout,
		IdleTimeout:       httpapi.DefaultIdleTimeout,
	}}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Addr returns the address the stub listens on, such as "127.0.0.1:43123".
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL returns the stub's base URL on its listener.
func (s *Server) URL() string { return "http://" + s.Addr() }

// Shutdown stops the stub, letting requests in flight finish until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// HTTPHandlerConfig returns the http step handler's configuration for a
// host with the stub listening at stubAddr: Host and allow are
// allow-listed, Host resolves to the stub, and connections to it are sent
// to stubAddr. Every other address is resolved and checked as usual (the
// dialer connects to the IP the handler checked, never resolving again).
func HTTPHandlerConfig(stubAddr string, allow []string) *flow.HTTPHandlerConfig {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	return &flow.HTTPHandlerConfig{
		Allow:    append([]string{Host}, allow...),
		Resolver: resolver{},
		DialContextFunc: func(ctx context.Context, network, address string) (net.Conn, error) {
			if ap, err := netip.ParseAddrPort(address); err == nil && ap.Addr() == stubIP {
				address = stubAddr
			}
			return d.DialContext(ctx, network, address)
		},
	}
}

// resolver resolves Host to the stub and everything else through the
// system's resolver.
type resolver struct{}

func (resolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if strings.EqualFold(strings.TrimSuffix(host, "."), Host) {
		if network == "ip6" {
			return nil, &net.DNSError{Err: "no IPv6 address", Name: host, IsNotFound: true}
		}
		return []netip.Addr{stubIP}, nil
	}
	return net.DefaultResolver.LookupNetIP(ctx, network, host)
}

// UsesStub reports whether a flow definition (JSON) has an http step whose
// URL names Host, so that it cannot run where the stub is not served.
// Definitions that do not decode report false: validation says why.
func UsesStub(definition []byte) bool {
	var v any
	if json.Unmarshal(definition, &v) != nil {
		return false
	}
	return usesStub(v)
}

func usesStub(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		if t, _ := v["type"].(string); t == "http" {
			if cfg, ok := v["config"].(map[string]any); ok {
				if raw, ok := cfg["url"].(string); ok {
					if u, err := url.Parse(raw); err == nil && strings.EqualFold(strings.TrimSuffix(u.Hostname(), "."), Host) {
						return true
					}
				}
			}
		}
		for _, x := range v {
			if usesStub(x) {
				return true
			}
		}
	case []any:
		for _, x := range v {
			if usesStub(x) {
				return true
			}
		}
	}
	return false
}
