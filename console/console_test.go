package console_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/schedule"
	"github.com/duraflow/duraflow/testharness"
)

func TestPages(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setup(t, backend)
		b.create(t, "greet", "g1")
		b.create(t, "approve", "a1")
		b.create(t, "flaky", "f1")
		b.h.RunUntilIdle()
		b.h.RequireStatus("greet", "g1", dftype.StatusComplete)
		b.h.RequireStatus("approve", "a1", dftype.StatusWaiting)
		b.h.RequireStatus("flaky", "f1", dftype.StatusComplete)
		_, err := b.sched.Create(b.ctx, schedule.CreateRequest{ID: "nightly", WorkflowName: "greet", Cron: "0 3 * * *"})
		require.NoError(t, err)
		_, err = b.flows.Apply(b.ctx, []byte(doubler("1.0.0")))
		require.NoError(t, err)
		_, err = b.flows.Apply(b.ctx, []byte(doubler("1.1.0")))
		require.NoError(t, err)
		br := b.browser(t)

		// Overview: counts by workflow and status, and what ended in the
		// last hour (greet and flaky).
		ov := br.get("/ui/").requireStatus(t, http.StatusOK)
		require.Contains(t, ov.body, `<p id="ended">2 instances ended`)
		require.Contains(t, ov.body, `<a href="/ui/instances?workflow=greet&status=complete">1</a>`)
		require.Contains(t, ov.body, `<a href="/ui/instances?workflow=approve&status=waiting">1</a>`)
		require.Contains(t, ov.body, "Tasks ready 0")

		// Workflows: Go and flow, a flow's versions and definition.
		wfs := br.get("/ui/workflows").requireStatus(t, http.StatusOK)
		require.Contains(t, wfs.body, `<a href="/ui/workflows/greet">greet</a></td><td>go</td>`)
		require.Contains(t, wfs.body, `<a href="/ui/workflows/doubler">doubler</a></td><td>flow</td><td>1.1.0</td>`)
		fl := br.get("/ui/workflows/doubler?version=1.0.0").requireStatus(t, http.StatusOK)
		require.Contains(t, fl.body, `Definition of version 1.0.0`)
		require.Contains(t, fl.body, `&#34;version&#34;: &#34;1.0.0&#34;`)
		require.Contains(t, fl.body, `?version=1.1.0">1.1.0</a>`)
		latest := br.get("/ui/workflows/doubler").requireStatus(t, http.StatusOK)
		require.Contains(t, latest.body, `Definition of version 1.1.0`)

		// Instances, filtered by status.
		all := br.get("/ui/instances").requireStatus(t, http.StatusOK)
		for _, id := range []string{"g1", "a1", "f1"} {
			require.Contains(t, all.body, fmt.Sprintf(`>%s</a>`, id))
		}
		waiting := br.get("/ui/instances?status=waiting").requireStatus(t, http.StatusOK)
		require.Contains(t, waiting.body, `>a1</a>`)
		require.NotContains(t, waiting.body, `>g1</a>`)
		require.NotContains(t, waiting.body, `>f1</a>`)

		// Id search: one match opens the instance.
		found := br.get("/ui/instances?id=a1")
		require.Equal(t, http.StatusSeeOther, found.status)
		require.Equal(t, "/ui/instances/approve/a1", found.header.Get("Location"))
		none := br.get("/ui/instances?id=zz").requireStatus(t, http.StatusOK)
		require.Contains(t, none.body, "0 instance(s) with id")

		// The instance page: timeline, steps, params, waiting wait bar.
		inst := br.get("/ui/instances/approve/a1").requireStatus(t, http.StatusOK)
		require.Contains(t, inst.body, `<span class="status status-waiting" id="status">waiting</span>`)
		require.Contains(t, inst.body, `<svg class="timeline" id="timeline"`)
		require.Contains(t, inst.body, `class="tl-bar attempt-complete"`)
		require.Contains(t, inst.body, `class="tl-bar wait open"`)
		require.Contains(t, inst.body, "No events received in this run.")
		require.Contains(t, inst.body, `id="action-pause"`)
		require.Contains(t, inst.body, `id="send-event"`)

		// Retries on the timeline: a failed attempt, the delay, the success.
		fk := br.get("/ui/instances/flaky/f1").requireStatus(t, http.StatusOK)
		require.Contains(t, fk.body, `class="tl-bar attempt-failed"`)
		require.Contains(t, fk.body, `class="tl-bar retry"`)
		require.Contains(t, fk.body, `class="tl-bar attempt-complete"`)
		require.Contains(t, fk.body, `attempt 1 failed`)
		require.Contains(t, fk.body, `service unavailable`)
		require.Contains(t, fk.body, `<pre id="output">42</pre>`)

		sch := br.get("/ui/schedules").requireStatus(t, http.StatusOK)
		require.Contains(t, sch.body, `<td>nightly</td>`)
		require.Contains(t, sch.body, `<code>0 3 * * *</code>`)

		wk := br.get("/ui/workers").requireStatus(t, http.StatusOK)
		require.Contains(t, wk.body, `<table id="workers">`)
	})
}

func TestInstancePages(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setup(t, backend)
		for i := range 55 {
			b.create(t, "greet", fmt.Sprintf("p%02d", i))
			b.h.Advance(time.Millisecond)
		}
		br := b.browser(t)
		first := br.get("/ui/instances?workflow=greet").requireStatus(t, http.StatusOK)
		require.Equal(t, 50, strings.Count(first.body, `class="instance-link"`))
		m := regexpNext.FindStringSubmatch(first.body)
		require.NotNil(t, m, "no next page link")
		second := br.get(strings.ReplaceAll(m[1], "&amp;", "&")).requireStatus(t, http.StatusOK)
		require.Equal(t, 5, strings.Count(second.body, `class="instance-link"`))
		require.NotContains(t, second.body, `id="next-page"`)
		seen := map[string]bool{}
		for _, body := range []string{first.body, second.body} {
			for _, mm := range regexpInstance.FindAllStringSubmatch(body, -1) {
				require.False(t, seen[mm[1]], "instance %s on two pages", mm[1])
				seen[mm[1]] = true
			}
		}
		require.Len(t, seen, 55)
	})
}

func TestActions(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setup(t, backend)
		b.create(t, "approve", "a1")
		b.h.RunUntilIdle()
		br := b.browser(t)

		// The confirmation names the action; nothing happens before it.
		conf := br.get("/ui/instances/approve/a1/confirm?action=pause").requireStatus(t, http.StatusOK)
		require.Contains(t, conf.body, `id="confirm"`)
		b.h.RequireStatus("approve", "a1", dftype.StatusWaiting)

		r := br.act("approve", "a1", "pause", nil)
		require.Equal(t, http.StatusSeeOther, r.status, r.body)
		require.Equal(t, "/ui/instances/approve/a1", r.header.Get("Location"))
		b.h.RequireStatus("approve", "a1", dftype.StatusPaused)
		require.Contains(t, br.get("/ui/instances/approve/a1").body, `id="action-resume"`)

		require.Equal(t, http.StatusSeeOther, br.act("approve", "a1", "resume", nil).status)
		b.h.RunUntilIdle()
		b.h.RequireStatus("approve", "a1", dftype.StatusWaiting)

		// An event: confirmed, received, consumed, and the instance ends.
		ev := url.Values{"type": {"approval"}, "payload": {`{"by":"ada"}`}}
		conf = br.get("/ui/instances/approve/a1/confirm?action=event&"+ev.Encode()).requireStatus(t, http.StatusOK)
		require.Contains(t, conf.body, `&#34;by&#34;:&#34;ada&#34;`)
		require.Equal(t, http.StatusSeeOther, br.act("approve", "a1", "event", ev).status)
		b.h.RunUntilIdle()
		var out approval
		b.h.RequireOutput("approve", "a1", &out)
		require.Equal(t, approval{By: "ada"}, out)
		page := br.get("/ui/instances/approve/a1").requireStatus(t, http.StatusOK)
		require.Contains(t, page.body, `id="status">complete</span>`)
		require.Contains(t, page.body, `<td class="event-type">approval</td>`)
		require.Contains(t, page.body, `<td>wait for approval</td>`)
		require.NotContains(t, page.body, `id="action-pause"`)
		require.Contains(t, page.body, `id="action-restart"`)

		require.Equal(t, http.StatusSeeOther, br.act("approve", "a1", "restart", nil).status)
		info := b.h.Status("approve", "a1")
		require.Equal(t, 2, info.RunNumber)
		require.Equal(t, http.StatusSeeOther, br.act("approve", "a1", "terminate", nil).status)
		b.h.RequireStatus("approve", "a1", dftype.StatusTerminated)

		// A refused action shows the engine's refusal: a terminated
		// instance cannot be paused.
		bad := br.act("approve", "a1", "pause", nil).requireStatus(t, http.StatusConflict)
		require.Contains(t, bad.body, `id="error-code"`)
	})
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setup(t, backend)
		b.create(t, "approve", "a1")
		b.h.RunUntilIdle()
		br := b.browser(t)
		for _, tc := range []struct {
			path   string
			status int
			code   string
		}{
			{"/ui/instances/approve/missing", http.StatusNotFound, "INSTANCE_NOT_FOUND"},
			{"/ui/instances/nosuch/a1", http.StatusNotFound, "WORKFLOW_NOT_FOUND"},
			{"/ui/workflows/nosuch", http.StatusNotFound, "WORKFLOW_NOT_FOUND"},
			{"/ui/workflows/greet?version=x", http.StatusBadRequest, "INVALID_REQUEST"},
			{"/ui/instances/approve/" + strings.Repeat("x", 200), http.StatusBadRequest, "INVALID_INSTANCE_ID"},
			{"/ui/instances?cursor=not-a-cursor", http.StatusBadRequest, "INVALID_REQUEST"},
			{"/ui/instances?status=sleepy", http.StatusBadRequest, "INVALID_REQUEST"},
			{"/ui/instances?workflow=nosuch", http.StatusNotFound, "WORKFLOW_NOT_FOUND"},
			{"/ui/instances?status=waiting&status=paused", http.StatusBadRequest, "INVALID_REQUEST"},
			{"/ui/instances?bogus=1", http.StatusBadRequest, "INVALID_REQUEST"},
			{"/ui/instances/approve/a1?run=0", http.StatusBadRequest, "INVALID_REQUEST"},
			{"/ui/instances/approve/a1?run=7", http.StatusBadRequest, "INVALID_REQUEST"},
			{"/ui/instances/approve/a1/confirm?action=explode", http.StatusBadRequest, "INVALID_REQUEST"},
			{"/ui/instances/approve/a1/confirm?action=event", http.StatusBadRequest, "INVALID_REQUEST"},
			{"/ui/instances/approve/a1/confirm?action=event&type=x&payload=%7Bnot", http.StatusBadRequest, "INVALID_REQUEST"},
			{"/ui/instances/approve/missing/confirm?action=pause", http.StatusNotFound, "INSTANCE_NOT_FOUND"},
			{"/ui/schedules?cursor=%00", http.StatusBadRequest, "INVALID_REQUEST"},
			{"/ui/workers?cursor=zzz", http.StatusBadRequest, "INVALID_REQUEST"},
			{"/ui/instances?namespace=Bad%20NS", http.StatusBadRequest, "INVALID_REQUEST"},
			{"/ui/nothing/here", http.StatusNotFound, "NOT_FOUND"},
		} {
			a := br.get(tc.path)
			require.Equal(t, tc.status, a.status, tc.path)
			a.requireStatus(t, tc.status)
			require.Contains(t, a.body, `<code id="error-code">`+tc.code+`</code>`, tc.path)
			require.Equal(t, "text/html; charset=utf-8", a.header.Get("Content-Type"), tc.path)
		}
		b.h.RequireStatus("approve", "a1", dftype.StatusWaiting)
	})
}

func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	b := setup(t, testharness.DefaultBackend())
	br := b.browser(t)
	for _, path := range []string{"/ui/", "/ui/instances/approve/missing", "/ui/static/console.css"} {
		a := br.get(path)
		require.Equal(t, "default-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'", a.header.Get("Content-Security-Policy"), path)
		require.Equal(t, "DENY", a.header.Get("X-Frame-Options"), path)
		require.Equal(t, "nosniff", a.header.Get("X-Content-Type-Options"), path)
	}
	require.NotContains(t, br.get("/ui/").body, "<script", "the console runs no script")
	redirect := br.get("/ui")
	require.Equal(t, http.StatusFound, redirect.status)
	require.Equal(t, "/ui/", redirect.header.Get("Location"))
}

// TestInstanceLifecycle: the instance page lists the instance's newest
// lifecycle events, newest first, with a link to all of them when there
// are more than a page; the lifecycle page lists them all, oldest first,
// a page at a time.
func TestInstanceLifecycle(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setup(t, backend)
		b.create(t, "approve", "a1")
		b.h.RunUntilIdle()
		br := b.browser(t)

		page := br.get("/ui/instances/approve/a1").requireStatus(t, http.StatusOK)
		require.Contains(t, page.body, `<table id="lifecycle">`)
		types := regexpLifecycleType.FindAllStringSubmatch(page.body, -1)
		var got []string
		for _, m := range types {
			got = append(got, m[1])
		}
		require.Equal(t, []string{"instance.waiting", "step.completed", "step.started", "instance.started", "instance.created"}, got,
			"the run so far, newest first")
		require.Contains(t, page.body, `<td>event:approval</td>`, "the wait's detail")
		require.NotContains(t, page.body, `id="lifecycle-all"`, "one page holds them all")

		// 25 restarts and terminations: 55 events, more than a page.
		for range 25 {
			_, err := b.h.Client.Restart(b.ctx, "approve", "a1")
			require.NoError(t, err)
			_, err = b.h.Client.Terminate(b.ctx, "approve", "a1")
			require.NoError(t, err)
		}
		page = br.get("/ui/instances/approve/a1").requireStatus(t, http.StatusOK)
		require.Equal(t, 50, strings.Count(page.body, `class="lifecycle-event"`), "the newest page")
		require.Equal(t, "instance.terminated", regexpLifecycleType.FindStringSubmatch(page.body)[1], "newest first")
		require.Contains(t, page.body, `<a id="lifecycle-all" href="/ui/instances/approve/a1/lifecycle">`)

		first := br.get("/ui/instances/approve/a1/lifecycle").requireStatus(t, http.StatusOK)
		require.Equal(t, 50, strings.Count(first.body, `class="lifecycle-event"`))
		require.Equal(t, "instance.created", regexpLifecycleType.FindStringSubmatch(first.body)[1], "oldest first")
		m := regexpNext.FindStringSubmatch(first.body)
		require.NotNil(t, m, "no next page link")
		second := br.get(strings.ReplaceAll(m[1], "&amp;", "&")).requireStatus(t, http.StatusOK)
		require.Equal(t, 5, strings.Count(second.body, `class="lifecycle-event"`))
		require.NotContains(t, second.body, `id="next-page"`)

		bad := br.get("/ui/instances/approve/missing/lifecycle")
		require.Equal(t, http.StatusNotFound, bad.status)
		require.Contains(t, bad.body, `<code id="error-code">INSTANCE_NOT_FOUND</code>`)
		bad = br.get("/ui/instances/approve/a1/lifecycle?cursor=not-a-cursor")
		require.Equal(t, http.StatusBadRequest, bad.status)
	})
}

// TestInstancePageDetails: the timeline draws a sleep as a sleep bar, and
// the instance page links a child to its parent and the parent to its
// child.
func TestInstancePageDetails(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setup(t, backend)
		b.create(t, "parent", "p1")
		b.h.RunUntilIdle()
		b.h.RequireStatus("parent", "p1", dftype.StatusComplete)
		b.create(t, "nap", "n1")
		b.h.RunDue() // RunUntilIdle would sleep through the hour
		b.h.RequireStatus("nap", "n1", dftype.StatusWaiting)
		br := b.browser(t)

		nap := br.get("/ui/instances/nap/n1").requireStatus(t, http.StatusOK)
		require.Contains(t, nap.body, `class="tl-bar sleep open"`, "a sleep in progress")
		require.Contains(t, nap.body, `<title>nap: sleep · `)
		b.h.Advance(time.Hour)
		b.h.RunDue()
		b.h.RequireStatus("nap", "n1", dftype.StatusComplete)
		nap = br.get("/ui/instances/nap/n1").requireStatus(t, http.StatusOK)
		require.Contains(t, nap.body, `class="tl-bar sleep"`, "a sleep that ended")
		require.Contains(t, nap.body, `(1h0m0s)</title>`, "the bar spans the hour slept")

		parent := br.get("/ui/instances/parent/p1").requireStatus(t, http.StatusOK)
		require.Contains(t, parent.body, `<a class="child-link" href="/ui/instances/greet/p1-child">greet / p1-child</a>`)
		require.Contains(t, parent.body, `<a class="step-child-link" href="/ui/instances/greet/p1-child">greet / p1-child</a>`, "the Invoke step's row")
		child := br.get("/ui/instances/greet/p1-child").requireStatus(t, http.StatusOK)
		require.Contains(t, child.body, `<a id="parent-link" href="/ui/instances/parent/p1">parent / p1</a>`)
	})
}

// TestWorkersPage: the workers page shows a registered worker's row.
func TestWorkersPage(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setup(t, backend)
		br := b.browser(t)
		require.Contains(t, br.get("/ui/workers").requireStatus(t, http.StatusOK).body, "No workers have registered.")
		_, err := b.h.Store.WorkerRegister(b.ctx, &db.WorkerRegisterParams{
			ID: "web-7", Hostname: "host-a", PID: 4242, Queues: []string{"default", "emails"}, Workflows: []string{"greet"},
			MaxConcurrency: 8, Now: b.h.Now(),
		})
		require.NoError(t, err)
		wk := br.get("/ui/workers").requireStatus(t, http.StatusOK)
		require.Contains(t, wk.body, `<tr><td>web-7</td><td>host-a</td><td>4242</td><td>online</td><td>default, emails</td><td>greet</td><td>0 / 8</td>`)
		require.NotContains(t, wk.body, "No workers have registered.")
	})
}
