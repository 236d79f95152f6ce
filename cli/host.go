package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/duraflow/duraflow"
	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/console"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/dburl"
	"github.com/duraflow/duraflow/db/postgres"
	"github.com/duraflow/duraflow/dispatcher"
	"github.com/duraflow/duraflow/flow"
	"github.com/duraflow/duraflow/hook"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/internal/devstub"
	"github.com/duraflow/duraflow/metrics"
	"github.com/duraflow/duraflow/runner"
	"github.com/duraflow/duraflow/schedule"
	"github.com/duraflow/duraflow/workflow"
)

// hostConfig is the configuration of dev, serve and worker, filled from
// flags and DURAFLOW_* variables.
type hostConfig struct {
	databaseURL  string
	migrate      bool
	addr         string // "" serves no HTTP (worker)
	prefix       string
	tokens       []string
	triggers     []string
	triggersFile string
	// namespaceQueues ("ns=q1,q2" each) and namespaceMaxPriority bound the
	// creates of callers limited to namespaces (httpapi.Config).
	namespaceQueues      []string
	namespaceMaxPriority int
	httpAllow            []string
	timeouts             httpTimeouts
	limits               httpapi.Limits
	engineLimits         workflow.EngineLimits
	maxBodyBytes         int64
	flowRefresh          time.Duration
	flowsDir             string // dev
	stub                 bool   // dev
	// activityInterval is how often dev logs its activity summary; 0 for
	// never (serve, worker).
	activityInterval time.Duration
	stubAddr         string // dev
	tick             bool
	runner           bool
	lease            time.Duration
	pollInterval     time.Duration
	concurrency      int
	maxLeaseLosses   int
	maxInvokeDepth   int
	eagerStart       bool
	queues           []string
	workflows        []string
	notify           bool
	wakeChannel      string
	listenURL        string // --listen-db: the wake listener's database URL; "" for --db's
	shutdownTimeout  time.Duration
	workerHeartbeat  time.Duration
	offlineAfter     time.Duration
	eventLog         bool
	eventRetention   time.Duration
	logFormat        string
	logLevel         string
	metricsOnAPI     bool   // dev, serve: /metrics on the API address
	metricsAddr      string // a listen address of its own for /metrics; "" for none
	console          bool   // dev, serve: the web console at /ui
	secureCookies    bool   // dev, serve: the console's cookies always Secure
	trustedProxies   []string
}

// addMetricsFlags adds --metrics-addr and, when onAPI (dev, serve),
// --metrics, which serves /metrics on the API address.
func addMetricsFlags(fs *pflag.FlagSet, c *hostConfig, onAPI bool) {
	fs.StringVar(&c.metricsAddr, "metrics-addr", "", `serve the Prometheus metrics at /metrics on this listen address of their own ("" for none); tokens need the metrics scope, and without tokens only loopback addresses are allowed`)
	bindEnv(fs, "metrics-addr", "DURAFLOW_METRICS_ADDR")
	if onAPI {
		fs.BoolVar(&c.metricsOnAPI, "metrics", true, "serve the Prometheus metrics at /metrics on the API address (tokens need the metrics scope; --metrics=false to turn it off)")
		bindEnv(fs, "metrics", "DURAFLOW_METRICS")
	}
}

// addMetricsTokenFlag adds --token to a command that serves no API
// (worker), so that its --metrics-addr can be protected, and served on an
// address other than loopback: a scrape needs a token with the metrics
// scope.
func addMetricsTokenFlag(fs *pflag.FlagSet, c *hostConfig) {
	fs.StringArrayVar(&c.tokens, "token", nil, `bearer token "name:secret:scopes" or "name:sha256=<hex>:scopes" that may scrape --metrics-addr, which needs the metrics scope (or *); with tokens --metrics-addr may listen on any address (repeatable; the variable takes several separated by spaces or ';')`)
	bindEnv(fs, "token", "DURAFLOW_TOKENS")
}

func addDatabaseFlags(fs *pflag.FlagSet, c *hostConfig, def string) {
	fs.StringVar(&c.databaseURL, "db", def, "database URL: postgres://…, sqlite:path, a bare path, or sqlite::memory:")
	bindEnv(fs, "db", "DURAFLOW_DATABASE_URL")
	fs.BoolVar(&c.migrate, "migrate", true, "apply pending migrations on start")
	bindEnv(fs, "migrate", "DURAFLOW_MIGRATE")
}

func addHTTPFlags(fs *pflag.FlagSet, c *hostConfig) {
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8080", "listen address of the HTTP API: host:port, or a port alone for 127.0.0.1:port (\":port\" is every interface); without --token only loopback addresses are allowed")
	bindEnv(fs, "addr", "DURAFLOW_ADDR")
	fs.StringArrayVar(&c.tokens, "token", nil, `bearer token "name:secret:scopes" or "name:sha256=<hex>:scopes", scopes a comma-separated list from `+strings.Join(httpapi.Scopes(), ", ")+` ("*" is every scope but tick; "scopes@ns1,ns2" limits a token to namespaces) (repeatable; the variable takes several separated by spaces or ';')`)
	bindEnv(fs, "token", "DURAFLOW_TOKENS")
	fs.StringVar(&c.prefix, "api-prefix", "/api", "path the API routes are mounted under")
	bindEnv(fs, "api-prefix", "DURAFLOW_API_PREFIX")
	fs.BoolVar(&c.tick, "tick", false, "enable POST <prefix>/_runner/tick, which fires due schedules and runs due work once (needs a token with the tick scope)")
	bindEnv(fs, "tick", "DURAFLOW_TICK")
	fs.StringArrayVar(&c.triggers, "trigger", nil, `HTTP trigger "[METHOD ]/path=workflow[@namespace][,key=source...]": a request to the path (at the root) starts the workflow (in the namespace, default "default") with the JSON body as params, or params mapped from body.a.b, query.x, header.X, path.x; credential headers and query parameters (Authorization, Cookie, token, api_key, …) only with a trailing ",allowCredentialHeaders" (repeatable; needs the create scope, and a token limited to namespaces only fires the triggers of its namespaces)`)
	fs.StringVar(&c.triggersFile, "triggers-file", "", `JSON file of HTTP triggers: [{"method","path","workflow","namespace","params":{key: source},"allowCredentialHeaders":false}]`)
	bindEnv(fs, "triggers-file", "DURAFLOW_TRIGGERS_FILE")
	fs.StringArrayVar(&c.namespaceQueues, "namespace-queues", nil, `"namespace=queue1,queue2": the task queues a token limited to namespaces may name in a create in that namespace, besides the workflow's own (repeatable; default: the workflow's queue only)`)
	bindEnv(fs, "namespace-queues", "DURAFLOW_NAMESPACE_QUEUES")
	fs.IntVar(&c.namespaceMaxPriority, "namespace-max-priority", 0, "the highest priority a token limited to namespaces may ask for in a create (-1000 to 1000)")
	bindEnv(fs, "namespace-max-priority", "DURAFLOW_NAMESPACE_MAX_PRIORITY")
	fs.BoolVar(&c.console, "console", true, "serve the web console at /ui on the API address (same tokens and scopes as the API)")
	bindEnv(fs, "console", "DURAFLOW_CONSOLE")
	fs.BoolVar(&c.secureCookies, "secure-cookies", false, "mark the web console's cookies Secure on every answer: set it when a proxy in front of the server terminates TLS (without it they are Secure only over TLS, which the server does not serve)")
	bindEnv(fs, "secure-cookies", "DURAFLOW_SECURE_COOKIES")
	fs.StringSliceVar(&c.trustedProxies, "trusted-proxies", nil, "addresses or CIDR prefixes of reverse proxies in front of the server (comma-separated or repeated): from them the web console takes the client address of X-Forwarded-For (for its login throttle) and TLS from X-Forwarded-Proto: https (for Secure cookies)")
	bindEnv(fs, "trusted-proxies", "DURAFLOW_TRUSTED_PROXIES")
	addTimeoutFlags(fs, c)
	addLimitFlags(fs, c)
}

// limitFlag is the flag of one of the engine's limits: its field, default
// and range.
type limitFlag struct {
	v           *int
	def         int
	least, most int
	name, env   string
	usage       string
}

// engineLimitFlags are the flags of the engine's limits
// (workflow.EngineLimits) on dev, serve and worker, over the fields of l.
func engineLimitFlags(l *workflow.EngineLimits) []limitFlag {
	return []limitFlag{
		{&l.MaxPayloadBytes, workflow.MaxPayloadBytes, workflow.MinPayloadBytesLimit, workflow.MaxPayloadBytesLimit, "max-payload-bytes", "DURAFLOW_MAX_PAYLOAD_BYTES",
			"largest payload, in bytes: the params and metadata of a create, an event's payload, a schedule's params (larger: 413 PAYLOAD_TOO_LARGE), a step's result, an output, an Invoke step's params (larger: the step fails)"},
		{&l.MaxStepsPerRun, workflow.MaxStepsPerRun, 1, workflow.MaxStepsPerRunLimit, "max-steps-per-run", "DURAFLOW_MAX_STEPS_PER_RUN",
			"most Do, WaitForEvent and Invoke steps of one run (sleeps don't count), and step visits of a flow's run; the step past it returns an error, too many steps in one run; a workflow registered WithMaxStepsPerRun has its own"},
		{&l.MaxBatchSize, workflow.MaxBatchSize, 1, workflow.MaxBatchSizeLimit, "max-batch-size", "DURAFLOW_MAX_BATCH_SIZE",
			"most instances of one batch create"},
	}
}

// addEngineLimitFlags adds the engine's limits (workflow.EngineLimits),
// which may be raised or lowered within their ranges; the processes of a
// deployment should share them.
func addEngineLimitFlags(fs *pflag.FlagSet, c *hostConfig) {
	for _, f := range engineLimitFlags(&c.engineLimits) {
		fs.IntVar(f.v, f.name, f.def, fmt.Sprintf("%s (%d to %d)", f.usage, f.least, f.most))
		bindEnv(fs, f.name, f.env)
	}
}

// checkEngineLimits refuses an engine limit outside its range, naming its
// flag.
func checkEngineLimits(c *hostConfig) error {
	for _, f := range engineLimitFlags(&c.engineLimits) {
		if *f.v < f.least || *f.v > f.most {
			return fmt.Errorf("--%s %d must be between %d and %d", f.name, *f.v, f.least, f.most)
		}
	}
	return nil
}

// addLimitFlags adds the request limits of the HTTP API (httpapi.Limits),
// the engine's limits by default; they may be lowered, not raised. The
// API's payload and batch limits are the engine's (addEngineLimitFlags).
func addLimitFlags(fs *pflag.FlagSet, c *hostConfig) {
	d := httpapi.DefaultLimits()
	for _, f := range []struct {
		v         *int
		def       int
		name, env string
		usage     string
	}{
		{&c.limits.MaxIDLength, d.MaxIDLength, "max-id-length", "DURAFLOW_MAX_ID_LENGTH", "longest instance id (longer: 400 INVALID_INSTANCE_ID)"},
		{&c.limits.MaxEventTypeLength, d.MaxEventTypeLength, "max-event-type-length", "DURAFLOW_MAX_EVENT_TYPE_LENGTH", "longest event type (longer: 400 INVALID_EVENT_TYPE)"},
		{&c.limits.MaxWorkflowNameLength, d.MaxWorkflowNameLength, "max-workflow-name-length", "DURAFLOW_MAX_WORKFLOW_NAME_LENGTH", "longest workflow name in an instance route"},
		{&c.limits.MaxPageSize, d.MaxPageSize, "max-page-size", "DURAFLOW_MAX_PAGE_SIZE", "largest pageSize of a list"},
	} {
		fs.IntVar(f.v, f.name, f.def, f.usage+"; may be lowered, not raised")
		bindEnv(fs, f.name, f.env)
	}
	fs.Int64Var(&c.maxBodyBytes, "max-body-bytes", 0, "largest request body, in bytes (0: --max-payload-bytes + 64 KiB); may be lowered, not raised")
	bindEnv(fs, "max-body-bytes", "DURAFLOW_MAX_BODY_BYTES")
}

// httpTimeouts are the timeouts of the HTTP server (see httpapi.Config).
type httpTimeouts struct {
	readHeader, body, write, idle time.Duration
}

// check refuses timeouts that are not positive (0 would not mean "none").
func (t httpTimeouts) check() error {
	for _, d := range []struct {
		flag string
		d    time.Duration
	}{{"--read-header-timeout", t.readHeader}, {"--body-timeout", t.body}, {"--write-timeout", t.write}, {"--idle-timeout", t.idle}} {
		if d.d <= 0 {
			return fmt.Errorf("%s %s must be positive", d.flag, d.d)
		}
	}
	return nil
}

func addTimeoutFlags(fs *pflag.FlagSet, c *hostConfig) {
	fs.Var(newDurationValue(&c.timeouts.readHeader, httpapi.DefaultReadHeaderTimeout), "read-header-timeout", "how long a client may take to send a request's headers")
	bindEnv(fs, "read-header-timeout", "DURAFLOW_READ_HEADER_TIMEOUT")
	fs.Var(newDurationValue(&c.timeouts.body, httpapi.DefaultBodyTimeout), "body-timeout", "how long a client may take to send a request's body once it is authorized; a slower one is answered 408 and disconnected")
	bindEnv(fs, "body-timeout", "DURAFLOW_BODY_TIMEOUT")
	fs.Var(newDurationValue(&c.timeouts.write, httpapi.DefaultWriteTimeout), "write-timeout", "how long a request may take from the end of its headers to the end of its answer (a tick's work does not count)")
	bindEnv(fs, "write-timeout", "DURAFLOW_WRITE_TIMEOUT")
	fs.Var(newDurationValue(&c.timeouts.idle, httpapi.DefaultIdleTimeout), "idle-timeout", "how long a kept-alive connection may wait for its next request")
	bindEnv(fs, "idle-timeout", "DURAFLOW_IDLE_TIMEOUT")
}

func addRunnerFlags(fs *pflag.FlagSet, c *hostConfig) {
	fs.Var(newDurationValue(&c.lease, runner.DefaultLeaseDuration), "lease", "how long a claimed task stays locked without a heartbeat; a crashed runner's work is taken over after it")
	bindEnv(fs, "lease", "DURAFLOW_LEASE")
	fs.Var(newDurationValue(&c.pollInterval, runner.DefaultPollInterval), "poll-interval", "how often the runner looks for due work when nothing woke it")
	bindEnv(fs, "poll-interval", "DURAFLOW_POLL_INTERVAL")
	fs.IntVar(&c.concurrency, "concurrency", runner.DefaultMaxConcurrency, "how many instances the runner executes at once")
	bindEnv(fs, "concurrency", "DURAFLOW_CONCURRENCY")
	fs.IntVar(&c.maxLeaseLosses, "max-lease-losses", runner.DefaultMaxLeaseLosses, "how many times in a row a task may lose its runner (its lease expires without a checkpoint: the process died or stalled in a step) before its instance errors instead of running the step again")
	bindEnv(fs, "max-lease-losses", "DURAFLOW_MAX_LEASE_LOSSES")
	fs.IntVar(&c.maxInvokeDepth, "max-invoke-depth", workflow.DefaultMaxInvokeDepth, "how deep Invoke steps may nest: an invoke past it fails with InvokeDepthError instead of starting a child")
	bindEnv(fs, "max-invoke-depth", "DURAFLOW_MAX_INVOKE_DEPTH")
	fs.BoolVar(&c.eagerStart, "eager-start", true, "start an instance created in this process on its runner at once, its task leased in the create's transaction, when the runner has a free slot (--eager-start=false: always queue it for a claim)")
	bindEnv(fs, "eager-start", "DURAFLOW_EAGER_START")
	fs.StringSliceVar(&c.queues, "queues", []string{workflow.DefaultQueue}, "task queues the runner serves (comma-separated or repeated): it claims only instances on them; '*' alone serves every queue")
	bindEnv(fs, "queues", "DURAFLOW_QUEUES")
	fs.StringSliceVar(&c.workflows, "workflows", nil, "only run these workflows (comma-separated or repeated; default: every registered one)")
	bindEnv(fs, "workflows", "DURAFLOW_WORKFLOWS")
	fs.BoolVar(&c.notify, "notify", true, "on Postgres, LISTEN for wake-ups from other processes (--notify=false: poll only)")
	bindEnv(fs, "notify", "DURAFLOW_NOTIFY")
	fs.StringVar(&c.wakeChannel, "wake-channel", postgres.WakeChannel, "on Postgres, the NOTIFY channel; deployments sharing a database use different ones")
	bindEnv(fs, "wake-channel", "DURAFLOW_WAKE_CHANNEL")
	fs.StringVar(&c.listenURL, "listen-db", "", "on Postgres, a direct postgres:// URL of the --db database for the LISTEN connection, when --db goes through a pooler in transaction mode (PgBouncer), which cannot keep a LISTEN (default: --db)")
	bindEnv(fs, "listen-db", "DURAFLOW_LISTEN_DATABASE_URL")
	fs.Var(newDurationValue(&c.workerHeartbeat, runner.DefaultWorkerHeartbeatInterval), "worker-heartbeat", "how often the runner heartbeats its worker row (see duraflow workers) and marks workers whose heartbeat stopped offline")
	bindEnv(fs, "worker-heartbeat", "DURAFLOW_WORKER_HEARTBEAT")
	fs.Var(newDurationValue(&c.offlineAfter, 0), "offline-after", "how old a worker's last heartbeat may be before it is marked offline and its tasks are released (0: three --worker-heartbeat intervals)")
	bindEnv(fs, "offline-after", "DURAFLOW_OFFLINE_AFTER")
	fs.BoolVar(&c.eventLog, "event-log", true, "keep the lifecycle event log (docs/events.md; --event-log=false: write none)")
	bindEnv(fs, "event-log", "DURAFLOW_EVENT_LOG")
	fs.Var(newDurationValue(&c.eventRetention, duraflow.DefaultLifecycleRetention), "event-retention", "how long lifecycle events are kept; the runner prunes older ones in the background")
	bindEnv(fs, "event-retention", "DURAFLOW_EVENT_RETENTION")
	fs.Var(newDurationValue(&c.shutdownTimeout, 30*time.Second), "shutdown-timeout", "on SIGTERM or SIGINT, or a drain (duraflow workers drain), how long running work may take to finish before it is handed back")
	bindEnv(fs, "shutdown-timeout", "DURAFLOW_SHUTDOWN_TIMEOUT")
	addFlowFlags(fs, c)
}

func addLogFlags(fs *pflag.FlagSet, c *hostConfig, level string) {
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	bindEnv(fs, "log-format", "DURAFLOW_LOG_FORMAT")
	fs.StringVar(&c.logLevel, "log-level", level, "log level: debug, info, warn or error")
	bindEnv(fs, "log-level", "DURAFLOW_LOG_LEVEL")
}

// host is a running dev, serve or worker process: a store, the workflows,
// the host duraflow.New builds over them (client, runner, wake-ups, hook
// deliverer, scheduler, flow registry) and the HTTP server.
type host struct {
	cfg     *hostConfig
	opts    *Options
	log     *slog.Logger
	backend dburl.Backend

	store    db.Store
	registry *workflow.Registry
	// core is the host duraflow.New builds; the fields below are its parts.
	core      *duraflow.Host
	client    *client.Client
	runner    *runner.Runner // nil when neither the loop nor the tick runs
	scheduler *schedule.Scheduler
	flows     *flow.Registry
	stub      *devstub.Server // dev
	activity  *activity       // dev, nil when --activity-interval is 0
	api       *httpapi.Server
	console   *console.Console // nil when --console=false
	listener  net.Listener
	url       string // the API's base URL, "" without HTTP

	// metrics serves /metrics (guarded as the API is), nil when off;
	// metricsListener is its own address (--metrics-addr), metricsURL its
	// URL there.
	metrics http.Handler
	// tracer exports spans over OTLP when the OTEL_ variables turn tracing
	// on (see newTracerProvider); nil otherwise.
	tracer          *sdktrace.TracerProvider
	metricsListener net.Listener
	metricsURL      string

	flowFiles, skippedFlowFiles []string // dev --flows
}

// openStore opens the database. On Postgres it sends wake notifications on
// the configured channel, and listens on it (db.WakeListener), on a
// connection to listenURL when it is set (--listen-db), checked here.
func openStore(ctx context.Context, url, wakeChannel, listenURL string) (db.Store, dburl.Backend, error) {
	backend, dsn, err := dburl.Parse(url)
	if err != nil {
		return nil, "", usageError(fmt.Errorf("--db: %w", err))
	}
	var listenDSN string
	if listenURL != "" {
		listenBackend, d, err := dburl.Parse(listenURL)
		switch {
		case err != nil:
			return nil, "", usageError(fmt.Errorf("--listen-db: %w", err))
		case listenBackend != dburl.Postgres:
			return nil, "", usageError(errors.New("--listen-db: want a postgres:// URL"))
		case backend != dburl.Postgres:
			return nil, "", usageError(errors.New("--listen-db is for a Postgres --db (on SQLite nothing LISTENs)"))
		}
		listenDSN = d
	}
	var s db.Store
	if backend == dburl.Postgres {
		s, err = postgres.Open(ctx, dsn, postgres.WithWakeChannel(wakeChannel), postgres.WithListenURL(listenDSN))
	} else {
		s, err = dburl.Open(ctx, url)
	}
	if err != nil {
		return nil, "", err
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.Ping(pingCtx); err != nil {
		_ = s.Close()
		return nil, "", fmt.Errorf("database %s is unreachable: %w", redactURL(url), err)
	}
	if ps, ok := s.(*postgres.Store); ok && listenDSN != "" {
		if err := ps.PingListener(pingCtx); err != nil {
			_ = s.Close()
			return nil, "", fmt.Errorf("--listen-db %s: %w", redactURL(listenURL), err)
		}
	}
	return s, backend, nil
}

// startHost builds and starts everything cfg asks for; serveHTTP says
// whether it serves the API (dev, serve) or not (worker).
func startHost(ctx context.Context, o *Options, cfg *hostConfig, log *slog.Logger, serveHTTP bool) (_ *host, err error) {
	h := &host{cfg: cfg, opts: o, log: log}
	defer func() {
		if err != nil {
			stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if h.core != nil {
				_ = h.core.Stop(stopCtx)
			}
			cancel()
			h.close()
		}
	}()
	if cfg.concurrency < 1 {
		return nil, usageError(fmt.Errorf("--concurrency %d must be at least 1", cfg.concurrency))
	}
	if cfg.maxInvokeDepth < 1 {
		return nil, usageError(fmt.Errorf("--max-invoke-depth %d must be at least 1", cfg.maxInvokeDepth))
	}
	if cfg.maxLeaseLosses < 1 {
		return nil, usageError(fmt.Errorf("--max-lease-losses %d must be at least 1", cfg.maxLeaseLosses))
	}
	if err := checkEngineLimits(cfg); err != nil {
		return nil, usageError(err)
	}
	if serveHTTP {
		if err := cfg.timeouts.check(); err != nil {
			return nil, usageError(err)
		}
		if err := cfg.limits.ValidateFor(cfg.engineLimits); err != nil {
			return nil, usageError(err)
		}
		if most := httpapi.MaxBodyBytesFor(cfg.engineLimits); cfg.maxBodyBytes < 0 || cfg.maxBodyBytes > most {
			return nil, usageError(fmt.Errorf("--max-body-bytes %d must be between 1 and %d (--max-payload-bytes plus 64 KiB), or 0 for --max-payload-bytes + 64 KiB: it may be lowered, not raised", cfg.maxBodyBytes, most))
		}
	}
	var tokens []httpapi.Token
	for _, spec := range cfg.tokens {
		t, err := httpapi.ParseToken(spec)
		if err != nil {
			return nil, usageError(fmt.Errorf("--token: %w", err))
		}
		tokens = append(tokens, t)
	}
	authConfigured := len(tokens) > 0 || o.Authorize != nil
	if cfg.metricsAddr != "" {
		if err := httpapi.CheckListenAddr(cfg.metricsAddr, authConfigured); err != nil {
			return nil, usageError(fmt.Errorf("--metrics-addr: %w", err))
		}
	}
	var (
		triggers        []httpapi.Trigger
		namespaceQueues map[string][]string
		proxies         []netip.Prefix
	)
	if serveHTTP {
		if err := httpapi.CheckListenAddr(cfg.addr, len(tokens) > 0 || o.Authorize != nil); err != nil {
			return nil, usageError(fmt.Errorf("--addr: %w", err))
		}
		if triggers, err = loadTriggers(cfg); err != nil {
			return nil, err
		}
		if namespaceQueues, err = parseNamespaceQueues(cfg.namespaceQueues); err != nil {
			return nil, err
		}
		if err := checkHostPaths(cfg, triggers); err != nil {
			return nil, usageError(err)
		}
		if proxies, err = parsePrefixes(cfg.trustedProxies); err != nil {
			return nil, usageError(fmt.Errorf("--trusted-proxies: %w", err))
		}
	}

	// Bind the listen addresses before the database is opened, so that a
	// busy port fails the start before anything is created or migrated.
	if serveHTTP {
		h.listener, err = net.Listen("tcp", cfg.addr)
		if err != nil {
			return nil, withCode(ExitError, fmt.Errorf("listening on %s: %w", cfg.addr, err))
		}
		h.url = "http://" + h.listener.Addr().String()
	}
	if cfg.metricsAddr != "" {
		h.metricsListener, err = net.Listen("tcp", cfg.metricsAddr)
		if err != nil {
			return nil, withCode(ExitError, fmt.Errorf("listening on %s: %w", cfg.metricsAddr, err))
		}
		h.metricsURL = "http://" + h.metricsListener.Addr().String() + "/metrics"
	}

	h.store, h.backend, err = openStore(ctx, cfg.databaseURL, cfg.wakeChannel, cfg.listenURL)
	if err != nil {
		return nil, err
	}
	if cfg.migrate {
		if err := dburl.Migrate(ctx, h.store); err != nil {
			return nil, fmt.Errorf("migrating %s: %w", redactURL(cfg.databaseURL), err)
		}
	}

	h.registry = workflow.NewRegistry()
	if o.Register != nil {
		if err := o.Register(h.registry); err != nil {
			return nil, fmt.Errorf("registering workflows: %w", err)
		}
	}
	if len(h.registry.Names()) == 0 {
		log.Warn(errNoWorkflows.Error())
	}

	handlers, err := h.flowHandlers()
	if err != nil {
		return nil, err
	}
	coreCfg := &duraflow.Config{
		Registry: h.registry, Logger: log, RunMode: duraflow.RunNone, PollOnly: !cfg.notify,
		Flows:               &flow.Config{Handlers: handlers, RefreshInterval: cfg.flowRefresh},
		Scheduler:           &schedule.Config{PollInterval: cfg.pollInterval},
		DisableLifecycleLog: !cfg.eventLog, LifecycleRetention: cfg.eventRetention,
		EngineLimits: cfg.engineLimits,
	}
	if cfg.runner || (serveHTTP && cfg.tick) {
		// Schedules fire wherever a runner runs its loop; a host driven by
		// ticks alone fires them in its ticks (tickFunc).
		coreCfg.RunMode = duraflow.RunOnDemand
		if cfg.runner {
			coreCfg.RunMode = duraflow.RunBackground
		}
		coreCfg.Runner = &runner.Config{
			LeaseDuration: cfg.lease, PollInterval: cfg.pollInterval, MaxConcurrency: cfg.concurrency,
			MaxLeaseLosses: cfg.maxLeaseLosses, MaxInvokeDepth: cfg.maxInvokeDepth, DisableEagerStart: !cfg.eagerStart,
			Queues: cfg.queues, Workflows: cfg.workflows,
			DrainGrace: cfg.shutdownTimeout, WorkerHeartbeatInterval: cfg.workerHeartbeat, OfflineAfter: cfg.offlineAfter,
		}
	}
	if cfg.metricsAddr != "" || (serveHTTP && cfg.metricsOnAPI) {
		m, err := metrics.New(&metrics.Config{Store: h.store, Logger: log})
		if err != nil {
			return nil, err
		}
		reg, err := metrics.NewRegistry(m)
		if err != nil {
			return nil, err
		}
		if h.metrics, err = httpapi.Guard(tokens, o.Authorize, httpapi.ActionMetrics, metrics.Handler(reg)); err != nil {
			return nil, usageError(fmt.Errorf("--token: %w", err))
		}
		coreCfg.Observer = m
	}
	if cfg.activityInterval > 0 {
		h.activity = &activity{next: coreCfg.Observer}
		coreCfg.Observer = h.activity
	}
	if h.tracer, err = newTracerProvider(ctx); err != nil {
		return nil, usageError(err)
	}
	if h.tracer != nil {
		coreCfg.TracerProvider = h.tracer
	}
	if o.OnWorkflowEnqueued != nil {
		coreCfg.Hooks = &hook.Config{OnWorkflowEnqueued: o.OnWorkflowEnqueued}
	}
	if h.core, err = duraflow.New(h.store, coreCfg); err != nil {
		return nil, usageError(err)
	}
	h.client, h.runner, h.scheduler, h.flows = h.core.Client(), h.core.Runner(), h.core.Scheduler(), h.core.Flows()
	if cfg.flowsDir != "" {
		// Apply reads and writes the store; Start loads every stored flow,
		// these included, so nothing is loaded twice.
		if err := h.applyFlowFiles(ctx); err != nil {
			return nil, err
		}
	}
	// Background pieces run until serve drains them, not until ctx: ctx ends
	// when the process is asked to drain, and draining is serve's job.
	if err := h.core.Start(ctx); err != nil {
		return nil, err
	}

	if serveHTTP {
		apiCfg := &httpapi.Config{
			Client: h.client, Prefix: cfg.prefix, Tokens: tokens, Authorize: o.Authorize,
			Ready: h.ready, Logger: log, Schedules: h.scheduler, Triggers: triggers, Flows: h.flows,
			ReadHeaderTimeout: cfg.timeouts.readHeader, BodyTimeout: cfg.timeouts.body,
			WriteTimeout: cfg.timeouts.write, IdleTimeout: cfg.timeouts.idle,
			Limits: cfg.limits, MaxBodyBytes: cfg.maxBodyBytes, Version: o.Version,
			LifecycleWakeups: h.core.LifecycleWakeups,
			NamespaceQueues:  namespaceQueues, NamespaceMaxPriority: cfg.namespaceMaxPriority,
		}
		if cfg.tick {
			apiCfg.Tick = h.tickFunc(dispatcher.TickFunc(h.runner))
		}
		if cfg.console {
			apiCfg.ConsolePath = console.Path + "/"
		}
		h.api, err = httpapi.New(apiCfg)
		if err != nil {
			return nil, usageError(err)
		}
		if cfg.console {
			// The console holds its forms to the API's limits: the
			// server's, defaults filled, are the one source of both.
			h.console, err = console.New(&console.Config{
				Client: h.client, Tokens: tokens, Authorize: o.Authorize,
				Schedules: h.scheduler, Flows: h.flows, Stats: h.store, Logger: log,
				Limits: h.api.Limits(), MaxBodyBytes: h.api.MaxBodyBytes(),
				SecureCookies: cfg.secureCookies, TrustedProxies: proxies,
			})
			if err != nil {
				return nil, usageError(err)
			}
		}
	}

	auth := "none (loopback only)"
	switch {
	case !serveHTTP:
		auth = "no API"
	case o.Authorize != nil:
		auth = "custom"
	case len(tokens) > 0:
		names := make([]string, len(tokens))
		for i, t := range tokens {
			names[i] = t.Name
		}
		auth = "tokens " + strings.Join(names, ",")
	}
	log.Info("started",
		"database", redactURL(cfg.databaseURL), "backend", string(h.backend),
		"workflows", strings.Join(h.registry.Names(), ","),
		"runner", cfg.runner, "notify", h.core.Listening() != nil, "hooks", h.core.Hooks() != nil, "api", h.url, "console", h.consoleURL(), "auth", auth,
		"triggers", len(triggers), "flows", len(h.flowNames()), "metrics", h.metricsWhere(), "tracing", h.tracer != nil)
	return h, nil
}

// parseNamespaceQueues reads --namespace-queues: "namespace=queue,…"
// items, the queues of one namespace given in one item or several.
func parseNamespaceQueues(items []string) (map[string][]string, error) {
	if len(items) == 0 {
		return nil, nil
	}
	out := map[string][]string{}
	for _, item := range items {
		ns, list, ok := strings.Cut(item, "=")
		ns = strings.TrimSpace(ns)
		if !ok || ns == "" || strings.TrimSpace(list) == "" {
			return nil, usageError(fmt.Errorf("--namespace-queues %q: want namespace=queue1,queue2", item))
		}
		for q := range strings.SplitSeq(list, ",") {
			if q = strings.TrimSpace(q); q != "" && !slices.Contains(out[ns], q) {
				out[ns] = append(out[ns], q)
			}
		}
	}
	return out, nil
}

// hostPath is a path the host serves itself beside the API, before any
// request reaches it: a trigger or an API prefix there could never be
// reached.
type hostPath struct {
	path, what, off string
}

// hostPaths are the paths the host serves on the API address: /metrics
// with --metrics, the web console's with --console.
func hostPaths(cfg *hostConfig) []hostPath {
	var out []hostPath
	if cfg.metricsOnAPI {
		out = append(out, hostPath{"/metrics", "the metrics", "--metrics=false"})
	}
	if cfg.console {
		out = append(out, hostPath{console.Path, "the web console", "--console=false"})
	}
	return out
}

// checkHostPaths refuses an API prefix or a trigger whose first path
// segment is that of a path the host serves itself (hostPaths): requests
// there would never reach it. /healthz, /readyz and the prefix itself are
// the API's, which httpapi.New checks.
func checkHostPaths(cfg *hostConfig, triggers []httpapi.Trigger) error {
	for _, hp := range hostPaths(cfg) {
		seg := firstPathSegment(hp.path)
		if firstPathSegment(cfg.prefix) == seg {
			return fmt.Errorf("--api-prefix %q collides with %s at %s (choose another prefix or %s)", cfg.prefix, hp.what, hp.path, hp.off)
		}
		for _, tr := range triggers {
			if firstPathSegment(tr.Path) == seg {
				return fmt.Errorf("trigger %s collides with %s at %s (choose another path or %s)", tr.Path, hp.what, hp.path, hp.off)
			}
		}
	}
	return nil
}

// firstPathSegment is the first segment of a path: "ui" of "/ui/x".
func firstPathSegment(p string) string {
	seg, _, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	return seg
}

// parsePrefixes reads addresses ("10.0.0.1", "::1") and CIDR prefixes
// ("10.0.0.0/8").
func parsePrefixes(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("%q is neither an address nor a CIDR prefix", s)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// loadTriggers reads the HTTP triggers of --triggers-file and --trigger.
func loadTriggers(cfg *hostConfig) ([]httpapi.Trigger, error) {
	var triggers []httpapi.Trigger
	if cfg.triggersFile != "" {
		data, err := os.ReadFile(cfg.triggersFile)
		if err != nil {
			return nil, usageError(fmt.Errorf("--triggers-file: %w", err))
		}
		if triggers, err = httpapi.ParseTriggersJSON(data); err != nil {
			return nil, usageError(fmt.Errorf("--triggers-file %s: %w", cfg.triggersFile, err))
		}
	}
	for _, spec := range cfg.triggers {
		t, err := httpapi.ParseTrigger(spec)
		if err != nil {
			return nil, usageError(fmt.Errorf("--trigger: %w", err))
		}
		triggers = append(triggers, t)
	}
	return triggers, nil
}

// tickFunc makes a tick fire the due schedules before it runs due work, so
// a host driven by ticks alone starts scheduled instances too.
func (h *host) tickFunc(run httpapi.TickFunc) httpapi.TickFunc {
	return func(ctx context.Context, maxInstances, maxSteps int) (int, error) {
		if _, err := h.scheduler.FireDue(ctx); err != nil {
			h.log.Warn("tick: firing due schedules failed", "error", err)
		}
		return run(ctx, maxInstances, maxSteps)
	}
}

// metricsURLs are the URLs of /metrics: on the API address (--metrics)
// and on an address of its own (--metrics-addr).
func (h *host) metricsURLs() []string {
	var where []string
	if h.metrics != nil && h.cfg.metricsOnAPI && h.url != "" {
		where = append(where, h.url+"/metrics")
	}
	if h.metricsURL != "" {
		where = append(where, h.metricsURL)
	}
	return where
}

// metricsWhere says where /metrics is served, for the start log.
func (h *host) metricsWhere() string {
	if where := h.metricsURLs(); len(where) > 0 {
		return strings.Join(where, ",")
	}
	return "off"
}

// apiHandler is the API's handler, with GET /metrics beside it when the
// API address serves the metrics (--metrics). It is no http.ServeMux: a
// ServeMux cleans paths and redirects "/x/./y" and "/x/../y" with a 301,
// which would change what the API answers to such paths (and turn a
// redirected POST into a GET); every other request reaches the API as it
// came.
func (h *host) apiHandler(api http.Handler) http.Handler {
	metricsOn := h.metrics != nil && h.cfg.metricsOnAPI
	if !metricsOn && h.console == nil {
		return api
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		switch {
		case metricsOn && p == "/metrics" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
			h.metrics.ServeHTTP(w, r)
		case h.console != nil && (p == console.Path || strings.HasPrefix(p, console.Path+"/")):
			h.console.Handler().ServeHTTP(w, r)
		default:
			api.ServeHTTP(w, r)
		}
	})
}

// consoleURL is the web console's URL, "" when it is off.
func (h *host) consoleURL() string {
	if h.console == nil || h.url == "" {
		return ""
	}
	return h.url + console.Path + "/"
}

// apiURL is the base URL of the API routes.
func (h *host) apiURL() string {
	p := strings.TrimSuffix(h.cfg.prefix, "/")
	if p == "" || p == "/" {
		return h.url
	}
	return h.url + p
}

// ready is /readyz: the database answers, the stored flows are loaded
// (duraflow.Host.Ready) and every migration is applied.
func (h *host) ready(ctx context.Context) error {
	if err := h.core.Ready(ctx); err != nil {
		return err
	}
	st, err := dburl.MigrateStatus(ctx, h.store)
	if err != nil {
		return err
	}
	for _, m := range st {
		if !m.Applied {
			return fmt.Errorf("migration %s is not applied (run migrate up)", m.Name)
		}
	}
	return nil
}

// serve serves HTTP (if the host has a listener) until ctx is done or the
// server fails, then drains.
func (h *host) serve(ctx context.Context) error {
	var (
		srv     *http.Server
		srvErr  = make(chan error, 1)
		srvDone sync.WaitGroup
	)
	if h.listener != nil {
		srv = h.api.HTTPServer()
		srv.Handler = h.apiHandler(srv.Handler)
		srv.ErrorLog = slog.NewLogLogger(h.log.Handler(), slog.LevelWarn)
		srvDone.Add(1)
		go func() {
			defer srvDone.Done()
			if err := srv.Serve(h.listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
				srvErr <- err
			}
		}()
		h.log.Info("serving the HTTP API", "url", h.url, "api", h.apiURL())
	}
	var metricsSrv *http.Server
	if h.metricsListener != nil {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", h.metrics)
		metricsSrv = &http.Server{
			Handler: mux, ReadHeaderTimeout: httpapi.DefaultReadHeaderTimeout, WriteTimeout: httpapi.DefaultWriteTimeout,
			IdleTimeout: httpapi.DefaultIdleTimeout, ErrorLog: slog.NewLogLogger(h.log.Handler(), slog.LevelWarn),
		}
		srvDone.Add(1)
		go func() {
			defer srvDone.Done()
			if err := metricsSrv.Serve(h.metricsListener); err != nil && !errors.Is(err, http.ErrServerClosed) {
				srvErr <- err
			}
		}()
		h.log.Info("serving the metrics", "url", h.metricsURL)
	}

	// A drain requested through the API or the CLI (workers drain) stops the
	// runner; a worker then exits (status 0), while serve goes on serving
	// the API without a runner until it is stopped.
	var drained <-chan struct{}
	if h.runner != nil && h.cfg.runner {
		drained = h.runner.Drained()
	}
	var runErr error
wait:
	for {
		select {
		case <-ctx.Done():
			h.log.Info("shutting down: draining")
			break wait
		case runErr = <-srvErr:
			h.log.Error("the HTTP server failed", "error", runErr)
			break wait
		case <-drained:
			if srv == nil {
				h.log.Info("the worker was drained on request: exiting")
				break wait
			}
			h.log.Warn("the runner was drained on request: serving the API without it until stopped")
			drained = nil
		}
	}

	drainCtx, cancel := context.WithTimeout(context.Background(), h.cfg.shutdownTimeout)
	defer cancel()
	if srv != nil {
		// Stop accepting, and let requests in flight (a tick, say) finish.
		if err := srv.Shutdown(drainCtx); err != nil {
			h.log.Warn("HTTP requests still running at the shutdown timeout were cut off", "error", err)
			_ = srv.Close()
		}
	}
	if metricsSrv != nil {
		_ = metricsSrv.Shutdown(drainCtx)
	}
	if srv != nil || metricsSrv != nil {
		srvDone.Wait()
	}
	if h.runner != nil && h.cfg.runner && !h.runner.Draining() {
		// The worker shows draining, claims nothing new and its running
		// work gets what is left of the shutdown timeout to finish; the
		// rest is handed back and the worker deregisters.
		if err := h.runner.Drain(drainCtx); err != nil {
			h.log.Warn("work still running at the shutdown timeout was handed back to the queue", "error", err)
		}
	}
	if err := h.core.Stop(drainCtx); err != nil {
		h.log.Warn("the host did not drain before the shutdown timeout: work still running was handed back to the queue", "error", err)
	}
	h.close()
	h.log.Info("stopped")
	if runErr != nil {
		return fmt.Errorf("serving HTTP: %w", runErr)
	}
	return nil
}

// close releases what startHost acquired; the core host must be stopped
// first.
func (h *host) close() {
	if h.tracer != nil {
		flushCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = h.tracer.Shutdown(flushCtx)
		cancel()
	}
	if h.listener != nil {
		_ = h.listener.Close()
	}
	if h.metricsListener != nil {
		_ = h.metricsListener.Close()
	}
	if h.stub != nil {
		stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = h.stub.Shutdown(stopCtx)
		cancel()
	}
	if h.store != nil {
		_ = h.store.Close()
	}
}

// redactURL hides the password of a database URL.
func redactURL(u string) string {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return u
	}
	userinfo, after, ok := strings.Cut(rest, "@")
	if !ok || strings.Contains(userinfo, "/") {
		return u
	}
	if user, _, hasPass := strings.Cut(userinfo, ":"); hasPass {
		return scheme + "://" + user + ":***@" + after
	}
	return u
}
