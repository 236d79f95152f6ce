package flow

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/flow/internal/procgroup"
	"github.com/duraflow/duraflow/workflow"
)

// TypeExec is the step type of the built-in exec handler.
const TypeExec = "exec"

// ExecConfig is the config of an exec step, which runs a command the host
// allow-listed (ExecHandlerConfig.Commands) — nothing else can run, and by
// default nothing is listed. The program is started directly, without a
// shell, with the step's input as JSON on stdin; it must write one JSON value
// (or nothing, which is null) on stdout, which is the step's output. It runs
// in a process group of its own (on Unix), and the whole group — the command
// and every process it started — is killed when its timeout passes, when the
// step's attempt ends, and when the command exits.
//
//	{"command": "resize-image", "args": ["--width", "${size.width}"], "timeout": "2 minutes"}
//
// A non-zero exit or a timeout fails the attempt with EXEC_ERROR (retried,
// the message carries the end of stderr); output that is not JSON or too
// large fails it with EXEC_OUTPUT_INVALID (not retried).
type ExecConfig struct {
	// Command is the name of an allow-listed command.
	Command string `json:"command"`
	// Args are templates appended to the command's fixed arguments, allowed
	// only when the command sets AllowArgs.
	Args []string `json:"args,omitempty"`
	// Timeout bounds the run, within the step's attempt timeout.
	//
	// Defaults to the handler's DefaultTimeout (1 minute).
	Timeout dftype.Duration `json:"timeout,omitempty"`
}

// ExecCommand is a command flows may run.
type ExecCommand struct {
	// Name is how flows name it in config.command.
	Name string
	// Path is the program's absolute path; there is no PATH lookup.
	Path string
	// Args are fixed arguments that come first.
	Args []string
	// AllowArgs lets flows append arguments. It is off by default because
	// arguments can change what a program does.
	AllowArgs bool
	// Env is the program's whole environment ("KEY=value"); nothing is
	// inherited from the host.
	Env []string
	// Dir is the working directory; empty is the host process's.
	Dir string
}

// ExecHandlerConfig configures the exec handler.
type ExecHandlerConfig struct {
	// Commands are the allow-listed commands.
	//
	// Defaults to none: every exec step fails validation.
	Commands []ExecCommand
	// MaxOutputBytes bounds what a command writes on stdout.
	//
	// Defaults to 1 MiB.
	MaxOutputBytes int
	// DefaultTimeout bounds a run without a timeout of its own.
	//
	// Defaults to 1 minute.
	DefaultTimeout time.Duration
	// WaitDelay is how long to wait, after the process was killed or
	// exited, for its output pipes to close (children holding them).
	//
	// Defaults to 5 seconds.
	WaitDelay time.Duration
}

// WithDefaults returns a copy of the config with zero fields filled in.
func (c *ExecHandlerConfig) WithDefaults() *ExecHandlerConfig {
	var out ExecHandlerConfig
	if c != nil {
		out = *c
	}
	out.MaxOutputBytes = cmp.Or(out.MaxOutputBytes, workflow.MaxPayloadBytes)
	out.DefaultTimeout = cmp.Or(out.DefaultTimeout, time.Minute)
	out.WaitDelay = cmp.Or(out.WaitDelay, 5*time.Second)
	return &out
}

// ExecHandler is the built-in exec handler.
type ExecHandler struct {
	cfg      *ExecHandlerConfig
	commands map[string]ExecCommand
}

// NewExecHandler returns an exec handler (nil config: no commands).
func NewExecHandler(cfg *ExecHandlerConfig) (*ExecHandler, error) {
	c := cfg.WithDefaults()
	if c.MaxOutputBytes < 0 || c.DefaultTimeout < 0 || c.WaitDelay < 0 {
		return nil, errors.New("flow: ExecHandlerConfig: limits must not be negative")
	}
	h := &ExecHandler{cfg: c, commands: map[string]ExecCommand{}}
	for _, cmd := range c.Commands {
		switch {
		case cmd.Name == "":
			return nil, errors.New("flow: ExecHandlerConfig: a command has no name")
		case !filepath.IsAbs(cmd.Path):
			return nil, fmt.Errorf("flow: ExecHandlerConfig: command %q: path %q is not absolute", cmd.Name, cmd.Path)
		}
		if _, dup := h.commands[cmd.Name]; dup {
			return nil, fmt.Errorf("flow: ExecHandlerConfig: command %q is listed twice", cmd.Name)
		}
		cmd.Args = append([]string(nil), cmd.Args...)
		cmd.Env = append([]string{}, cmd.Env...)
		h.commands[cmd.Name] = cmd
	}
	return h, nil
}

// Type returns "exec".
func (h *ExecHandler) Type() string { return TypeExec }

// Validate checks that the command is allow-listed and its args allowed.
func (h *ExecHandler) Validate(config json.RawMessage) error {
	var c ExecConfig
	if err := DecodeConfig(config, &c); err != nil {
		return err
	}
	var problems []Problem
	cmd, ok := h.commands[c.Command]
	switch {
	case c.Command == "":
		problems = append(problems, Problem{Path: "command", Message: "is required"})
	case !ok:
		problems = append(problems, Problem{Path: "command", Message: fmt.Sprintf("command %q is not allow-listed on this host (allowed: %s)", c.Command, h.names())})
	case len(c.Args) > 0 && !cmd.AllowArgs:
		problems = append(problems, Problem{Path: "args", Message: fmt.Sprintf("command %q takes no arguments from flows", c.Command)})
	}
	for i, a := range c.Args {
		if err := ValidateTemplate(a); err != nil {
			problems = append(problems, Problem{Path: fmt.Sprintf("args[%d]", i), Message: err.Error()})
		}
	}
	if c.Timeout < 0 {
		problems = append(problems, Problem{Path: "timeout", Message: "must not be negative"})
	}
	return newValidationError(problems, nil)
}

func (h *ExecHandler) names() string {
	if len(h.commands) == 0 {
		return "none"
	}
	names := sortedKeys(h.commands)
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// Run runs the command.
func (h *ExecHandler) Run(ctx context.Context, inv *Invocation) (any, error) {
	var c ExecConfig
	if err := DecodeConfig(inv.Config, &c); err != nil {
		return nil, failure(ErrorNameInvalidConfig, "%v", err)
	}
	command, ok := h.commands[c.Command]
	if !ok {
		return nil, failure(ErrorNameInvalidConfig, "command %q is not allow-listed on this host", c.Command)
	}
	if len(c.Args) > 0 && !command.AllowArgs {
		return nil, failure(ErrorNameInvalidConfig, "command %q takes no arguments from flows", c.Command)
	}
	args := append([]string(nil), command.Args...)
	for _, a := range c.Args {
		s, err := inv.Expand(a)
		if err != nil {
			return nil, err
		}
		args = append(args, s)
	}
	stdin, err := json.Marshal(inv.Input)
	if err != nil {
		return nil, failure(ErrorNameInvalidInput, "encoding input: %v", err)
	}
	timeout := cmp.Or(c.Timeout.Std(), h.cfg.DefaultTimeout)
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(rctx, command.Path, args...)
	cmd.Env = append([]string{}, command.Env...)
	cmd.Dir = command.Dir
	cmd.Stdin = bytes.NewReader(stdin)
	stdout := &cappedBuffer{max: h.cfg.MaxOutputBytes}
	stderr := &cappedBuffer{max: 64 << 10, keepTail: true}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = h.cfg.WaitDelay
	procgroup.Start(cmd)
	runErr := cmd.Run()
	// Children the command left behind (daemons, or those of a killed
	// command that still hold its pipes) go with it.
	_ = procgroup.Kill(cmd)
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case rctx.Err() != nil:
		return nil, retryable(ErrorNameExec, fmt.Errorf("command %q did not finish within %s and was killed%s", c.Command, dftype.FormatDuration(timeout), stderr.suffix()))
	case runErr != nil:
		return nil, retryable(ErrorNameExec, fmt.Errorf("command %q: %v%s", c.Command, runErr, stderr.suffix()))
	case stdout.overflow:
		return nil, failure(ErrorNameExecOutput, "command %q wrote more than %d bytes on stdout", c.Command, h.cfg.MaxOutputBytes)
	}
	out, err := decodeValue(stdout.Bytes())
	if err != nil {
		return nil, failure(ErrorNameExecOutput, "command %q wrote something other than one JSON value on stdout: %v", c.Command, err)
	}
	return out, nil
}

// cappedBuffer keeps at most max bytes (the first, or with keepTail the
// last) and swallows the rest, so that the writer never blocks on a full
// pipe.
type cappedBuffer struct {
	mu       sync.Mutex
	buf      []byte
	max      int
	keepTail bool
	overflow bool
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.max {
		b.overflow = true
		if b.keepTail {
			b.buf = append(b.buf[:0], b.buf[len(b.buf)-b.max:]...)
		} else {
			b.buf = b.buf[:b.max]
		}
	}
	return len(p), nil
}

func (b *cappedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf
}

// suffix returns ": stderr: <last line(s)>" for error messages.
func (b *cappedBuffer) suffix() string {
	s := strings.TrimSpace(strings.ToValidUTF8(string(b.Bytes()), "?"))
	if s == "" {
		return ""
	}
	const limit = 1024
	if len(s) > limit {
		s = "…" + s[len(s)-limit:]
	}
	return ": stderr: " + s
}
