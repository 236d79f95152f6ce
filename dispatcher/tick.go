package dispatcher

import (
	"context"
	"fmt"

	"github.com/duraflow/duraflow/runner"
	"github.com/duraflow/duraflow/workflow"
)

// MaxTickInstances bounds the instances one tick may run.
const MaxTickInstances = 1000

// TickFunc returns the function behind the HTTP tick route: it runs the due
// work of r once, within the limits the caller gives, and returns how many
// claimed tasks it ran (to completion, suspension or failure). It lets a cron job or a platform scheduler drive a runner that
// has no loop of its own. Concurrent ticks are safe: every write the runner
// makes is fenced by its task's lease, so two ticks never both commit a step.
func TickFunc(r *runner.Runner) func(ctx context.Context, maxInstances, maxSteps int) (int, error) {
	return func(ctx context.Context, maxInstances, maxSteps int) (int, error) {
		if maxInstances < 0 || maxInstances > MaxTickInstances {
			return 0, fmt.Errorf("%w: maxInstances must be between 1 and %d", workflow.ErrInvalidRequest, MaxTickInstances)
		}
		if maxSteps < 0 {
			return 0, fmt.Errorf("%w: maxSteps must not be negative", workflow.ErrInvalidRequest)
		}
		n, err := r.RunDueLimited(ctx, maxInstances, maxSteps)
		if err != nil {
			return 0, fmt.Errorf("ticking the runner: %w", err)
		}
		return n, nil
	}
}
