package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"
)

func newDevCommand(o *Options) *cobra.Command {
	cfg := &hostConfig{runner: true}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the API, a runner and this binary's workflows on a local SQLite file",
		Long: `dev runs everything in one process for trying Duraflow out: the HTTP API on
127.0.0.1:8080, a runner, and the workflows built into this binary, on the
SQLite file ./duraflow.db (created and migrated on start). It prints the URL
and commands to try. Stop it with Ctrl-C: running work finishes or is handed
back, and everything is kept in the file for the next start.

--flows <folder> applies every *.json flow definition in the folder at start
(a file that does not validate, or that changes a stored version, is
reported on standard error and skipped). dev also serves the stub service of
the example flows (examples/flows) on a loopback address of its own
(--stub-addr, a free port by default), which http steps reach as
http://stub.localhost; no other internal address is reachable from them
unless --http-allow lists it. With the stub off (--stub=false, or
--stub-addr ""), flow files whose http steps call it are reported and not
applied.

dev serves the web console at http://127.0.0.1:8080/ui (--console=false
turns it off; see docs/console.md) and the Prometheus metrics at
http://127.0.0.1:8080/metrics, on the API address, so that dev servers on
other --addr ports each serve their own (--metrics=false turns them off;
--metrics-addr serves them on an address of their own too). See
docs/metrics.md.

--max-payload-bytes, --max-steps-per-run and --max-batch-size raise or
lower the engine's limits (see docs/limits.md), as on serve and worker.

dev logs on standard error, at warn by default: each failed step attempt
that is retried, each step that fails for good and each instance that
errors, with its workflow, instance, step, attempt and error; and every
--activity-interval in which something happened, a one-line summary of the
instances created, completed and errored and of the retries.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(o.Stderr, cfg.logFormat, cfg.logLevel)
			if err != nil {
				return err
			}
			h, err := startHost(cmd.Context(), o, cfg, log, true)
			if err != nil {
				return hostError(err)
			}
			printDevBanner(o.Stdout, o.Name, h)
			stopSummary, err := h.startActivitySummary(o)
			if err != nil {
				return err
			}
			defer stopSummary()
			return hostError(h.serve(cmd.Context()))
		},
	}
	fs := cmd.Flags()
	addDatabaseFlags(fs, cfg, "./duraflow.db")
	addHTTPFlags(fs, cfg)
	addRunnerFlags(fs, cfg)
	addEngineLimitFlags(fs, cfg)
	addDevFlowFlags(fs, cfg)
	addMetricsFlags(fs, cfg, true)
	addLogFlags(fs, cfg, "warn")
	fs.Var(newDurationValue(&cfg.activityInterval, 10*time.Second), "activity-interval", `how often to log a one-line summary of the activity (instances created, completed and errored, step retries), only when there was some; 0 turns it off`)
	bindEnv(fs, "activity-interval", "DURAFLOW_ACTIVITY_INTERVAL")
	return cmd
}

// startActivitySummary starts dev's activity summary (see
// activity.summarize) and returns the function that stops it. The summary
// is an info line shown at dev's default level (warn) and at info or
// debug; --log-level error hides it.
func (h *host) startActivitySummary(o *Options) (stop func(), err error) {
	var lvl slog.Level
	if h.activity == nil || lvl.UnmarshalText([]byte(h.cfg.logLevel)) != nil || lvl > slog.LevelWarn {
		return func() {}, nil
	}
	log, err := newLogger(o.Stderr, h.cfg.logFormat, slog.LevelInfo.String())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(h.cfg.activityInterval)
		defer tick.Stop()
		h.activity.summarize(ctx, log, h.cfg.activityInterval, tick.C)
	}()
	return func() { cancel(); <-done }, nil
}

// printDevBanner says where the API is and how to try it.
func printDevBanner(w io.Writer, name string, h *host) {
	names := h.registry.Names()
	fmt.Fprintf(w, "%s dev server: %s (database %s)\n", displayName(name), h.apiURL(), redactURL(h.cfg.databaseURL))
	if u := h.consoleURL(); u != "" {
		fmt.Fprintf(w, "Web console: %s\n", u)
	}
	for _, u := range h.metricsURLs() {
		fmt.Fprintf(w, "Prometheus metrics: %s\n", u)
	}
	printDevFlows(w, h)
	if len(names) == 0 {
		fmt.Fprintf(w, "No workflows are registered in this binary.\n")
		return
	}
	fmt.Fprintf(w, "Workflows: %s\n\n", strings.Join(names, ", "))
	wf, params := names[0], `{}`
	if slices.Contains(names, "hello") {
		wf, params = "hello", `{"name":"Ada"}`
	}
	server := ""
	if h.url != "http://127.0.0.1:8080" || h.cfg.prefix != "/api" {
		server = " --server " + h.url
		if h.cfg.prefix != "/api" {
			server += " --api-prefix " + h.cfg.prefix
		}
	}
	fmt.Fprintf(w, "Try it in another shell:\n")
	fmt.Fprintf(w, "  curl -s -X POST %s/workflows/%s/instances -H 'Content-Type: application/json' -d '{\"params\":%s}'\n", h.apiURL(), wf, params)
	fmt.Fprintf(w, "  curl -s %s/workflows/%s/instances/<id>\n", h.apiURL(), wf)
	fmt.Fprintf(w, "or with the command line:\n")
	fmt.Fprintf(w, "  %s instances create %s --params '%s'%s\n", name, wf, params, server)
	fmt.Fprintf(w, "  %s instances list%s\n", name, server)
	if name == "duraflow" {
		fmt.Fprintf(w, "(from a checkout of Duraflow: go run ./cmd/duraflow instances create %s --params '%s'%s)\n", wf, params, server)
	}
	fmt.Fprintf(w, "\nPress Ctrl-C to stop.\n")
}

// displayName is the command's name as a banner starts with it: "Duraflow"
// for duraflow, "Acme" for a binary built with WithName("acme").
func displayName(name string) string {
	r, size := utf8.DecodeRuneInString(name)
	if r == utf8.RuneError {
		return name
	}
	return string(unicode.ToUpper(r)) + name[size:]
}

func newServeCommand(o *Options) *cobra.Command {
	cfg := &hostConfig{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the HTTP API and run workflows (production)",
		Long: `serve runs the HTTP API and a runner for the workflows built into this
binary. Run as many as you like against one Postgres database, together with
worker processes: work is claimed under fenced leases, and on Postgres every
process LISTENs for wake-ups (--notify), so an event or a new instance starts
running at once wherever there is a free runner.

Without --token (or DURAFLOW_TOKENS) the API is unauthenticated and serve
refuses any --addr but a loopback one. SIGTERM or SIGINT drain: the API stops
accepting requests, the runner's worker shows draining and claims nothing new,
running work gets --shutdown-timeout to finish and is then handed back to the
queue for another runner, and the worker deregisters. A drain requested with
duraflow workers drain stops the runner the same way; serve then goes on
serving the API alone until it is stopped.

serve also serves the web console at /ui on the API address, with the
same tokens and scopes as the API (--console=false turns it off; see
docs/console.md), and the Prometheus metrics at /metrics on the API address
(--metrics=false turns it off), and with --metrics-addr on an address of
their own; with tokens, a scrape needs the metrics scope (see
docs/metrics.md).

--max-payload-bytes, --max-steps-per-run and --max-batch-size raise or
lower the engine's limits (see docs/limits.md); give every serve and
worker process of a deployment the same.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runHost(cmd, o, cfg, true)
		},
	}
	fs := cmd.Flags()
	addDatabaseFlags(fs, cfg, "./duraflow.db")
	addHTTPFlags(fs, cfg)
	fs.BoolVar(&cfg.runner, "runner", true, "run workflows in this process (--runner=false serves the API only)")
	bindEnv(fs, "runner", "DURAFLOW_RUNNER")
	addRunnerFlags(fs, cfg)
	addEngineLimitFlags(fs, cfg)
	addMetricsFlags(fs, cfg, true)
	addLogFlags(fs, cfg, "info")
	return cmd
}

func newWorkerCommand(o *Options) *cobra.Command {
	cfg := &hostConfig{runner: true}
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run workflows without serving the API (production)",
		Long: `worker runs a runner for the workflows built into this binary, and no HTTP
API. Start as many as the load needs, next to one or more serve processes on
the same database. SIGTERM or SIGINT drain as for serve. A drain requested with
duraflow workers drain (or POST /workers/:id/drain), seen at the worker's next
heartbeat, drains it the same way, and the process then exits with status 0.
With --metrics-addr it serves the Prometheus metrics at /metrics there; with
--token a scrape needs a token with the metrics scope, and the address may be
other than loopback (see docs/metrics.md).

--max-payload-bytes, --max-steps-per-run and --max-batch-size raise or
lower the engine's limits (see docs/limits.md); give every serve and
worker process of a deployment the same.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runHost(cmd, o, cfg, false)
		},
	}
	fs := cmd.Flags()
	addDatabaseFlags(fs, cfg, "./duraflow.db")
	addRunnerFlags(fs, cfg)
	addEngineLimitFlags(fs, cfg)
	addMetricsFlags(fs, cfg, false)
	addMetricsTokenFlag(fs, cfg)
	addLogFlags(fs, cfg, "info")
	return cmd
}

func runHost(cmd *cobra.Command, o *Options, cfg *hostConfig, serveHTTP bool) error {
	log, err := newLogger(o.Stderr, cfg.logFormat, cfg.logLevel)
	if err != nil {
		return err
	}
	h, err := startHost(cmd.Context(), o, cfg, log, serveHTTP)
	if err != nil {
		return hostError(err)
	}
	return hostError(h.serve(cmd.Context()))
}

// hostError gives a failure of dev, serve, worker or migrate the exit code
// ExitError unless it has one: a database that refuses connections is not
// the unreachable server of the client commands.
func hostError(err error) error {
	var ee *exitError
	if err == nil || errors.As(err, &ee) {
		return err
	}
	return withCode(ExitError, err)
}
