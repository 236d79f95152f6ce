package metrics_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/metrics"
	"github.com/duraflow/duraflow/runner"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// countingStats counts the reads of the database gauges.
type countingStats struct {
	db.StatsStore
	reads atomic.Int64
}

func (c *countingStats) StatsGet(ctx context.Context, p *db.StatsGetParams) (*db.Stats, error) {
	c.reads.Add(1)
	return c.StatsStore.StatsGet(ctx, p)
}

// scrape gets /metrics over HTTP and parses the text format.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return mfs
}

// find returns the metric of family name whose labels are labels (name,
// value pairs), or nil.
func find(mfs map[string]*dto.MetricFamily, name string, labels ...string) *dto.Metric {
	mf := mfs[name]
	if mf == nil {
		return nil
	}
next:
	for _, m := range mf.Metric {
		if len(m.Label) != len(labels)/2 {
			continue
		}
		for i := 0; i < len(labels); i += 2 {
			found := false
			for _, l := range m.Label {
				if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		return m
	}
	return nil
}

func value(t *testing.T, mfs map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	m := find(mfs, name, labels...)
	require.NotNil(t, m, "no %s %v", name, labels)
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	t.Fatalf("%s is neither a counter nor a gauge", name)
	return 0
}

func histogram(t *testing.T, mfs map[string]*dto.MetricFamily, name string, labels ...string) (count uint64, sum float64) {
	t.Helper()
	m := find(mfs, name, labels...)
	require.NotNil(t, m, "no %s %v", name, labels)
	require.NotNil(t, m.Histogram, name)
	return m.Histogram.GetSampleCount(), m.Histogram.GetSampleSum()
}

// TestMetricsMoveAsInstancesRun runs instances that complete, error, retry,
// wait for an event and crash-loop on each backend, scrapes /metrics over
// HTTP and checks every metric moved by what ran, with its labels.
func TestMetricsMoveAsInstancesRun(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		store := b.NewStore(t)
		stats := &countingStats{StatsStore: store}
		clk := &lateClock{}
		m, err := metrics.New(&metrics.Config{Store: stats, Clock: clk})
		require.NoError(t, err)
		h := testharness.New(t, testharness.WithStore(store), testharness.WithObserver(m),
			testharness.WithRunnerConfig(func(c *runner.Config) { c.MaxLeaseLosses = 1 }))
		clk.Mock = h.Clock
		reg, err := metrics.NewRegistry(m)
		require.NoError(t, err)
		srv := httptest.NewServer(metrics.Handler(reg))
		t.Cleanup(srv.Close)
		ctx := h.Context()

		workflow.MustRegister(h.Registry, "ok", func(ctx context.Context, _ workflow.Event[any], step workflow.Step) (string, error) {
			return workflow.Do(step, "work", func(context.Context) (string, error) {
				h.Advance(2 * time.Second) // the step takes 2 s on the clock
				return "done", nil
			})
		})
		workflow.MustRegister(h.Registry, "fail", func(ctx context.Context, _ workflow.Event[any], step workflow.Step) (string, error) {
			return workflow.Do(step, "work", func(context.Context) (string, error) {
				return "", workflow.NonRetryable(errors.New("no"))
			})
		})
		var flakyCalls atomic.Int32
		workflow.MustRegister(h.Registry, "flaky", func(ctx context.Context, _ workflow.Event[any], step workflow.Step) (string, error) {
			return workflow.Do(step, "work", func(context.Context) (string, error) {
				if flakyCalls.Add(1) == 1 {
					return "", errors.New("once")
				}
				return "done", nil
			}, workflow.WithRetries(workflow.RetryPolicy{Limit: 1, Delay: time.Second}))
		})
		workflow.MustRegister(h.Registry, "waiter", func(ctx context.Context, _ workflow.Event[any], step workflow.Step) (string, error) {
			ev, err := step.WaitForEvent("approval", workflow.WaitOptions{Type: "approve"})
			if err != nil {
				return "", err
			}
			return string(ev.Payload), nil
		})
		workflow.MustRegister(h.Registry, "crash", func(ctx context.Context, _ workflow.Event[any], step workflow.Step) (string, error) {
			return workflow.Do(step, "boom", func(context.Context) (string, error) { return "never", nil })
		})
		create := func(name, id string) {
			t.Helper()
			_, err := h.Client.Create(ctx, name, dftype.CreateRequest{ID: id})
			require.NoError(t, err)
			h.RunUntilIdle()
		}
		create("ok", "a1")
		create("ok", "a2")
		create("fail", "f1")
		create("flaky", "r1")
		create("waiter", "w1")
		h.RequireStatus("waiter", "w1", dftype.StatusWaiting)
		// c1's runner died holding its task; with MaxLeaseLosses 1 the
		// next claim ends the crash loop.
		_, err = h.Client.Create(ctx, "crash", dftype.CreateRequest{ID: "c1"})
		require.NoError(t, err)
		now := h.Now().UTC().Truncate(time.Microsecond)
		claims, err := store.TaskClaim(ctx, &db.TaskClaimParams{Owner: "dead", WorkflowNames: []string{"crash"}, Max: 1, Now: now, LockedUntil: now.Add(30 * time.Second)})
		require.NoError(t, err)
		require.Len(t, claims, 1)
		h.Advance(31 * time.Second)
		h.RunUntilIdle()
		h.RequireStatus("crash", "c1", dftype.StatusErrored)

		mfs := scrape(t, srv.URL)
		for _, c := range []struct {
			name, workflow string
			want           float64
		}{
			{"duraflow_instances_created_total", "ok", 2},
			{"duraflow_instances_created_total", "fail", 1},
			{"duraflow_instances_created_total", "flaky", 1},
			{"duraflow_instances_created_total", "waiter", 1},
			{"duraflow_instances_created_total", "crash", 1},
			{"duraflow_instances_completed_total", "ok", 2},
			{"duraflow_instances_completed_total", "flaky", 1},
			{"duraflow_instances_errored_total", "fail", 1},
			{"duraflow_instances_errored_total", "crash", 1},
			{"duraflow_crash_loops_total", "crash", 1},
		} {
			require.Equal(t, c.want, value(t, mfs, c.name, "workflow", c.workflow), "%s{workflow=%q}", c.name, c.workflow)
		}
		require.Nil(t, find(mfs, "duraflow_instances_completed_total", "workflow", "fail"), "fail never completed")
		require.Nil(t, find(mfs, "duraflow_crash_loops_total", "workflow", "fail"), "an error is no crash loop")
		count, sum := histogram(t, mfs, "duraflow_step_duration_seconds", "workflow", "ok")
		require.Equal(t, uint64(2), count)
		require.InDelta(t, 4.0, sum, 1e-6, "two attempts of 2 s")
		count, _ = histogram(t, mfs, "duraflow_step_duration_seconds", "workflow", "flaky")
		require.Equal(t, uint64(2), count, "the failed attempt and the retry")
		count, _ = histogram(t, mfs, "duraflow_step_duration_seconds", "workflow", "fail")
		require.Equal(t, uint64(1), count)
		require.Nil(t, find(mfs, "duraflow_step_duration_seconds", "workflow", "crash"), "the crash loop ran no attempt")
		count, _ = histogram(t, mfs, "duraflow_claim_duration_seconds")
		require.Positive(t, count)
		require.Positive(t, value(t, mfs, "duraflow_tasks_claimed_total"))

		for _, c := range []struct {
			workflow string
			status   dftype.InstanceStatus
			want     float64
		}{
			{"ok", dftype.StatusComplete, 2},
			{"ok", dftype.StatusQueued, 0},
			{"fail", dftype.StatusErrored, 1},
			{"flaky", dftype.StatusComplete, 1},
			{"waiter", dftype.StatusWaiting, 1},
			{"crash", dftype.StatusErrored, 1},
		} {
			require.Equal(t, c.want, value(t, mfs, "duraflow_instances", "workflow", c.workflow, "status", string(c.status)), "%s %s", c.workflow, c.status)
		}
		require.Zero(t, value(t, mfs, "duraflow_tasks_ready"), "w1 waits a day for its event")
		require.Zero(t, value(t, mfs, "duraflow_tasks_leased"))
		require.Zero(t, value(t, mfs, "duraflow_hook_outbox_backlog"))
		require.Zero(t, value(t, mfs, "duraflow_schedule_lag_seconds"))
		require.Zero(t, value(t, mfs, "duraflow_workers_online"), "the harness's runner is not started")
		require.Nil(t, find(mfs, "duraflow_wake_latency_seconds", "workflow", "waiter"), "nothing woke yet")

		// The event wakes w1 3 s after it was sent.
		h.SendEvent("waiter", "w1", "approve", "yes")
		h.Advance(3 * time.Second)
		h.RunUntilIdle()
		h.RequireStatus("waiter", "w1", dftype.StatusComplete)
		// An instance queued with a hook entry (not through the client), a
		// schedule due 30 s ago, and a worker online.
		_, err = store.InstanceCreate(ctx, &db.InstanceCreateParams{WorkflowName: "ok", ID: "raw", Now: new(h.Now().UTC().Truncate(time.Microsecond)), RecordHooks: true})
		require.NoError(t, err)
		_, err = store.ScheduleCreate(ctx, &db.ScheduleCreateParams{
			ID: "s", WorkflowName: "ok", Cron: "* * * * *", TimeZone: "UTC", Params: json.RawMessage(`{}`), Enabled: true, MaxCatchup: 1,
			NextFireAt: new(h.Now().Add(-30 * time.Second).UTC().Truncate(time.Microsecond)), Now: new(h.Now().UTC().Truncate(time.Microsecond)),
		})
		require.NoError(t, err)
		_, err = store.WorkerRegister(ctx, &db.WorkerRegisterParams{ID: "w-1", Hostname: "h", PID: 1, MaxConcurrency: 1, Now: h.Now().UTC().Truncate(time.Microsecond)})
		require.NoError(t, err)

		h.Advance(metrics.DefaultCacheTTL) // the cached read is stale
		reads := stats.reads.Load()
		mfs = scrape(t, srv.URL)
		require.Equal(t, reads+1, stats.reads.Load())
		count, sum = histogram(t, mfs, "duraflow_wake_latency_seconds", "workflow", "waiter")
		require.Equal(t, uint64(1), count)
		require.InDelta(t, 3.0, sum, 1e-6)
		require.Equal(t, 1.0, value(t, mfs, "duraflow_instances_completed_total", "workflow", "waiter"))
		require.Equal(t, 2.0, value(t, mfs, "duraflow_instances_created_total", "workflow", "ok"), "a create outside the client is not counted")
		require.Equal(t, 1.0, value(t, mfs, "duraflow_instances", "workflow", "ok", "status", "queued"))
		require.Equal(t, 1.0, value(t, mfs, "duraflow_instances", "workflow", "waiter", "status", "complete"))
		require.Equal(t, 0.0, value(t, mfs, "duraflow_instances", "workflow", "waiter", "status", "waiting"))
		require.Equal(t, 1.0, value(t, mfs, "duraflow_tasks_ready"))
		require.Equal(t, 1.0, value(t, mfs, "duraflow_hook_outbox_backlog"))
		require.InDelta(t, 30.0+metrics.DefaultCacheTTL.Seconds(), value(t, mfs, "duraflow_schedule_lag_seconds"), 1e-6)
		require.Equal(t, 1.0, value(t, mfs, "duraflow_workers_online"))

		// Within the TTL a storm of scrapes costs no read.
		for range 5 {
			scrape(t, srv.URL)
		}
		require.Equal(t, reads+1, stats.reads.Load())
	})
}

// lateClock is the harness's mock clock, set once the harness exists.
type lateClock struct{ *clock.Mock }
