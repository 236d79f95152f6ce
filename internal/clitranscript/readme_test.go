package clitranscript_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/cli"
	"github.com/duraflow/duraflow/examples/demo"
)

const readme = "../../README.md"

// TestReadmeQuickstart checks what README.md shows a new user against the
// command and a dev server: every duraflow command in its shell blocks is
// one the binary has, with flags and arguments it takes, and each but dev
// (the server they talk to) exits 0 when run in order; every `duraflow …`
// of its text names a command; its make targets and `go run` packages
// exist; the output its quickstart shows for `instances create hello` is
// what the command prints, and curl's answer and the GET after it are what
// the API answers, ids and times aside.
func TestReadmeQuickstart(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(readme)
	require.NoError(t, err)
	text := string(data)
	blocks := fencedBlocks(text)
	base := startDev(t)

	createShown := false
	for i, b := range blocks {
		if b.lang != "sh" {
			continue
		}
		for _, line := range shellLines(b.body) {
			words, err := shellWords(line)
			require.NoError(t, err, "README: %s", line)
			switch {
			case len(words) == 0:
			case words[0] == "make":
				requireMakeTarget(t, line, words[1])
			case words[0] == "curl":
				requireCurlAnswer(t, base, line, text, blocks[i+1:])
			default:
				args, ok := duraflowArgs(words)
				if !ok {
					continue
				}
				requireCommand(t, line, args, true)
				if args[0] == "dev" {
					continue
				}
				settle(t, base)
				stdout, stderr, code := run(base, args)
				require.Equal(t, 0, code, "README: %s\n%s%s", line, stdout, stderr)
				if len(args) >= 3 && args[0] == "instances" && args[1] == "create" && args[2] == "hello" {
					requireCreateOutput(t, line, stdout, base, blocks[i+1:])
					createShown = true
				}
			}
		}
	}
	require.True(t, createShown, "README's quickstart shows instances create hello and what it prints")

	// `duraflow …` in the text: the command exists (arguments left out).
	for _, m := range regexp.MustCompile("`duraflow ([a-z][^`]*)`").FindAllStringSubmatch(text, -1) {
		for _, args := range alternatives(strings.Fields(m[1])) {
			requireCommand(t, m[0], args, false)
		}
	}
	for _, m := range regexp.MustCompile("`go run\\s+\\./(\\S+)`").FindAllStringSubmatch(text, -1) {
		requireMainPackage(t, m[0], m[1])
	}
	for _, m := range regexp.MustCompile("`make ([a-z-]+)`").FindAllStringSubmatch(text, -1) {
		requireMakeTarget(t, m[0], m[1])
	}
}

// block is a fenced code block of a Markdown document.
type block struct{ lang, body string }

// fencedBlocks returns the ``` blocks of text in order.
func fencedBlocks(text string) []block {
	var (
		out []block
		cur *block
	)
	for line := range strings.SplitSeq(text, "\n") {
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &block{lang: strings.TrimSpace(strings.TrimPrefix(line, "```"))}
		case cur != nil && strings.TrimSpace(line) == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.body += line + "\n"
		}
	}
	return out
}

// shellLines returns the command lines of a shell block, a line ending in
// a backslash joined with the next.
func shellLines(body string) []string {
	var out []string
	cur := ""
	for line := range strings.SplitSeq(body, "\n") {
		if l, ok := strings.CutSuffix(line, "\\"); ok {
			cur += l
			continue
		}
		if l := strings.TrimSpace(cur + line); l != "" {
			out = append(out, l)
		}
		cur = ""
	}
	return out
}

// duraflowArgs returns the arguments of a duraflow command line, run as
// `duraflow …`, `go run ./cmd/duraflow …` or `source <(duraflow …)`.
func duraflowArgs(words []string) ([]string, bool) {
	if len(words) > 1 && words[0] == "source" && strings.HasPrefix(words[1], "<(") {
		words = append([]string{strings.TrimPrefix(words[1], "<(")}, words[2:]...)
		words[len(words)-1] = strings.TrimSuffix(words[len(words)-1], ")")
	}
	switch {
	case len(words) > 1 && words[0] == "duraflow":
		return words[1:], true
	case len(words) > 3 && words[0] == "go" && words[1] == "run" && words[2] == "./cmd/duraflow":
		return words[3:], true
	}
	return nil, false
}

// alternatives expands the last word of `duraflow workers list|get|drain`
// into one command each.
func alternatives(words []string) [][]string {
	if len(words) == 0 {
		return nil
	}
	last := words[len(words)-1]
	var out [][]string
	for alt := range strings.SplitSeq(last, "|") {
		out = append(out, append(append([]string(nil), words[:len(words)-1]...), alt))
	}
	return out
}

// requireCommand requires that args name a command of the binary; full
// also requires its flags and positional arguments to parse, as they do
// when it runs.
func requireCommand(t *testing.T, shown string, args []string, full bool) {
	t.Helper()
	root := cli.NewCommand(cli.WithWorkflows(demo.Register), cli.WithOutput(io.Discard, io.Discard), cli.WithLookupEnv(noEnv))
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	cmd, rest, err := root.Find(args)
	require.NoError(t, err, "README shows %s: no such command", shown)
	require.NotSame(t, root, cmd, "README shows %s: no such command", shown)
	require.True(t, cmd.Runnable(), "README shows %s, which is only a group of commands", shown)
	require.NoError(t, cmd.ParseFlags(rest), "README shows %s", shown)
	positional := cmd.Flags().Args()
	if full {
		require.NoError(t, cmd.ValidateArgs(positional), "README shows %s", shown)
	} else if cmd.HasAvailableSubCommands() {
		require.Empty(t, positional, "README shows %s: %s has no subcommand %q", shown, cmd.CommandPath(), positional)
	}
}

// requireMakeTarget requires a target of the Makefile.
func requireMakeTarget(t *testing.T, shown, target string) {
	t.Helper()
	mk, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	require.NoError(t, err)
	require.Regexp(t, `(?m)^`+regexp.QuoteMeta(target)+`:`, string(mk), "README shows %s: the Makefile has no target %s", shown, target)
}

// requireMainPackage requires that dir (from the repository's root) is a
// main package.
func requireMainPackage(t *testing.T, shown, dir string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", dir, "*.go"))
	require.NoError(t, err)
	for _, f := range files {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		if !strings.HasSuffix(f, "_test.go") && regexp.MustCompile(`(?m)^package main$`).Match(src) {
			return
		}
	}
	require.Fail(t, "no main package", "README shows %s", shown)
}

var idLineRe = regexp.MustCompile(`(?m)^(ID:\s+)[0-9a-f]{32}$`)

// requireCreateOutput requires that the first plain block after the
// command's block is what the command printed, but for the id and times.
func requireCreateOutput(t *testing.T, shown, stdout, base string, after []block) {
	t.Helper()
	var want *block
	for i := range after {
		if after[i].lang == "" {
			want = &after[i]
			break
		}
	}
	require.NotNil(t, want, "README shows no output after %s", shown)
	norm := func(s string) string { return idLineRe.ReplaceAllString(normalize(s, base), "${1}<id>") }
	require.Equal(t, norm(want.body), norm(stdout), "README shows another output for %s", shown)
}

// requireCurlAnswer sends the quickstart's POST and requires the answer
// the next json block shows, ids, times and eager start aside; then the
// GET of the instance, once it settled, has the details README quotes.
func requireCurlAnswer(t *testing.T, base, shown, text string, after []block) {
	t.Helper()
	m := regexp.MustCompile(`-X POST (\S+) .*-d '([^']*)'`).FindStringSubmatch(shown)
	require.NotNil(t, m, "README's curl: %s", shown)
	url := strings.Replace(m[1], server, base, 1)
	resp, err := http.Post(url, "application/json", strings.NewReader(m[2]))
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))

	var want *block
	for i := range after {
		if after[i].lang == "json" {
			want = &after[i]
			break
		}
	}
	require.NotNil(t, want, "README shows no answer after %s", shown)
	var got, shownAnswer map[string]any
	require.NoError(t, json.Unmarshal(body, &got))
	require.NoError(t, json.Unmarshal([]byte(want.body), &shownAnswer))
	id := got["id"].(string)
	if got["details"].(map[string]any)["status"] == "queued" {
		// The runner had no free slot to start it at once: README's
		// running answer, as it would be queued.
		shownAnswer["details"] = map[string]any{"status": "queued"}
		delete(shownAnswer, "startedAt")
	}
	require.Equal(t, stable(shownAnswer), stable(got), "README shows another answer to %s", shown)

	q := regexp.MustCompile("`GET (/api/workflows/hello/instances/)<id>` then shows it complete, with\\s+`(\"details\":\\{[^`]*\\})`").FindStringSubmatch(text)
	require.NotNil(t, q, "README says what GET of the instance shows")
	settle(t, base)
	resp, err = http.Get(base + q[1] + id)
	require.NoError(t, err)
	var inst struct{ Details json.RawMessage }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&inst))
	require.NoError(t, resp.Body.Close())
	var details struct{ Details json.RawMessage }
	require.NoError(t, json.Unmarshal([]byte("{"+q[2]+"}"), &details))
	require.JSONEq(t, string(details.Details), string(inst.Details))
}

// stable replaces what differs from one answer to the next (ids, request
// ids and times) with stand-ins.
func stable(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range v {
			if k == "id" || k == "requestId" {
				x = "<id>"
			}
			out[k] = stable(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = stable(x)
		}
		return out
	case string:
		if timeRe.MatchString(v) && len(timeRe.FindString(v)) == len(v) {
			return "<time>"
		}
	}
	return v
}
