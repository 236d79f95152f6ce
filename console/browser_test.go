package console_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/testharness"
)

// updateScreenshots makes TestBrowser write the screenshots of the main
// pages to docs/console:
//
//	go test ./console -run TestBrowser -update-screenshots
var updateScreenshots = flag.Bool("update-screenshots", false, "write the console's screenshots to docs/console")

// chromium returns the path of a Chromium (or Chrome) on PATH. Without one
// the test skips, except under CI (CI=true), where it fails: CI installs
// Chromium to run it.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no Chromium on PATH (chromium, chromium-browser, google-chrome): CI must install it (apt-get install -y chromium)")
	}
	t.Skip("skipping the browser test: no Chromium on PATH (chromium, chromium-browser, google-chrome); install it (apt-get install -y chromium) to run it")
	return ""
}

// TestBrowser drives the console in headless Chromium: log in, find an
// instance by its id, open its timeline, send it an event through the
// confirmation and see it complete; then, logged in with a read-only
// token, see no actions and have an action refused.
func TestBrowser(t *testing.T) {
	t.Parallel()
	exe := chromium(t)
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setup(t, backend, testTokens(t)...)
		seedDemo(t, b)

		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 900))
		allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		defer cancelAlloc()
		ctx, cancelCtx := chromedp.NewContext(allocCtx)
		defer cancelCtx()
		ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		defer cancel()

		shots := map[string][]byte{}
		shot := func(name string) {
			t.Helper()
			buf, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
			require.NoError(t, err)
			shots[name] = buf
		}
		do := func(steps ...chromedp.Action[chromedp.Void]) {
			t.Helper()
			require.NoError(t, chromedp.Do(ctx, steps...))
		}
		text := func(id string) string {
			t.Helper()
			s, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID(id)))
			require.NoError(t, err)
			return s
		}
		eval := func(expr string, opts ...chromedp.EvaluateOption) any {
			t.Helper()
			v, err := chromedp.Run(ctx, chromedp.Evaluate[any](expr, opts...))
			require.NoError(t, err)
			return v
		}
		base := b.srv.URL

		// Log in: the console sends to its login form first.
		do(chromedp.EmulateViewport(1280, 900), chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.ID("token")))
		shot("login")
		do(chromedp.SendKeys(chromedp.ID("token"), adminSecret), chromedp.Click(chromedp.ID("login")), chromedp.WaitVisible(chromedp.ID("counts")))
		shot("overview")

		// Find the instance by its id, and open its timeline.
		do(chromedp.Navigate(base+"/ui/instances"), chromedp.WaitVisible(chromedp.ID("instances")))
		shot("instances")
		do(chromedp.SendKeys(chromedp.ID("filter-id"), "order-1042"), chromedp.Click(chromedp.ID("filter")), chromedp.WaitVisible(chromedp.ID("timeline")))
		location, err := chromedp.Run(ctx, chromedp.Location())
		require.NoError(t, err)
		require.Equal(t, base+"/ui/instances/approve/order-1042", location)
		require.Equal(t, "waiting", text("status"))
		require.EqualValues(t, 2, eval(`document.querySelectorAll('#timeline rect.tl-bar').length`), "the prepare attempt and the wait")
		shot("instance-waiting")

		// Send an event: the confirmation shows it, and nothing is sent
		// before it is confirmed.
		do(chromedp.SendKeys(chromedp.ID("event-type"), "approval"),
			chromedp.SetValue(chromedp.ID("event-payload"), `{"by":"ada"}`),
			chromedp.Click(chromedp.ID("send-event")),
			chromedp.WaitVisible(chromedp.ID("confirm")))
		shot("confirm")
		require.Empty(t, b.h.History("approve", "order-1042").Events)
		do(chromedp.Click(chromedp.ID("confirm")), chromedp.WaitVisible(chromedp.ID("timeline")))
		b.h.RunUntilIdle() // the runner takes the event
		do(chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("events")))
		require.Equal(t, "complete", text("status"))
		events := text("events")
		require.Contains(t, events, "approval")
		require.Contains(t, events, `"by": "ada"`)

		// The timeline of a retried step, and a flow's versions, for the
		// screenshots.
		do(chromedp.Navigate(base+"/ui/instances/flaky/charge-7"), chromedp.WaitVisible(chromedp.ID("timeline")))
		require.EqualValues(t, 1, eval(`document.querySelectorAll('#timeline rect.retry').length`))
		shot("instance")
		do(chromedp.Navigate(base+"/ui/workflows/doubler"), chromedp.WaitVisible(chromedp.ID("definition")))
		shot("workflow")

		// A read-only token: no actions shown, and an action refused.
		do(chromedp.Click(chromedp.ID("logout")), chromedp.WaitVisible(chromedp.ID("token")),
			chromedp.SendKeys(chromedp.ID("token"), readSecret), chromedp.Click(chromedp.ID("login")),
			chromedp.WaitVisible(chromedp.ID("ended")),
			chromedp.Navigate(base+"/ui/instances/approve/order-1043"), chromedp.WaitVisible(chromedp.ID("timeline")))
		require.Equal(t, true, eval(`document.querySelector('#actions') === null && document.querySelector('#send-event') === null`), "a read-only session sees no actions")
		// The form a page with actions would post, posted anyway.
		status := eval(`fetch('/ui/instances/approve/order-1043/action', {method: 'POST', body: new URLSearchParams({
			csrf: document.querySelector('input[name=csrf]').value, action: 'terminate'})}).then(r => r.status)`, chromedp.EvalAwaitPromise)
		require.EqualValues(t, 403, status)
		do(chromedp.Navigate(base+"/ui/instances/approve/order-1043/confirm?action=terminate"), chromedp.WaitVisible(chromedp.ID("error-code")))
		require.Equal(t, "FORBIDDEN", text("error-code"))
		b.h.RequireStatus("approve", "order-1043", dftype.StatusWaiting)

		if *updateScreenshots && backend.Name == testharness.SQLite.Name {
			dir := filepath.Join("..", "docs", "console")
			require.NoError(t, os.MkdirAll(dir, 0o755))
			for name, buf := range shots {
				require.NotEmpty(t, buf, name)
				require.NoError(t, os.WriteFile(filepath.Join(dir, name+".png"), buf, 0o644))
			}
		}
	})
}

// seedDemo fills the console with instances over the last hour: greetings
// that completed, an order that waits for approval, a charge that failed
// once and was retried, a terminated one, a flow with two versions.
func seedDemo(t *testing.T, b *testBundle) {
	t.Helper()
	_, err := b.flows.Apply(b.ctx, []byte(doubler("1.0.0")))
	require.NoError(t, err)
	_, err = b.flows.Apply(b.ctx, []byte(doubler("1.1.0")))
	require.NoError(t, err)
	for i := range 9 {
		b.create(t, "greet", fmt.Sprintf("greet-%d", i))
		if i%3 == 0 {
			b.create(t, "flaky", fmt.Sprintf("charge-%d", i))
		}
		b.h.RunUntilIdle()
		b.h.Advance(time.Duration(3+i%4) * time.Minute)
	}
	b.create(t, "flaky", "charge-7")
	b.create(t, "approve", "order-1042")
	b.create(t, "approve", "order-1043")
	b.create(t, "approve", "order-1044")
	b.h.RunUntilIdle()
	_, err = b.h.Client.Terminate(b.ctx, "approve", "order-1044")
	require.NoError(t, err)
	b.h.RequireStatus("flaky", "charge-7", dftype.StatusComplete)
	require.True(t, strings.HasPrefix(b.srv.URL, "http://127.0.0.1:"))
}
