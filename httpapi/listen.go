package httpapi

import (
	"fmt"
	"net"
	"strings"
)

// CheckListenAddr refuses to serve the API without authentication anywhere
// but the loopback interface. addr is a net.Listen address ("host:port").
// When authConfigured is false (no tokens and no AuthorizeFunc, see
// Server.AuthConfigured), the host must be loopback: "localhost", an address
// in 127.0.0.0/8, or ::1. An empty host (":8080", or addr "") means every
// interface and is refused. With authentication configured any address is
// allowed.
func CheckListenAddr(addr string, authConfigured bool) error {
	if addr == "" {
		addr = ":http" // what net/http listens on for an empty address
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("httpapi: listen address %q: %w", addr, err)
	}
	if authConfigured || isLoopback(host) {
		return nil
	}
	if host == "" {
		return fmt.Errorf("httpapi: refusing to listen on every interface (%q) without authentication: configure tokens, or listen on a loopback address such as 127.0.0.1:8080", addr)
	}
	return fmt.Errorf("httpapi: refusing to listen on %q without authentication: configure tokens, or listen on a loopback address such as 127.0.0.1:8080", addr)
}

// isLoopback reports whether host (without a port) is "localhost" or a
// loopback IP address.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// isLoopbackHost reports whether a request's Host header names the loopback
// interface. A server without authentication answers only such requests, so
// a web page cannot reach it through a DNS name rebound to 127.0.0.1.
func isLoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	} else {
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	}
	return isLoopback(host)
}
