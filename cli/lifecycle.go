package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/dftype"
)

// lifecycleFlags are the flags of duraflow events list (and of plain
// duraflow events, which lists).
type lifecycleFlags struct {
	workflow, instance string
	worker             string
	types              []string
	since, until       string
	follow, all        bool
	pageSize           int
	cursor             string
}

func (f *lifecycleFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.workflow, "workflow", "", "only events of this workflow")
	fs.StringVar(&f.instance, "instance", "", "only events of this instance (with --workflow)")
	fs.StringVar(&f.worker, "worker", "", "only events of this worker (worker.online, worker.draining, worker.offline)")
	fs.StringArrayVar(&f.types, "type", nil, "only events of this lifecycle type (repeatable), e.g. step.retrying")
	fs.StringVar(&f.since, "since", "", "only events at or after this time: RFC 3339, or a duration ago (1h)")
	fs.StringVar(&f.until, "until", "", "only events before this time: RFC 3339, or a duration ago")
	fs.BoolVar(&f.follow, "follow", false, "after the list, stream new events as they happen (until interrupted)")
	pageFlags(fs, "events", &f.pageSize, &f.cursor, &f.all)
}

// parseWhen reads --since or --until: an RFC 3339 time or a duration ago.
func parseWhen(flag, v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return time.Time{}, usageError(fmt.Errorf("%s %q is neither an RFC 3339 time nor a duration ago (such as 90m)", flag, v))
	}
	return now.Add(-d), nil
}

func newLifecycleListCommand(o *Options, cf *clientFlags, f *lifecycleFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List lifecycle events (what happened to instances), and follow new ones",
		Long: `list prints the lifecycle event log: instance created, started, step started,
completed, failed and retrying, waiting, event received, paused, resumed,
terminated, restarted, completed and errored, and workers online, draining
and offline (docs/events.md), oldest first. Filters: --workflow, --instance
(with --workflow), --worker, --type (repeatable), and
--since / --until (an RFC 3339 time or a duration ago). With --follow it
then streams new events as they happen, until interrupted, resuming where it
was when the connection drops. With --json it prints one JSON object per
line. Plain "duraflow events" does the same.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return runLifecycleList(cmd, o, cf, f) },
	}
	f.add(cmd.Flags())
	return cmd
}

func runLifecycleList(cmd *cobra.Command, o *Options, cf *clientFlags, f *lifecycleFlags) error {
	now := time.Now()
	p := client.LifecycleListParams{
		WorkflowName: f.workflow, InstanceID: f.instance, WorkerID: f.worker, Types: f.types, PageSize: f.pageSize, Cursor: f.cursor,
	}
	var err error
	if p.Since, err = parseWhen("--since", f.since, now); err != nil {
		return err
	}
	if p.Until, err = parseWhen("--until", f.until, now); err != nil {
		return err
	}
	if f.follow && f.until != "" {
		return usageError(errors.New("--follow streams new events: it takes no --until"))
	}
	api := cf.client()
	ctx := cmd.Context()
	var last int64
	all := f.all || f.follow // following starts after the last event listed
	events, next, err := listPages(all, func(c string) { p.Cursor = c }, func() ([]*dftype.LifecycleEvent, string, error) {
		page, err := api.ListLifecycleEvents(ctx, p)
		if err != nil {
			return nil, "", err
		}
		return page.Events, page.NextCursor, nil
	})
	if err != nil {
		return err
	}
	for _, e := range events {
		if err := printLifecycleEvent(o.Stdout, e, cf.json); err != nil {
			return err
		}
		last = e.ID
	}
	if !f.follow {
		if next != "" && !cf.json {
			fmt.Fprintf(o.Stderr, "more: --cursor %s (or --all)\n", next)
		}
		return nil
	}
	if last == 0 && p.Cursor != "" {
		if last, err = client.DecodeLifecycleCursor(p.Cursor); err != nil {
			return err
		}
	}
	// The stream is one long answer: no overall timeout.
	stream := apiclient.New(cf.server, cf.token, &http.Client{}).WithPrefix(cf.prefix)
	return stream.FollowLifecycleEvents(ctx, p, last, func(e *dftype.LifecycleEvent) error {
		return printLifecycleEvent(o.Stdout, e, cf.json)
	})
}

// printLifecycleEvent prints one event: a line of columns, or a line of
// JSON.
func printLifecycleEvent(w io.Writer, e *dftype.LifecycleEvent, asJSON bool) error {
	if asJSON {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	// Fixed widths line the columns up, also line by line as --follow
	// prints them: the id, the time, the longest type.
	cols := []string{fmt.Sprintf("%-6d", e.ID), e.At.UTC().Format("2006-01-02T15:04:05.000000Z"), fmt.Sprintf("%-19s", e.Type)}
	if e.WorkerID != "" {
		cols = append(cols, "worker "+e.WorkerID)
	} else {
		cols = append(cols, e.WorkflowName+"/"+e.InstanceID, "run "+strconv.Itoa(e.RunNumber))
	}
	if e.StepKey != "" {
		step := "step " + e.StepKey
		if e.Attempt > 0 {
			step += " attempt " + strconv.Itoa(e.Attempt)
		}
		cols = append(cols, step)
	}
	if e.Detail != "" {
		cols = append(cols, strings.NewReplacer("\n", " ", "\t", " ").Replace(e.Detail))
	}
	_, err := fmt.Fprintln(w, strings.Join(cols, "  "))
	return err
}
