package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/flow"
	"github.com/duraflow/duraflow/internal/devstub"
)

// WithFlowHandler adds a flow step handler to dev, serve and worker: a step
// type of the host's own, or a replacement of a built-in one (an exec
// handler with allow-listed commands, say; an http handler given here
// replaces --http-allow). Several calls add up.
func WithFlowHandler(h flow.Handler) Option {
	return func(o *Options) { o.FlowHandlers = append(o.FlowHandlers, h) }
}

// addFlowFlags adds the flow flags of dev, serve and worker.
func addFlowFlags(fs *pflag.FlagSet, c *hostConfig) {
	fs.StringArrayVar(&c.httpAllow, "http-allow", nil, `internal destinations the http step of flows may reach: a CIDR ("10.0.0.0/8"), an IP, a host name or "*.domain" (repeatable; by default no loopback, private, link-local or metadata address is reachable)`)
	bindEnv(fs, "http-allow", "DURAFLOW_HTTP_ALLOW")
	fs.Var(newDurationValue(&c.flowRefresh, 10*time.Second), "flow-refresh", "how often to look for flows applied by other processes (at once, on Postgres, when a wake-up names one)")
	bindEnv(fs, "flow-refresh", "DURAFLOW_FLOW_REFRESH")
}

// addDevFlowFlags adds the flags of dev's flow files and stub.
func addDevFlowFlags(fs *pflag.FlagSet, c *hostConfig) {
	fs.StringVar(&c.flowsDir, "flows", "", "folder of flow definitions (*.json) to apply at start; a file that does not validate is reported and skipped")
	bindEnv(fs, "flows", "DURAFLOW_FLOWS")
	fs.BoolVar(&c.stub, "stub", true, "serve the stub service of the example flows on a loopback address of its own (--stub-addr); http steps reach it as http://"+devstub.Host+` (--stub=false turns it off: flows that call it are not applied)`)
	bindEnv(fs, "stub", "DURAFLOW_STUB")
	fs.StringVar(&c.stubAddr, "stub-addr", "127.0.0.1:0", `loopback address of the stub service (port 0: a free one; "" turns the stub off, as --stub=false does)`)
	bindEnv(fs, "stub-addr", "DURAFLOW_STUB_ADDR")
}

// stubOn reports whether dev serves the stub.
func (c *hostConfig) stubOn() bool { return c.stub && c.stubAddr != "" }

// flowHandlers returns the step types the host's flows run with: the
// built-ins, the http handler under --http-allow (dev's pointing at its
// stub, which it starts), and Options.FlowHandlers.
func (h *host) flowHandlers() (*flow.Handlers, error) {
	if h.cfg.stubOn() {
		stub, err := devstub.Start(h.cfg.stubAddr)
		if err != nil {
			return nil, usageError(fmt.Errorf("--stub-addr: %w", err))
		}
		h.stub = stub
	}
	httpCfg := &flow.HTTPHandlerConfig{Allow: h.cfg.httpAllow}
	if h.stub != nil {
		httpCfg = devstub.HTTPHandlerConfig(h.stub.Addr(), h.cfg.httpAllow)
	}
	httpHandler, err := flow.NewHTTPHandler(httpCfg)
	if err != nil {
		return nil, usageError(fmt.Errorf("--http-allow: %w", err))
	}
	opts := []flow.HandlersOption{flow.WithHandler(httpHandler)}
	for _, fh := range h.opts.FlowHandlers {
		opts = append(opts, flow.WithHandler(fh))
	}
	handlers, err := flow.NewHandlers(opts...)
	if err != nil {
		return nil, usageError(fmt.Errorf("flow handlers: %w", err))
	}
	return handlers, nil
}

// applyFlowFiles applies every *.json file of --flows, in name order. A
// file that does not validate, or that changes a stored version, is
// reported on standard error and skipped; dev starts with the rest.
func (h *host) applyFlowFiles(ctx context.Context) error {
	dir := h.cfg.flowsDir
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		if err == nil {
			err = errors.New("not a folder")
		}
		return usageError(fmt.Errorf("--flows %s: %w", dir, err))
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return usageError(fmt.Errorf("--flows %s: %w", dir, err))
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			h.reportFlowFile(file, err)
			continue
		}
		if h.stub == nil && devstub.UsesStub(data) {
			h.skippedFlowFiles = append(h.skippedFlowFiles, filepath.Base(file))
			fmt.Fprintf(h.opts.Stderr, "%s: warning: not applied: its http steps call the stub service (http://%s), which is off (--stub=false or --stub-addr \"\")\n", file, devstub.Host)
			continue
		}
		res, err := h.flows.Apply(ctx, data)
		var ve *flow.ValidationError
		switch {
		case errors.As(err, &ve), errors.Is(err, flow.ErrVersionConflict):
			h.reportFlowFile(file, err)
			continue
		case err != nil:
			return fmt.Errorf("applying %s: %w", file, err)
		}
		for _, w := range res.Warnings {
			fmt.Fprintf(h.opts.Stderr, "%s: warning: %s\n", file, w)
		}
		state := "unchanged"
		if res.Created {
			state = "applied"
		}
		h.flowFiles = append(h.flowFiles, fmt.Sprintf("%s %s (%s)", res.ID, res.Version, state))
	}
	return nil
}

// reportFlowFile says why a flow file was skipped, one problem a line.
func (h *host) reportFlowFile(file string, err error) {
	h.skippedFlowFiles = append(h.skippedFlowFiles, filepath.Base(file))
	var ve *flow.ValidationError
	if errors.As(err, &ve) {
		fmt.Fprintf(h.opts.Stderr, "%s: skipped: the flow is invalid:\n", file)
		for _, p := range ve.Problems {
			fmt.Fprintf(h.opts.Stderr, "  %s\n", p)
		}
		return
	}
	fmt.Fprintf(h.opts.Stderr, "%s: skipped: %v\n", file, err)
}

// printDevFlows adds the flows and the stub to dev's banner.
func printDevFlows(w io.Writer, h *host) {
	if h.cfg.flowsDir != "" {
		fmt.Fprintf(w, "Flows from %s: %s\n", h.cfg.flowsDir, orNone(strings.Join(h.flowFiles, ", ")))
		if len(h.skippedFlowFiles) > 0 {
			fmt.Fprintf(w, "Skipped (see above): %s\n", strings.Join(h.skippedFlowFiles, ", "))
		}
	}
	if h.stub != nil {
		fmt.Fprintf(w, "Stub service for flows: http://%s (on %s); no other internal address is reachable from http steps\n", devstub.Host, h.stub.URL())
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func newFlowsCommand(o *Options) *cobra.Command {
	cf := &clientFlags{}
	cmd := &cobra.Command{
		Use:     "flows",
		Aliases: []string{"flow"},
		Short:   "Apply and read JSON flow definitions",
		Long: `flows manages the server's flow registry. A flow is a workflow written as a
JSON definition; applying one validates it against the server's step
handlers, stores it under its id and version, and registers it: instances are
created and driven with the instances and events commands under its id, like
a Go workflow's. Versions never change once applied: a changed flow needs a
new version. Every instance runs the version that was the latest when it was
created, after a restart too.`,
		Args: args(cobra.NoArgs),
		RunE: groupHelp,
	}
	addClientFlags(cmd, cf)
	cmd.AddCommand(
		newFlowsApplyCommand(o, cf),
		newFlowsListCommand(o, cf),
		newFlowsGetCommand(o, cf),
		newFlowsVersionsCommand(o, cf),
	)
	return cmd
}

func newFlowsApplyCommand(o *Options, cf *clientFlags) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "apply -f <file>",
		Short: "Apply a flow definition (needs the flows scope)",
		Long: `apply sends a flow definition to the server, which stores it byte for byte.
Applying a version that is stored with the same definition changes nothing; a
version stored with a different definition is refused (exit 4). A definition
that does not validate is refused with every problem listed (exit 5).`,
		Example: `  duraflow flows apply -f examples/flows/order.json
  cat order.json | duraflow flows apply -f -`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			data, err := readFlowFile(file, cmd.InOrStdin())
			if err != nil {
				return err
			}
			res, err := cf.client().ApplyFlow(cmd.Context(), data)
			if err != nil {
				var apiErr *apiclient.APIError
				if errors.As(err, &apiErr) && len(apiErr.Problems) > 0 {
					for _, p := range apiErr.Problems {
						fmt.Fprintf(o.Stderr, "  %s\n", p)
					}
					return withCode(ExitInvalid, fmt.Errorf("%s: the flow is invalid (%d problems, above)", file, len(apiErr.Problems)))
				}
				return err
			}
			if cf.json {
				return writeJSON(o.Stdout, res)
			}
			state := "unchanged, stored already"
			if res.Created {
				state = "applied"
			}
			fmt.Fprintf(o.Stdout, "%s %s: %s; new instances run %s\n", res.ID, res.Version, state, res.Latest)
			for _, w := range res.Warnings {
				fmt.Fprintf(o.Stderr, "warning: %s\n", w)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the flow definition: a JSON file, or - for standard input (required)")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

// readFlowFile reads a flow definition file, or standard input for "-".
func readFlowFile(file string, in io.Reader) ([]byte, error) {
	var (
		data []byte
		err  error
	)
	if file == "-" {
		data, err = io.ReadAll(io.LimitReader(in, flow.MaxDefinitionBytes+1))
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, withCode(ExitInvalid, fmt.Errorf("-f %s: %w", file, err))
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, withCode(ExitInvalid, fmt.Errorf("-f %s: the file is empty", file))
	}
	return data, nil
}

func newFlowsListCommand(o *Options, cf *clientFlags) *cobra.Command {
	var (
		p   flow.ListParams
		all bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List flows by id, each at its latest version",
		Long: `list lists the stored flows ordered by id, each at its latest version (the
one new instances run), one page at a time (--page-size, default 50). When
there are more, it prints the --cursor of the next page on standard error;
--all follows every page.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := cf.client()
			out := &flow.ListResult{}
			var err error
			out.Flows, out.NextCursor, err = listPages(all, func(cur string) { p.Cursor = cur }, func() ([]*flow.Info, string, error) {
				page, err := c.ListFlows(cmd.Context(), p)
				if err != nil {
					return nil, "", err
				}
				return page.Flows, page.NextCursor, nil
			})
			if err != nil {
				return err
			}
			if cf.json {
				return writeJSON(o.Stdout, out)
			}
			t := newTable(o.Stdout, "ID", "LATEST", "NAME", "CREATED")
			for _, f := range out.Flows {
				t.row(f.ID, f.Version, orDash(f.Name), formatTime(f.CreatedAt))
			}
			if err := t.flush(); err != nil {
				return err
			}
			if out.NextCursor != "" {
				fmt.Fprintf(o.Stderr, "more: %s flows list --cursor %s (or --all)\n", o.Name, out.NextCursor)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	pageFlags(fs, "flows", &p.PageSize, &p.Cursor, &all)
	return cmd
}

func newFlowsGetCommand(o *Options, cf *clientFlags) *cobra.Command {
	var (
		version    string
		definition bool
	)
	cmd := &cobra.Command{
		Use:   "get <id>",
		Short: "Show a flow version and its definition (the latest unless --version)",
		Example: `  duraflow flows get order
  duraflow flows get order --version 1.0.0 --definition > order.json`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			info, err := cf.client().GetFlow(cmd.Context(), a[0], version)
			if err != nil {
				return err
			}
			if definition {
				return writeRawJSON(o.Stdout, info.Definition)
			}
			if cf.json {
				return writeJSON(o.Stdout, info)
			}
			t := newTable(o.Stdout)
			t.row("Flow:", info.ID)
			t.row("Version:", info.Version)
			t.row("Latest:", fmt.Sprint(info.Latest))
			t.row("Name:", orDash(info.Name))
			t.row("Created:", formatTime(info.CreatedAt))
			if err := t.flush(); err != nil {
				return err
			}
			fmt.Fprintln(o.Stdout, "Definition:")
			return writeRawJSON(o.Stdout, info.Definition)
		},
	}
	cmd.Flags().StringVar(&version, "version", "", "the version to show (default: the latest)")
	cmd.Flags().BoolVar(&definition, "definition", false, "print only the definition, as JSON")
	return cmd
}

// writeRawJSON writes raw JSON indented.
func writeRawJSON(w io.Writer, raw json.RawMessage) error {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		b.Reset()
		b.Write(raw)
	}
	b.WriteByte('\n')
	_, err := w.Write(b.Bytes())
	return err
}

func newFlowsVersionsCommand(o *Options, cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "versions <id>",
		Short: "List the versions of a flow, lowest first",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			list, err := cf.client().FlowVersions(cmd.Context(), a[0])
			if err != nil {
				return err
			}
			if cf.json {
				return writeJSON(o.Stdout, list)
			}
			t := newTable(o.Stdout, "VERSION", "LATEST", "NAME", "CREATED")
			for _, v := range list.Versions {
				latest := ""
				if v.Latest {
					latest = "*"
				}
				t.row(v.Version, latest, orDash(v.Name), formatTime(v.CreatedAt))
			}
			return t.flush()
		},
	}
}

// flowNames returns the ids of the flows the host registered.
func (h *host) flowNames() []string {
	var out []string
	for _, n := range h.registry.Names() {
		if h.flows.IsFlow(n) {
			out = append(out, n)
		}
	}
	return out
}
