// Package netguard decides which addresses the http handler of package flow
// may connect to: internal addresses (loopback, private, link-local, cloud
// metadata, ...) are refused unless the handler's allowlist permits them.
package netguard

import (
	"fmt"
	"net/netip"
	"strings"
)

// AddressNotAllowedError is the error of an http step that was about to
// connect to an address the handler refuses: loopback, private (RFC 1918 and
// IPv6 ULA), link-local, shared (CGNAT), unspecified, multicast, reserved or
// a cloud metadata address, unless its allowlist permits it. The check runs
// on the resolved IP when the connection is dialed, so a name that resolves
// to such an address (DNS rebinding included) and a redirect to one are
// refused too. Its recorded name is ADDRESS_NOT_ALLOWED and it is not retried.
type AddressNotAllowedError struct {
	// Host is the host the request named (a name or an IP literal).
	Host string
	// IP is the address it resolved to.
	IP netip.Addr
	// Reason is the kind of address: "loopback", "private", "link-local", ...
	Reason string
}

// Error describes the refusal.
func (e *AddressNotAllowedError) Error() string {
	if e.Host != "" && e.Host != e.IP.String() {
		return fmt.Sprintf("refusing to connect to %s (%s): a %s address, which the http handler's allowlist does not permit", e.Host, e.IP, e.Reason)
	}
	return fmt.Sprintf("refusing to connect to %s: a %s address, which the http handler's allowlist does not permit", e.IP, e.Reason)
}

// ErrorName returns ADDRESS_NOT_ALLOWED.
func (e *AddressNotAllowedError) ErrorName() string { return ErrorNameAddressNotAllowed }

// ErrorNameAddressNotAllowed is the recorded name of an
// AddressNotAllowedError (flow.ErrorNameAddressNotAllowed).
const ErrorNameAddressNotAllowed = "ADDRESS_NOT_ALLOWED"

var (
	metadataV4 = netip.MustParseAddr("169.254.169.254")
	metadataV6 = netip.MustParseAddr("fd00:ec2::254")
)

// blockedPrefixes are refused on top of what netip's predicates cover.
var blockedPrefixes = []struct {
	prefix netip.Prefix
	reason string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "\"this network\""},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared (CGNAT)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignment"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("::/96"), "IPv4-compatible"},
	{netip.MustParsePrefix("100::/64"), "discard-only"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
}

// Prefixes of IPv6 addresses that embed an IPv4 address, which is checked too.
var (
	nat64Prefix = netip.MustParsePrefix("64:ff9b::/96")
	nat64Local  = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFour   = netip.MustParsePrefix("2002::/16")
	broadcastV4 = netip.MustParseAddr("255.255.255.255")
)

// internalReason returns why ip is internal, or "" for a public address.
func internalReason(ip netip.Addr) string {
	ip = ip.Unmap().WithZone("")
	switch {
	case !ip.IsValid():
		return "invalid"
	case ip == metadataV4 || ip == metadataV6:
		return "cloud metadata"
	case ip.IsUnspecified():
		return "unspecified"
	case ip.IsLoopback():
		return "loopback"
	case ip.IsLinkLocalUnicast():
		return "link-local"
	case ip.IsPrivate():
		return "private"
	case ip.IsMulticast(), ip.IsLinkLocalMulticast(), ip.IsInterfaceLocalMulticast():
		return "multicast"
	case ip == broadcastV4:
		return "broadcast"
	}
	for _, b := range blockedPrefixes {
		if b.prefix.Contains(ip) {
			return b.reason
		}
	}
	if ip.Is6() {
		b := ip.As16()
		var v4 netip.Addr
		switch {
		case nat64Prefix.Contains(ip):
			v4 = netip.AddrFrom4([4]byte(b[12:16]))
		case nat64Local.Contains(ip):
			return "NAT64 (local use)"
		case sixToFour.Contains(ip):
			v4 = netip.AddrFrom4([4]byte(b[2:6]))
		}
		if v4.IsValid() {
			if r := internalReason(v4); r != "" {
				return r + " (embedded in " + ip.String() + ")"
			}
		}
	}
	return ""
}

// Policy is the http handler's allowlist.
type Policy struct {
	prefixes []netip.Prefix
	hosts    map[string]bool // exact names, lower case
	suffixes []string        // ".example.com" for "*.example.com"
}

// NewPolicy reads allowlist entries: CIDRs ("10.0.0.0/8"), IPs
// ("127.0.0.1", "::1"), host names ("localhost") and wildcard names
// ("*.internal.example.com", its subdomains only).
func NewPolicy(allow []string) (*Policy, error) {
	p := &Policy{hosts: map[string]bool{}}
	for _, entry := range allow {
		e := strings.TrimSpace(entry)
		switch {
		case e == "":
			return nil, fmt.Errorf("empty allowlist entry")
		case strings.Contains(e, "/"):
			pfx, err := netip.ParsePrefix(e)
			if err != nil {
				return nil, fmt.Errorf("allowlist entry %q: %w", entry, err)
			}
			p.prefixes = append(p.prefixes, pfx.Masked())
		default:
			if ip, err := netip.ParseAddr(strings.Trim(e, "[]")); err == nil {
				ip = ip.Unmap()
				p.prefixes = append(p.prefixes, netip.PrefixFrom(ip, ip.BitLen()))
				continue
			}
			name := normalizeHost(e)
			if rest, ok := strings.CutPrefix(name, "*."); ok {
				if !validHostName(rest) {
					return nil, fmt.Errorf("allowlist entry %q is not a CIDR, an IP or a host name", entry)
				}
				p.suffixes = append(p.suffixes, "."+rest)
				continue
			}
			if !validHostName(name) {
				return nil, fmt.Errorf("allowlist entry %q is not a CIDR, an IP or a host name", entry)
			}
			p.hosts[name] = true
		}
	}
	return p, nil
}

func normalizeHost(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

func validHostName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, r := range label {
			if !(r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
				return false
			}
		}
	}
	return true
}

// HostAllowed reports whether the host name is allow-listed, which permits
// whatever it resolves to.
func (p *Policy) HostAllowed(host string) bool {
	h := normalizeHost(host)
	if p.hosts[h] {
		return true
	}
	for _, s := range p.suffixes {
		if strings.HasSuffix(h, s) {
			return true
		}
	}
	return false
}

// Check returns an *AddressNotAllowedError when ip is internal and no CIDR of
// the allowlist contains it.
func (p *Policy) Check(host string, ip netip.Addr) error {
	reason := internalReason(ip)
	if reason == "" {
		return nil
	}
	u := ip.Unmap().WithZone("")
	for _, pfx := range p.prefixes {
		if pfx.Contains(u) {
			return nil
		}
	}
	return &AddressNotAllowedError{Host: host, IP: u, Reason: reason}
}
