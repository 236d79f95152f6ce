package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

func TestTickOffByDefault(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	b.call(t, "POST", "/api/_runner/tick", "").requireError(t, http.StatusNotFound, apiclient.CodeNotFound)
	_, err := b.api.Tick(b.ctx, apiclient.TickRequest{})
	var apiErr *apiclient.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, apiclient.CodeNotFound, apiErr.Code)
}

func TestTick(t *testing.T) {
	t.Parallel()
	b := setup(t, "", withTick)
	for i := range 3 {
		_, err := b.api.Create(b.ctx, "greet", dftype.CreateRequest{ID: fmt.Sprintf("t-%d", i)})
		require.NoError(t, err)
	}

	r := b.call(t, "POST", "/api/_runner/tick", `{"maxInstances":2}`)
	r.requireOK(t, http.StatusOK, nil)
	require.JSONEq(t, `{"processed":2,"maxInstances":2,"maxSteps":0}`, string(r.body))
	res, err := b.api.Tick(b.ctx, apiclient.TickRequest{})
	require.NoError(t, err)
	require.Equal(t, 1, res.Processed)
	b.call(t, "POST", "/api/_runner/tick", "").requireOK(t, http.StatusOK, res)
	require.Equal(t, 0, res.Processed)
	for i := range 3 {
		b.h.RequireStatus("greet", fmt.Sprintf("t-%d", i), dftype.StatusComplete)
	}

	// maxSteps bounds the step attempts of one tick; later ticks go on.
	_, err = b.api.Create(b.ctx, "steps", dftype.CreateRequest{ID: "budget"})
	require.NoError(t, err)
	_, err = b.api.Tick(b.ctx, apiclient.TickRequest{MaxSteps: 2})
	require.NoError(t, err)
	require.NotEqual(t, dftype.StatusComplete, b.h.Status("steps", "budget").Status)
	require.Less(t, int(b.steps.total.Load()), numSteps)
	for range numSteps {
		_, err = b.api.Tick(b.ctx, apiclient.TickRequest{MaxSteps: 2})
		require.NoError(t, err)
	}
	b.h.RequireStatus("steps", "budget", dftype.StatusComplete)
	for k, n := range b.steps.snapshot() {
		require.Equal(t, 1, n, k)
	}

	for _, body := range []string{`{"maxInstances":-1}`, `{"maxInstances":1001}`, `{"maxSteps":-5}`, `{"maxSteps":"10"}`, `{"max":1}`, `[]`} {
		b.call(t, "POST", "/api/_runner/tick", body).requireError(t, http.StatusBadRequest, apiclient.CodeInvalidRequest)
	}
	b.call(t, "GET", "/api/_runner/tick", "").requireError(t, http.StatusMethodNotAllowed, apiclient.CodeMethodNotAllowed)
}

func TestTickFuncResults(t *testing.T) {
	t.Parallel()
	var mode atomic.Value
	mode.Store("nil")
	b := setup(t, "", func(c *httpapi.Config, _ *testharness.Harness) {
		c.Tick = func(ctx context.Context, maxInstances, maxSteps int) (int, error) {
			switch mode.Load() {
			case "invalid":
				return 0, fmt.Errorf("%w: not today", workflow.ErrInvalidRequest)
			case "broken":
				return 0, errors.New("connection to 10.0.0.9 refused")
			case "echo":
				return maxInstances + maxSteps, nil
			}
			return 0, nil
		}
	})
	require.JSONEq(t, `{"processed":0,"maxInstances":0,"maxSteps":0}`, string(b.call(t, "POST", "/api/_runner/tick", "").body))

	mode.Store("echo")
	res, err := b.api.Tick(b.ctx, apiclient.TickRequest{MaxInstances: 7, MaxSteps: 9})
	require.NoError(t, err)
	require.Equal(t, &apiclient.TickResult{Processed: 16, MaxInstances: 7, MaxSteps: 9}, res)

	mode.Store("invalid")
	b.call(t, "POST", "/api/_runner/tick", "").requireError(t, http.StatusBadRequest, apiclient.CodeInvalidRequest, "not today")
	mode.Store("broken")
	msg := b.call(t, "POST", "/api/_runner/tick", "").requireError(t, http.StatusInternalServerError, apiclient.CodeInternal)
	require.NotContains(t, msg, "10.0.0.9")
}

// TestTickBusy checks that a tick arriving while every slot is taken is
// answered at once with 429.
func TestTickBusy(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{})
	release := make(chan struct{})
	b := setup(t, "", func(c *httpapi.Config, _ *testharness.Harness) {
		c.Tick = func(ctx context.Context, maxInstances, maxSteps int) (int, error) {
			entered <- struct{}{}
			<-release
			return 1, nil
		}
	})

	done := make(chan error, 1)
	go func() {
		_, err := b.api.Tick(b.ctx, apiclient.TickRequest{})
		done <- err
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the first tick never started")
	}

	r := b.call(t, "POST", "/api/_runner/tick", "")
	r.requireError(t, http.StatusTooManyRequests, apiclient.CodeTickBusy)
	require.Equal(t, "1", r.header.Get("Retry-After"))

	close(release)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the first tick never ended")
	}
	go func() { <-entered }()
	b.call(t, "POST", "/api/_runner/tick", "").requireOK(t, http.StatusOK, nil)
}

// TestTickConcurrent has eight callers tick at once over many instances, with
// the default single tick slot (extra callers get 429) and with eight slots
// (eight ticks claim and run at the same time). Every instance completes and
// no step runs twice.
func TestTickConcurrent(t *testing.T) {
	t.Parallel()
	for _, slots := range []int{1, 8} {
		t.Run(fmt.Sprintf("slots=%d", slots), func(t *testing.T) {
			t.Parallel()
			const instances, callers = 40, 8
			b := setup(t, "", withTick, func(c *httpapi.Config, _ *testharness.Harness) {
				c.MaxConcurrentTicks = slots
			})
			reqs := make([]dftype.CreateRequest, instances)
			for i := range reqs {
				reqs[i].ID = fmt.Sprintf("c-%02d", i)
			}
			_, err := b.api.CreateBatch(b.ctx, "steps", reqs)
			require.NoError(t, err)

			var busy, ran atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, callers)
			for range callers {
				wg.Go(func() {
					for range 20000 {
						res, err := b.api.Tick(b.ctx, apiclient.TickRequest{MaxInstances: 3, MaxSteps: 4})
						if errors.Is(err, errTickBusy) {
							busy.Add(1)
							runtime.Gosched()
							continue
						}
						if err != nil {
							errs <- err
							return
						}
						ran.Add(int64(res.Processed))
						if res.Processed == 0 && b.steps.total.Load() >= instances*numSteps {
							return
						}
					}
					errs <- errors.New("a caller never saw the work end")
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}

			counts := b.steps.snapshot()
			require.Len(t, counts, instances*numSteps)
			for k, n := range counts {
				require.Equal(t, 1, n, "step %s ran %d times", k, n)
			}
			res, err := b.api.List(b.ctx, client.ListParams{WorkflowName: "steps", Statuses: []dftype.InstanceStatus{dftype.StatusComplete}, PageSize: 100})
			require.NoError(t, err)
			require.Len(t, res.Instances, instances)
			require.GreaterOrEqual(t, ran.Load(), int64(instances))
			if slots == callers {
				require.Zero(t, busy.Load(), "eight slots never turn a caller away")
			}
			t.Logf("slots=%d: %d task runs, %d busy answers", slots, ran.Load(), busy.Load())
		})
	}
}

// errTickBusy matches the 429 answer of a busy tick.
var errTickBusy = &apiclient.APIError{Code: apiclient.CodeTickBusy}
