package cli

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/dftype"
)

func newWorkersCommand(o *Options) *cobra.Command {
	cf := &clientFlags{}
	cmd := &cobra.Command{
		Use:   "workers",
		Short: "List the registered workers (runners) and drain one",
		Long: `workers shows the registry of runners: every process that runs work (serve
and worker) registers its runner as a worker when it starts, heartbeats with
its active count, and deregisters when it stops. A worker whose heartbeat
stopped is marked offline by the others and the tasks it held are released at
once. A drain asks a worker to take nothing new, finish what it runs and
deregister; it sees the request at its next heartbeat.`,
		Args: args(cobra.NoArgs),
		RunE: groupHelp,
	}
	addClientFlags(cmd, cf)
	cmd.AddCommand(
		newWorkersListCommand(o, cf),
		newWorkersGetCommand(o, cf),
		newWorkersDrainCommand(o, cf),
	)
	return cmd
}

func newWorkersListCommand(o *Options, cf *clientFlags) *cobra.Command {
	var (
		p      apiclient.WorkerListParams
		status string
		all    bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List workers by id, with their status and load",
		Long: `list lists workers ordered by id, of one --status (online, draining or
offline) and serving one --queue when given, one page at a time (--page-size,
default 50). When there are more, it prints the --cursor of the next page on
standard error; --all follows every page.`,
		Example: `  duraflow workers list
  duraflow workers list --status online --queue emails --json`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			p.Status = dftype.WorkerStatus(status)
			c := cf.client()
			out := &apiclient.WorkerList{}
			var err error
			out.Workers, out.NextCursor, err = listPages(all, func(cur string) { p.Cursor = cur }, func() ([]*dftype.WorkerInfo, string, error) {
				page, err := c.ListWorkers(cmd.Context(), p)
				if err != nil {
					return nil, "", err
				}
				return page.Workers, page.NextCursor, nil
			})
			if err != nil {
				return err
			}
			if cf.json {
				return writeJSON(o.Stdout, out)
			}
			t := newTable(o.Stdout, "ID", "STATUS", "HOST", "PID", "QUEUES", "ACTIVE", "COMPLETED", "FAILED", "LAST HEARTBEAT")
			for _, w := range out.Workers {
				t.row(w.ID, string(w.Status), w.Hostname, strconv.Itoa(w.PID), strings.Join(w.Queues, ","),
					fmt.Sprintf("%d/%d", w.ActiveCount, w.MaxConcurrency),
					strconv.FormatInt(w.CompletedTotal, 10), strconv.FormatInt(w.FailedTotal, 10), formatTime(w.LastHeartbeatAt))
			}
			if err := t.flush(); err != nil {
				return err
			}
			if out.NextCursor != "" {
				fmt.Fprintf(o.Stderr, "more: %s workers list --cursor %s (or --all)\n", o.Name, out.NextCursor)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&status, "status", "", "only workers with this status: online, draining or offline")
	fs.StringVar(&p.Queue, "queue", "", "only workers that serve this queue")
	pageFlags(fs, "workers", &p.PageSize, &p.Cursor, &all)
	return cmd
}

func newWorkersGetCommand(o *Options, cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "get <id>",
		Short: "Show a worker: what it serves, its load and its heartbeat",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			info, err := cf.client().GetWorker(cmd.Context(), a[0])
			if err != nil {
				return err
			}
			return printWorker(o.Stdout, cf.json, info)
		},
	}
}

func newWorkersDrainCommand(o *Options, cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "drain <id>",
		Short: "Ask a worker to drain: take nothing new, finish what it runs, deregister",
		Long: `drain marks a worker draining. At its next heartbeat the worker stops
claiming, lets what it runs finish within its drain grace (a worker's
--shutdown-timeout), hands back what is still running, and deregisters; a
duraflow worker process then exits with status 0. Draining a draining worker
changes nothing; an unknown worker is WORKER_NOT_FOUND and an offline one
WORKER_OFFLINE.`,
		Example: `  duraflow workers drain web-7-1`,
		Args:    args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			info, err := cf.client().DrainWorker(cmd.Context(), a[0])
			if err != nil {
				return err
			}
			return printWorker(o.Stdout, cf.json, info)
		},
	}
}

func printWorker(w io.Writer, asJSON bool, wk *dftype.WorkerInfo) error {
	if asJSON {
		return writeJSON(w, wk)
	}
	labels := make([]string, 0, len(wk.Labels))
	for _, k := range slices.Sorted(maps.Keys(wk.Labels)) {
		labels = append(labels, k+"="+wk.Labels[k])
	}
	t := newTable(w)
	t.row("ID:", wk.ID)
	t.row("Status:", string(wk.Status))
	t.row("Host:", wk.Hostname)
	t.row("PID:", strconv.Itoa(wk.PID))
	t.row("Version:", orDash(wk.Version))
	t.row("Labels:", orDash(strings.Join(labels, ",")))
	t.row("Queues:", orDash(strings.Join(wk.Queues, ",")))
	t.row("Workflows:", orDash(strings.Join(wk.Workflows, ",")))
	t.row("Active:", fmt.Sprintf("%d/%d", wk.ActiveCount, wk.MaxConcurrency))
	t.row("Completed:", strconv.FormatInt(wk.CompletedTotal, 10))
	t.row("Failed:", strconv.FormatInt(wk.FailedTotal, 10))
	t.row("Registered:", formatTime(wk.RegisteredAt))
	t.row("Last heartbeat:", formatTime(wk.LastHeartbeatAt))
	t.row("Drain requested:", formatTimePtr(wk.DrainRequestedAt))
	t.row("Deregistered:", formatTimePtr(wk.DeregisteredAt))
	return t.flush()
}
