package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/duraflow/duraflow/flow"
	"github.com/duraflow/duraflow/hook"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/workflow"
)

// Options configure the command. Build them with Option functions and pass
// those to Main, Run or NewCommand.
type Options struct {
	// Name is the command's name in help and in the lines dev prints.
	//
	// Defaults to "duraflow".
	Name string
	// Version is printed by --version and the version command.
	//
	// Defaults to the main module's version in the binary's build
	// information with the commit it was built from: the tag of go install
	// module@version, a pseudo-version of the commit for a build from a git
	// checkout the toolchain stamped (-buildvcs), or "dev" for a build
	// without VCS information (-buildvcs=false).
	Version string
	// Register registers the workflows that dev, serve and worker run.
	//
	// Defaults to none: the server and client commands work, but no
	// workflow can be created.
	Register func(reg *workflow.Registry) error
	// OnWorkflowEnqueued, when set, is called durably (recorded in the same
	// transaction as the change, delivered after commit, retried until it
	// succeeds) each time dev, serve or worker enqueue an instance: it was
	// created, resumed, received an event, or scheduled a retry or a timer.
	//
	// Defaults to nil: nothing is recorded.
	OnWorkflowEnqueued hook.OnWorkflowEnqueuedFunc
	// FlowHandlers are flow step handlers of the host, added to the
	// built-in ones or replacing them by type (see WithFlowHandler).
	//
	// Defaults to none: the built-ins, with no exec command allowed.
	FlowHandlers []flow.Handler
	// Authorize, when set, replaces the bearer-token check of the HTTP API of
	// dev and serve (see httpapi.Config.Authorize).
	//
	// Defaults to nil: tokens from --token.
	Authorize httpapi.AuthorizeFunc
	// Stdout and Stderr receive the command's output and its logs.
	//
	// Default to os.Stdout and os.Stderr.
	Stdout, Stderr io.Writer
	// LookupEnv reads the DURAFLOW_* environment variables.
	//
	// Defaults to os.LookupEnv.
	LookupEnv func(key string) (string, bool)

	// explicitVersion is the Version given, before the default.
	explicitVersion string
}

// Option changes Options.
type Option func(*Options)

// WithWorkflows adds a function that registers workflows, such as
// demo.Register or a function of your own. Several calls add up.
func WithWorkflows(register func(reg *workflow.Registry) error) Option {
	return func(o *Options) {
		prev := o.Register
		o.Register = func(reg *workflow.Registry) error {
			if prev != nil {
				if err := prev(reg); err != nil {
					return err
				}
			}
			return register(reg)
		}
	}
}

// WithOnWorkflowEnqueued sets the durable OnWorkflowEnqueued hook (see
// Options.OnWorkflowEnqueued).
func WithOnWorkflowEnqueued(f hook.OnWorkflowEnqueuedFunc) Option {
	return func(o *Options) { o.OnWorkflowEnqueued = f }
}

// WithAuthorize replaces the HTTP API's token check (see Options.Authorize).
func WithAuthorize(f httpapi.AuthorizeFunc) Option {
	return func(o *Options) { o.Authorize = f }
}

// WithName sets the command's name (see Options.Name).
func WithName(name string) Option {
	return func(o *Options) { o.Name = name }
}

// WithVersion sets the version --version prints.
func WithVersion(v string) Option {
	return func(o *Options) { o.Version = v }
}

// WithOutput sends the command's output and logs to stdout and stderr
// instead of the process's.
func WithOutput(stdout, stderr io.Writer) Option {
	return func(o *Options) { o.Stdout, o.Stderr = stdout, stderr }
}

// WithLookupEnv reads DURAFLOW_* variables through lookup instead of the
// process environment, for tests.
func WithLookupEnv(lookup func(key string) (string, bool)) Option {
	return func(o *Options) { o.LookupEnv = lookup }
}

func newOptions(opts []Option) *Options {
	o := &Options{}
	for _, opt := range opts {
		if opt != nil {
			opt(o)
		}
	}
	o.Name = cmp.Or(o.Name, "duraflow")
	o.explicitVersion = o.Version
	if o.Version == "" {
		o.Version = readBuildVersion("").short()
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	return o
}

// Main runs the command with the process's arguments until it is done, or
// until SIGINT or SIGTERM asks dev, serve or worker to drain, and returns the
// exit code. A second signal ends the process at once. It is the whole of a
// main function:
//
//	func main() { os.Exit(cli.Main(cli.WithWorkflows(myapp.Register))) }
func Main(opts ...Option) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case <-sigs:
			// The first signal drains; the default behaviour is back for
			// the second.
			signal.Stop(sigs)
			cancel()
		case <-ctx.Done():
		}
	}()
	return Run(ctx, os.Args[1:], opts...)
}

// Run runs the command with args (without the program name) and returns the
// exit code (see ExitOK and the other Exit constants). Cancelling ctx makes
// dev, serve and worker drain and return.
func Run(ctx context.Context, args []string, opts ...Option) int {
	o := newOptions(opts)
	cmd := newRootCommand(o)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	if err != nil {
		fmt.Fprintf(o.Stderr, "%s: %v\n", o.Name, err)
		var ee *exitError
		if ExitCode(err) == ExitUnavailable && !errors.As(err, &ee) {
			fmt.Fprintf(o.Stderr, "Is a Duraflow server running there? Start one with '%s dev', or point --server (or DURAFLOW_SERVER) at one.\n", o.Name)
		}
		if ExitCode(err) == ExitUsage {
			if c, _, ferr := cmd.Find(args); ferr == nil && c != nil {
				fmt.Fprintf(o.Stderr, "Run '%s --help' for usage.\n", c.CommandPath())
			}
		}
	}
	return ExitCode(err)
}

// NewCommand returns the command tree, for programs that mount it under a
// cobra command of their own. Its RunE functions return errors that
// ExitCode maps to exit codes; they print nothing about the error itself.
func NewCommand(opts ...Option) *cobra.Command {
	return newRootCommand(newOptions(opts))
}

func newRootCommand(o *Options) *cobra.Command {
	root := &cobra.Command{
		Use:     o.Name,
		Short:   "Durable workflows: run the engine, and manage instances over its HTTP API",
		Version: o.Version,
		Long: o.Name + ` runs the Duraflow engine and talks to it.

Run the engine:
  dev       API, runner and this binary's workflows on ./duraflow.db, to try things out
  serve     API and runner, for production
  worker    runner only, for production
  migrate   apply or list database migrations
  bench     measure throughput and latency on a database

Talk to a running server over HTTP (--server, --token):
  workflows list
  instances list|get|create|result|execute|history|pause|resume|terminate|restart|compensate
  events list|send          (list --follow streams new lifecycle events)
  workers list|get|drain
  schedules create|list|get|update|enable|disable|delete
  queues list|get|set
  flows apply|list|get|versions

And: version (this binary's version and commit), completion bash|zsh|fish
(a shell completion script; see '` + o.Name + ` completion --help').

Exit codes: 0 ok, 1 error, 2 usage, 3 not found, 4 conflict (exists or
terminal), 5 invalid input, 6 unauthorized or forbidden, 7 server unreachable;
for an instance a command waited for: 8 it errored, 9 it was terminated,
10 the wait ran out before it ended.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd, o.LookupEnv); err != nil {
				return err
			}
			return normalizeFlags(cmd)
		},
	}
	root.SetOut(o.Stdout)
	root.SetErr(o.Stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError(err) })
	root.AddCommand(
		newDevCommand(o),
		newServeCommand(o),
		newWorkerCommand(o),
		newMigrateCommand(o),
		newWorkflowsCommand(o),
		newInstancesCommand(o),
		newEventsCommand(o),
		newSchedulesCommand(o),
		newQueuesCommand(o),
		newWorkersCommand(o),
		newFlowsCommand(o),
		newBenchCommand(o),
		newVersionCommand(o),
	)
	return root
}

// args wraps a cobra argument check so that its failure is a usage error.
func args(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if err := check(cmd, a); err != nil {
			// A group's argument is a mistyped subcommand: suggest the
			// nearest ones, as cobra does for the root's.
			if len(a) > 0 && cmd.HasAvailableSubCommands() {
				if cmd.SuggestionsMinimumDistance <= 0 {
					cmd.SuggestionsMinimumDistance = 2
				}
				if s := cmd.SuggestionsFor(a[0]); len(s) > 0 {
					err = fmt.Errorf("%w\n\nDid you mean this?\n\t%s", err, strings.Join(s, "\n\t"))
				}
			}
			return usageError(err)
		}
		return nil
	}
}

// errNoWorkflows is returned when a server command has nothing to run.
var errNoWorkflows = errors.New("no workflows are registered in this binary")
