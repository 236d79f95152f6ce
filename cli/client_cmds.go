package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/workflow"
)

// clientFlags are the flags of every command that talks to a server.
type clientFlags struct {
	server  string
	token   string
	prefix  string
	timeout time.Duration
	json    bool
	// namespace is the namespace the commands act in; "" is the server's
	// default for the token.
	namespace string
}

// addClientFlags adds the client flags to a command group, for all its
// subcommands.
func addClientFlags(cmd *cobra.Command, cf *clientFlags) {
	fs := cmd.PersistentFlags()
	fs.StringVar(&cf.server, "server", "http://127.0.0.1:8080", "the Duraflow server: a base URL, or host:port for http://host:port, or a port alone for http://127.0.0.1:port")
	bindEnv(fs, "server", "DURAFLOW_SERVER")
	fs.StringVar(&cf.token, "token", "", "bearer token: the secret of a token the server accepts; its scopes ("+strings.Join(httpapi.Scopes(), ", ")+") decide which commands it may run")
	bindEnv(fs, "token", "DURAFLOW_TOKEN")
	fs.StringVar(&cf.prefix, "api-prefix", "/api", "path the server mounts its API under")
	bindEnv(fs, "api-prefix", "DURAFLOW_API_PREFIX")
	fs.Var(newDurationValue(&cf.timeout, 30*time.Second), "timeout", "bound of each HTTP request")
	fs.BoolVar(&cf.json, "json", false, "print JSON instead of tables")
	fs.StringVar(&cf.namespace, "namespace", "", `namespace the instance commands act in (default: "default", or the first namespace of a token limited to some)`)
	bindEnv(fs, "namespace", "DURAFLOW_NAMESPACE")
}

func (cf *clientFlags) client() *apiclient.Client {
	c := apiclient.New(cf.server, cf.token, &http.Client{Timeout: cf.timeout}).WithPrefix(cf.prefix)
	if cf.namespace != "" {
		c = c.WithNamespace(cf.namespace)
	}
	return c
}

func newWorkflowsCommand(o *Options) *cobra.Command {
	cf := &clientFlags{}
	cmd := &cobra.Command{
		Use:   "workflows",
		Short: "List the workflows a server runs",
		Args:  args(cobra.NoArgs),
		RunE:  groupHelp,
	}
	addClientFlags(cmd, cf)
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the registered workflows: Go workflows and flows (with the version new instances run)",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			list, err := cf.client().Workflows(cmd.Context())
			if err != nil {
				return err
			}
			if cf.json {
				return writeJSON(o.Stdout, list)
			}
			t := newTable(o.Stdout, "NAME", "KIND", "VERSION")
			for _, w := range list.Workflows {
				t.row(w.Name, orDash(w.Kind), orDash(w.Version))
			}
			return t.flush()
		},
	})
	return cmd
}

func newInstancesCommand(o *Options) *cobra.Command {
	cf := &clientFlags{}
	cmd := &cobra.Command{
		Use:     "instances",
		Aliases: []string{"instance"},
		Short:   "List, inspect, create and control workflow instances",
		Args:    args(cobra.NoArgs),
		RunE:    groupHelp,
	}
	addClientFlags(cmd, cf)
	cmd.AddCommand(
		newInstancesListCommand(o, cf),
		newInstancesGetCommand(o, cf),
		newInstancesCreateCommand(o, cf),
		newInstancesResultCommand(o, cf),
		newInstancesExecuteCommand(o, cf),
		newInstancesHistoryCommand(o, cf),
		newInstancesChangeCommand(o, cf, "pause", "Pause an instance (at its next step boundary when it is running)", (*apiclient.Client).Pause),
		newInstancesChangeCommand(o, cf, "resume", "Resume a paused instance", (*apiclient.Client).Resume),
		newInstancesChangeCommand(o, cf, "compensate", "Undo an instance's completed steps: stop it at its next step boundary and run their compensations in reverse order", (*apiclient.Client).Compensate),
		newInstancesChangeCommand(o, cf, "terminate", "Terminate an instance that is not terminal", (*apiclient.Client).Terminate),
		newInstancesChangeCommand(o, cf, "restart", "Start a new run of an instance from the top", (*apiclient.Client).Restart),
	)
	return cmd
}

// listJSON is the JSON of instances list: the API's page
// (apiclient.InstancePage).
type listJSON struct {
	Instances   []*apiclient.Instance `json:"instances"`
	Cursor      string                `json:"cursor,omitempty"`
	HasNextPage bool                  `json:"hasNextPage"`
}

func newInstancesListCommand(o *Options, cf *clientFlags) *cobra.Command {
	var (
		statuses []string
		pageSize int
		cursor   string
		all      bool
		queue    string
	)
	cmd := &cobra.Command{
		Use:   "list [workflow]",
		Short: "List instances, newest update first",
		Long: `list lists the instances of a workflow, or of every workflow when none is
named, newest update first, one page at a time (--page-size, default 50).
It reads the database, so it lists the instances of workflows the server does
not run too. When there are more, it prints the --cursor of the next page on
standard error; --all follows every page.`,
		Args: args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c := cf.client()
			p := client.ListParams{PageSize: pageSize, Cursor: cursor, Queue: queue}
			if len(a) == 1 {
				p.WorkflowName = a[0]
			}
			for _, s := range statuses {
				for st := range strings.SplitSeq(s, ",") {
					if st = strings.TrimSpace(st); st != "" {
						p.Statuses = append(p.Statuses, dftype.InstanceStatus(st))
					}
				}
			}
			items, next, err := listPages(all, func(cur string) { p.Cursor = cur }, func() ([]*dftype.InstanceInfo, string, error) {
				page, err := c.List(cmd.Context(), p)
				if err != nil {
					return nil, "", err
				}
				return page.Instances, page.NextCursor, nil
			})
			if err != nil {
				return err
			}
			if cf.json {
				return writeJSON(o.Stdout, listJSON{Instances: apiclient.NewInstances(items), Cursor: next, HasNextPage: next != ""})
			}
			t := newTable(o.Stdout, "WORKFLOW", "ID", "STATUS", "RUN", "QUEUE", "PRIORITY", "CREATED", "UPDATED", "OUTPUT/ERROR")
			for _, i := range items {
				queue := orDash(i.Queue)
				if i.Unserved {
					queue += " (unserved)"
				}
				t.row(i.WorkflowName, i.ID, string(i.Status), fmt.Sprint(i.RunNumber), queue, fmt.Sprint(i.Priority),
					formatTime(i.CreatedAt), formatTime(i.UpdatedAt), outcome(i, 60))
			}
			if err := t.flush(); err != nil {
				return err
			}
			if next != "" {
				again := []string{o.Name, "instances", "list"}
				again = append(again, a...)
				fmt.Fprintf(o.Stderr, "more: %s --cursor %s (or --all)\n", strings.Join(again, " "), next)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringArrayVar(&statuses, "status", nil, "only instances with this status (repeatable, or comma-separated): queued, running, waiting, waitingForPause, paused, complete, errored, terminated")
	pageFlags(fs, "instances", &pageSize, &cursor, &all)
	fs.StringVar(&queue, "queue", "", "only instances on this task queue (the namespace is --namespace)")
	return cmd
}

// outcome is an instance's output, or its error, on one line.
func outcome(i *dftype.InstanceInfo, max int) string {
	if i.WaitingFor != nil {
		return formatWaitingFor(i.WaitingFor)
	}
	if i.Error != nil {
		s := i.Error.Name + ": " + i.Error.Message
		if max > 0 && len([]rune(s)) > max {
			s = string([]rune(s)[:max-1]) + "…"
		}
		return s
	}
	if len(i.Output) == 0 || string(i.Output) == "null" && !i.Status.Terminal() {
		return "-"
	}
	return compactJSON(i.Output, max)
}

func newInstancesGetCommand(o *Options, cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "get <workflow> <id>",
		Short: "Show an instance: status, params, output or error",
		Args:  args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			info, err := cf.client().Get(cmd.Context(), a[0], a[1])
			if err != nil {
				return err
			}
			return printInstance(o.Stdout, cf.json, info)
		},
	}
}

// printInstance writes one instance as JSON or as a list of fields.
func printInstance(w io.Writer, asJSON bool, i *dftype.InstanceInfo) error {
	if asJSON {
		return writeJSON(w, apiclient.NewInstance(i))
	}
	t := newTable(w)
	t.row("Workflow:", i.WorkflowName)
	t.row("ID:", i.ID)
	t.row("Status:", string(i.Status))
	t.row("Run:", fmt.Sprint(i.RunNumber))
	t.row("Namespace:", orDash(i.Namespace))
	if i.Unserved {
		t.row("Queue:", i.Queue+" (no online worker serves it)")
	} else {
		t.row("Queue:", orDash(i.Queue))
	}
	t.row("Priority:", fmt.Sprint(i.Priority))
	if i.DedupeKey != "" {
		t.row("Dedupe key:", i.DedupeKey)
	}
	if i.Deduplicated {
		t.row("Deduplicated:", "yes: an active instance held the dedupe key; nothing was created")
	}
	t.row("Created:", formatTime(i.CreatedAt))
	t.row("Updated:", formatTime(i.UpdatedAt))
	t.row("Started:", formatTimePtr(i.StartedAt))
	t.row("Completed:", formatTimePtr(i.CompletedAt))
	if i.DeadlineAt != nil {
		t.row("Deadline:", formatTime(*i.DeadlineAt))
	}
	if i.RunAttempt > 1 {
		t.row("Run attempt:", fmt.Sprint(i.RunAttempt))
	}
	if p := i.Parent; p != nil {
		t.row("Parent:", fmt.Sprintf("%s/%s run %d step %q (on terminate: %s)", p.WorkflowName, p.InstanceID, p.RunNumber, p.StepKey, p.Policy))
	}
	for n, c := range i.Children {
		label := ""
		if n == 0 {
			label = "Children:"
		}
		t.row(label, fmt.Sprintf("%s/%s %s (run %d step %q)", c.WorkflowName, c.ID, c.Status, c.RunNumber, c.StepKey))
	}
	t.row("Params:", compactJSON(i.Params, 0))
	if i.Status == dftype.StatusComplete || len(i.Output) > 0 && string(i.Output) != "null" {
		t.row("Output:", compactJSON(i.Output, 0))
	}
	if i.Error != nil {
		t.row("Error:", i.Error.Name+": "+i.Error.Message)
	}
	if i.WaitingFor != nil {
		t.row("Waiting for:", formatWaitingFor(i.WaitingFor))
	}
	printPending(t, i)
	return t.flush()
}

func newInstancesCreateCommand(o *Options, cf *clientFlags) *cobra.Command {
	var (
		id        string
		params    string
		wait      time.Duration
		queue     string
		priority  int
		dedupeKey string
		deadline  string
	)
	cmd := &cobra.Command{
		Use:   "create <workflow> [id]",
		Short: "Create an instance and show it once it settles",
		Long: `create creates an instance of a workflow with JSON params (--params, or
--params @file, or --params - for standard input) and an id (the argument or
--id; a random one when neither is given).

It then waits up to --wait (default 2 seconds) for the instance to settle,
that is, to be neither queued nor running, and shows it: a short workflow is
complete with its output, one that sleeps or waits for an event is waiting.
--wait 0 shows it as created. When the instance it shows ended errored the
command exits 8, terminated 9 (see instances execute and result to wait
until the instance ends).

--deadline sets the instance's deadline, overriding the workflow's: a
duration from now ("30 minutes", "2h") or an RFC 3339 time. When it passes
the instance errors with DeadlineExceeded, even while it sleeps or waits.`,
		Args: args(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if len(a) == 2 {
				if id != "" && id != a[1] {
					return usageError(fmt.Errorf("the id is given twice: %q and --id %q", a[1], id))
				}
				id = a[1]
			}
			raw, err := readJSONArg("--params", params, cmd.InOrStdin())
			if err != nil {
				return err
			}
			at, err := parseDeadline(deadline, time.Now())
			if err != nil {
				return err
			}
			c := cf.client()
			info, err := c.Create(cmd.Context(), a[0], dftype.CreateRequest{
				ID: id, Params: raw, Queue: queue, Priority: priority, DedupeKey: dedupeKey, Deadline: at,
			})
			if err != nil {
				return err
			}
			if wait <= 0 {
				return printInstance(o.Stdout, cf.json, info)
			}
			if info, err = waitSettled(cmd.Context(), c, info, wait); err != nil {
				return err
			}
			if err := printInstance(o.Stdout, cf.json, info); err != nil {
				return err
			}
			// Scripts can tell an instance that ended badly within --wait.
			return terminalError(info)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&id, "id", "", "instance id (default: a random one)")
	fs.StringVar(&params, "params", "", "params as JSON, @file to read a file, or - to read standard input")
	fs.Var(newDurationValue(&wait, 2*time.Second), "wait", "how long to wait for the instance to settle before showing it; 0 shows it as created")
	fs.StringVar(&queue, "queue", "", "task queue to run on (default: the workflow's)")
	fs.IntVar(&priority, "priority", 0, fmt.Sprintf("claim priority, %d to %d: higher is claimed first", workflow.MinPriority, workflow.MaxPriority))
	fs.StringVar(&dedupeKey, "dedupe-key", "", "return the active instance holding this key instead of creating another")
	fs.StringVar(&deadline, "deadline", "", "the instance's deadline: a duration from now (\"30 minutes\") or an RFC 3339 time (default: the workflow's)")
	return cmd
}

// parseDeadline reads --deadline: empty is none, a positive duration is
// that long from now, else an RFC 3339 time.
func parseDeadline(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	d, err := dftype.ParseDuration(v)
	if err != nil {
		return time.Time{}, usageError(fmt.Errorf("--deadline %q is neither a duration nor an RFC 3339 time", v))
	}
	if d <= 0 {
		return time.Time{}, usageError(fmt.Errorf("--deadline %q must be in the future", v))
	}
	return now.Add(d), nil
}

// waitSettled polls an instance until it is neither queued, running nor
// waitingForPause, or until d has passed, and returns it as last seen.
func waitSettled(ctx context.Context, c *apiclient.Client, info *dftype.InstanceInfo, d time.Duration) (*dftype.InstanceInfo, error) {
	deadline := time.Now().Add(d)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		switch info.Status {
		case dftype.StatusQueued, dftype.StatusRunning, dftype.StatusWaitingForPause:
		default:
			return info, nil
		}
		if time.Now().After(deadline) {
			return info, nil
		}
		select {
		case <-ctx.Done():
			return info, nil
		case <-tick.C:
		}
		next, err := c.Get(ctx, info.WorkflowName, info.ID)
		if err != nil {
			return nil, err
		}
		info = next
	}
}

// readJSONArg reads a JSON argument: the value itself, @file, or - for in.
// It checks that the JSON is well-formed; empty means none.
func readJSONArg(flag, v string, in io.Reader) (json.RawMessage, error) {
	var (
		b   []byte
		err error
	)
	switch {
	case v == "":
		return nil, nil
	case v == "-":
		// The server holds it to its own limit, which may be past the
		// default: read up to the highest any server takes.
		b, err = io.ReadAll(io.LimitReader(in, workflow.MaxPayloadBytesLimit+1))
	case strings.HasPrefix(v, "@"):
		b, err = os.ReadFile(v[1:])
	default:
		b = []byte(v)
	}
	if err != nil {
		return nil, withCode(ExitInvalid, fmt.Errorf("%s: %w", flag, err))
	}
	if !json.Valid(b) {
		return nil, withCode(ExitInvalid, fmt.Errorf("%s: %w", flag, describeJSONError(b)))
	}
	return json.RawMessage(b), nil
}

// describeJSONError says where and why b, which is not valid JSON, goes
// wrong: "invalid JSON at byte 16: invalid character '}' looking for
// beginning of object key string, at {"name": "Ada",⟨here⟩}", where byte
// counts from 1 and ⟨here⟩ marks the byte the decoder stopped at.
func describeJSONError(b []byte) error {
	var v any
	err := json.Unmarshal(b, &v)
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		// Offset is the number of bytes read, the bad one included; at the
		// end of the input nothing is bad but what is missing.
		pos := int(se.Offset) - 1
		if se.Offset >= int64(len(b)) && strings.Contains(se.Error(), "end of JSON input") {
			pos = len(b)
		}
		return fmt.Errorf("invalid JSON at byte %d: %s, at %s", se.Offset, se.Error(), near(b, pos))
	case err != nil:
		return fmt.Errorf("invalid JSON: %w", err)
	}
	return errors.New("invalid JSON")
}

// near is the text of b around index pos, on one line, with "⟨here⟩" at
// pos.
func near(b []byte, pos int) string {
	pos = min(max(pos, 0), len(b))
	s := string(b[max(0, pos-24):pos]) + "⟨here⟩" + string(b[pos:min(len(b), pos+24)])
	return strings.Join(strings.Fields(s), " ")
}

func newInstancesHistoryCommand(o *Options, cf *clientFlags) *cobra.Command {
	var (
		run      int
		pageSize int
		cursor   string
	)
	cmd := &cobra.Command{
		Use:   "history <workflow> <id>",
		Short: "Show the steps and events of a run of an instance",
		Long: `history shows the steps (name, type, status, attempts, result or error) and
the events of the current run of an instance, or of --run n. It reads every
page, unless --page-size or --cursor ask for one page, in which case it prints
the cursor of the next on standard error.`,
		Args: args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c := cf.client()
			onePage := pageSize != 0 || cursor != ""
			p := client.HistoryParams{Run: run, PageSize: pageSize, Cursor: cursor}
			var h *apiclient.History
			for {
				page, err := c.History(cmd.Context(), a[0], a[1], p)
				if err != nil {
					return err
				}
				if h == nil {
					h = page
				} else {
					h.Steps = append(h.Steps, page.Steps...)
					h.Events = append(h.Events, page.Events...)
					h.NextCursor = page.NextCursor
				}
				if page.NextCursor == "" || onePage {
					break
				}
				p.Cursor, p.Run = page.NextCursor, page.RunNumber
			}
			if cf.json {
				return writeJSON(o.Stdout, apiclient.NewHistoryPage(h))
			}
			if err := printHistory(o.Stdout, h); err != nil {
				return err
			}
			if h.NextCursor != "" {
				fmt.Fprintf(o.Stderr, "more: %s instances history %s %s --cursor %s\n", o.Name, a[0], a[1], h.NextCursor)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&run, "run", 0, "run number (default: the current run)")
	fs.IntVar(&pageSize, "page-size", 0, "steps and events per page; reads one page")
	fs.StringVar(&cursor, "cursor", "", "continue after a previous page; reads one page")
	return cmd
}

// printAttempts prints the steps running now and every attempt of the steps
// that took more than one.
func printAttempts(w io.Writer, h *apiclient.History) error {
	if len(h.Running) > 0 {
		fmt.Fprintln(w)
		t := newTable(w, "RUNNING", "ATTEMPT", "STARTED")
		for _, r := range h.Running {
			t.row(r.Name, fmt.Sprint(r.Attempt), formatTime(r.StartedAt))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	var rows [][]string
	for _, s := range h.Steps {
		if len(s.AttemptLog) < 2 && (len(s.AttemptLog) == 0 || s.AttemptLog[0].Status == "complete") {
			continue
		}
		for _, a := range s.AttemptLog {
			errText := "-"
			if a.Error != nil {
				errText = a.Error.Name + ": " + a.Error.Message
			}
			rows = append(rows, []string{s.Name, fmt.Sprint(a.RunAttempt), fmt.Sprint(a.Attempt), a.Status,
				formatTimePtr(a.StartedAt), formatTimePtr(a.EndedAt), errText})
		}
	}
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	t := newTable(w, "ATTEMPTS OF", "RUN ATTEMPT", "ATTEMPT", "STATUS", "STARTED", "ENDED", "ERROR")
	for _, r := range rows {
		t.row(r...)
	}
	return t.flush()
}

func printHistory(w io.Writer, h *apiclient.History) error {
	i := h.Instance
	fmt.Fprintf(w, "%s/%s run %d: %s", i.WorkflowName, i.ID, h.RunNumber, i.Status)
	if h.RunNumber == i.RunNumber && (i.Status == dftype.StatusComplete || i.Error != nil) {
		fmt.Fprintf(w, " %s", outcome(i, 0))
	}
	if i.RunAttempt > 1 {
		fmt.Fprintf(w, " (run attempt %d)", i.RunAttempt)
	}
	if i.DeadlineAt != nil {
		fmt.Fprintf(w, " deadline %s", formatTime(*i.DeadlineAt))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w)
	t := newTable(w, "STEP", "TYPE", "STATUS", "ATTEMPTS", "UPDATED", "RESULT/ERROR/WAIT")
	for _, s := range h.Steps {
		detail := "-"
		switch {
		case s.Error != nil:
			detail = s.Error.Name + ": " + s.Error.Message
			if s.NextRetryAt != nil && s.Status != "complete" && s.Status != "errored" {
				detail += " (retry at " + formatTime(*s.NextRetryAt) + ")"
			}
		case len(s.Result) > 0 && (s.Type == "waitForEvent" || s.Type == "invoke"):
			// The result is the received event; its payload is what matters.
			var ev struct {
				Payload json.RawMessage `json:"payload"`
			}
			if json.Unmarshal(s.Result, &ev) == nil && len(ev.Payload) > 0 {
				detail = compactJSON(ev.Payload, 80)
			} else {
				detail = compactJSON(s.Result, 80)
			}
		case len(s.Result) > 0:
			detail = compactJSON(s.Result, 80)
		case s.WaitEventType != "" && s.WakeAt != nil:
			detail = "event " + s.WaitEventType + " until " + formatTime(*s.WakeAt)
		case s.WakeAt != nil:
			detail = "until " + formatTime(*s.WakeAt)
		}
		attempts := "-"
		if s.Type == "do" {
			attempts = fmt.Sprint(s.Attempts)
			switch {
			case s.MaxAttempts == workflow.UnlimitedAttempts:
				attempts += "/unlimited"
			case s.MaxAttempts > 0:
				attempts += "/" + fmt.Sprint(s.MaxAttempts)
			}
		}
		t.row(s.Name, s.Type, s.Status, attempts, formatTime(s.UpdatedAt), detail)
	}
	if len(h.Steps) == 0 {
		t.row("(none)")
	}
	if err := t.flush(); err != nil {
		return err
	}
	if err := printAttempts(w, h); err != nil {
		return err
	}
	fmt.Fprintln(w)
	t = newTable(w, "EVENT", "SENT", "DELIVERED", "CONSUMED BY", "PAYLOAD")
	for _, e := range h.Events {
		t.row(e.Type, formatTime(e.CreatedAt), formatTimePtr(e.DeliveredAt), cmp.Or(e.ConsumedBy, "-"), compactJSON(e.Payload, 80))
	}
	if len(h.Events) == 0 {
		t.row("(none)")
	}
	return t.flush()
}

type changeFunc func(c *apiclient.Client, ctx context.Context, workflowName, id string) (*dftype.InstanceInfo, error)

func newInstancesChangeCommand(o *Options, cf *clientFlags, verb, short string, f changeFunc) *cobra.Command {
	return &cobra.Command{
		Use:   verb + " <workflow> <id>",
		Short: short,
		Args:  args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			info, err := f(cf.client(), cmd.Context(), a[0], a[1])
			if err != nil {
				return err
			}
			if cf.json {
				return writeJSON(o.Stdout, apiclient.NewInstance(info))
			}
			fmt.Fprintf(o.Stdout, "%s/%s: %s (run %d)\n", info.WorkflowName, info.ID, info.Status, info.RunNumber)
			return nil
		},
	}
}

func newEventsCommand(o *Options) *cobra.Command {
	cf := &clientFlags{}
	cmd := &cobra.Command{
		Use:     "events",
		Aliases: []string{"event"},
		Short:   "List lifecycle events (and follow them); send events to instances",
		Long: `events lists the lifecycle event log (as "events list" does, with the same
flags) and, with "events send", sends a workflow event to an instance.`,
		Args: args(cobra.NoArgs),
	}
	addClientFlags(cmd, cf)
	lf := &lifecycleFlags{}
	lf.add(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return runLifecycleList(cmd, o, cf, lf) }
	cmd.AddCommand(newLifecycleListCommand(o, cf, &lifecycleFlags{}))
	var payload string
	send := &cobra.Command{
		Use:   "send <workflow> <id> <type>",
		Short: "Send an event to an instance",
		Long: `send sends an event of a type to an instance, with a JSON payload (--payload,
or @file, or - for standard input). The event is buffered: the first
WaitForEvent of that type in the instance's current run receives it, now if
the instance waits for it, or when it gets there. send says which: the event
was delivered (a waiting step took it), or it was buffered because no step
waits for its type now; then, when the instance waits for events of other
types, it warns on standard error (a mistyped type is kept, never refused).`,
		Args: args(cobra.ExactArgs(3)),
		RunE: func(cmd *cobra.Command, a []string) error {
			raw, err := readJSONArg("--payload", payload, cmd.InOrStdin())
			if err != nil {
				return err
			}
			c := cf.client()
			sent, err := c.SendEventAnswer(cmd.Context(), a[0], a[1], a[2], raw)
			if err != nil {
				return err
			}
			if sent.Delivery == apiclient.EventBuffered {
				warnOtherWait(cmd.Context(), o, c, a[0], a[1], a[2])
			}
			if cf.json {
				return writeJSON(o.Stdout, sent)
			}
			fmt.Fprintf(o.Stdout, "sent %s to %s/%s (now %s)%s\n", a[2], a[0], a[1], sent.Status.Status, deliveryText(sent, a[2]))
			return nil
		},
	}
	send.Flags().StringVar(&payload, "payload", "", "payload as JSON, @file to read a file, or - to read standard input")
	cmd.AddCommand(send)
	return cmd
}

// groupHelp is the RunE of a command that only groups others: it shows the
// help, and an argument (a mistyped subcommand) is refused by Args.
func groupHelp(cmd *cobra.Command, _ []string) error { return cmd.Help() }
