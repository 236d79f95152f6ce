package console

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/flow"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/schedule"
)

// Path is where the console is served: every page's path starts with it.
const Path = "/ui"

// Defaults of Config.
const (
	// DefaultSessionTTL is how long a console session lasts after its login.
	DefaultSessionTTL = 12 * time.Hour
	// DefaultMaxSessions bounds the sessions kept in memory.
	DefaultMaxSessions = 10000
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
	// Stats reads the instance counts by workflow and status of the
	// overview (one index-backed query).
	//
	// Defaults to nil: the overview shows throughput only.
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
	// MaxSessions bounds the sessions kept in memory; a login past it
	// drops the session closest to its expiry.
	//
	// Defaults to DefaultMaxSessions (10000).
	MaxSessions int
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
	return &out
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
	return nil
}
