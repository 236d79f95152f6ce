//go:build unix

package main_test

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/db/dburl"
	"github.com/duraflow/duraflow/db/postgres/pgtest"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/workflow"
)

// The command-line tests run the real binary against a real dev server,
// on SQLite and on Postgres.

// ran is what one run of the binary printed, and its exit code.
type ran struct {
	stdout, stderr string
	code           int
}

// runAt runs the binary at bin once with args and no DURAFLOW_* variables.
func runAt(t *testing.T, bin string, args ...string) ran {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = cleanEnv()
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return ran{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// requireCode runs the binary and requires the exit code.
func requireCode(t *testing.T, code int, args ...string) ran {
	t.Helper()
	return requireCodeAt(t, duraflowBinary(t), code, args...)
}

// requireCodeAt is requireCode for the binary at bin.
func requireCodeAt(t *testing.T, bin string, code int, args ...string) ran {
	t.Helper()
	r := runAt(t, bin, args...)
	require.Equal(t, code, r.code, "%v\nstdout:\n%s\nstderr:\n%s", args, r.stdout, r.stderr)
	return r
}

// databases returns the database URL of each backend: a fresh SQLite file
// and a fresh Postgres schema (skipped when Postgres is unreachable, unless
// DURAFLOW_REQUIRE_POSTGRES=1).
func databases(t *testing.T) map[string]func(t *testing.T) string {
	return map[string]func(t *testing.T) string{
		"SQLite": func(t *testing.T) string {
			return "sqlite:" + filepath.Join(t.TempDir(), "duraflow.db")
		},
		"Postgres": func(t *testing.T) string {
			pool := pgtest.NewPool(t, pgtest.WithMaxConns(1))
			schema := pool.Config().ConnConfig.RuntimeParams["search_path"]
			require.NotEmpty(t, schema)
			u, err := url.Parse(pgtest.DatabaseURL())
			require.NoError(t, err)
			q := u.Query()
			q.Set("search_path", schema)
			u.RawQuery = q.Encode()
			return u.String()
		},
	}
}

// startDev starts `duraflow dev` on db with the extra args, logging at
// info, and returns the base URL it serves, as it logged it.
func startDev(t *testing.T, db string, args ...string) (*proc, string) {
	t.Helper()
	all := append([]string{"dev", "--db", db, "--metrics-addr", "", "--log-format", "json", "--log-level", "info"}, args...)
	if !containsArg(args, "--addr") {
		all = append(all, "--addr", "127.0.0.1:0")
	}
	p := start(t, "dev", all...)
	m := p.out.waitLog(t, p.name, "serving the HTTP API")
	p.out.waitLine(t, p.name, "its banner", isBannerEnd)
	return p, m["url"].(string)
}

// startDevAtDefaultLevel is startDev without --log-level: dev logs at its
// default, warn, which does not log the URL, so the base URL is read from
// the banner (the API's URL it prints, without the prefix).
func startDevAtDefaultLevel(t *testing.T, db string, args ...string) (p *proc, base, banner string) {
	t.Helper()
	all := append([]string{"dev", "--db", db, "--metrics-addr", "", "--log-format", "json", "--addr", "127.0.0.1:0"}, args...)
	p = start(t, "dev", all...)
	p.quiet = true
	p.out.waitLine(t, p.name, "its banner", isBannerEnd)
	banner = p.out.String()
	m := regexp.MustCompile(`(?m)^Duraflow dev server: (http://\S+)/api \(database `).FindStringSubmatch(banner)
	require.NotNil(t, m, "the banner says where the API is:\n%s", banner)
	return p, m[1], banner
}

// isBannerEnd reports whether line is the last line of dev's banner.
func isBannerEnd(line string) bool { return line == "Press Ctrl-C to stop." }

func containsArg(args []string, a string) bool {
	for _, x := range args {
		if x == a {
			return true
		}
	}
	return false
}

// freePort returns a TCP port that was free on loopback a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	_, port, err := net.SplitHostPort(l.Addr().String())
	require.NoError(t, err)
	require.NoError(t, l.Close())
	return port
}

// TestServerFlagTakesHostPort: --server takes a URL, host:port, :port or a
// port alone; what is no server address is a usage error (exit 2).
func TestServerFlagTakesHostPort(t *testing.T) {
	t.Parallel()
	for name, db := range databases(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, base := startDev(t, db(t))
			u, err := url.Parse(base)
			require.NoError(t, err)
			port := u.Port()
			for _, server := range []string{base, "127.0.0.1:" + port, "localhost:" + port, ":" + port, port} {
				r := requireCode(t, 0, "workflows", "list", "--server", server)
				require.Regexp(t, `(?m)^hello\s+go\s+-$`, r.stdout, "--server %s", server)
			}
			r := requireCode(t, 0, "instances", "create", "hello", "ada", "--params", `{"name":"Ada"}`, "--server", "127.0.0.1:"+port)
			require.Regexp(t, `(?m)^Status:\s+complete$`, r.stdout)

			for _, bad := range []string{"ftp://127.0.0.1:" + port, "http://", "127.0.0.1:http", "http://u:p@127.0.0.1:" + port, ""} {
				r := requireCode(t, 2, "workflows", "list", "--server", bad)
				require.Contains(t, r.stderr, "duraflow: --server: ", "--server %q", bad)
				require.Contains(t, r.stderr, "Run 'duraflow workflows list --help' for usage.")
			}
		})
	}
}

// TestAddrTakesAPort: dev --addr 18202 listens on 127.0.0.1:18202, the
// loopback interface, not every interface.
func TestAddrTakesAPort(t *testing.T) {
	t.Parallel()
	for name, db := range databases(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			port := freePort(t)
			_, base := startDev(t, db(t), "--addr", port)
			require.Equal(t, "http://127.0.0.1:"+port, base)
			r := requireCode(t, 0, "workflows", "list", "--server", port)
			require.Contains(t, r.stdout, "hello")
		})
	}
	r := requireCode(t, 2, "dev", "--db", "sqlite:"+filepath.Join(t.TempDir(), "x.db"), "--addr", "99999999")
	require.Contains(t, r.stderr, "--addr")
}

// TestDevBusyPortCreatesNothing: dev on an address in use exits 1 saying
// so before it creates the SQLite file or migrates the Postgres schema,
// with the stub service on (the default, whose listener comes first) and
// off.
func TestDevBusyPortCreatesNothing(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = busy.Close() })
	devOn := func(t *testing.T, db string, args ...string) {
		t.Helper()
		r := requireCode(t, 1, append([]string{"dev", "--db", db, "--addr", busy.Addr().String(), "--metrics-addr", ""}, args...)...)
		require.Equal(t, "duraflow: listening on "+busy.Addr().String()+": listen tcp "+busy.Addr().String()+": bind: address already in use\n", r.stderr)
		require.Empty(t, r.stdout, "no banner")
	}
	for _, stub := range [][]string{nil, {"--stub=false"}} {
		t.Run("SQLite"+strings.Join(stub, ""), func(t *testing.T) {
			t.Parallel()
			file := filepath.Join(t.TempDir(), "duraflow.db")
			devOn(t, "sqlite:"+file, stub...)
			_, err := os.Stat(file)
			require.ErrorIs(t, err, os.ErrNotExist, "the database file was created")
		})
	}
	t.Run("Postgres", func(t *testing.T) {
		t.Parallel()
		pool := pgtest.NewPool(t, pgtest.WithoutMigrations(), pgtest.WithMaxConns(1))
		schema := pool.Config().ConnConfig.RuntimeParams["search_path"]
		devOn(t, pgtest.DatabaseURLWith("search_path="+schema))
		var tables int
		require.NoError(t, pool.QueryRow(context.Background(),
			`SELECT count(*) FROM information_schema.tables WHERE table_schema = $1`, schema).Scan(&tables))
		require.Zero(t, tables, "nothing was migrated")
	})
}

// TestUsageErrorsExitTwo: unknown commands and flags, flag values that do
// not parse and missing arguments exit 2 with one line saying what, and a
// mistyped subcommand gets suggestions at every level.
func TestUsageErrorsExitTwo(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"instnces", "list"}, "Did you mean this?\n\tinstances\n"},
		{[]string{"instances", "lst"}, "Did you mean this?\n\tlist"},
		{[]string{"flows", "aply"}, "Did you mean this?\n\tapply"},
		{[]string{"schedules", "lst"}, "Did you mean this?\n\tlist"},
		{[]string{"instances", "list", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"instances", "list", "--page-size", "many"}, `invalid argument "many" for "--page-size"`},
		{[]string{"instances", "list", "--timeout", "soon"}, `invalid argument "soon" for "--timeout"`},
		{[]string{"instances", "get", "hello"}, "accepts 2 arg(s), received 1"},
		{[]string{"dev", "--concurrency", "x"}, `invalid argument "x" for "--concurrency"`},
		{[]string{"version", "extra"}, `unknown command "extra" for "duraflow version"`},
	} {
		r := requireCode(t, 2, tt.args...)
		require.Contains(t, r.stderr, tt.want, "%v", tt.args)
		require.True(t, strings.HasPrefix(r.stderr, "duraflow: "), "%v: %s", tt.args, r.stderr)
	}
}

// TestVersionCommand: version prints what the Go toolchain stamped into
// the binary (its version, the commit and whether the tree was modified),
// its Go version and platform; --json the same as an object; --version one
// line. The binary is built three ways: as the other tests build it (GOFLAGS
// decides), with -buildvcs=false (no VCS information: version dev, commit
// unknown) and with -buildvcs=true, which in a git checkout stamps the
// commit `git rev-parse HEAD` names and a pseudo-version of it (or its tag).
func TestVersionCommand(t *testing.T) {
	t.Parallel()
	head, worktree := gitCheckout(t)
	t.Run("AsBuilt", func(t *testing.T) {
		t.Parallel()
		requireVersion(t, duraflowBinary(t))
	})
	t.Run("NoVCS", func(t *testing.T) {
		t.Parallel()
		bin := filepath.Join(t.TempDir(), "duraflow")
		require.NoError(t, goBuild(bin, "-buildvcs=false"))
		v := requireVersion(t, bin)
		require.Equal(t, "dev", v.Version)
		require.Empty(t, v.Commit)
		require.Regexp(t, `(?m)^Commit:\s+unknown$`, runAt(t, bin, "version").stdout)
	})
	t.Run("VCS", func(t *testing.T) {
		t.Parallel()
		if head == "" {
			t.Skip("not in a git checkout: there is no commit to stamp")
		}
		bin := filepath.Join(t.TempDir(), "duraflow")
		require.NoError(t, goBuild(bin, "-buildvcs=true"))
		v := requireVersion(t, bin)
		if worktree && v.Commit != head {
			// The go command takes only a .git directory for a repository,
			// not the .git file of a linked worktree: it stamps nothing, or
			// the commit of a repository around the worktree
			// (golang/go#58218).
			t.Logf("in a linked git worktree the go command stamps no commit of it (it stamped %q); HEAD is not checked", v.Commit)
			return
		}
		require.Equal(t, head, v.Commit, "the commit the binary was built from")
		require.NotEqual(t, "dev", v.Version, "a stamped build has a version")
		r := runAt(t, bin, "version")
		require.Regexp(t, `(?m)^Commit:\s+`+head+`( \(modified\))?$`, r.stdout)
	})
}

// gitCheckout returns the commit HEAD names when the tests run in a git
// checkout ("" otherwise), and whether it is a linked worktree (git worktree
// add), whose commit the go command does not stamp.
func gitCheckout(t *testing.T) (head string, worktree bool) {
	t.Helper()
	git := func(args ...string) (string, bool) {
		out, err := exec.Command("git", args...).Output()
		return strings.TrimSpace(string(out)), err == nil
	}
	head, ok := git("rev-parse", "HEAD")
	if !ok {
		return "", false
	}
	dir, _ := git("rev-parse", "--git-dir")
	common, _ := git("rev-parse", "--git-common-dir")
	dir, err := filepath.Abs(dir)
	require.NoError(t, err)
	common, err = filepath.Abs(common)
	require.NoError(t, err)
	return head, dir != common
}

// versionJSON is what version --json prints.
type versionJSON struct {
	Version, Module, Duraflow, Commit, CommitTime, Go, Platform string
	Modified                                                    bool
}

// requireVersion requires that version, version --json and --version
// print what the toolchain stamped into the binary at bin, read from its
// build information, and returns what --json printed.
func requireVersion(t *testing.T, bin string) versionJSON {
	t.Helper()
	bi, err := buildinfo.ReadFile(bin)
	require.NoError(t, err)
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	version := bi.Main.Version
	if version == "" || version == "(devel)" {
		version = "dev"
	}
	rev, commitTime, modified := settings["vcs.revision"], settings["vcs.time"], settings["vcs.modified"] == "true"
	if rev != "" {
		require.Regexp(t, `^[0-9a-f]{40}([0-9a-f]{24})?$`, rev)
		// The go command names a stamped build by the commit: its tag, or
		// a pseudo-version of it; +dirty when the tree was modified.
		if module.IsPseudoVersion(version) {
			r, err := module.PseudoVersionRev(version)
			require.NoError(t, err)
			require.Equal(t, rev[:12], r, "the pseudo-version %s names the commit", version)
		} else {
			require.True(t, semver.IsValid(version), "version %q is a tag", version)
		}
		require.Equal(t, modified, strings.HasSuffix(version, "+dirty"), version)
	}

	r := requireCodeAt(t, bin, 0, "version")
	require.Regexp(t, `(?m)^duraflow:\s+`+regexp.QuoteMeta(version)+`$`, r.stdout)
	require.NotContains(t, r.stdout, "Duraflow:", "the main module is Duraflow: no second version")
	commit := "unknown"
	if rev != "" {
		commit = rev
		if modified {
			commit += " (modified)"
		}
	}
	require.Regexp(t, `(?m)^Commit:\s+`+regexp.QuoteMeta(commit)+`$`, r.stdout)
	if commitTime != "" {
		require.Regexp(t, `(?m)^Commit time:\s+`+regexp.QuoteMeta(commitTime)+`$`, r.stdout)
	} else {
		require.NotContains(t, r.stdout, "Commit time:")
	}
	require.Regexp(t, `(?m)^Go:\s+`+regexp.QuoteMeta(runtime.Version())+`$`, r.stdout)
	require.Regexp(t, `(?m)^Platform:\s+`+runtime.GOOS+"/"+runtime.GOARCH+`$`, r.stdout)

	var v versionJSON
	r = requireCodeAt(t, bin, 0, "version", "--json")
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &v), r.stdout)
	require.Equal(t, versionJSON{
		Version: version, Module: "github.com/duraflow/duraflow", Duraflow: version, Commit: rev, CommitTime: commitTime,
		Modified: modified, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH,
	}, v)

	short := version
	if rev != "" {
		short += " (" + rev[:12]
		if modified {
			short += ", modified"
		}
		short += ")"
	}
	r = requireCodeAt(t, bin, 0, "--version")
	require.Equal(t, "duraflow version "+short+"\n", r.stdout)
	return v
}

// TestCompletion: completion prints a script for bash, zsh and fish that
// completes the binary's commands.
func TestCompletion(t *testing.T) {
	t.Parallel()
	for shell, want := range map[string]string{
		"bash": "# bash completion V2 for duraflow",
		"zsh":  "#compdef duraflow",
		"fish": "# fish completion for duraflow",
	} {
		r := requireCode(t, 0, "completion", shell)
		require.True(t, strings.HasPrefix(r.stdout, want), "%s: %.200s", shell, r.stdout)
	}
	// The scripts call the binary back for the candidates.
	r := requireCode(t, 0, "__complete", "inst")
	require.Contains(t, r.stdout, "instances")
	r = requireCode(t, 0, "__complete", "instances", "")
	for _, sub := range []string{"list", "get", "create", "history"} {
		require.Contains(t, r.stdout, sub+"\t")
	}
}

// TestTokenHelpListsEveryScope: the help of serve's --token and of the
// client commands' --token lists every scope the server accepts.
func TestTokenHelpListsEveryScope(t *testing.T) {
	t.Parallel()
	scopes := httpapi.Scopes()
	require.Contains(t, scopes, "tick")
	for _, args := range [][]string{{"serve", "--help"}, {"dev", "--help"}, {"instances", "--help"}, {"flows", "apply", "--help"}} {
		r := requireCode(t, 0, args...)
		line := ""
		for l := range strings.SplitSeq(r.stdout, "\n") {
			if strings.Contains(l, "--token") {
				line = l
			}
		}
		require.NotEmpty(t, line, "%v has no --token", args)
		require.Contains(t, line, strings.Join(scopes, ", "), "%v", args)
	}
}

// exampleFlows returns the absolute path of examples/flows: order.json,
// whose http step calls dev's stub service, and approval.json
// (expense-approval), which does not.
func exampleFlows(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "examples", "flows"))
	require.NoError(t, err)
	return dir
}

// TestFlowApplyListsEveryProblem: flows apply lists every problem of a
// definition on standard error, unknown fields with the others, and exits
// 5; bad JSON in --params and --payload says at which byte and why, exits
// 5 and creates nothing. Its dev runs with the stub service off and
// --flows examples/flows: the order flow, which needs the stub, is not
// applied, with a warning, and expense-approval is.
func TestFlowApplyListsEveryProblem(t *testing.T) {
	t.Parallel()
	for name, db := range databases(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			flows := exampleFlows(t)
			dev, base := startDev(t, db(t), "--stub=false", "--flows", flows)
			out := dev.out.String()
			require.Contains(t, out, "Flows from "+flows+": expense-approval 1.0.0 (applied)\n")
			require.Contains(t, out, "Skipped (see above): order.json, release.json, saga.json\n")
			require.Contains(t, out, filepath.Join(flows, "order.json")+
				`: warning: not applied: its http steps call the stub service (http://stub.localhost), which is off (--stub=false or --stub-addr "")`)
			require.NotContains(t, out, "Stub service for flows")
			r := requireCode(t, 0, "workflows", "list", "--server", base)
			require.Regexp(t, `(?m)^expense-approval\s+flow\s+1\.0\.0$`, r.stdout)
			require.NotRegexp(t, `(?m)^order\s`, r.stdout)
			requireCode(t, 3, "flows", "get", "order", "--server", base)
			file := filepath.Join(t.TempDir(), "broken.json")
			require.NoError(t, os.WriteFile(file, []byte(`{"id": "broken", "version": "1.0.0", "initialStepId": "nowhere", "colour": "red",
			  "steps": {"a": {"id": "a", "type": "teleport", "retrys": 3, "timeOut": "1s"}}}`), 0o600))
			r = requireCode(t, 5, "flows", "apply", "-f", file, "--server", base)
			for _, want := range []string{
				`  colour: unknown field "colour"`,
				`  initialStepId: no step "nowhere" (steps: a)`,
				`  steps.a.retrys: unknown field "retrys"`,
				`  steps.a.timeOut: unknown field "timeOut"`,
				`  steps.a.type: unknown step type "teleport"`,
				file + ": the flow is invalid (5 problems, above)",
			} {
				require.Contains(t, r.stderr, want)
			}
			requireCode(t, 3, "flows", "get", "broken", "--server", base)

			r = requireCode(t, 5, "instances", "create", "hello", "bad", "--params", `{"name": "Ada",}`, "--server", base)
			require.Equal(t, "duraflow: --params: invalid JSON at byte 16: invalid character '}' looking for beginning of object key string, at {\"name\": \"Ada\",⟨here⟩}\n", r.stderr)
			r = requireCode(t, 5, "instances", "create", "hello", "bad", "--params", `{"name": "Ada"`, "--server", base)
			require.Contains(t, r.stderr, "--params: invalid JSON at byte 14: unexpected end of JSON input, at {\"name\": \"Ada\"⟨here⟩\n")
			r = requireCode(t, 5, "events", "send", "hello", "bad", "approval", "--payload", `[1, 2 3]`, "--server", base)
			require.Contains(t, r.stderr, "--payload: invalid JSON at byte 7: invalid character '3' after array element, at [1, 2 ⟨here⟩3]")
			requireCode(t, 3, "instances", "get", "hello", "bad", "--server", base)
		})
	}
}

// seedBilling stores instances of "billing", a workflow the duraflow binary
// does not register, as another deployment would: created with a client
// whose registry has it, and left queued (no runner here runs it). The
// database is migrated already (by the dev server).
func seedBilling(t *testing.T, dbURL string, ids ...string) {
	t.Helper()
	ctx := context.Background()
	store, err := dburl.Open(ctx, dbURL)
	require.NoError(t, err)
	defer func() { require.NoError(t, store.Close()) }()
	reg := workflow.NewRegistry()
	workflow.MustRegister(reg, "billing", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (any, error) { return nil, nil })
	c, err := client.New(&client.Config{Store: store, Registry: reg})
	require.NoError(t, err)
	for _, id := range ids {
		_, err := c.Create(ctx, "billing", dftype.CreateRequest{ID: id, Params: json.RawMessage(`{"customer":"cus_1"}`)})
		require.NoError(t, err)
	}
}

// TestListGetHistoryOfUnregisteredWorkflows: the instances of a workflow
// the server does not run are listed (alone and among every workflow's),
// shown and their history read; creating one is still refused, and a name
// that is neither registered nor stored is still unknown.
func TestListGetHistoryOfUnregisteredWorkflows(t *testing.T) {
	t.Parallel()
	for name, db := range databases(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			url := db(t)
			_, base := startDev(t, url)
			seedBilling(t, url, "inv-1", "inv-2")
			requireCode(t, 0, "instances", "create", "hello", "h1", "--server", base)

			r := requireCode(t, 0, "instances", "list", "billing", "--server", base)
			require.Regexp(t, `(?m)^billing\s+inv-2\s+queued\s`, r.stdout)
			require.Regexp(t, `(?m)^billing\s+inv-1\s+queued\s`, r.stdout)
			r = requireCode(t, 0, "instances", "list", "--server", base)
			require.Regexp(t, `(?m)^hello\s+h1\s+complete\s`, r.stdout)
			require.Regexp(t, `(?m)^billing\s+inv-1\s+queued\s`, r.stdout)
			r = requireCode(t, 0, "instances", "list", "billing", "--status", "complete", "--server", base)
			require.Equal(t, 1, strings.Count(r.stdout, "\n"), "only the header: %s", r.stdout)

			r = requireCode(t, 0, "instances", "get", "billing", "inv-1", "--server", base)
			require.Regexp(t, `(?m)^Status:\s+queued$`, r.stdout)
			require.Regexp(t, `(?m)^Params:\s+\{"customer":"cus_1"\}$`, r.stdout)
			r = requireCode(t, 0, "instances", "history", "billing", "inv-1", "--server", base)
			require.True(t, strings.HasPrefix(r.stdout, "billing/inv-1 run 1: queued\n"), r.stdout)

			requireCode(t, 3, "instances", "get", "billing", "inv-9", "--server", base)
			r = requireCode(t, 3, "instances", "create", "billing", "inv-3", "--server", base)
			require.Contains(t, r.stderr, "WORKFLOW_NOT_FOUND")
			r = requireCode(t, 3, "instances", "list", "biling", "--server", base)
			require.Contains(t, r.stderr, "WORKFLOW_NOT_FOUND")
			r = requireCode(t, 3, "instances", "get", "biling", "inv-1", "--server", base)
			require.Contains(t, r.stderr, "WORKFLOW_NOT_FOUND")
		})
	}
}

// TestListEveryWorkflowHasOneCursor: instances list without a workflow
// pages through every workflow's instances in one order, newest update
// first, with one cursor, and --all follows it.
func TestListEveryWorkflowHasOneCursor(t *testing.T) {
	t.Parallel()
	for name, db := range databases(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			url := db(t)
			_, base := startDev(t, url)
			seedBilling(t, url, "inv-1")
			for _, id := range []string{"h1", "h2"} {
				requireCode(t, 0, "instances", "create", "hello", id, "--server", base)
			}
			requireCode(t, 0, "instances", "create", "sleeper", "s1", "--params", `{"duration":"1 hour"}`, "--server", base)

			type page struct {
				Instances []struct {
					ID        string
					UpdatedAt time.Time
				}
				Cursor      string
				HasNextPage bool
				Cursors     map[string]string
			}
			list := func(args ...string) page {
				r := requireCode(t, 0, append([]string{"instances", "list", "--json", "--server", base}, args...)...)
				var p page
				require.NoError(t, json.Unmarshal([]byte(r.stdout), &p), r.stdout)
				require.Nil(t, p.Cursors, "one cursor, no map of them")
				return p
			}
			var seen []string
			args := []string{"--page-size", "1"}
			for {
				p := list(args...)
				require.Len(t, p.Instances, 1)
				seen = append(seen, p.Instances[0].ID)
				r := requireCode(t, 0, append([]string{"instances", "list", "--server", base}, args...)...)
				if !p.HasNextPage {
					require.Empty(t, p.Cursor)
					require.NotContains(t, r.stderr, "more")
					break
				}
				require.Equal(t, "more: duraflow instances list --cursor "+p.Cursor+" (or --all)\n", r.stderr, "one cursor for every workflow")
				args = []string{"--page-size", "1", "--cursor", p.Cursor}
			}
			require.ElementsMatch(t, []string{"inv-1", "h1", "h2", "s1"}, seen)
			all := list("--all", "--page-size", "2")
			var ids []string
			for i, inst := range all.Instances {
				ids = append(ids, inst.ID)
				if i > 0 {
					require.False(t, inst.UpdatedAt.After(all.Instances[i-1].UpdatedAt), "newest update first")
				}
			}
			require.Equal(t, seen, ids)
			require.Equal(t, "inv-1", ids[len(ids)-1], "billing was seeded first")
		})
	}
}

// TestWaitsResultsAndWhatInstancesWaitFor runs, with the real binary on
// both backends: instances execute and result with their exit codes (0
// complete, 8 errored, 9 terminated, 10 the wait ran out), params a
// registered workflow cannot decode (exit 5), what instances get says a
// waiting instance waits for, an event sent to a type nothing waits for
// (buffered, with a warning), and dev's log of a retried step, of an
// errored instance and of its activity at its default level (no
// --log-level). Its dev runs the stub service on the address --stub-addr
// gives and applies examples/flows, whose order flow calls the stub; the
// URL its banner prints serves the API's index.
func TestWaitsResultsAndWhatInstancesWaitFor(t *testing.T) {
	t.Parallel()
	for name, db := range databases(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			stub := "127.0.0.1:" + freePort(t)
			flows := exampleFlows(t)
			dev, base, banner := startDevAtDefaultLevel(t, db(t), "--stub-addr", stub, "--flows", flows, "--activity-interval", "1s")
			srv := "--server=" + base

			// The stub, on its address, serves the order flow's http step.
			require.Contains(t, banner, "Stub service for flows: http://stub.localhost (on http://"+stub+")")
			require.Contains(t, banner, "Flows from "+flows+": expense-approval 1.0.0 (applied), order 1.0.0 (applied), inventory-release 1.0.0 (applied), order-saga 1.0.0 (applied)\n")
			r := requireCode(t, 0, "instances", "execute", "order", "o1", "--params", `{"orderId":"A-1","items":[{"sku":"book","qty":2,"priceCents":1250}]}`, srv)
			require.JSONEq(t, `{"status":"accepted","orderId":"A-1","totalCents":2500,"reservation":"R-A-1"}`, r.stdout)

			// The URL the banner prints answers the index, not 404.
			resp, err := http.Get(base + "/api")
			require.NoError(t, err)
			var idx apiclient.APIIndex
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&idx))
			require.NoError(t, resp.Body.Close())
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, "/api/openapi.json", idx.OpenAPI)
			require.Equal(t, "/ui/", idx.Console)
			require.Contains(t, idx.Routes, apiclient.IndexRoute{Method: "POST", Path: "/api/workflows/:name/instances", Scope: "create"})
			version := requireCode(t, 0, "--version").stdout
			require.Equal(t, "duraflow version "+idx.Version+"\n", version, "the index has the binary's version")

			r = requireCode(t, 0, "instances", "execute", "hello", "h1", "--params", `{"name":"Ada"}`, srv)
			require.JSONEq(t, `{"greeting":"Hello, Ada!"}`, r.stdout)
			r = requireCode(t, 5, "instances", "create", "hello", "h2", "--params", `"Ada"`, srv)
			require.Contains(t, r.stderr, "cannot unmarshal string")
			requireCode(t, 3, "instances", "get", "hello", "h2", srv) // refused: nothing was created

			r = requireCode(t, 8, "instances", "execute", "flaky", "f1", "--params", `{"failures":9}`, srv)
			require.Contains(t, r.stderr, "errored")
			// dev logs, at its default level, each retry and the errored
			// instance at warn, and its activity (an info line shown at
			// warn); nothing else at info.
			m := dev.out.waitLog(t, dev.name, "step attempt failed; retrying")
			require.Equal(t, "WARN", m["level"])
			require.Subset(t, m, map[string]any{"workflow": "flaky", "instance": "f1", "step": "call", "attempt": float64(1)})
			require.Contains(t, m["error"], "attempt 1 fails on purpose")
			m = dev.out.waitLog(t, dev.name, "instance errored")
			require.Equal(t, "WARN", m["level"])
			require.Subset(t, m, map[string]any{"workflow": "flaky", "instance": "f1"})
			require.Contains(t, m["error"], `step "call" failed after 6 attempt(s)`)
			dev.out.waitLine(t, dev.name, "an activity line that counts the errored instance", func(line string) bool {
				var m map[string]any
				return json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "activity" && m["errored"] != nil && m["errored"] != float64(0)
			})
			require.NotContains(t, dev.out.String(), `"msg":"serving the HTTP API"`, "info lines but the activity's are not logged")

			requireCode(t, 0, "instances", "create", "approval", "a1", "--params", `{"amount":5}`, srv)
			r = requireCode(t, 0, "instances", "get", "approval", "a1", srv)
			require.Regexp(t, `Pending:\s+step "wait for approval" waits for an event of type approval`, r.stdout)
			r = requireCode(t, 0, "events", "send", "approval", "a1", "approvl", "--payload", `{"approved":true}`, srv)
			require.Contains(t, r.stdout, "buffered")
			require.Contains(t, r.stderr, "waits for an event of type approval, not approvl")
			requireCode(t, 10, "instances", "result", "approval", "a1", "--wait", "500ms", srv)
			requireCode(t, 0, "instances", "terminate", "approval", "a1", srv)
			requireCode(t, 9, "instances", "result", "approval", "a1", srv)
		})
	}
}
