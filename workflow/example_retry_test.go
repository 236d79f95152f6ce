package workflow_test

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/duraflow/duraflow/workflow"
)

// ExampleRetryPolicy_NextDelay shows the default jitter (±20% of each wait,
// drawn once and recorded) and MaxDelay capping the exponential growth.
func ExampleRetryPolicy_NextDelay() {
	p := workflow.RetryPolicy{Limit: 10, Delay: 10 * time.Second, Backoff: workflow.BackoffExponential, MaxDelay: time.Minute}
	for _, retry := range []int{1, 2, 3, 4} {
		fmt.Println(retry, p.NextDelay(retry, 0), p.NextDelay(retry, 1))
	}
	p.NoJitter = true
	fmt.Println("no jitter:", p.NextDelay(1, 0), p.NextDelay(1, 1))
	// Output:
	// 1 8s 12s
	// 2 16s 24s
	// 3 32s 48s
	// 4 48s 1m0s
	// no jitter: 10s 10s
}

// ExampleRetryPolicy_json shows a policy as flows and the HTTP API write it:
// an unlimited limit, a maximum delay, jitter off and error names that fail
// at once.
func ExampleRetryPolicy_json() {
	var p workflow.RetryPolicy
	_ = json.Unmarshal([]byte(`{"limit": "unlimited", "delay": "1 second", "maxDelay": "5 minutes",
		"jitter": false, "nonRetryable": ["CardDeclined"]}`), &p)
	fmt.Println(p.Unlimited(), p.MaxAttempts(), p.MaxDelay, p.NoJitter, p.IsNonRetryable("CardDeclined"))
	b, _ := json.Marshal(p)
	fmt.Println(string(b))
	// Output:
	// true -1 5m0s true true
	// {"limit":"unlimited","delay":"1 second","backoff":"exponential","maxDelay":"5 minutes","jitter":false,"nonRetryable":["CardDeclined"]}
}
