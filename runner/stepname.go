package runner

import (
	"fmt"

	"github.com/duraflow/duraflow/workflow"
)

// useName records that workflow code reached step key in this run pass,
// and refuses a key reached before in the same pass: a loop that gives
// every iteration the same name would otherwise get the first iteration's
// recorded result back each time, silently. Every pass re-executes the code
// from the top on a fresh execution, so a replay reaches each name once
// again and is never refused. A key running right now is another branch's
// (parallel code), which the step's own check answers with
// workflow.ErrDuplicateStep as before.
func (e *execution) useName(key string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.active[key] {
		return nil
	}
	if e.used == nil {
		e.used = map[string]bool{}
	}
	if e.used[key] {
		return &workflow.NonRetryableError{
			Name: workflow.ErrorNameStepNameReused,
			Err: fmt.Errorf("%w: step %q was reached a second time in this run, and a step name returns its first result; "+
				"give each call a name of its own, such as fmt.Sprintf(%q, i)", workflow.ErrStepNameReused, key, key+"-%d"),
		}
	}
	e.used[key] = true
	return nil
}
