package cli

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

// normalizeFlags rewrites the address flags of cmd into their full form
// after the command line and the environment were read: --server takes a
// host:port, :port or port without a scheme (see normalizeServer), and
// --addr and --metrics-addr take a bare port (see normalizeListenAddr). A
// value that cannot be understood is a usage error.
func normalizeFlags(cmd *cobra.Command) error {
	fs := cmd.Flags()
	if f := fs.Lookup("server"); f != nil {
		v, err := normalizeServer(f.Value.String())
		if err != nil {
			return usageError(fmt.Errorf("--server: %w", err))
		}
		if err := f.Value.Set(v); err != nil {
			return usageError(fmt.Errorf("--server: %w", err))
		}
	}
	for _, name := range []string{"addr", "metrics-addr"} {
		if f := fs.Lookup(name); f != nil {
			if err := f.Value.Set(normalizeListenAddr(f.Value.String())); err != nil {
				return usageError(fmt.Errorf("--%s: %w", name, err))
			}
		}
	}
	return nil
}

// normalizeServer turns what a user may type for a server into a base URL:
// "http://host:port/..." and "https://..." stay as they are,
// "host:port" and "host" become "http://host:port" and "http://host",
// ":8080" and "8080" become "http://127.0.0.1:8080".
func normalizeServer(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", errors.New("empty; want a URL such as http://127.0.0.1:8080 or a host:port")
	}
	if !strings.Contains(s, "://") {
		switch {
		case isPort(s):
			s = "127.0.0.1:" + s
		case strings.HasPrefix(s, ":") && isPort(s[1:]):
			s = "127.0.0.1" + s
		}
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("%q is not a URL or host:port: %w", s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("%q: the scheme must be http or https", s)
	}
	if u.Host == "" {
		return "", fmt.Errorf("%q has no host", s)
	}
	if p := u.Port(); p != "" && !isPort(p) {
		return "", fmt.Errorf("%q: port %q is not a number from 1 to 65535", s, p)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%q: a server URL has no user, query or fragment (the token goes in --token)", s)
	}
	return s, nil
}

// normalizeListenAddr turns a bare port ("18202") into a loopback listen
// address ("127.0.0.1:18202"): listening on every interface needs to be
// asked for, as ":18202". Anything else is left for the listener to judge.
func normalizeListenAddr(s string) string {
	if isPort(s) {
		return net.JoinHostPort("127.0.0.1", s)
	}
	return s
}

// isPort reports whether s is a TCP port number, 0 to 65535.
func isPort(s string) bool {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return false
	}
	n, err := strconv.Atoi(s)
	return err == nil && n >= 0 && n <= 65535
}
