//go:build unix

package flow_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/flow"
)

// TestExecHandlerKillsTheProcessGroup shows that a timeout or the end of the
// attempt kills the command's children too, not only the command.
func TestExecHandlerKillsTheProcessGroup(t *testing.T) {
	t.Parallel()

	// spawner runs a shell that starts a grandchild (sleep), writes its pid
	// to a file and waits for it.
	spawner := func(t *testing.T) (*flow.ExecHandler, string) {
		t.Helper()
		pidFile := filepath.Join(t.TempDir(), "pid")
		env := []string{"PIDFILE=" + pidFile}
		h, err := flow.NewExecHandler(&flow.ExecHandlerConfig{
			Commands: []flow.ExecCommand{
				{Name: "spawn", Path: "/bin/sh", Args: []string{"-c", `sleep 60 & echo $! > "$PIDFILE"; wait`}, Env: env},
				// A daemon: the grandchild holds none of the command's pipes.
				{Name: "detach", Path: "/bin/sh", Args: []string{"-c", `sleep 60 < /dev/null > /dev/null 2>&1 & echo $! > "$PIDFILE"`}, Env: env},
			},
			WaitDelay: 500 * time.Millisecond,
		})
		require.NoError(t, err)
		return h, pidFile
	}

	t.Run("OnTimeout", func(t *testing.T) {
		t.Parallel()
		h, pidFile := spawner(t)
		_, err := invoke(t, h, `{"command": "spawn", "timeout": "300 milliseconds"}`, `{}`, nil)
		requireFailure(t, err, flow.ErrorNameExec, true)
		requireGone(t, readPID(t, pidFile))
	})

	t.Run("OnExit", func(t *testing.T) {
		t.Parallel()
		h, pidFile := spawner(t)
		out, err := invoke(t, h, `{"command": "detach"}`, `{}`, nil)
		require.NoError(t, err)
		require.Nil(t, out)
		requireGone(t, readPID(t, pidFile))
	})

	t.Run("OnCancel", func(t *testing.T) {
		t.Parallel()
		h, pidFile := spawner(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := h.Run(ctx, &flow.Invocation{StepID: "s", Config: json.RawMessage(`{"command": "spawn"}`), Context: map[string]any{}})
			done <- err
		}()
		pid := readPID(t, pidFile) // the grandchild runs
		cancel()
		select {
		case err := <-done:
			require.ErrorIs(t, err, context.Canceled)
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return after the cancellation")
		}
		requireGone(t, pid)
	})
}

// readPID waits for the spawner to write its grandchild's pid.
func readPID(t *testing.T, file string) int {
	t.Helper()
	var pid int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(file)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}, 10*time.Second, 10*time.Millisecond)
	return pid
}

// requireGone waits until the process is gone (or a zombie, which a
// container's init may never reap).
func requireGone(t *testing.T, pid int) {
	t.Helper()
	gone := func() bool {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return errors.Is(err, os.ErrNotExist)
		}
		// pid (comm) state ...: comm may hold spaces, so read after the last ')'.
		s := string(stat)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		return len(fields) > 0 && fields[0] == "Z"
	}
	if !waitFor(gone, 5*time.Second) {
		_ = syscall.Kill(pid, syscall.SIGKILL) // don't leave it behind
		t.Fatalf("grandchild %d outlived the command", pid)
	}
}

func waitFor(cond func() bool, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
	return true
}
