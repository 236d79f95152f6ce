package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/workflow"
)

var _ workflow.TxEngine = (*Client)(nil)

// CreateTx creates one instance exactly as Create does (the same
// validation, metadata, placement, dedupe key, deadline and limits), but
// inside the caller's own database transaction tx, so that the instance,
// its first task and the caller's rows written in tx commit or roll back
// together. tx is a transaction on the client's database: a pgx.Tx on
// Postgres (begun on the store's pool, or any connection to the same
// database and schema), a *sql.Tx on SQLite (begun on the store's DB). A
// transaction on another database is not detected: the instance is
// written there.
//
// Nothing runs before the commit: the instance is queued, never started
// eagerly, and no runner is woken. On Postgres the wake notification is
// part of tx, so listening runners are woken when it commits and never
// when it rolls back. The returned AfterCommitFunc (never nil) wakes this
// process's runners: call it after the commit. Without it the instance
// still runs, when a runner next polls (or, on Postgres, as soon as the
// notification arrives).
//
// The create writes in a savepoint of tx: when it fails (an id that
// exists, ErrInstanceAlreadyExists) it changes nothing and tx stays usable.
// A committed or rolled-back tx is workflow.ErrTxDone, a transaction of
// the wrong type workflow.ErrTxNotSupported. A create with a dedupe key
// sees the instances tx created, and one held by a transaction not yet
// committed waits for it (on Postgres).
func (c *Client) CreateTx(ctx context.Context, tx any, workflowName string, req dftype.CreateRequest) (*dftype.InstanceInfo, workflow.AfterCommitFunc, error) {
	view, ctx, wake, err := c.inTx(ctx, tx)
	if err != nil {
		return nil, noWake, err
	}
	info, err := view.Create(ctx, workflowName, req)
	if err != nil {
		return nil, noWake, txError(err)
	}
	return info, wake.afterCommit, nil
}

// CreateBatchTx creates up to Config.EngineLimits.MaxBatchSize instances
// exactly as CreateBatch does, inside the caller's database transaction
// tx, as CreateTx does for one.
func (c *Client) CreateBatchTx(ctx context.Context, tx any, workflowName string, reqs []dftype.CreateRequest) ([]*dftype.InstanceInfo, workflow.AfterCommitFunc, error) {
	view, ctx, wake, err := c.inTx(ctx, tx)
	if err != nil {
		return nil, noWake, err
	}
	infos, err := view.CreateBatch(ctx, workflowName, reqs)
	if err != nil {
		return nil, noWake, txError(err)
	}
	return infos, wake.afterCommit, nil
}

// inTx returns a view of the client whose creates write in tx, under the
// context the store bound to tx: it starts nothing eagerly (a runner would
// get the instance before the commit), and it records the wake-ups its
// creates make for the caller to send after the commit.
func (c *Client) inTx(ctx context.Context, tx any) (*Client, context.Context, *pendingWake, error) {
	binder, ok := c.store.(db.TxBinder)
	if !ok {
		return nil, nil, nil, fmt.Errorf("%w: the store %T creates no instance in a transaction", workflow.ErrTxNotSupported, c.store)
	}
	if tx == nil {
		return nil, nil, nil, fmt.Errorf("%w: the transaction is nil", workflow.ErrTxNotSupported)
	}
	txCtx, err := binder.BindTx(ctx, tx)
	if err != nil {
		return nil, nil, nil, txError(err)
	}
	wake := &pendingWake{wake: c.wake}
	view := *c
	view.eager = nil
	view.wake = wake.add
	// The queue limits are read in tx, not from the cache the client's
	// other calls share: on an in-memory SQLite database tx holds the one
	// connection, which a concurrent refresh of the shared cache would wait
	// for while holding the cache.
	view.queues = &queueCache{}
	return &view, txCtx, wake, nil
}

// pendingWake holds the wake-ups of creates in the caller's transaction
// until it committed.
type pendingWake struct {
	wake  func(string)
	names []string
	once  sync.Once
}

func (w *pendingWake) add(workflowName string) {
	if !slices.Contains(w.names, workflowName) {
		w.names = append(w.names, workflowName)
	}
}

func (w *pendingWake) afterCommit() {
	w.once.Do(func() {
		for _, name := range w.names {
			w.wake(name)
		}
	})
}

// noWake is the AfterCommitFunc of a create that failed.
func noWake() {}

// txError maps the store's transaction errors onto the workflow package's.
func txError(err error) error {
	switch {
	case errors.Is(err, db.ErrTxDone):
		return fmt.Errorf("%w: %w", workflow.ErrTxDone, err)
	case errors.Is(err, db.ErrTxNotSupported):
		return fmt.Errorf("%w: %w", workflow.ErrTxNotSupported, err)
	}
	return err
}
