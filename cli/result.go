package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/workflow"
)

// terminalError is the error a command that waited for an instance ends
// with when the instance ended errored (ExitInstanceErrored) or was
// terminated (ExitInstanceTerminated); nil for any other status.
func terminalError(i *dftype.InstanceInfo) error {
	switch i.Status {
	case dftype.StatusErrored:
		msg := "errored"
		if i.Error != nil {
			msg += ": " + i.Error.Name + ": " + i.Error.Message
		}
		return withCode(ExitInstanceErrored, fmt.Errorf("%s/%s %s", i.WorkflowName, i.ID, msg))
	case dftype.StatusTerminated:
		return withCode(ExitInstanceTerminated, fmt.Errorf("%s/%s was terminated", i.WorkflowName, i.ID))
	}
	return nil
}

// Polls of waitTerminal start at waitPollMin and double up to waitPollMax.
const (
	waitPollMin = 50 * time.Millisecond
	waitPollMax = time.Second
)

// waitTerminal reads an instance until it is terminal (complete, errored or
// terminated), polling with a backoff from 50 ms to 1 s, and returns it. A
// positive d bounds the wait: when it runs out first, the error has
// ExitWaitTimeout.
func waitTerminal(ctx context.Context, c *apiclient.Client, workflowName, id string, d time.Duration) (*dftype.InstanceInfo, error) {
	var deadline <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		deadline = t.C
	}
	every := waitPollMin
	for {
		info, err := c.Get(ctx, workflowName, id)
		if err != nil {
			return nil, err
		}
		if info.Status.Terminal() {
			return info, nil
		}
		poll := time.NewTimer(every)
		select {
		case <-ctx.Done():
			poll.Stop()
			return nil, fmt.Errorf("waiting for %s/%s (still %s): %w", workflowName, id, info.Status, ctx.Err())
		case <-deadline:
			poll.Stop()
			return info, withCode(ExitWaitTimeout, fmt.Errorf("%s/%s is still %s after --wait %s", workflowName, id, info.Status, d))
		case <-poll.C:
		}
		every = min(2*every, waitPollMax)
	}
}

// printResult prints what instances result and execute show of a terminal
// instance: with --json the instance, else the output of a complete one;
// then it returns terminalError.
func printResult(o *Options, asJSON bool, info *dftype.InstanceInfo) error {
	if asJSON {
		if err := writeJSON(o.Stdout, apiclient.NewInstance(info)); err != nil {
			return err
		}
	} else if info.Status == dftype.StatusComplete {
		fmt.Fprintln(o.Stdout, compactJSON(info.Output, 0))
	}
	return terminalError(info)
}

// addResultWaitFlag adds --wait to instances result and execute.
func addResultWaitFlag(fs *pflag.FlagSet, wait *time.Duration) {
	fs.Var(newDurationValue(wait, 0), "wait", "how long to wait for the instance to end (0: until it ends); when it runs out the command exits 10 and the instance goes on")
}

func newInstancesResultCommand(o *Options, cf *clientFlags) *cobra.Command {
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "result <workflow> <id>",
		Short: "Wait until an instance ends and print its output",
		Long: `result waits until an instance is terminal and prints its output as JSON
(with --json, the whole instance). It exits 0 when the instance completed,
8 when it errored (the error is printed on standard error), 9 when it was
terminated, and 10 when --wait ran out first. A paused or waiting instance
is waited for: send its event or resume it from another shell.`,
		Args: args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			info, err := waitTerminal(cmd.Context(), cf.client(), a[0], a[1], wait)
			if err != nil {
				return err
			}
			return printResult(o, cf.json, info)
		},
	}
	addResultWaitFlag(cmd.Flags(), &wait)
	return cmd
}

func newInstancesExecuteCommand(o *Options, cf *clientFlags) *cobra.Command {
	var (
		wait time.Duration
		req  createFlags
	)
	cmd := &cobra.Command{
		Use:   "execute <workflow> [id]",
		Short: "Create an instance, wait until it ends and print its output",
		Long: `execute creates an instance as create does (same flags) and waits until it
is terminal, as result does: it prints the output (with --json, the whole
instance) and exits 0 when the instance completed, 8 when it errored, 9
when it was terminated, and 10 when --wait ran out first.`,
		Args: args(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c := cf.client()
			info, err := req.create(cmd, c, a)
			if err != nil {
				return err
			}
			if info, err = waitTerminal(cmd.Context(), c, info.WorkflowName, info.ID, wait); err != nil {
				return err
			}
			return printResult(o, cf.json, info)
		},
	}
	req.add(cmd.Flags())
	addResultWaitFlag(cmd.Flags(), &wait)
	return cmd
}

// createFlags are the flags of an instance to create.
type createFlags struct {
	id, params, queue, dedupeKey, deadline string
	priority                               int
}

func (f *createFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.id, "id", "", "instance id (default: a random one)")
	fs.StringVar(&f.params, "params", "", "params as JSON, @file to read a file, or - to read standard input")
	fs.StringVar(&f.queue, "queue", "", "task queue to run on (default: the workflow's)")
	fs.IntVar(&f.priority, "priority", 0, fmt.Sprintf("claim priority, %d to %d: higher is claimed first", workflow.MinPriority, workflow.MaxPriority))
	fs.StringVar(&f.dedupeKey, "dedupe-key", "", "return the active instance holding this key instead of creating another")
	fs.StringVar(&f.deadline, "deadline", "", "the instance's deadline: a duration from now (\"30 minutes\") or an RFC 3339 time (default: the workflow's)")
}

// create creates the instance of a[0] (with the id a[1] or --id).
func (f *createFlags) create(cmd *cobra.Command, c *apiclient.Client, a []string) (*dftype.InstanceInfo, error) {
	id := f.id
	if len(a) == 2 {
		if id != "" && id != a[1] {
			return nil, usageError(fmt.Errorf("the id is given twice: %q and --id %q", a[1], id))
		}
		id = a[1]
	}
	raw, err := readJSONArg("--params", f.params, cmd.InOrStdin())
	if err != nil {
		return nil, err
	}
	at, err := parseDeadline(f.deadline, time.Now())
	if err != nil {
		return nil, err
	}
	info, err := c.Create(cmd.Context(), a[0], dftype.CreateRequest{
		ID: id, Params: raw, Queue: f.queue, Priority: f.priority, DedupeKey: f.dedupeKey, Deadline: at,
	})
	if err != nil {
		return nil, err
	}
	if info == nil {
		return nil, errors.New("the server answered the create without an instance")
	}
	return info, nil
}
