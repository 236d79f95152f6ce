//go:build chaos && linux

package chaos_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres"
	"github.com/duraflow/duraflow/db/sqlite"
	"github.com/duraflow/duraflow/runner"
	"github.com/duraflow/duraflow/workflow"
)

// The environment through which the test tells a worker process what to do.
const (
	// envWorker set to "1" turns TestChaosWorker into the host program.
	envWorker = "DURAFLOW_CHAOS_WORKER"
	// envBackend is "sqlite" or "postgres".
	envBackend = "DURAFLOW_CHAOS_WORKER_BACKEND"
	// envDSN is the SQLite file or the Postgres URL.
	envDSN = "DURAFLOW_CHAOS_WORKER_DSN"
	// envLedger is the side-effect ledger the step callbacks append to.
	envLedger = "DURAFLOW_CHAOS_WORKER_LEDGER"
	// envLease is the runner's lease duration.
	envLease = "DURAFLOW_CHAOS_WORKER_LEASE"
	// envLifetime bounds a worker nobody killed, should the test die.
	envLifetime = "DURAFLOW_CHAOS_WORKER_LIFETIME"
	// envListenDSN is the Postgres URL the worker LISTENs on, when envDSN
	// goes through a pooler (the PgBouncer scenario); "" for envDSN.
	envListenDSN = "DURAFLOW_CHAOS_WORKER_LISTEN_DSN"
	// envWorkflow is the comma-separated workflows the worker registers,
	// and so claims: the chaos workers run chaos and crashloop-shared (the
	// crash loop beside the ordinary instances, which the runner's
	// quarantine must keep from taking them down with it), the isolated
	// crash-loop worker crashloop alone.
	envWorkflow = "DURAFLOW_CHAOS_WORKER_WORKFLOW"
)

const (
	chaosWorkflow     = "chaos"
	crashLoopWorkflow = "crashloop"
	// sharedLoopWorkflow is the same crash loop under another name, so
	// that only the chaos workers claim it.
	sharedLoopWorkflow = "crashloop-shared"

	// listenerAppName prefixes the application_name of a worker's LISTEN
	// connection; the pid follows, so the test can terminate one worker's.
	listenerAppName = "duraflow-chaos-listener-"
	// eventType is the event every chaos instance waits for.
	eventType = "go"
	// doSteps are the step.Do steps of the chaos workflow, in order.
	// stepMillis in the params gives each its callback's duration.
)

var doSteps = []string{"a", "b", "c", "d0", "d1", "d2"}

// chaosParams are the params of a chaos instance, drawn by the test from its
// seed so a replay runs the same workflows.
type chaosParams struct {
	N int `json:"n"`
	// StepMillis is how long each step of doSteps works (sleeps) inside its
	// callback, so that kills land mid-step.
	StepMillis []int `json:"stepMillis"`
	// NapMillis is the durable sleep between steps b and the wait.
	NapMillis int `json:"napMillis"`
}

// goEvent is the payload of the event a chaos instance waits for.
type goEvent struct {
	X int `json:"x"`
}

// stepResult is what every step.Do of the chaos workflow records: the value,
// and who computed it (pid and attempt token), so the database shows which
// process's attempt wrote each completed step.
type stepResult struct {
	V     int    `json:"v"`
	Pid   int    `json:"pid"`
	Token string `json:"token"`
}

// chaosOutput is a chaos instance's output: the final value and the token of
// the attempt whose result each step used.
type chaosOutput struct {
	V      int               `json:"v"`
	Tokens map[string]string `json:"tokens"`
}

// expectedValue is the output value of a chaos instance with params n whose
// event carried x.
func expectedValue(n, x int) int { return n*10 + 1 + x + len(doSteps) - 3 }

// eventValue is the payload the test sends to the instance with params n.
func eventValue(n int) int { return n * 7 }

// registerWorkflows registers the named workflows (chaos, crashloop,
// crashloop-shared; none means all), whose step callbacks append to the
// ledger at ledgerPath.
func registerWorkflows(reg *workflow.Registry, ledgerPath string, names ...string) {
	want := func(name string) bool { return len(names) == 0 || slices.Contains(names, name) }
	if want(chaosWorkflow) {
		registerChaos(reg, ledgerPath)
	}
	for _, name := range []string{crashLoopWorkflow, sharedLoopWorkflow} {
		if want(name) {
			registerCrashLoop(reg, name, ledgerPath)
		}
	}
}

func registerChaos(reg *workflow.Registry, ledgerPath string) {
	workflow.MustRegister(reg, chaosWorkflow, func(ctx context.Context, ev workflow.Event[chaosParams], step workflow.Step) (chaosOutput, error) {
		p := ev.Payload
		out := chaosOutput{Tokens: map[string]string{}}
		do := func(i int, v int) (int, error) {
			name := doSteps[i]
			work := time.Duration(p.StepMillis[i]) * time.Millisecond
			r, err := workflow.Do(step, name, func(ctx context.Context) (stepResult, error) {
				return ledgered(ctx, ledgerPath, work, v)
			})
			if err != nil {
				return 0, err
			}
			out.Tokens[name] = r.Token
			return r.V, nil
		}
		v, err := do(0, p.N*10)
		if err != nil {
			return out, err
		}
		if v, err = do(1, v+1); err != nil {
			return out, err
		}
		if err := step.Sleep("nap", time.Duration(p.NapMillis)*time.Millisecond); err != nil {
			return out, err
		}
		e, err := workflow.WaitForEvent[goEvent](step, "go", workflow.WaitOptions{Type: eventType, Timeout: time.Hour})
		if err != nil {
			return out, err
		}
		if v, err = do(2, v+e.X); err != nil {
			return out, err
		}
		for i := 3; i < len(doSteps); i++ {
			if v, err = do(i, v+1); err != nil {
				return out, err
			}
		}
		out.V = v
		return out, nil
	})
}

func registerCrashLoop(reg *workflow.Registry, name, ledgerPath string) {
	// crashloop's one step kills its own process on every attempt: the
	// crash loop that must end in an error after a bounded number of lost
	// leases instead of killing runners forever.
	workflow.MustRegister(reg, name, func(ctx context.Context, ev workflow.Event[struct{}], step workflow.Step) (int, error) {
		return workflow.Do(step, "boom", func(ctx context.Context) (int, error) {
			info, _ := workflow.StepInfoFromContext(ctx)
			if err := appendLedger(ledgerPath, 'S', info.InstanceID, info.Step, newToken(), info.StartedAt); err != nil {
				return 0, err
			}
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			<-ctx.Done()
			return 0, ctx.Err()
		})
	})
}

// ledgered is the body of every chaos step: it records its start in the
// ledger, works for the step's duration, records that it is done, and
// returns v with its pid and attempt token.
func ledgered(ctx context.Context, ledgerPath string, work time.Duration, v int) (stepResult, error) {
	info, ok := workflow.StepInfoFromContext(ctx)
	if !ok {
		return stepResult{}, workflow.NonRetryable(errors.New("step callback without step info"))
	}
	token := newToken()
	if err := appendLedger(ledgerPath, 'S', info.InstanceID, info.Step, token, info.StartedAt); err != nil {
		return stepResult{}, err
	}
	select {
	case <-ctx.Done():
		return stepResult{}, ctx.Err()
	case <-time.After(work):
	}
	if err := appendLedger(ledgerPath, 'D', info.InstanceID, info.Step, token, time.Now()); err != nil {
		return stepResult{}, err
	}
	return stepResult{V: v, Pid: os.Getpid(), Token: token}, nil
}

func newToken() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// appendLedger appends "<kind> <pid> <instance> <step> <token> <at>" to
// the ledger in one O_APPEND write, which keeps lines of concurrent
// processes whole and ordered; at is in Unix nanoseconds: for an S line the
// attempt's workflow.StepInfo.StartedAt (when the runner last made sure it
// held the instance, just before the function), for a C line the claim's
// Now (when it took the task), for a D line when the work finished. It does
// not sync: a SIGKILL loses nothing the kernel accepted.
func appendLedger(path string, kind byte, instance, step, token string, at time.Time) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("opening ledger: %w", err)
	}
	if _, err := fmt.Fprintf(f, "%c %d %s %s %s %d\n", kind, os.Getpid(), instance, step, token, at.UnixNano()); err != nil {
		_ = f.Close()
		return fmt.Errorf("writing ledger: %w", err)
	}
	return f.Close()
}

// workerID is the runner id of the worker process with the pid: the lock
// owner the database shows on the tasks it holds.
func workerID(pid int) string { return "chaos-" + strconv.Itoa(pid) }

// TestChaosWorker is the host program the chaos test starts, kills, stops
// and starts again: the test binary re-executed with envWorker set. It opens
// the database the test migrated, runs a runner with the chaos workflows
// (and on Postgres a LISTEN wake listener whose application_name carries
// the pid) until it is killed or its lifetime ends. Without envWorker it
// does nothing.
func TestChaosWorker(t *testing.T) {
	if os.Getenv(envWorker) != "1" {
		return
	}
	lifetime, err := time.ParseDuration(os.Getenv(envLifetime))
	require.NoError(t, err)
	lease, err := time.ParseDuration(os.Getenv(envLease))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), lifetime)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))

	dsn := os.Getenv(envDSN)
	var store db.Store
	poll := 200 * time.Millisecond
	switch backend := os.Getenv(envBackend); backend {
	case "sqlite":
		s, err := sqlite.Open(ctx, dsn)
		require.NoError(t, err)
		store = &claimLedgerSQLite{Store: s, ledger: os.Getenv(envLedger)}
	case "postgres":
		// The host LISTENs on a connection configured as the store's pool,
		// or on envListenDSN's, so the application_name (which the test
		// finds the LISTEN connection by) goes on both URLs.
		named := func(dsn string) string {
			u, err := url.Parse(dsn)
			require.NoError(t, err)
			q := u.Query()
			q.Set("application_name", listenerAppName+strconv.Itoa(os.Getpid()))
			u.RawQuery = q.Encode()
			return u.String()
		}
		opts := []postgres.Option{postgres.WithListenReconnectDelay(0, time.Second)}
		if listen := os.Getenv(envListenDSN); listen != "" {
			opts = append(opts, postgres.WithListenURL(named(listen)))
		}
		s, err := postgres.Open(ctx, named(dsn), opts...)
		require.NoError(t, err)
		store = &claimLedgerPostgres{Store: s, ledger: os.Getenv(envLedger)}
		// Wake-ups come over LISTEN, so the poll is only the safety net
		// and a terminated listener shows as slower work.
		poll = time.Second
	default:
		t.Fatalf("worker: unknown backend %q", backend)
	}
	defer func() { _ = store.Close() }()

	reg := workflow.NewRegistry()
	registerWorkflows(reg, os.Getenv(envLedger), strings.Split(os.Getenv(envWorkflow), ",")...)
	host, err := duraflow.New(store, &duraflow.Config{
		Registry: reg, Logger: logger, DisableScheduler: true,
		Runner: &runner.Config{
			ID:             workerID(os.Getpid()),
			LeaseDuration:  lease,
			PollInterval:   poll,
			MaxConcurrency: 32,
		},
	})
	require.NoError(t, err)
	require.NoError(t, host.Start(ctx))
	fmt.Fprintf(os.Stderr, "chaos worker %d started\n", os.Getpid())
	<-ctx.Done()
	stopCtx, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	_ = host.Stop(stopCtx)
}

// claimLedgerSQLite and claimLedgerPostgres are the workers' stores: the
// backend's own (every capability the host looks for is promoted), with a
// TaskClaim that writes a C line per claimed task to the ledger before the
// runner gets it. A worker that dies holds every task it claimed, reached
// its workflow code or not; the C lines let verify tell the lease losses an
// instance can have had from its claims in workers that died.
type claimLedgerSQLite struct {
	*sqlite.Store
	ledger string
}

// TaskClaim claims and writes the claims to the ledger.
func (s *claimLedgerSQLite) TaskClaim(ctx context.Context, p *db.TaskClaimParams) ([]db.Claim, error) {
	return ledgerClaims(s.ledger, p.Now)(s.Store.TaskClaim(ctx, p))
}

type claimLedgerPostgres struct {
	*postgres.Store
	ledger string
}

// TaskClaim claims and writes the claims to the ledger.
func (s *claimLedgerPostgres) TaskClaim(ctx context.Context, p *db.TaskClaimParams) ([]db.Claim, error) {
	return ledgerClaims(s.ledger, p.Now)(s.Store.TaskClaim(ctx, p))
}

// ledgerClaims returns a func that writes a C line per claim of an ordinary
// chaos instance, with the task's lease losses, and passes the claim on; a ledger that cannot be written
// fails the claim (the worker then claims nothing and the test sees it).
func ledgerClaims(ledger string, now time.Time) func([]db.Claim, error) ([]db.Claim, error) {
	return func(claims []db.Claim, err error) ([]db.Claim, error) {
		if err != nil {
			return claims, err
		}
		for _, c := range claims {
			if c.Task.WorkflowName != chaosWorkflow {
				continue
			}
			// The step field carries the task's lease losses in a row as
			// the claim found them (the previous holder's loss counted).
			if err := appendLedger(ledger, 'C', c.Task.InstanceID, strconv.Itoa(c.Task.LeaseLosses), "-", now); err != nil {
				return nil, err
			}
		}
		return claims, nil
	}
}
