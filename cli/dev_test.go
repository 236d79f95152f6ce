package cli_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/cli"
)

func TestDevBanner(t *testing.T) {
	t.Parallel()
	s := startServer(t, []string{"dev", "--db", sqliteDB(t)})
	banner := s.stdout.waitLine(t, 10*time.Second, func(l string) bool { return strings.HasPrefix(l, "Press Ctrl-C") })
	require.NotEmpty(t, banner)
	out := s.stdout.String()
	require.Contains(t, out, "Duraflow dev server: "+s.url+"/api")
	require.Contains(t, out, "Workflows: approval, child, flaky, hello, parent, sleeper")
	require.Contains(t, out, "curl -s -X POST "+s.url+`/api/workflows/hello/instances -H 'Content-Type: application/json' -d '{"params":{"name":"Ada"}}'`)
	require.Contains(t, out, `duraflow instances create hello --params '{"name":"Ada"}' --server `+s.url)
}

func TestClientCommands(t *testing.T) {
	t.Parallel()
	s := startServer(t, []string{"dev", "--db", sqliteDB(t)})
	c := s.client(t)

	t.Run("WorkflowsList", func(t *testing.T) {
		r := c.run(cli.ExitOK, "workflows", "list")
		require.Regexp(t, `^NAME\s+KIND\s+VERSION\napproval\s+go\s+-\nchild\s+go\s+-\nflaky\s+go\s+-\nhello\s+go\s+-\nparent\s+go\s+-\nsleeper\s+go\s+-\n$`, r.stdout)
		var list struct{ Workflows []struct{ Name string } }
		c.json(&list, "workflows", "list")
		require.Len(t, list.Workflows, 6)
	})

	t.Run("CreateShowsTheCompletedInstance", func(t *testing.T) {
		r := c.run(cli.ExitOK, "instances", "create", "hello", "ada", "--params", `{"name":"Ada"}`)
		require.Regexp(t, `(?m)^Status:\s+complete$`, r.stdout)
		require.Regexp(t, `(?m)^Output:\s+\{"greeting":"Hello, Ada!"\}$`, r.stdout)

		var info struct {
			ID      string
			Details struct {
				Status string
				Output json.RawMessage
			}
		}
		c.json(&info, "instances", "get", "hello", "ada")
		require.Equal(t, "complete", info.Details.Status)
		require.JSONEq(t, `{"greeting":"Hello, Ada!"}`, string(info.Details.Output))

		// A random id when none is given; --wait 0 shows it as created:
		// running when it started on dev's runner at once (eager start),
		// queued when the runner had no free slot.
		c.json(&info, "instances", "create", "hello", "--wait", "0")
		require.Len(t, info.ID, 32)
		require.Contains(t, []string{"queued", "running"}, info.Details.Status)
	})

	t.Run("ApprovalByEvent", func(t *testing.T) {
		r := c.run(cli.ExitOK, "instances", "create", "approval", "a1", "--params", `{"amount":120,"timeout":"1 hour"}`)
		require.Regexp(t, `(?m)^Status:\s+waiting$`, r.stdout)
		r = c.run(cli.ExitOK, "events", "send", "approval", "a1", "approval", "--payload", `{"approved":true}`)
		require.Regexp(t, `^sent approval to approval/a1 \(now (waiting|queued|running|complete)\): delivered to (step "wait for approval"|a waiting step)\n$`, r.stdout)
		info := c.waitStatus("approval", "a1", "complete")
		out, _ := json.Marshal(info["details"].(map[string]any)["output"])
		require.JSONEq(t, `{"approved":true,"amount":120}`, string(out))

		r = c.run(cli.ExitOK, "instances", "history", "approval", "a1")
		require.Contains(t, r.stdout, `approval/a1 run 1: complete {"approved":true,"amount":120}`)
		require.Regexp(t, `(?m)^prepare\s+do\s+complete\s+1/6\s+\S+\s+120$`, r.stdout)
		require.Regexp(t, `(?m)^wait for approval\s+waitForEvent\s+complete\s+-\s+\S+\s+\{"approved":true\}$`, r.stdout)
		require.Regexp(t, `(?m)^approval\s+\S+\s+\S+\s+wait for approval\s+\{"approved":true\}$`, r.stdout)

		var hist struct {
			Steps  []struct{ Name, Status string }
			Events []struct{ Type, ConsumedBy string }
		}
		c.json(&hist, "instances", "history", "approval", "a1")
		require.Len(t, hist.Steps, 2)
		require.Equal(t, "wait for approval", hist.Events[0].ConsumedBy)

		// One page at a time.
		r = c.run(cli.ExitOK, "instances", "history", "approval", "a1", "--page-size", "1")
		require.Contains(t, r.stdout, "prepare")
		require.NotContains(t, r.stdout, "wait for approval  waitForEvent")
		require.Contains(t, r.stderr, "--cursor ")
	})

	t.Run("LifeCycle", func(t *testing.T) {
		r := c.run(cli.ExitOK, "instances", "create", "sleeper", "s1", "--params", `{"duration":"1 hour"}`)
		require.Regexp(t, `(?m)^Status:\s+waiting$`, r.stdout)
		require.Equal(t, "sleeper/s1: paused (run 1)\n", c.run(cli.ExitOK, "instances", "pause", "sleeper", "s1").stdout)
		r = c.run(cli.ExitOK, "instances", "resume", "sleeper", "s1")
		require.Regexp(t, `^sleeper/s1: (queued|running|waiting) \(run 1\)\n$`, r.stdout)
		require.Equal(t, "sleeper/s1: terminated (run 1)\n", c.run(cli.ExitOK, "instances", "terminate", "sleeper", "s1").stdout)
		var info struct {
			ID        string
			Details   struct{ Status string }
			RunNumber int
		}
		c.json(&info, "instances", "restart", "sleeper", "s1")
		require.Equal(t, 2, info.RunNumber)
		require.Equal(t, "s1", info.ID)
		require.NotEmpty(t, info.Details.Status)
	})

	t.Run("AttemptsAndDeadline", func(t *testing.T) {
		// One failure, retried a second later (±20% jitter), under a
		// deadline given on the command line.
		r := c.run(cli.ExitOK, "instances", "create", "flaky", "f1", "--params", `{"failures":1}`, "--deadline", "1 hour", "--wait", "0")
		require.Regexp(t, `(?m)^Deadline:`, r.stdout)
		c.waitStatus("flaky", "f1", "complete")
		r = c.run(cli.ExitOK, "instances", "history", "flaky", "f1")
		require.Regexp(t, `(?m)^call\s+do\s+complete\s+2/6\s`, r.stdout)
		require.Regexp(t, `(?m)^ATTEMPTS OF\s+RUN ATTEMPT\s+ATTEMPT\s+STATUS`, r.stdout)
		require.Regexp(t, `(?m)^call\s+1\s+1\s+failed\s.*attempt 1 fails on purpose`, r.stdout)
		require.Regexp(t, `(?m)^call\s+1\s+2\s+complete\s`, r.stdout)
		var hist struct {
			Instance struct {
				DeadlineAt *time.Time `json:"deadlineAt"`
			} `json:"instance"`
			Steps []struct {
				AttemptLog []struct{ Attempt int } `json:"attemptLog"`
			} `json:"steps"`
		}
		c.json(&hist, "instances", "history", "flaky", "f1")
		require.NotNil(t, hist.Instance.DeadlineAt)
		require.Len(t, hist.Steps[0].AttemptLog, 2)

		r = c.run(cli.ExitUsage, "instances", "create", "flaky", "f2", "--deadline", "0 seconds")
		require.Contains(t, r.stderr, "--deadline")
		r = c.run(cli.ExitInvalid, "instances", "create", "flaky", "f3", "--deadline", "2001-01-01T00:00:00Z")
		require.Contains(t, r.stderr, "INVALID_REQUEST")
		c.run(cli.ExitNotFound, "instances", "get", "flaky", "f3")
	})

	t.Run("ExitCodes", func(t *testing.T) {
		c.run(cli.ExitOK, "instances", "create", "hello", "dup")
		c.run(cli.ExitOK, "instances", "create", "flaky", "done", "--params", `{"failures":0}`)
		c.waitStatus("flaky", "done", "complete")
		cases := []struct {
			name string
			code int
			args []string
			msg  string
		}{
			{"UnknownWorkflow", cli.ExitNotFound, []string{"instances", "get", "nope", "x"}, "WORKFLOW_NOT_FOUND"},
			{"UnknownInstance", cli.ExitNotFound, []string{"instances", "get", "hello", "nope"}, "INSTANCE_NOT_FOUND"},
			{"EventForUnknownInstance", cli.ExitNotFound, []string{"events", "send", "hello", "nope", "x"}, "INSTANCE_NOT_FOUND"},
			{"IDTaken", cli.ExitConflict, []string{"instances", "create", "hello", "dup"}, "INSTANCE_ID_ALREADY_EXISTS"},
			{"PauseTerminal", cli.ExitConflict, []string{"instances", "pause", "flaky", "done"}, "INSTANCE_TERMINAL"},
			{"EventForTerminal", cli.ExitConflict, []string{"events", "send", "flaky", "done", "x"}, "INSTANCE_TERMINAL"},
			{"BadID", cli.ExitInvalid, []string{"instances", "create", "hello", "bad id"}, "INVALID_INSTANCE_ID"},
			{"BadEventType", cli.ExitInvalid, []string{"events", "send", "hello", "dup", "bad type"}, "INVALID_EVENT_TYPE"},
			{"BadParamsJSON", cli.ExitInvalid, []string{"instances", "create", "hello", "--params", "{bad"}, "--params: invalid JSON at byte 2: invalid character 'b' looking for beginning of object key string, at {⟨here⟩bad"},
			{"BadStatus", cli.ExitInvalid, []string{"instances", "list", "hello", "--status", "sleepy"}, "INVALID_REQUEST"},
			{"ParamsTooLarge", cli.ExitInvalid, []string{"instances", "create", "hello", "--params", `"` + strings.Repeat("x", 1<<20) + `"`}, "PAYLOAD_TOO_LARGE"},
			{"UnknownCommand", cli.ExitUsage, []string{"instances", "bogus"}, `unknown command "bogus"`},
			{"UnknownFlag", cli.ExitUsage, []string{"instances", "list", "--bogus"}, "unknown flag"},
			{"MissingArgument", cli.ExitUsage, []string{"instances", "get", "hello"}, "accepts 2 arg(s)"},
			{"MalformedCursor", cli.ExitInvalid, []string{"instances", "list", "--cursor", "x"}, "malformed cursor"},
			{"BadDuration", cli.ExitUsage, []string{"instances", "create", "hello", "--wait", "soon"}, "invalid duration"},
			{"Unreachable", cli.ExitUnavailable, []string{"workflows", "list", "--server", "http://127.0.0.1:1"}, "connection refused"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				r := run(t, c.env, tc.args...)
				require.Equal(t, tc.code, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
				require.Contains(t, r.stderr, tc.msg)
				require.True(t, strings.HasPrefix(r.stderr, "duraflow: "), r.stderr)
			})
		}
	})
}

func TestInstancesListPaginates(t *testing.T) {
	t.Parallel()
	s := startServer(t, []string{"dev", "--db", sqliteDB(t)})
	c := s.client(t)
	for _, id := range []string{"h1", "h2", "h3"} {
		c.run(cli.ExitOK, "instances", "create", "hello", id)
	}
	c.run(cli.ExitOK, "instances", "create", "sleeper", "s1", "--params", `{"duration":"1 hour"}`)

	type list struct {
		Instances []struct {
			WorkflowName string
			ID           string
			Details      struct{ Status string }
		}
		Cursor      string
		HasNextPage bool
	}
	ids := func(l list) []string {
		var out []string
		for _, i := range l.Instances {
			out = append(out, i.ID)
		}
		return out
	}

	var page1, page2, all list
	c.json(&page1, "instances", "list", "hello", "--page-size", "2")
	require.Len(t, page1.Instances, 2)
	require.NotEmpty(t, page1.Cursor)
	require.True(t, page1.HasNextPage)
	require.Equal(t, "complete", page1.Instances[0].Details.Status)
	c.json(&page2, "instances", "list", "hello", "--page-size", "2", "--cursor", page1.Cursor)
	require.Len(t, page2.Instances, 1)
	require.Empty(t, page2.Cursor)
	require.False(t, page2.HasNextPage)
	require.ElementsMatch(t, []string{"h1", "h2", "h3"}, append(ids(page1), ids(page2)...))

	c.json(&all, "instances", "list", "hello", "--page-size", "1", "--all")
	require.ElementsMatch(t, []string{"h1", "h2", "h3"}, ids(all))
	require.Empty(t, all.Cursor)

	// Without a workflow, every workflow's instances, newest update first,
	// in pages with one cursor.
	c.json(&all, "instances", "list")
	require.Equal(t, "s1", ids(all)[0], "the sleeper was created (and updated) last")
	require.ElementsMatch(t, []string{"h1", "h2", "h3", "s1"}, ids(all))
	var first, rest list
	c.json(&first, "instances", "list", "--page-size", "3")
	require.Len(t, first.Instances, 3)
	require.True(t, first.HasNextPage)
	require.NotEmpty(t, first.Cursor)
	c.json(&rest, "instances", "list", "--page-size", "3", "--cursor", first.Cursor)
	require.Len(t, rest.Instances, 1)
	require.False(t, rest.HasNextPage)
	require.Equal(t, ids(all), append(ids(first), ids(rest)...))
	r := c.run(cli.ExitOK, "instances", "list", "--page-size", "3")
	require.Equal(t, "more: duraflow instances list --cursor "+first.Cursor+" (or --all)\n", r.stderr, "one cursor, one line")
	c.json(&rest, "instances", "list", "--page-size", "1", "--all")
	require.Equal(t, ids(all), ids(rest))

	c.json(&all, "instances", "list", "--status", "waiting")
	require.Equal(t, []string{"s1"}, ids(all))

	// The table, and the next page's hint on stderr.
	r = c.run(cli.ExitOK, "instances", "list", "hello", "--page-size", "2")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 3)
	require.Regexp(t, `^WORKFLOW\s+ID\s+STATUS\s+RUN\s+QUEUE\s+PRIORITY\s+CREATED\s+UPDATED\s+OUTPUT/ERROR$`, lines[0])
	require.Regexp(t, `^hello\s+h\d\s+complete\s+1\s+default\s+0\s+\S+\s+\S+\s+\{"greeting":"Hello, World!"\}$`, lines[1])
	require.Contains(t, r.stderr, "more: duraflow instances list hello --cursor "+page1.Cursor)
}
