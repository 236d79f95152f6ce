package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/duraflow/duraflow"
	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/dburl"
	"github.com/duraflow/duraflow/db/postgres"
	"github.com/duraflow/duraflow/db/sqlite"
	"github.com/duraflow/duraflow/metrics"
	"github.com/duraflow/duraflow/runner"
)

// hostOptions say what one process of a run holds.
type hostOptions struct {
	backend      dburl.Backend
	url          string
	wakeChannel  string
	runner       bool
	concurrency  int
	pollInterval time.Duration
	noEager      bool
	noLog        bool
	metrics      bool
	logger       *slog.Logger
	// tracer, when set, counts the statements of the store (Postgres).
	tracer *sqlTracer
}

// host is one process's share of a run, built as duraflow serve and worker
// build theirs (duraflow.New): a store, a client with in-process wake-ups,
// and optionally a runner that also LISTENs for wake-ups from other
// processes on Postgres.
type host struct {
	store db.Store
	host  *duraflow.Host
	// client is the host's client; creates is the create workload's, the
	// only one that knows its workflow (nameCreate), so that no runner
	// claims its instances.
	client       *client.Client
	creates      *client.Client
	runner       *runner.Runner
	poolMaxConns int
}

// startHost opens the store and starts what opts ask for.
func startHost(ctx context.Context, opts hostOptions) (_ *host, err error) {
	h := &host{}
	defer func() {
		if err != nil {
			h.stop(context.WithoutCancel(ctx))
		}
	}()
	if h.store, h.poolMaxConns, err = openStore(ctx, opts); err != nil {
		return nil, err
	}
	clientReg, err := newRegistry(true)
	if err != nil {
		return nil, err
	}
	cfg := &duraflow.Config{
		Registry: clientReg, Logger: opts.logger, RunMode: duraflow.RunNone, DisableScheduler: true,
		DisableLifecycleLog: opts.noLog,
	}
	if opts.runner {
		// The runner's registry lacks the create workload's workflow, and
		// the host's client shares it; the create workload has a client of
		// its own below.
		if cfg.Registry, err = newRegistry(false); err != nil {
			return nil, err
		}
		// As duraflow worker builds it: instances the bench creates start on
		// the in-process runner at once when it has a free slot (eager
		// start), unless noEager.
		cfg.RunMode = duraflow.RunBackground
		cfg.Runner = &runner.Config{
			MaxConcurrency: opts.concurrency, PollInterval: opts.pollInterval, DisableEagerStart: opts.noEager,
		}
	}
	if opts.metrics {
		m, err := metrics.New(&metrics.Config{Store: h.store, Logger: opts.logger})
		if err != nil {
			return nil, err
		}
		cfg.Observer = m
	}
	if h.host, err = duraflow.New(h.store, cfg); err != nil {
		return nil, err
	}
	h.client, h.runner, h.creates = h.host.Client(), h.host.Runner(), h.host.Client()
	if opts.runner {
		if h.creates, err = client.New(&client.Config{Store: h.store, Registry: clientReg}); err != nil {
			return nil, err
		}
	}
	if err := h.host.Start(ctx); err != nil {
		return nil, err
	}
	if listening := h.host.Listening(); listening != nil {
		// A wake-up sent before the listener listens would wait for a poll.
		select {
		case <-listening:
		case <-time.After(10 * time.Second):
			return nil, errors.New("the wake listener did not connect within 10 seconds")
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return h, nil
}

// openStore opens the run's store as duraflow worker does, through the
// backend's Open; with a tracer, over a copy of the pool configuration Open
// chose with the tracer added.
func openStore(ctx context.Context, opts hostOptions) (db.Store, int, error) {
	if opts.backend != dburl.Postgres {
		_, dsn, err := dburl.Parse(opts.url)
		if err != nil {
			return nil, 0, err
		}
		s, err := sqlite.Open(ctx, dsn)
		if err != nil {
			return nil, 0, fmt.Errorf("opening SQLite: %w", err)
		}
		return s, 0, nil
	}
	s, err := postgres.Open(ctx, opts.url, postgres.WithWakeChannel(opts.wakeChannel))
	if err != nil {
		return nil, 0, err
	}
	maxConns := int(s.Pool().Config().MaxConns)
	if opts.tracer == nil {
		return s, maxConns, nil
	}
	pc := s.Pool().Config()
	_ = s.Close()
	pc.ConnConfig.Tracer = opts.tracer
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, 0, fmt.Errorf("opening postgres pool: %w", err)
	}
	return &ownedStore{Store: postgres.New(pool, postgres.WithWakeChannel(opts.wakeChannel)), pool: pool}, maxConns, nil
}

// ownedStore is a postgres.Store over a pool the bench opened, closed with
// it.
type ownedStore struct {
	*postgres.Store
	pool *pgxpool.Pool
}

// Close closes the pool.
func (s *ownedStore) Close() error {
	s.pool.Close()
	return nil
}

// groupCommits returns the in-process runner's group commits so far and the
// step checkpoints they held (zero without a runner).
func (h *host) groupCommits() (commits, checkpoints int64) {
	if h.runner == nil {
		return 0, 0
	}
	return h.runner.GroupCommitStats()
}

// stop stops the host (letting running work finish for up to 30 seconds)
// and closes the store.
func (h *host) stop(ctx context.Context) {
	if h.host != nil {
		stopCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_ = h.host.Stop(stopCtx)
		cancel()
	}
	if h.store != nil {
		_ = h.store.Close()
	}
}
