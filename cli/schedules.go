package cli

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/duraflow/duraflow/schedule"
)

func newSchedulesCommand(o *Options) *cobra.Command {
	cf := &clientFlags{}
	cmd := &cobra.Command{
		Use:     "schedules",
		Aliases: []string{"schedule"},
		Short:   "Create, list and control cron schedules that start workflows",
		Long: `schedules manages cron schedules: each starts an instance of a workflow at
every time its cron expression names, in its time zone. Expressions have five
fields (minute hour day-of-month month day-of-week, with names such as MON and
JAN) or are one of @yearly, @monthly, @weekly, @daily, @hourly. Every due time
fires once, however many servers and workers run; the instance id is
<schedule>-<due time in UTC>, such as nightly-20260314T020000Z. After an
outage, only the --max-catchup most recent missed times are started.`,
		Args: args(cobra.NoArgs),
		RunE: groupHelp,
	}
	addClientFlags(cmd, cf)
	cmd.AddCommand(
		newSchedulesCreateCommand(o, cf),
		newSchedulesListCommand(o, cf),
		newSchedulesGetCommand(o, cf),
		newSchedulesUpdateCommand(o, cf),
		newSchedulesToggleCommand(o, cf, "enable", "Make a schedule fire again, from its next fire time after now"),
		newSchedulesToggleCommand(o, cf, "disable", "Stop a schedule from firing until it is enabled"),
		newSchedulesDeleteCommand(o, cf),
	)
	return cmd
}

func newSchedulesCreateCommand(o *Options, cf *clientFlags) *cobra.Command {
	var (
		req      schedule.CreateRequest
		params   string
		disabled bool
	)
	cmd := &cobra.Command{
		Use:   "create <id> --workflow <name> --cron <expression>",
		Short: "Create a schedule",
		Example: `  duraflow schedules create nightly --workflow report --cron '0 2 * * *' --tz Europe/Berlin --params '{"kind":"daily"}'
  duraflow schedules create every-5 --workflow poll --cron '*/5 * * * *' --max-catchup 3`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			req.ID = a[0]
			raw, err := readJSONArg("--params", params, cmd.InOrStdin())
			if err != nil {
				return err
			}
			req.Params = raw
			if disabled {
				req.Enabled = new(false)
			}
			info, err := cf.client().CreateSchedule(cmd.Context(), req)
			if err != nil {
				return err
			}
			return printSchedule(o.Stdout, cf.json, info)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&req.WorkflowName, "workflow", "", "the workflow the schedule starts (required)")
	fs.StringVar(&req.Cron, "cron", "", "cron expression: five fields or a descriptor such as @daily (required)")
	fs.StringVar(&req.TimeZone, "tz", "UTC", "IANA time zone the expression is evaluated in")
	fs.StringVar(&params, "params", "", "params of every instance as JSON, @file to read a file, or - to read standard input")
	fs.IntVar(&req.MaxCatchup, "max-catchup", 1, "after an outage, how many of the most recent missed times to start (1 to 1000)")
	fs.BoolVar(&disabled, "disabled", false, "create the schedule disabled")
	_ = cmd.MarkFlagRequired("workflow")
	_ = cmd.MarkFlagRequired("cron")
	return cmd
}

func newSchedulesListCommand(o *Options, cf *clientFlags) *cobra.Command {
	var (
		p   schedule.ListParams
		all bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List schedules by id, with their next fire times",
		Long: `list lists schedules ordered by id, of one workflow with --workflow, one
page at a time (--page-size, default 50). When there are more, it prints the
--cursor of the next page on standard error; --all follows every page.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := cf.client()
			out := &schedule.ListResult{}
			var err error
			out.Schedules, out.NextCursor, err = listPages(all, func(cur string) { p.Cursor = cur }, func() ([]*schedule.Info, string, error) {
				page, err := c.ListSchedules(cmd.Context(), p)
				if err != nil {
					return nil, "", err
				}
				return page.Schedules, page.NextCursor, nil
			})
			if err != nil {
				return err
			}
			if cf.json {
				return writeJSON(o.Stdout, out)
			}
			t := newTable(o.Stdout, "ID", "WORKFLOW", "CRON", "TIME ZONE", "ENABLED", "NEXT FIRE", "LAST INSTANCE")
			for _, s := range out.Schedules {
				t.row(s.ID, s.WorkflowName, s.Cron, s.TimeZone, strconv.FormatBool(s.Enabled), formatTimePtr(s.NextFireAt), orDash(s.LastInstanceID))
			}
			if err := t.flush(); err != nil {
				return err
			}
			if out.NextCursor != "" {
				fmt.Fprintf(o.Stderr, "more: %s schedules list --cursor %s (or --all)\n", o.Name, out.NextCursor)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&p.WorkflowName, "workflow", "", "only the schedules of this workflow")
	pageFlags(fs, "schedules", &p.PageSize, &p.Cursor, &all)
	return cmd
}

func newSchedulesGetCommand(o *Options, cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "get <id>",
		Short: "Show a schedule and when it fires next",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			info, err := cf.client().GetSchedule(cmd.Context(), a[0])
			if err != nil {
				return err
			}
			return printSchedule(o.Stdout, cf.json, info)
		},
	}
}

func newSchedulesUpdateCommand(o *Options, cf *clientFlags) *cobra.Command {
	var (
		workflowName, cron, tz, params string
		maxCatchup                     int
	)
	cmd := &cobra.Command{
		Use:   "update <id>",
		Short: "Change a schedule: only the flags given change",
		Long: `update changes the fields whose flags are given and leaves the others. A new
--cron or --tz moves the next fire time to the first one after now under the
new rule.`,
		Example: `  duraflow schedules update nightly --cron '30 3 * * *'
  duraflow schedules update nightly --params @params.json --max-catchup 5`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			var req schedule.UpdateRequest
			fs := cmd.Flags()
			if fs.Changed("workflow") {
				req.WorkflowName = &workflowName
			}
			if fs.Changed("cron") {
				req.Cron = &cron
			}
			if fs.Changed("tz") {
				req.TimeZone = &tz
			}
			if fs.Changed("max-catchup") {
				req.MaxCatchup = &maxCatchup
			}
			if fs.Changed("params") {
				raw, err := readJSONArg("--params", params, cmd.InOrStdin())
				if err != nil {
					return err
				}
				if raw == nil {
					raw = []byte("null")
				}
				req.Params = raw
			}
			if req.WorkflowName == nil && req.Cron == nil && req.TimeZone == nil && req.MaxCatchup == nil && req.Params == nil {
				return usageError(fmt.Errorf("nothing to change: give --workflow, --cron, --tz, --params or --max-catchup"))
			}
			info, err := cf.client().UpdateSchedule(cmd.Context(), a[0], req)
			if err != nil {
				return err
			}
			return printSchedule(o.Stdout, cf.json, info)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&workflowName, "workflow", "", "the workflow the schedule starts")
	fs.StringVar(&cron, "cron", "", "cron expression: five fields or a descriptor such as @daily")
	fs.StringVar(&tz, "tz", "", "IANA time zone the expression is evaluated in")
	fs.StringVar(&params, "params", "", "params of every instance as JSON, @file, or - for standard input (empty: null)")
	fs.IntVar(&maxCatchup, "max-catchup", 1, "after an outage, how many of the most recent missed times to start (1 to 1000)")
	return cmd
}

func newSchedulesToggleCommand(o *Options, cf *clientFlags, verb, short string) *cobra.Command {
	return &cobra.Command{
		Use:   verb + " <id>",
		Short: short,
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c := cf.client()
			f := c.EnableSchedule
			if verb == "disable" {
				f = c.DisableSchedule
			}
			info, err := f(cmd.Context(), a[0])
			if err != nil {
				return err
			}
			if cf.json {
				return writeJSON(o.Stdout, info)
			}
			if info.Enabled {
				fmt.Fprintf(o.Stdout, "schedule %s: enabled, next fire %s\n", info.ID, formatFire(info.NextFireAt, info.TimeZone))
			} else {
				fmt.Fprintf(o.Stdout, "schedule %s: disabled\n", info.ID)
			}
			return nil
		},
	}
}

func newSchedulesDeleteCommand(o *Options, cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "delete <id>",
		Short: "Delete a schedule (the instances it started stay)",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := cf.client().DeleteSchedule(cmd.Context(), a[0]); err != nil {
				return err
			}
			if cf.json {
				return writeJSON(o.Stdout, map[string]any{"deleted": true, "id": a[0]})
			}
			fmt.Fprintf(o.Stdout, "deleted schedule %s\n", a[0])
			return nil
		},
	}
}

// printSchedule writes one schedule as JSON or as a list of fields.
func printSchedule(w io.Writer, asJSON bool, s *schedule.Info) error {
	if asJSON {
		return writeJSON(w, s)
	}
	t := newTable(w)
	t.row("ID:", s.ID)
	t.row("Workflow:", s.WorkflowName)
	t.row("Cron:", s.Cron)
	t.row("Time zone:", s.TimeZone)
	t.row("Enabled:", strconv.FormatBool(s.Enabled))
	t.row("Next fire:", formatFire(s.NextFireAt, s.TimeZone))
	t.row("Last fired:", formatFire(s.LastFiredAt, s.TimeZone))
	t.row("Last instance:", orDash(s.LastInstanceID))
	t.row("Max catch-up:", strconv.Itoa(s.MaxCatchup))
	t.row("Params:", compactJSON(s.Params, 0))
	t.row("Created:", formatTime(s.CreatedAt))
	t.row("Updated:", formatTime(s.UpdatedAt))
	return t.flush()
}

// formatFire writes a fire time in UTC and, for another zone, on that
// zone's wall clock too: "2026-03-14T01:00:00Z (02:00 CET)".
func formatFire(t *time.Time, zone string) string {
	if t == nil {
		return "-"
	}
	s := formatTime(*t)
	if loc, err := time.LoadLocation(zone); err == nil && zone != "UTC" {
		s += " (" + t.In(loc).Format("2006-01-02 15:04 MST") + ")"
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
