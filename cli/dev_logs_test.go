package cli_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/cli"
	"github.com/duraflow/duraflow/examples/demo"
	"github.com/duraflow/duraflow/workflow"
)

// registerShaky registers "shaky", whose step "call" fails every attempt
// with an error of name HTTP_REQUEST_FAILED, retried twice 10 ms apart.
func registerShaky(reg *workflow.Registry) error {
	_, err := workflow.Register(reg, "shaky", func(ctx context.Context, _ workflow.Event[any], step workflow.Step) (string, error) {
		return workflow.Do(step, "call", func(context.Context) (string, error) {
			return "", httpRequestFailed{}
		}, workflow.WithRetries(workflow.RetryPolicy{Limit: 2, Delay: 10 * time.Millisecond, Backoff: workflow.BackoffConstant}))
	})
	return err
}

// httpRequestFailed is an error recorded under the name HTTP_REQUEST_FAILED.
type httpRequestFailed struct{}

func (httpRequestFailed) Error() string     { return "connection refused" }
func (httpRequestFailed) ErrorName() string { return "HTTP_REQUEST_FAILED" }

var bannerURL = regexp.MustCompile(` dev server: (http://127\.0\.0\.1:\d+)/api `)

// startDevDefaultLog runs dev at its default log level (no --log-level) and
// returns it once its banner is printed.
func startDevDefaultLog(t *testing.T, args ...string) *server {
	t.Helper()
	s := &server{stdout: newLines(), stderr: newLines(), done: make(chan int, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	all := append([]string{"dev", "--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0"}, args...)
	go func() {
		s.done <- cli.Run(ctx, all, cli.WithWorkflows(demo.Register), cli.WithWorkflows(registerShaky),
			cli.WithOutput(s.stdout, s.stderr), cli.WithLookupEnv(noEnv))
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-s.done:
			require.Equal(t, cli.ExitOK, code, "stderr:\n%s", s.stderr.String())
		case <-time.After(30 * time.Second):
			t.Errorf("dev did not stop within 30 s")
		}
	})
	line := s.stdout.waitLine(t, 30*time.Second, func(l string) bool { return bannerURL.MatchString(l) })
	s.url = bannerURL.FindStringSubmatch(line)[1]
	return s
}

// TestDevLogsFailures: at dev's default log level, each retry, each step
// that fails for good and each instance that errors is logged with its
// workflow, instance, step, attempt and error, and the activity summary
// counts them; in JSON with --log-format json, as text otherwise.
func TestDevLogsFailures(t *testing.T) {
	t.Parallel()
	t.Run("JSON", func(t *testing.T) {
		t.Parallel()
		forEachBackend(t, func(t *testing.T, dbArgs []string) {
			s := startDevDefaultLog(t, append([]string{"--log-format", "json", "--activity-interval", "100ms"}, dbArgs...)...)
			c := s.client(t)
			c.run(cli.ExitInstanceErrored, "instances", "execute", "shaky", "s1")

			find := func(msg string, match func(m map[string]any) bool) map[string]any {
				line := s.stderr.waitLine(t, 10*time.Second, func(l string) bool {
					m, ok := logLine(l, msg)
					return ok && match(m)
				})
				m, _ := logLine(line, msg)
				return m
			}
			for attempt := 1.0; attempt <= 2; attempt++ {
				m := find("step attempt failed; retrying", func(m map[string]any) bool { return m["attempt"] == attempt })
				require.Equal(t, "WARN", m["level"])
				require.Equal(t, "shaky", m["workflow"])
				require.Equal(t, "s1", m["instance"])
				require.Equal(t, "call", m["step"])
				require.EqualValues(t, 3, m["max_attempts"])
				require.Equal(t, "HTTP_REQUEST_FAILED", m["error_name"])
				require.Contains(t, m["error"], "connection refused")
				require.NotEmpty(t, m["next_attempt_at"])
			}
			m := find("step failed", func(map[string]any) bool { return true })
			require.Equal(t, "call", m["step"])
			require.EqualValues(t, 3, m["attempt"])
			m = find("instance errored", func(map[string]any) bool { return true })
			require.Equal(t, "WARN", m["level"])
			require.Equal(t, "shaky", m["workflow"])
			require.Equal(t, "s1", m["instance"])
			require.Contains(t, m["error"], `step "call" failed after 3 attempt(s)`)

			// The summaries add up to what happened.
			// waitLine reads the whole output again each time a line
			// arrives: each summary counts once.
			var created, errored, retries float64
			counted := map[string]bool{}
			s.stderr.waitLine(t, 10*time.Second, func(l string) bool {
				m, ok := logLine(l, "activity")
				if ok && !counted[l] {
					counted[l] = true
					created += m["created"].(float64)
					errored += m["errored"].(float64)
					retries += m["retries"].(float64)
				}
				return created == 1 && errored == 1 && retries == 2
			})
		})
	})
	t.Run("Text", func(t *testing.T) {
		t.Parallel()
		s := startDevDefaultLog(t, "--db", sqliteDB(t), "--activity-interval", "100ms")
		c := s.client(t)
		c.run(cli.ExitInstanceErrored, "instances", "execute", "shaky", "s1")
		line := s.stderr.waitLine(t, 10*time.Second, func(l string) bool {
			return strings.Contains(l, `msg="step attempt failed; retrying"`) && strings.Contains(l, "attempt=2")
		})
		require.Contains(t, line, "level=WARN")
		require.Contains(t, line, "workflow=shaky instance=s1")
		require.Contains(t, line, "step=call attempt=2 max_attempts=3")
		require.Contains(t, line, `error_name=HTTP_REQUEST_FAILED error="connection refused"`)
		line = s.stderr.waitLine(t, 10*time.Second, func(l string) bool { return strings.Contains(l, `msg="instance errored"`) })
		require.Contains(t, line, "workflow=shaky instance=s1")
		s.stderr.waitLine(t, 10*time.Second, func(l string) bool {
			return strings.Contains(l, "msg=activity") && strings.Contains(l, "errored=1")
		})
		// Nothing at info but the summary: dev's default level is warn.
		for _, l := range strings.Split(strings.TrimSpace(s.stderr.String()), "\n") {
			if strings.Contains(l, "level=INFO") {
				require.Contains(t, l, "msg=activity", "only the summary is at info")
			}
		}
	})
}
