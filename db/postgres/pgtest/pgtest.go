package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/duraflow/duraflow/db/postgres"
	"github.com/duraflow/duraflow/internal/pgbouncertest"
)

// DefaultDatabaseURL is the database tests use when
// DURAFLOW_TEST_DATABASE_URL is not set.
const DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// Environment variables that steer the package.
const (
	// EnvDatabaseURL names the database in which test schemas are created.
	EnvDatabaseURL = "DURAFLOW_TEST_DATABASE_URL"
	// EnvRequirePostgres, set to 1, turns "Postgres not reachable" from a skip
	// into a failure.
	EnvRequirePostgres = "DURAFLOW_REQUIRE_POSTGRES"
	// EnvPgBouncer, set to 1, routes every pool and store of the package
	// through a private PgBouncer in transaction mode (see WithPgBouncer),
	// started at the first use in front of DURAFLOW_TEST_DATABASE_URL's
	// server; a missing pgbouncer binary is then a failure.
	EnvPgBouncer = pgbouncertest.EnvPgBouncer
)

// pingTimeout bounds how long a test waits to learn that Postgres is down.
const pingTimeout = 3 * time.Second

// Option changes how NewPool and NewStore build their pool.
type Option func(*options)

type options struct {
	maxConns     int32
	noMigrations bool
	databaseURL  string
	bouncer      string
}

// WithMaxConns sets the most connections the test's pool opens. Tests run in
// parallel against one server, so keep it small.
//
// Defaults to 10.
func WithMaxConns(n int32) Option {
	return func(o *options) { o.maxConns = n }
}

// WithDatabaseURL connects to url instead of DatabaseURL: the same server
// through another address, such as a proxy a test can cut to simulate an
// outage.
//
// Defaults to DatabaseURL().
func WithDatabaseURL(url string) Option {
	return func(o *options) { o.databaseURL = url }
}

// WithPgBouncer connects the pool through the PgBouncer at addr
// (host:port) in front of the test database's server, in transaction
// pooling mode, as deployments behind a pooler do. PgBouncer must let any
// role of the server log in (auth_type trust with an auth_user, as
// internal/pgbouncertest configures it). It forwards no search_path, so
// the schema gets a role of its own, named as the schema (a superuser, as
// the tests' user is), whose search_path is the schema; the pool logs in
// as that role, with pgx's cache_describe query exec mode (no prepared
// statement outlives a transaction), and the store LISTENs on a direct
// connection (postgres.WithListenURL). The role is dropped with the
// schema. Set DURAFLOW_TEST_PGBOUNCER=1 to do this for every pool of the
// package.
//
// Defaults to a direct connection.
func WithPgBouncer(addr string) Option {
	return func(o *options) { o.bouncer = addr }
}

// WithoutMigrations leaves the fresh schema empty, for tests of migrating
// itself.
func WithoutMigrations() Option {
	return func(o *options) { o.noMigrations = true }
}

// DatabaseURL returns the URL of the test database: DURAFLOW_TEST_DATABASE_URL,
// or DefaultDatabaseURL when that is unset.
func DatabaseURL() string {
	if url := os.Getenv(EnvDatabaseURL); url != "" {
		return url
	}
	return DefaultDatabaseURL
}

// DatabaseURLWith returns DatabaseURL with more connection parameters, each
// "key=value" (such as the store's pool_max_conns): appended to the query of
// a URL, or to a keyword/value connection string.
func DatabaseURLWith(params ...string) string {
	return withParams(DatabaseURL(), params...)
}

// withParams appends connection parameters, each "key=value", to conn: to
// the query of a URL, or to a keyword/value connection string.
func withParams(conn string, params ...string) string {
	if !strings.Contains(conn, "://") {
		return strings.Join(append([]string{conn}, params...), " ")
	}
	sep := "?"
	if strings.Contains(conn, "?") {
		sep = "&"
	}
	return conn + sep + strings.Join(params, "&")
}

// NewStore returns a postgres.Store over a pool of its own, on a fresh,
// migrated schema that is dropped when the test ends. The store's wake
// notifications go to a channel of the test's own, "duraflow_wake_" and the
// schema's random part (store.WakeChannel() names it), because
// notifications, unlike tables, are shared by every schema of the database.
func NewStore(t testing.TB, opts ...Option) *postgres.Store {
	t.Helper()
	return NewSchema(t, opts...).Store
}

// Schema is a fresh, migrated test schema: a store on it, and what another
// process needs to open a store on the same schema.
type Schema struct {
	// Store is a postgres.Store over a pool of its own (as NewStore's).
	Store *postgres.Store
	// URL is the database's URL (or connection string) with the schema as
	// its search_path: a store opened on it (postgres.Open) uses the schema.
	// Through PgBouncer (WithPgBouncer) it is PgBouncer's URL, logging in as
	// the schema's role.
	URL string
	// ListenURL is the direct URL to LISTEN on (postgres.WithListenURL)
	// when URL goes through PgBouncer; "" otherwise.
	ListenURL string
	// WakeChannel is the store's wake channel, to pass to
	// postgres.WithWakeChannel where the store is opened on URL.
	WakeChannel string
}

// NewSchema is NewStore, also returning the URL and the wake channel with
// which another process, such as one a crash test kills, opens a store on
// the same schema. The schema is dropped when the test ends.
func NewSchema(t testing.TB, opts ...Option) *Schema {
	t.Helper()
	pool, schema, url, pooled := newPool(t, opts)
	channel := postgres.WakeChannel + "_" + strings.TrimPrefix(schema, schemaPrefix)
	if pooled != "" {
		// Through PgBouncer: LISTEN on a direct connection (any schema).
		return &Schema{
			Store:       postgres.New(pool, postgres.WithWakeChannel(channel), postgres.WithListenURL(url)),
			URL:         pooled,
			ListenURL:   url,
			WakeChannel: channel,
		}
	}
	return &Schema{
		Store:       postgres.New(pool, postgres.WithWakeChannel(channel)),
		URL:         withParams(url, "search_path="+schema),
		WakeChannel: channel,
	}
}

// NewPool returns a pool whose search_path is a fresh schema with the Duraflow
// tables migrated in it (see WithoutMigrations). The pool is closed and the schema dropped when the
// test ends. It skips the test (or fails it, with
// DURAFLOW_REQUIRE_POSTGRES=1) when Postgres is not reachable.
func NewPool(t testing.TB, opts ...Option) *pgxpool.Pool {
	t.Helper()
	pool, _, _, _ := newPool(t, opts)
	return pool
}

// schemaPrefix starts the name of every test schema.
const schemaPrefix = "duraflow_test_"

// newPool is NewPool, also returning the name of the test schema, the URL
// of its database (without the schema) and, when the pool goes through
// PgBouncer, the pool's URL (PgBouncer's, as the schema's role).
func newPool(t testing.TB, opts []Option) (pool *pgxpool.Pool, schema, url, pooled string) {
	t.Helper()
	o := options{maxConns: 10}
	for _, opt := range opts {
		opt(&o)
	}
	url = o.databaseURL
	if url == "" {
		url = DatabaseURL()
	}
	requireReachable(t, url)
	if o.bouncer == "" && os.Getenv(EnvPgBouncer) == "1" {
		o.bouncer = pgbouncertest.Shared(t, url).Addr()
	}

	schema = schemaPrefix + randomHex(t, 8)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	if o.bouncer != "" {
		// Before the schema, so that it is dropped after the schema, which
		// holds what it owns.
		pooled = newRole(t, ctx, url, o.bouncer, schema)
	}
	if err := execAdmin(ctx, url, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatalf("pgtest: creating schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := execAdmin(ctx, url, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("pgtest: dropping schema %s: %v", schema, err)
		}
	})

	var config *pgxpool.Config
	if pooled != "" {
		if config, err = pgxpool.ParseConfig(pooled); err != nil {
			t.Fatalf("pgtest: parsing %s: %v", redact(pooled), err)
		}
	} else {
		if config, err = pgxpool.ParseConfig(url); err != nil {
			t.Fatalf("pgtest: parsing %s: %v", EnvDatabaseURL, err)
		}
		config.ConnConfig.RuntimeParams["search_path"] = schema
	}
	config.MaxConns = o.maxConns
	pool, err = pgxpool.NewWithConfig(ctx, config)
	if err != nil {
		t.Fatalf("pgtest: opening pool: %v", err)
	}
	// Registered after the schema's cleanup, so it runs first.
	t.Cleanup(pool.Close)

	if o.noMigrations {
		return pool, schema, url, pooled
	}
	if err := postgres.Migrate(ctx, pool); err != nil {
		t.Fatalf("pgtest: migrating schema %s: %v", schema, err)
	}
	return pool, schema, url, pooled
}

var (
	reachOnce sync.Once
	reachErr  error
)

// requireReachable pings the server once per test binary and skips or fails
// every test when it is down.
func requireReachable(t testing.TB, url string) {
	t.Helper()
	reachOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
		defer cancel()
		reachErr = execAdmin(ctx, url, "SELECT 1")
	})
	if reachErr == nil {
		return
	}
	msg := fmt.Sprintf("Postgres not reachable at %s (%v); set %s", redact(url), reachErr, EnvDatabaseURL)
	if os.Getenv(EnvRequirePostgres) == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// execAdmin runs one statement on a short-lived connection outside any test
// schema.
func execAdmin(ctx context.Context, url, sql string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

// redact hides a password in a URL before it is printed.
func redact(url string) string {
	config, err := pgx.ParseConfig(url)
	if err != nil || config.Password == "" {
		return url
	}
	return fmt.Sprintf("postgres://%s:***@%s:%d/%s", config.User, config.Host, config.Port, config.Database)
}

func randomHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("pgtest: random schema name: %v", err)
	}
	return hex.EncodeToString(b)
}
