package console

import (
	"math"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// maxThrottled bounds the client addresses the login throttle remembers.
// Past it, addresses whose budget is whole again are forgotten, and when
// none is, new addresses share one budget until some are.
const maxThrottled = 10000

// loginThrottle bounds the failed logins of each client address with a
// token bucket (golang.org/x/time/rate): burst failures at once, then one
// per interval. Only failures spend the budget; while it is empty every
// login from the address is refused, the right token's too, so a guesser
// learns nothing until the interval has passed.
type loginThrottle struct {
	mu       sync.Mutex
	limit    rate.Limit
	burst    int
	addrs    map[string]*rate.Limiter
	overflow *rate.Limiter
}

func newLoginThrottle(burst int, interval time.Duration) *loginThrottle {
	limit := rate.Inf
	if interval > 0 {
		limit = rate.Every(interval)
	}
	return &loginThrottle{limit: limit, burst: burst, addrs: map[string]*rate.Limiter{}, overflow: rate.NewLimiter(limit, burst)}
}

// wait returns how long the address must wait before it may try to log
// in, 0 when it may now.
func (t *loginThrottle) wait(addr string, now time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	lim := t.addrs[addr]
	if lim == nil {
		if len(t.addrs) < maxThrottled {
			return 0
		}
		lim = t.overflow
	}
	tokens := lim.TokensAt(now)
	if tokens >= 1 {
		return 0
	}
	return time.Duration((1 - tokens) / float64(t.limit) * float64(time.Second))
}

// fail spends one try of the address's budget.
func (t *loginThrottle) fail(addr string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	lim := t.addrs[addr]
	if lim == nil {
		if len(t.addrs) >= maxThrottled {
			t.forgetLocked(now)
		}
		if len(t.addrs) >= maxThrottled {
			lim = t.overflow
		} else {
			lim = rate.NewLimiter(t.limit, t.burst)
			t.addrs[addr] = lim
		}
	}
	lim.AllowN(now, 1)
}

// forgetLocked drops the addresses whose budget is whole again: they are
// as good as new.
func (t *loginThrottle) forgetLocked(now time.Time) {
	for addr, lim := range t.addrs {
		if lim.TokensAt(now) >= float64(t.burst) {
			delete(t.addrs, addr)
		}
	}
}

// retryAfter is the value of a Retry-After header for a wait: whole
// seconds, at least 1.
func retryAfter(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}

// clientAddr is the address the login throttle counts a request against:
// the peer's, or, when the peer is a trusted proxy, the last address of
// X-Forwarded-For that is not one; an IPv6 address is counted by its /64.
func (c *Console) clientAddr(r *http.Request) string {
	addr := peerAddr(r)
	if addr.IsValid() && c.trusted(addr) {
		hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
		for i := len(hops) - 1; i >= 0; i-- {
			hop, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
			if err != nil {
				break
			}
			addr = hop.Unmap()
			if !c.trusted(addr) {
				break
			}
		}
	}
	if !addr.IsValid() {
		return r.RemoteAddr
	}
	if addr.Is6() {
		p, _ := addr.Prefix(64)
		return p.String()
	}
	return addr.String()
}

// overTLS reports whether the request reached the console over TLS: its
// own connection, or a trusted proxy's X-Forwarded-Proto of https; with
// Config.SecureCookies always.
func (c *Console) overTLS(r *http.Request) bool {
	if c.cfg.SecureCookies || r.TLS != nil {
		return true
	}
	addr := peerAddr(r)
	return addr.IsValid() && c.trusted(addr) && strings.EqualFold(strings.TrimSpace(r.Header.Get("X-Forwarded-Proto")), "https")
}

// trusted reports whether addr is one of Config.TrustedProxies.
func (c *Console) trusted(addr netip.Addr) bool {
	for _, p := range c.cfg.TrustedProxies {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// peerAddr is the address of the request's peer; invalid when RemoteAddr
// holds none.
func peerAddr(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return addr.Unmap()
}
