package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/dftype"
)

func newQueuesCommand(o *Options) *cobra.Command {
	cf := &clientFlags{}
	cmd := &cobra.Command{
		Use:     "queues",
		Aliases: []string{"queue"},
		Short:   "Show and set the concurrency and rate limits of task queues",
		Long: `queues shows and sets the limits of task queues, stored in the database and
enforced across every runner: --max-running caps the instances of the queue
that are admitted and not yet terminal (the others wait, queued, and say so in
instances get), --rate caps how many start per period (the excess starts in a
later window). See docs/limits.md.`,
		Args: args(cobra.NoArgs),
		RunE: groupHelp,
	}
	addClientFlags(cmd, cf)
	cmd.AddCommand(newQueuesListCommand(o, cf), newQueuesGetCommand(o, cf), newQueuesSetCommand(o, cf))
	return cmd
}

func newQueuesListCommand(o *Options, cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the queues that have limits",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			list, err := cf.client().ListQueues(cmd.Context())
			if err != nil {
				return err
			}
			if cf.json {
				return writeJSON(o.Stdout, list)
			}
			t := newTable(o.Stdout, "NAME", "MAX RUNNING", "RATE", "RUNNING", "UPDATED")
			for _, q := range list.Queues {
				t.row(q.Name, formatMax(q.MaxRunning), formatRate(q.Rate), strconv.Itoa(q.Running), formatTime(q.UpdatedAt))
			}
			return t.flush()
		},
	}
}

func newQueuesGetCommand(o *Options, cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "get <name>",
		Short: "Show a queue's limits and how many instances hold a slot",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			q, err := cf.client().GetQueue(cmd.Context(), a[0])
			if err != nil {
				return err
			}
			return printQueue(o.Stdout, cf.json, q)
		},
	}
}

func newQueuesSetCommand(o *Options, cf *clientFlags) *cobra.Command {
	var (
		maxRunning int
		rate       string
	)
	cmd := &cobra.Command{
		Use:   "set <name> [--max-running N] [--rate N/period]",
		Short: "Set a queue's limits, replacing the ones it had",
		Long: `set replaces a queue's limits: a flag left out clears that limit. The rate is
N/period, such as 10/1m, 100/1h or 5/"10 seconds"; windows are fixed (each
period holds at most N starts).`,
		Example: `  duraflow queues set payments --max-running 5 --rate 100/1m
  duraflow queues set payments --max-running 1`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			var l apiclient.QueueLimits
			if cmd.Flags().Changed("max-running") {
				if maxRunning <= 0 {
					return withCode(ExitInvalid, fmt.Errorf("--max-running must be positive, got %d (leave it out for no limit)", maxRunning))
				}
				l.MaxRunning = &maxRunning
			}
			if rate != "" {
				r, err := parseRate(rate)
				if err != nil {
					return withCode(ExitInvalid, err)
				}
				l.Rate = r
			}
			q, err := cf.client().SetQueueLimits(cmd.Context(), a[0], l)
			if err != nil {
				return err
			}
			return printQueue(o.Stdout, cf.json, q)
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&maxRunning, "max-running", 0, "most admitted, not yet terminal instances of the queue")
	fs.StringVar(&rate, "rate", "", "most starts per period, as N/period (10/1m)")
	return cmd
}

// parseRate reads "N/period".
func parseRate(s string) (*apiclient.QueueRate, error) {
	n, period, ok := strings.Cut(s, "/")
	if !ok {
		return nil, fmt.Errorf("--rate %q: want N/period, such as 10/1m", s)
	}
	limit, err := strconv.Atoi(strings.TrimSpace(n))
	if err != nil || limit <= 0 {
		return nil, fmt.Errorf("--rate %q: the count must be a positive integer", s)
	}
	d, err := dftype.ParseDuration(strings.TrimSpace(period))
	if err != nil || d <= 0 {
		return nil, fmt.Errorf("--rate %q: the period must be a positive duration", s)
	}
	return &apiclient.QueueRate{Limit: limit, Period: dftype.Duration(d)}, nil
}

func printQueue(w io.Writer, asJSON bool, q *apiclient.Queue) error {
	if asJSON {
		return writeJSON(w, q)
	}
	t := newTable(w)
	t.row("Name:", q.Name)
	t.row("Max running:", formatMax(q.MaxRunning))
	t.row("Rate:", formatRate(q.Rate))
	t.row("Running:", strconv.Itoa(q.Running))
	t.row("Updated:", formatTime(q.UpdatedAt))
	return t.flush()
}

func formatMax(n int) string {
	if n <= 0 {
		return "-"
	}
	return strconv.Itoa(n)
}

func formatRate(r *apiclient.QueueRate) string {
	if r == nil {
		return "-"
	}
	return fmt.Sprintf("%d per %s", r.Limit, r.Period)
}

// formatWaitingFor says which limit holds an instance back:
// "slot of key cust-1 (max 1)" or "rate of queue payments (10 per 1 minute) until <time>".
func formatWaitingFor(w *dftype.WaitingFor) string {
	if w.Kind == "rate" {
		return fmt.Sprintf("rate of %s %s (%d per %s) until %s", w.Scope, w.Name, w.Max, w.Period, formatTimePtr(w.Until))
	}
	return fmt.Sprintf("slot of %s %s (max %d)", w.Scope, w.Name, w.Max)
}
