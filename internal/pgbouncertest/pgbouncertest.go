package pgbouncertest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Environment variables that steer the package.
const (
	// EnvPgBouncer set to 1 makes a missing pgbouncer binary a failure
	// instead of a skip (as CI=true does); package pgtest also routes every
	// test store through a PgBouncer then.
	EnvPgBouncer = "DURAFLOW_TEST_PGBOUNCER"
	// EnvPgBouncerBin is the pgbouncer binary to run, when it is neither on
	// PATH nor /usr/sbin/pgbouncer.
	EnvPgBouncerBin = "DURAFLOW_TEST_PGBOUNCER_BIN"
)

// startTimeout bounds how long a start waits for PgBouncer to listen.
const startTimeout = 15 * time.Second

// Bouncer is a private PgBouncer process in transaction pooling mode. Stop,
// Start and Restart may be called from any goroutine; the port stays the
// same across restarts.
type Bouncer struct {
	bin      string
	dir      string
	ini      string
	log      string
	port     int
	sysProc  *syscall.SysProcAttr
	upstream string // host:port of the Postgres server

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// Option changes how Start configures PgBouncer.
type Option func(*config)

type config struct {
	poolSize, maxDBConns int
	ignoreParams         []string
}

// WithPoolSize sets default_pool_size: the most server connections of one
// pool (one database and role).
//
// Defaults to 10.
func WithPoolSize(n int) Option { return func(c *config) { c.poolSize = n } }

// WithMaxDBConnections sets max_db_connections: the most server
// connections to the database, over every role's pool. Tests share the
// server with other test processes, so keep it small.
//
// Defaults to 30.
func WithMaxDBConnections(n int) Option { return func(c *config) { c.maxDBConns = n } }

// WithIgnoreStartupParameters sets ignore_startup_parameters: startup
// parameters PgBouncer accepts from clients and drops, instead of refusing
// the connection.
//
// Defaults to none.
func WithIgnoreStartupParameters(names ...string) Option {
	return func(c *config) { c.ignoreParams = names }
}

// Start starts a PgBouncer in transaction mode in front of the Postgres
// server of upstream (a postgres:// URL whose user, with its password if
// any, looks up the roles clients log in as: auth_user) and stops it when
// the test ends. It skips the test when no pgbouncer binary is found, or
// fails it under CI=true or DURAFLOW_TEST_PGBOUNCER=1.
func Start(t testing.TB, upstream string, opts ...Option) *Bouncer {
	t.Helper()
	b, err := newBouncer(t, upstream, opts)
	if err != nil {
		t.Fatalf("pgbouncertest: %v", err)
	}
	t.Cleanup(func() {
		b.Stop()
		if t.Failed() {
			if out, err := os.ReadFile(b.log); err == nil {
				t.Logf("pgbouncer log (tail):\n%s", tail(string(out), 30))
			}
		}
		_ = os.RemoveAll(b.dir)
	})
	if err := b.Start(); err != nil {
		t.Fatalf("pgbouncertest: %v", err)
	}
	return b
}

var (
	sharedMu sync.Mutex
	shared   = map[string]*Bouncer{}
)

// Shared returns the PgBouncer of the test binary in front of upstream's
// server, started at its first use (as Start's) and never stopped: on
// Linux it dies with the test binary. Its directory is removed once it
// runs (it has read its configuration), so nothing of it outlives the
// binary; it cannot be restarted. A failed start fails every test that
// asks for it.
func Shared(t testing.TB, upstream string) *Bouncer {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if b := shared[upstream]; b != nil {
		return b
	}
	b, err := newBouncer(t, upstream, nil)
	if err != nil {
		t.Fatalf("pgbouncertest: %v", err)
	}
	if err := b.Start(); err != nil {
		_ = os.RemoveAll(b.dir)
		t.Fatalf("pgbouncertest: %v", err)
	}
	_ = os.RemoveAll(b.dir)
	shared[upstream] = b
	return b
}

// newBouncer writes the configuration of a PgBouncer in front of
// upstream's server into a directory of its own; it skips t without a
// pgbouncer binary.
func newBouncer(t testing.TB, upstream string, opts []Option) (_ *Bouncer, err error) {
	t.Helper()
	bin, err := findBinary()
	if err != nil {
		if os.Getenv("CI") == "true" || os.Getenv(EnvPgBouncer) == "1" {
			t.Fatalf("pgbouncertest: %v", err)
		}
		t.Skipf("skipping: %v", err)
	}
	cfg := config{poolSize: 10, maxDBConns: 30}
	for _, opt := range opts {
		opt(&cfg)
	}
	u, err := url.Parse(upstream)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.User == nil {
		return nil, fmt.Errorf("upstream %q: want a postgres:// URL with a user", redact(upstream))
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		host = "127.0.0.1"
	}
	if port == "" {
		port = "5432"
	}
	dir, err := os.MkdirTemp("", "duraflow-pgbouncer-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	sysProc, chown, err := processAttr(dir)
	if err != nil {
		return nil, err
	}
	b := &Bouncer{
		bin: bin, dir: dir, ini: filepath.Join(dir, "pgbouncer.ini"), log: filepath.Join(dir, "pgbouncer.log"),
		sysProc: sysProc, upstream: net.JoinHostPort(host, port),
	}
	if b.port, err = freePort(); err != nil {
		return nil, err
	}
	password, _ := u.User.Password()
	auth := fmt.Sprintf("%s %s\n", quote(u.User.Username()), quote(password))
	ini := strings.Join([]string{
		"[databases]",
		fmt.Sprintf("* = host=%s port=%s", host, port),
		"[pgbouncer]",
		"listen_addr = 127.0.0.1",
		fmt.Sprintf("listen_port = %d", b.port),
		"unix_socket_dir =",
		"pool_mode = transaction",
		// Any role of the server may log in: it is looked up through
		// auth_user, and the server trusts local connections.
		"auth_type = trust",
		"auth_file = " + filepath.Join(dir, "users.txt"),
		"auth_user = " + u.User.Username(),
		"max_client_conn = 1000",
		fmt.Sprintf("default_pool_size = %d", cfg.poolSize),
		fmt.Sprintf("max_db_connections = %d", cfg.maxDBConns),
		// Each test's role has a pool of its own: close its server
		// connections soon after the test, for the next pools.
		"server_idle_timeout = 2",
		"server_login_retry = 1",
		"log_connections = 0",
		"log_disconnections = 0",
		"ignore_startup_parameters = " + strings.Join(cfg.ignoreParams, ","),
		"",
	}, "\n")
	if err := os.WriteFile(filepath.Join(dir, "users.txt"), []byte(auth), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(b.ini, []byte(ini), 0o600); err != nil {
		return nil, err
	}
	for _, f := range []string{"users.txt", "pgbouncer.ini"} {
		if err := chown(filepath.Join(dir, f)); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// Addr is the host:port PgBouncer listens on.
func (b *Bouncer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(b.port)) }

// Upstream is the host:port of the Postgres server behind PgBouncer.
func (b *Bouncer) Upstream() string { return b.upstream }

// URL returns the postgres:// URL u with its host and port replaced by
// PgBouncer's and params ("key=value") added to its query: the same
// database and role, through the pooler.
func (b *Bouncer) URL(u string, params ...string) (string, error) {
	parsed, err := url.Parse(u)
	if err != nil || (parsed.Scheme != "postgres" && parsed.Scheme != "postgresql") {
		return "", fmt.Errorf("pgbouncertest: %q is not a postgres:// URL", redact(u))
	}
	parsed.Host = b.Addr()
	q := parsed.Query()
	for _, p := range params {
		k, v, _ := strings.Cut(p, "=")
		q.Set(k, v)
	}
	parsed.RawQuery = q.Encode()
	return parsed.String(), nil
}

// Start starts the process when it is not running, and returns once it
// listens.
func (b *Bouncer) Start() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd != nil {
		return nil
	}
	logFile, err := os.OpenFile(b.log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(b.bin, b.ini)
	cmd.Dir = b.dir
	cmd.SysProcAttr = b.sysProc
	stderr, err := cmd.StderrPipe()
	if err != nil {
		_ = logFile.Close()
		return err
	}
	cmd.Stdout = logFile
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return fmt.Errorf("starting %s: %w", b.bin, err)
	}
	up := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		// PgBouncer logs to standard error; its log is copied to the log
		// file, and "process up" says it listens.
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			_, _ = io.WriteString(logFile, line+"\n")
			if strings.Contains(line, "process up") {
				once.Do(func() { close(up) })
			}
		}
		_ = cmd.Wait()
		_ = logFile.Close()
		close(exited)
	}()
	select {
	case <-up:
	case <-exited:
		out, _ := os.ReadFile(b.log)
		return fmt.Errorf("pgbouncer exited at start (%s):\n%s", cmd.ProcessState, tail(string(out), 10))
	case <-time.After(startTimeout):
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("pgbouncer did not start within %s", startTimeout)
	}
	b.cmd, b.exited = cmd, exited
	return nil
}

// Stop stops the process at once (SIGTERM, PgBouncer's immediate
// shutdown: every client and server connection is closed) and waits until
// it has exited. A stopped bouncer may be started again.
func (b *Bouncer) Stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil {
		return
	}
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.exited:
	case <-time.After(10 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.exited
	}
	b.cmd, b.exited = nil, nil
}

// Restart stops the process, keeps it down for downtime, and starts it
// again on the same port. It returns once it listens again.
func (b *Bouncer) Restart(downtime time.Duration) error {
	b.Stop()
	<-time.After(downtime)
	return b.Start()
}

// findBinary returns the pgbouncer binary: DURAFLOW_TEST_PGBOUNCER_BIN, the
// one on PATH, or Debian's /usr/sbin/pgbouncer (sbin is not on every
// user's PATH).
func findBinary() (string, error) {
	if p := os.Getenv(EnvPgBouncerBin); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/pgbouncer", "/usr/local/sbin/pgbouncer", "/usr/local/bin/pgbouncer"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no pgbouncer binary (on PATH, /usr/sbin or " + EnvPgBouncerBin + "); install it (apt-get install pgbouncer)")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// quote quotes s for PgBouncer's auth file.
func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// redact hides the password of a URL.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
