// Package pgcluster starts a private PostgreSQL server for a test: initdb
// in a temporary directory, then pg_ctl on a free loopback port. A test may
// stop, restart or crash it without disturbing anyone else's tests, which
// share the server of DURAFLOW_TEST_DATABASE_URL and must never see it
// restart. The chaos suite restarts one under load; the database outage
// tests restart one under a host and under the real binary.
//
// The binaries are found in DURAFLOW_PG_BIN (or DURAFLOW_CHAOS_PG_BIN), the
// newest /usr/lib/postgresql/*/bin, or on PATH. As root they run as the OS
// user postgres, since initdb and postgres refuse to run as root. Without
// them Start skips the test, or fails it when CI=true or
// DURAFLOW_REQUIRE_POSTGRES=1.
//
// It is for tests only and must not be imported by production code.
package pgcluster

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Cluster is a private Postgres server, removed when its test ends.
type Cluster struct {
	bin  string // directory of initdb, pg_ctl
	dir  string // the temporary directory: data, socket, log
	data string
	log  string
	port int
	// asUser runs the binaries as this OS user (postgres) when the test runs
	// as root, which initdb and postgres refuse.
	asUser string

	mu      sync.Mutex
	running bool
}

// findBin returns the directory of initdb and pg_ctl.
func findBin() (string, error) {
	for _, env := range []string{"DURAFLOW_PG_BIN", "DURAFLOW_CHAOS_PG_BIN"} {
		if dir := os.Getenv(env); dir != "" {
			return dir, nil
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	sort.Slice(matches, func(i, j int) bool { return major(matches[i]) > major(matches[j]) })
	if len(matches) > 0 {
		return filepath.Dir(matches[0]), nil
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", fmt.Errorf("finding pg_ctl and initdb: not under /usr/lib/postgresql/*/bin nor on PATH; set DURAFLOW_PG_BIN")
}

func major(path string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return n
}

// Start initdbs a cluster in a temporary directory and starts it on a free
// loopback port with fsync on. It is stopped and removed when the test
// ends, failed or not; a failed test logs the tail of the server's log.
func Start(t testing.TB) *Cluster {
	t.Helper()
	bin, err := findBin()
	if err != nil {
		if os.Getenv("CI") == "true" || os.Getenv("DURAFLOW_REQUIRE_POSTGRES") == "1" {
			t.Fatalf("pgcluster: a private postgres is needed: %v", err)
		}
		t.Skipf("pgcluster: skipping, no private postgres: %v", err)
	}
	dir, err := os.MkdirTemp("", "duraflow-pg-")
	if err != nil {
		t.Fatalf("pgcluster: creating the cluster directory: %v", err)
	}
	c := &Cluster{bin: bin, dir: dir, data: filepath.Join(dir, "data"), log: filepath.Join(dir, "server.log")}
	t.Cleanup(func() {
		_ = c.Stop()
		if t.Failed() {
			if b, err := os.ReadFile(c.log); err == nil {
				t.Logf("private postgres log (tail):\n%s", Tail(string(b), 40))
			}
		}
		_ = os.RemoveAll(dir)
	})
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("pgcluster: running as root, the private postgres needs the OS user postgres: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatalf("pgcluster: giving the cluster directory to postgres: %v", err)
		}
		c.asUser = "postgres"
	}
	if out, err := c.run(exec.Command(filepath.Join(bin, "initdb"), "-D", c.data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8")); err != nil {
		t.Fatalf("pgcluster: initdb: %v\n%s", err, out)
	}
	c.port = freePort(t)
	if err := c.Start(); err != nil {
		t.Fatalf("pgcluster: starting the private postgres: %v", err)
	}
	return c
}

// run runs cmd, as c.asUser when set, and returns its combined output.
func (c *Cluster) run(cmd *exec.Cmd) (string, error) {
	if c.asUser != "" {
		args := append([]string{"-u", c.asUser, "--", cmd.Path}, cmd.Args[1:]...)
		cmd = exec.Command("runuser", args...)
	}
	cmd.Dir = c.dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// URL is the connection URL of the cluster's postgres database.
func (c *Cluster) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// Addr is the cluster's host:port.
func (c *Cluster) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)) }

// Start starts the server (again, after Stop) and returns once it accepts
// connections. Starting a running server does nothing.
func (c *Cluster) Start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running {
		return nil
	}
	opts := fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -c unix_socket_directories=%s -c fsync=on -c max_connections=200",
		c.port, c.dir)
	out, err := c.run(exec.Command(filepath.Join(c.bin, "pg_ctl"), "-D", c.data, "-l", c.log, "-o", opts, "-w", "-t", "60", "start"))
	if err != nil {
		return fmt.Errorf("pg_ctl start: %w\n%s", err, out)
	}
	c.running = true
	return nil
}

// Stop stops the server in immediate mode: no checkpoint, every connection
// cut, crash recovery at the next start. Stopping a stopped server does
// nothing.
func (c *Cluster) Stop() error { return c.stop("immediate") }

// StopFast stops the server in fast mode: every session is ended with
// admin_shutdown (57P01) and a checkpoint is written.
func (c *Cluster) StopFast() error { return c.stop("fast") }

func (c *Cluster) stop(mode string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.running {
		return nil
	}
	out, err := c.run(exec.Command(filepath.Join(c.bin, "pg_ctl"), "-D", c.data, "-m", mode, "-w", "stop"))
	if err != nil {
		return fmt.Errorf("pg_ctl stop: %w\n%s", err, out)
	}
	c.running = false
	return nil
}

// Restart stops the server in immediate mode, keeps it down for downtime
// and starts it again. It returns when the server accepts connections
// again: the moment the database is back.
func (c *Cluster) Restart(downtime time.Duration) (back time.Time, err error) {
	if err := c.Stop(); err != nil {
		return time.Time{}, err
	}
	<-time.After(downtime)
	if err := c.Start(); err != nil {
		return time.Time{}, err
	}
	return time.Now(), nil
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pgcluster: finding a free port: %v", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// Tail returns the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
