package console

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/flow"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/schedule"
	"github.com/duraflow/duraflow/workflow"
)

// Path is where the console is served: every page's path starts with it.
const Path = "/ui"

// Defaults of Config.
const (
	// DefaultSessionTTL is how long a console session lasts after its login.
	DefaultSessionTTL = 12 * time.Hour
	// DefaultMaxSessions bounds the sessions kept in memory.
	DefaultMaxSessions = 10000
	// DefaultMaxSessionsPerCredential bounds the sessions of one credential.
	DefaultMaxSessionsPerCredential = 100
	// DefaultLoginFailures is how many failed logins a client address may
	// make in a row before it is throttled.
	DefaultLoginFailures = 10
	// DefaultLoginFailureInterval is how often a throttled address gets one
	// more try.
	DefaultLoginFailureInterval = 6 * time.Second
)

// Config configures a Console.
type Config struct {
	// Client is the management service the pages read and act through.
	// Required.
	Client *client.Client
	// Tokens are the bearer tokens a login may present, as the API's
	// (httpapi.Config.Tokens). Ignored when Authorize is set.
	//
	// Defaults to none: without tokens and Authorize the console needs no
	// login and serves only requests addressed to a loopback host.
	Tokens []httpapi.Token
	// Authorize, when set, decides every check instead of the tokens, as
	// the API's httpapi.Config.Authorize: it sees each console request
	// with the logged-in secret as its bearer token.
	//
	// Defaults to nil.
	Authorize httpapi.AuthorizeFunc
	// Schedules serves the schedules page.
	//
	// Defaults to nil: the page says that schedules are off.
	Schedules *schedule.Scheduler
	// Flows serves the flow versions and their definitions.
	//
	// Defaults to nil: every workflow shows as a Go workflow.
	Flows *flow.Registry
	// Stats reads the overview's instance counts by workflow and status
	// and its throughput, the instances that ended in the last hour (an
	// index-backed query each, which read no instance).
	//
	// Defaults to nil: the overview shows neither.
	Stats db.StatsStore
	// Clock is the time the timeline and the throughput are drawn against.
	//
	// Defaults to the real clock.
	Clock clock.Clock
	// Logger receives failures a page shows as an internal error.
	//
	// Defaults to slog.Default().
	Logger *slog.Logger
	// SessionTTL is how long a session lasts after its login.
	//
	// Defaults to DefaultSessionTTL (12 hours).
	SessionTTL time.Duration
	// MaxSessions bounds the sessions kept in memory. A login past it first
	// drops the expired sessions, then the oldest session of the
	// credential that holds the most.
	//
	// Defaults to DefaultMaxSessions (10000).
	MaxSessions int
	// MaxSessionsPerCredential bounds the sessions of one credential: one
	// token (or one secret an AuthorizeFunc accepted), or without
	// authentication every loopback browser together. A login past it ends
	// that credential's oldest session and no other's, so whoever holds a
	// token can log out only the sessions of that token.
	//
	// Defaults to DefaultMaxSessionsPerCredential (100), or MaxSessions
	// when that is lower.
	MaxSessionsPerCredential int
	// LoginFailures is how many failed logins (an unknown token) a client
	// address may make in a row; past it every login from the address,
	// with the right token too, is answered 429 with Retry-After until
	// LoginFailureInterval has given it another try. Addresses are told
	// apart by IPv4 address and IPv6 /64 (see TrustedProxies).
	//
	// Defaults to DefaultLoginFailures (10).
	LoginFailures int
	// LoginFailureInterval is how often a throttled address gets one more
	// try: LoginFailures tries at once, then one per interval.
	//
	// Defaults to DefaultLoginFailureInterval (6 seconds: 10 a minute).
	LoginFailureInterval time.Duration
	// SecureCookies marks the console's cookies Secure on every answer.
	// Without it they are Secure only over TLS, which the duraflow binary
	// does not serve: set it when a proxy in front of the console
	// terminates TLS.
	//
	// Defaults to false.
	SecureCookies bool
	// TrustedProxies are the addresses of reverse proxies in front of the
	// console. A request that comes from one of them is taken to come from
	// the address its X-Forwarded-For names (the last one that is not a
	// trusted proxy), for the login throttle, and over TLS when its
	// X-Forwarded-Proto is https, for the cookies. From any other address
	// both headers are ignored.
	//
	// Defaults to none.
	TrustedProxies []netip.Prefix
	// Limits are the request limits of the API the console is served
	// beside (httpapi.Server.Limits): the console holds instance ids,
	// workflow names, event types, event payloads and page sizes to them,
	// exactly as the API does.
	//
	// Defaults to the engine's (a zero field is the engine's limit: the
	// client's EngineLimits for payloads, as the API's).
	Limits httpapi.Limits
	// MaxBodyBytes bounds the body of a form posted to the console, as
	// httpapi.Config.MaxBodyBytes bounds a request body of the API
	// (httpapi.Server.MaxBodyBytes): a larger one is refused with 413.
	//
	// Defaults to Limits.DefaultMaxBodyBytes() (the largest payload plus
	// 64 KiB).
	MaxBodyBytes int64
}

// WithDefaults returns a copy of the config with zero fields filled in.
func (c *Config) WithDefaults() *Config {
	out := *c
	if out.Clock == nil {
		out.Clock = clock.New()
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	out.SessionTTL = cmp.Or(out.SessionTTL, DefaultSessionTTL)
	out.MaxSessions = cmp.Or(out.MaxSessions, DefaultMaxSessions)
	if out.MaxSessionsPerCredential == 0 {
		out.MaxSessionsPerCredential = min(DefaultMaxSessionsPerCredential, out.MaxSessions)
	}
	out.LoginFailures = cmp.Or(out.LoginFailures, DefaultLoginFailures)
	out.LoginFailureInterval = cmp.Or(out.LoginFailureInterval, DefaultLoginFailureInterval)
	out.Limits = out.Limits.WithDefaultsFor(out.engineLimits())
	out.MaxBodyBytes = cmp.Or(out.MaxBodyBytes, out.Limits.DefaultMaxBodyBytes())
	return &out
}

// engineLimits are the limits of the config's client, the default ones
// without a client (which validate refuses).
func (c *Config) engineLimits() workflow.EngineLimits {
	if c.Client == nil {
		return workflow.DefaultEngineLimits()
	}
	return c.Client.EngineLimits()
}

func (c *Config) validate() error {
	if c.Client == nil {
		return errors.New("console: Config.Client is required")
	}
	if c.SessionTTL < 0 {
		return fmt.Errorf("console: SessionTTL %s must be positive", c.SessionTTL)
	}
	if c.MaxSessions < 1 {
		return fmt.Errorf("console: MaxSessions %d must be at least 1", c.MaxSessions)
	}
	if c.MaxSessionsPerCredential < 1 || c.MaxSessionsPerCredential > c.MaxSessions {
		return fmt.Errorf("console: MaxSessionsPerCredential %d must be between 1 and MaxSessions (%d)", c.MaxSessionsPerCredential, c.MaxSessions)
	}
	if c.LoginFailures < 1 {
		return fmt.Errorf("console: LoginFailures %d must be at least 1", c.LoginFailures)
	}
	if c.LoginFailureInterval < 0 {
		return fmt.Errorf("console: LoginFailureInterval %s must not be negative", c.LoginFailureInterval)
	}
	if err := c.Limits.ValidateFor(c.engineLimits()); err != nil {
		return fmt.Errorf("console: %w", err)
	}
	if most := httpapi.MaxBodyBytesFor(c.engineLimits()); c.MaxBodyBytes < 1 || c.MaxBodyBytes > most {
		return fmt.Errorf("console: MaxBodyBytes %d must be between 1 and %d", c.MaxBodyBytes, most)
	}
	for _, p := range c.TrustedProxies {
		if !p.IsValid() {
			return errors.New("console: TrustedProxies holds an invalid prefix")
		}
	}
	return nil
}
