//go:build chaos && linux

package chaos_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgCluster is a private Postgres server the suite creates, restarts and
// removes, so that restarting it disturbs nobody else's tests.
type pgCluster struct {
	bin  string // directory of initdb, pg_ctl
	dir  string // the temporary directory: data, socket, log
	data string
	log  string
	port int
	// asUser runs the binaries as this OS user (postgres) when the test runs
	// as root, which initdb and postgres refuse.
	asUser string
}

// findPGBin returns the directory of initdb and pg_ctl: DURAFLOW_CHAOS_PG_BIN,
// the newest /usr/lib/postgresql/*/bin, or the one on PATH.
func findPGBin() (string, error) {
	if dir := os.Getenv("DURAFLOW_CHAOS_PG_BIN"); dir != "" {
		return dir, nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	sort.Slice(matches, func(i, j int) bool { return pgMajor(matches[i]) > pgMajor(matches[j]) })
	if len(matches) > 0 {
		return filepath.Dir(matches[0]), nil
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", fmt.Errorf("finding pg_ctl and initdb: not under /usr/lib/postgresql/*/bin nor on PATH; set DURAFLOW_CHAOS_PG_BIN")
}

func pgMajor(path string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return n
}

// startPGCluster initdbs a cluster in a temporary directory and starts it on
// a free loopback port with fsync on. It is stopped and removed when the test
// ends, failed or not. Without the binaries it skips the test, or fails it
// when CI=true.
func startPGCluster(t *testing.T) *pgCluster {
	t.Helper()
	bin, err := findPGBin()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("postgres chaos needs its own server: %v", err)
		}
		t.Skipf("skipping the postgres chaos run: %v", err)
	}
	dir, err := os.MkdirTemp("", "duraflow-chaos-pg-")
	if err != nil {
		t.Fatalf("creating the cluster directory: %v", err)
	}
	c := &pgCluster{bin: bin, dir: dir, data: filepath.Join(dir, "data"), log: filepath.Join(dir, "server.log")}
	t.Cleanup(func() {
		stop := exec.Command(filepath.Join(c.bin, "pg_ctl"), "-D", c.data, "-m", "immediate", "-w", "stop")
		_, _ = c.run(stop)
		if t.Failed() {
			if b, err := os.ReadFile(c.log); err == nil {
				t.Logf("private postgres log (tail):\n%s", tail(string(b), 40))
			}
		}
		_ = os.RemoveAll(dir)
	})
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root, the private postgres needs the OS user postgres: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatalf("giving the cluster directory to postgres: %v", err)
		}
		c.asUser = "postgres"
	}
	if out, err := c.run(exec.Command(filepath.Join(bin, "initdb"), "-D", c.data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8")); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	c.port = freePort(t)
	if err := c.start(); err != nil {
		t.Fatalf("starting the private postgres: %v", err)
	}
	return c
}

// run runs cmd, as c.asUser when set, and returns its combined output.
func (c *pgCluster) run(cmd *exec.Cmd) (string, error) {
	if c.asUser != "" {
		args := append([]string{"-u", c.asUser, "--", cmd.Path}, cmd.Args[1:]...)
		cmd = exec.Command("runuser", args...)
	}
	cmd.Dir = c.dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// URL is the connection URL of the cluster's postgres database.
func (c *pgCluster) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// start starts the server and waits until it accepts connections.
func (c *pgCluster) start() error {
	opts := fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -c unix_socket_directories=%s -c fsync=on -c max_connections=200",
		c.port, c.dir)
	out, err := c.run(exec.Command(filepath.Join(c.bin, "pg_ctl"), "-D", c.data, "-l", c.log, "-o", opts, "-w", "-t", "60", "start"))
	if err != nil {
		return fmt.Errorf("pg_ctl start: %w\n%s", err, out)
	}
	return nil
}

// stopImmediate stops the server in immediate mode: no checkpoint, every
// connection cut, crash recovery at the next start.
func (c *pgCluster) stopImmediate() error {
	out, err := c.run(exec.Command(filepath.Join(c.bin, "pg_ctl"), "-D", c.data, "-m", "immediate", "-w", "stop"))
	if err != nil {
		return fmt.Errorf("pg_ctl stop: %w\n%s", err, out)
	}
	return nil
}

// restart stops the server in immediate mode, keeps it down for downtime and
// starts it again. It returns when the server accepts connections again:
// the moment the database is back.
func (c *pgCluster) restart(downtime time.Duration) (back time.Time, err error) {
	if err := c.stopImmediate(); err != nil {
		return time.Time{}, err
	}
	<-time.After(downtime)
	if err := c.start(); err != nil {
		return time.Time{}, err
	}
	return time.Now(), nil
}

// terminateListener terminates the LISTEN connection of the worker with the
// pid (found by its application_name) and reports whether there was one.
func terminateListener(ctx context.Context, conn *pgx.Conn, pid int) (bool, error) {
	var n int
	err := conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1 AND query ILIKE 'LISTEN%'`, listenerAppName+strconv.Itoa(pid)).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("terminating the listener of worker %d: %w", pid, err)
	}
	return n > 0, nil
}

// listening reports whether the worker with the pid has a LISTEN connection.
func listening(ctx context.Context, conn *pgx.Conn, pid int) (bool, error) {
	var n int
	err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE application_name = $1 AND query ILIKE 'LISTEN%'`, listenerAppName+strconv.Itoa(pid)).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("looking for the listener of worker %d: %w", pid, err)
	}
	return n > 0, nil
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
