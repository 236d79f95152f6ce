package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/duraflow/duraflow/db/postgres/internal/pgsqlc"
)

// pipelineStep is one sqlc statement of a pipeline. It is called twice with
// the same arguments: once to queue the statement (every call of q then fails
// with errQueued, which the step returns or ignores), once to read its answer.
// It must call the same queries in the same order both times, whatever the
// answers, so it must not branch on them before its last query.
type pipelineStep func(q *pgsqlc.Queries) error

// errQueued is what a statement answers while its step is being queued.
var errQueued = errors.New("postgres: statement queued, not run")

// pipeline sends the prelude statements (SQL without arguments), the steps'
// statements and the postlude statements to Postgres as one pgx batch: one round trip, all in the
// implicit transaction of the batch, so they commit together, and an error in
// one rolls back all of them and skips the rest. Statements see the effects
// of those before them, each with a snapshot of its own (read committed).
//
// A prelude may open an explicit transaction (BEGIN) for the postlude to
// commit, to give every statement one snapshot.
//
// A step that returns an error stops the reading of answers; the statements
// after it still ran, and commit unless one of them failed.
func (s *Store) pipeline(ctx context.Context, prelude, postlude []string, steps ...pipelineStep) error {
	return sendPipeline(ctx, s.pool, prelude, postlude, steps...)
}

// batchSender sends a pgx batch: the pool (on any of its connections) or one
// connection held for a transaction of several round trips.
type batchSender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// sendPipeline is pipeline on a sender of its own: on a held connection, a
// transaction the prelude opens may stay open for the next pipeline.
func sendPipeline(ctx context.Context, sender batchSender, prelude, postlude []string, steps ...pipelineStep) error {
	b := &pgx.Batch{}
	for _, sql := range prelude {
		b.Queue(sql)
	}
	queue := pgsqlc.New(queuer{b})
	for _, step := range steps {
		if err := step(queue); err != nil && !errors.Is(err, errQueued) {
			return err
		}
	}
	for _, sql := range postlude {
		b.Queue(sql)
	}
	br := sender.SendBatch(ctx, b)
	for range prelude {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return err
		}
	}
	answers := pgsqlc.New(answerer{br})
	for _, step := range steps {
		if err := step(answers); err != nil {
			_ = br.Close()
			return err
		}
	}
	for range postlude {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return err
		}
	}
	return br.Close()
}

// queuer is a pgsqlc.DBTX that queues each statement in a batch instead of
// running it.
type queuer struct{ b *pgx.Batch }

func (q queuer) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	q.b.Queue(sql, args...)
	return pgconn.CommandTag{}, errQueued
}

func (q queuer) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	q.b.Queue(sql, args...)
	return nil, errQueued
}

func (q queuer) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	q.b.Queue(sql, args...)
	return errRow{errQueued}
}

// answerer is a pgsqlc.DBTX that answers each statement with the next result
// of a sent batch, in queue order; the SQL and arguments were sent already.
type answerer struct{ br pgx.BatchResults }

func (a answerer) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return a.br.Exec()
}

func (a answerer) Query(context.Context, string, ...any) (pgx.Rows, error) {
	return a.br.Query()
}

func (a answerer) QueryRow(context.Context, string, ...any) pgx.Row {
	return a.br.QueryRow()
}

// errRow is a pgx.Row that fails with err.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
