package cli_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/cli"
	"github.com/duraflow/duraflow/dftype"
)

func TestScheduleCommands(t *testing.T) {
	t.Parallel()
	s := startServer(t, []string{"dev", "--db", sqliteDB(t)})
	c := s.client(t)

	var created map[string]any
	c.json(&created, "schedules", "create", "nightly", "--workflow", "hello", "--cron", "0 2 * * *",
		"--tz", "Europe/Berlin", "--params", `{"name":"Ada"}`, "--max-catchup", "3")
	require.Equal(t, "nightly", created["id"])
	require.Equal(t, "hello", created["workflowName"])
	require.Equal(t, "0 2 * * *", created["cron"])
	require.Equal(t, "Europe/Berlin", created["timeZone"])
	require.Equal(t, map[string]any{"name": "Ada"}, created["params"])
	require.Equal(t, true, created["enabled"])
	require.Equal(t, float64(3), created["maxCatchup"])
	next, err := time.Parse(time.RFC3339, created["nextFireAt"].(string))
	require.NoError(t, err)
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	require.Equal(t, "02:00", next.In(berlin).Format("15:04"), "02:00 on Berlin's wall clock")
	require.True(t, next.After(time.Now()))

	r := c.run(cli.ExitOK, "schedules", "create", "every-5", "--workflow", "sleeper", "--cron", "*/5 * * * *", "--disabled")
	require.Regexp(t, `(?m)^ID:\s+every-5$`, r.stdout)
	require.Regexp(t, `(?m)^Enabled:\s+false$`, r.stdout)
	require.Regexp(t, `(?m)^Next fire:\s+-$`, r.stdout)

	t.Run("List", func(t *testing.T) {
		r := c.run(cli.ExitOK, "schedules", "list")
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		require.Len(t, lines, 3, r.stdout)
		require.Regexp(t, `^ID\s+WORKFLOW\s+CRON\s+TIME ZONE\s+ENABLED\s+NEXT FIRE\s+LAST INSTANCE$`, lines[0])
		require.Regexp(t, `^every-5\s+sleeper\s+\*/5 \* \* \* \*\s+UTC\s+false\s+-\s+-$`, lines[1])
		require.Regexp(t, `^nightly\s+hello\s+0 2 \* \* \*\s+Europe/Berlin\s+true\s+\S+Z\s+-$`, lines[2])

		var page struct {
			Schedules   []map[string]any
			NextCursor  string `json:"cursor"`
			HasNextPage bool
		}
		c.json(&page, "schedules", "list", "--page-size", "1")
		require.Len(t, page.Schedules, 1)
		require.Equal(t, "every-5", page.NextCursor)
		require.True(t, page.HasNextPage)
		r = c.run(cli.ExitOK, "schedules", "list", "--page-size", "1")
		require.Contains(t, r.stderr, "more: duraflow schedules list --cursor every-5")
		c.json(&page, "schedules", "list", "--page-size", "1", "--all")
		require.Len(t, page.Schedules, 2)
		c.json(&page, "schedules", "list", "--workflow", "hello")
		require.Len(t, page.Schedules, 1)
	})

	t.Run("Get", func(t *testing.T) {
		r := c.run(cli.ExitOK, "schedules", "get", "nightly")
		require.Regexp(t, `(?m)^Cron:\s+0 2 \* \* \*$`, r.stdout)
		require.Regexp(t, `(?m)^Next fire:\s+\S+Z \(\d{4}-\d\d-\d\d 02:00 CES?T\)$`, r.stdout)
		require.Regexp(t, `(?m)^Params:\s+\{"name":"Ada"\}$`, r.stdout)
		require.Regexp(t, `(?m)^Max catch-up:\s+3$`, r.stdout)
	})

	t.Run("Update", func(t *testing.T) {
		var u map[string]any
		c.json(&u, "schedules", "update", "nightly", "--cron", "30 4 * * *", "--tz", "UTC")
		require.Equal(t, "30 4 * * *", u["cron"])
		require.Equal(t, "UTC", u["timeZone"])
		require.Equal(t, map[string]any{"name": "Ada"}, u["params"], "left alone")
		next, err := time.Parse(time.RFC3339, u["nextFireAt"].(string))
		require.NoError(t, err)
		require.Equal(t, "04:30", next.UTC().Format("15:04"))

		c.json(&u, "schedules", "update", "nightly", "--params", `{"name":"Grace"}`, "--max-catchup", "1")
		require.Equal(t, map[string]any{"name": "Grace"}, u["params"])
		require.Equal(t, float64(1), u["maxCatchup"])

		r := c.run(cli.ExitUsage, "schedules", "update", "nightly")
		require.Contains(t, r.stderr, "nothing to change")
	})

	t.Run("EnableDisable", func(t *testing.T) {
		r := c.run(cli.ExitOK, "schedules", "enable", "every-5")
		require.Regexp(t, `^schedule every-5: enabled, next fire \S+Z\n$`, r.stdout)
		r = c.run(cli.ExitOK, "schedules", "disable", "every-5")
		require.Equal(t, "schedule every-5: disabled\n", r.stdout)
		var info map[string]any
		c.json(&info, "schedules", "disable", "every-5")
		require.Equal(t, false, info["enabled"])
	})

	t.Run("Errors", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			code int
			args []string
			has  string
		}{
			{"Exists", cli.ExitConflict, []string{"schedules", "create", "nightly", "--workflow", "hello", "--cron", "@daily"}, "SCHEDULE_ALREADY_EXISTS"},
			{"BadCron", cli.ExitInvalid, []string{"schedules", "create", "x", "--workflow", "hello", "--cron", "0 0 * *"}, "needs 5"},
			{"BadZone", cli.ExitInvalid, []string{"schedules", "create", "x", "--workflow", "hello", "--cron", "@daily", "--tz", "Nowhere/City"}, "unknown time zone"},
			{"BadParams", cli.ExitInvalid, []string{"schedules", "create", "x", "--workflow", "hello", "--cron", "@daily", "--params", "{"}, "invalid JSON at byte 1: unexpected end of JSON input"},
			{"UnknownWorkflow", cli.ExitNotFound, []string{"schedules", "create", "x", "--workflow", "nope", "--cron", "@daily"}, "WORKFLOW_NOT_FOUND"},
			{"NoCron", cli.ExitUsage, []string{"schedules", "create", "x", "--workflow", "hello"}, `"cron" not set`},
			{"NoID", cli.ExitUsage, []string{"schedules", "create", "--workflow", "hello", "--cron", "@daily"}, "accepts 1 arg"},
			{"GetMissing", cli.ExitNotFound, []string{"schedules", "get", "nope"}, "SCHEDULE_NOT_FOUND"},
			{"EnableMissing", cli.ExitNotFound, []string{"schedules", "enable", "nope"}, "SCHEDULE_NOT_FOUND"},
			{"UpdateBadCron", cli.ExitInvalid, []string{"schedules", "update", "nightly", "--cron", "@every 1m"}, "@every"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := c.run(tc.code, tc.args...)
				require.Contains(t, r.stderr, tc.has)
			})
		}
	})

	t.Run("Delete", func(t *testing.T) {
		r := c.run(cli.ExitOK, "schedules", "delete", "every-5")
		require.Equal(t, "deleted schedule every-5\n", r.stdout)
		c.run(cli.ExitNotFound, "schedules", "get", "every-5")
		c.run(cli.ExitNotFound, "schedules", "delete", "every-5")
	})
}

func TestServeTriggers(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "triggers.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"triggers":[
		{"method":"PUT","path":"/hooks/greet/:name","workflow":"hello","params":{"name":"path.name"}}
	]}`), 0o600))
	s := startServer(t, []string{"serve", "--db", sqliteDB(t),
		"--trigger", "POST /hooks/hello=hello", "--triggers-file", file})
	c := s.client(t)

	post := func(method, path, body string) (int, string, string) {
		req, err := http.NewRequestWithContext(t.Context(), method, s.url+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Request-Id", "req-7")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		var out struct {
			InstanceID string `json:"instanceId"`
		}
		_ = json.Unmarshal(data, &out)
		return resp.StatusCode, out.InstanceID, string(data)
	}

	status, id, body := post("POST", "/hooks/hello", `{"name":"Ada"}`)
	require.Equal(t, http.StatusAccepted, status, body)
	info := c.waitStatus("hello", id, "complete")
	require.Equal(t, map[string]any{"greeting": "Hello, Ada!"}, info["details"].(map[string]any)["output"])
	raw, err := json.Marshal(info["metadata"])
	require.NoError(t, err)
	prov, err := dftype.ProvenanceOf(raw)
	require.NoError(t, err)
	require.Equal(t, "http", prov.Type)
	require.Equal(t, "POST /hooks/hello", prov.Source)
	require.Equal(t, "req-7", prov.RequestID)
	require.WithinDuration(t, time.Now(), prov.ReceivedAt, time.Minute)

	status, id, body = post("PUT", "/hooks/greet/Grace", ``)
	require.Equal(t, http.StatusAccepted, status, body)
	info = c.waitStatus("hello", id, "complete")
	require.Equal(t, map[string]any{"greeting": "Hello, Grace!"}, info["details"].(map[string]any)["output"])
}

func TestServeRefusesBadTriggers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		has  string
	}{
		{"Syntax", []string{"--trigger", "POST /hooks/x"}, "--trigger"},
		{"Source", []string{"--trigger", "/hooks/x=hello,a=env.HOME"}, `source "env.HOME"`},
		{"Reserved", []string{"--trigger", "/api/x=hello"}, "belongs to the API"},
		{"MissingFile", []string{"--triggers-file", filepath.Join(t.TempDir(), "none.json")}, "--triggers-file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"serve", "--db", sqliteDB(t), "--addr", "127.0.0.1:0"}, tc.args...)
			r := run(t, nil, args...)
			require.Equal(t, cli.ExitUsage, r.code, r.stderr)
			require.Contains(t, r.stderr, tc.has)
		})
	}
}
