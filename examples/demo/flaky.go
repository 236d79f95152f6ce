package demo

import (
	"context"
	"fmt"
	"time"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/workflow"
)

// FlakyRetries is the retry policy of flaky's step: 5 retries, 1 second
// apart.
var FlakyRetries = workflow.RetryPolicy{Limit: 5, Delay: time.Second, Backoff: workflow.BackoffConstant}

// FlakyParams is the input of flaky.
type FlakyParams struct {
	// Failures is how many attempts of the step fail before one succeeds.
	Failures int `json:"failures"`
	// Work is how long each attempt works before it fails or succeeds
	// ("500 milliseconds"); it makes a step easy to interrupt mid-attempt.
	//
	// Defaults to 0.
	Work dftype.Duration `json:"work,omitempty"`
}

// FlakyOutput is the output of flaky.
type FlakyOutput struct {
	// Attempts is the attempt that succeeded: Failures + 1.
	Attempts int `json:"attempts"`
}

// Flaky runs a step "call" whose first Failures attempts fail, retried
// FlakyRetries: {"failures":2} → {"attempts":3}. With more failures than
// retries (6 or more) the step fails for good and the instance errors.
func Flaky(_ context.Context, event workflow.Event[FlakyParams], step workflow.Step) (FlakyOutput, error) {
	p := event.Payload
	attempt, err := workflow.Do(step, "call", func(ctx context.Context) (int, error) {
		if w := p.Work.Std(); w > 0 {
			t := time.NewTimer(w)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-t.C:
			}
		}
		n := workflow.Attempt(ctx)
		if n <= p.Failures {
			return 0, fmt.Errorf("attempt %d fails on purpose (failures: %d)", n, p.Failures)
		}
		return n, nil
	}, workflow.WithRetries(FlakyRetries))
	if err != nil {
		return FlakyOutput{}, err
	}
	return FlakyOutput{Attempts: attempt}, nil
}
