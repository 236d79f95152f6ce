package runner

import (
	"slices"

	"github.com/duraflow/duraflow/internal/wfcore"
)

// AllQueues is the Config.Queues entry that, alone, serves every task queue.
const AllQueues = "*"

// claimQueues returns the queues the runner claims on, nil for every queue.
func (r *Runner) claimQueues() []string {
	if len(r.cfg.Queues) == 1 && r.cfg.Queues[0] == AllQueues {
		return nil
	}
	return r.cfg.Queues
}

// servedNames returns the workflow names the runner claims tasks of: every
// registered workflow, or those of Config.Workflows that are registered.
func (r *Runner) servedNames() []string {
	names := r.cfg.Registry.Names()
	if len(r.cfg.Workflows) == 0 {
		return names
	}
	return slices.DeleteFunc(names, func(name string) bool {
		return !slices.Contains(r.cfg.Workflows, name)
	})
}

// serves reports whether the runner executes workflowName: it is
// registered and, when Config.Workflows is set, one of them.
func (r *Runner) serves(workflowName string) bool {
	if _, ok := wfcore.Lookup(r.cfg.Registry, workflowName); !ok {
		return false
	}
	return len(r.cfg.Workflows) == 0 || slices.Contains(r.cfg.Workflows, workflowName)
}

// Queues returns the task queues the runner serves (Config.Queues, with
// its default applied).
func (r *Runner) Queues() []string { return slices.Clone(r.cfg.Queues) }
