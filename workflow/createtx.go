package workflow

import (
	"context"
	"errors"
	"fmt"

	"github.com/duraflow/duraflow/dftype"
)

// Errors of the creates in the caller's transaction (TxEngine).
var (
	// ErrTxDone means the transaction given to CreateTx can take no more
	// statements: it was committed or rolled back, or (on Postgres) an
	// earlier statement of it failed. Nothing was created.
	ErrTxDone = errors.New("transaction is committed, rolled back or failed")
	// ErrTxNotSupported means the engine cannot create in the transaction
	// given to CreateTx: its store takes transactions of another type
	// (Postgres a pgx.Tx, SQLite a *sql.Tx), or the engine works over a
	// network (the HTTP client) and cannot join a transaction at all.
	ErrTxNotSupported = errors.New("transaction not supported")
)

// AfterCommitFunc wakes the runners of this process for the instances a
// create in the caller's transaction made (TxEngine). Call it once the
// transaction committed: a runner woken before the commit finds nothing to
// claim. Calling it is not required for the instances to run: on Postgres
// the commit itself notifies every listening runner, and every runner finds
// due work when it polls; it makes a runner of this process start them at
// once, which matters on SQLite, which has no notifications. It is safe to
// call more than once (only the first call wakes) and after a rollback
// (it wakes for nothing).
type AfterCommitFunc func()

// TxEngine is an Engine that creates instances inside the caller's own
// database transaction, so that the instances, their first tasks and the
// caller's rows written in the same transaction commit or roll back
// together, and no runner starts an instance before the commit.
// *client.Client implements it; the typed bindings' CreateTx and
// CreateBatchTx go through it.
type TxEngine interface {
	Engine
	// CreateTx creates one instance as Create does, in tx. It returns the
	// function to call after the commit (never nil).
	CreateTx(ctx context.Context, tx any, workflowName string, req dftype.CreateRequest) (*dftype.InstanceInfo, AfterCommitFunc, error)
	// CreateBatchTx creates up to the engine's batch limit instances as
	// CreateBatch does, in tx. It returns the function to call after the commit (never
	// nil).
	CreateBatchTx(ctx context.Context, tx any, workflowName string, reqs []dftype.CreateRequest) ([]*dftype.InstanceInfo, AfterCommitFunc, error)
}

// noWake is the AfterCommitFunc of a create that failed.
func noWake() {}

// txEngine returns the bound engine as a TxEngine.
func (r *Registry) txEngine() (TxEngine, error) {
	e, err := r.boundEngine()
	if err != nil {
		return nil, err
	}
	te, ok := e.(TxEngine)
	if !ok {
		return nil, fmt.Errorf("%w: the engine %T creates no instance in a transaction", ErrTxNotSupported, e)
	}
	return te, nil
}

// CreateTx creates an instance as Create does, inside the caller's
// database transaction tx (a pgx.Tx on Postgres, a *sql.Tx on SQLite, on
// the engine's database): it exists, and runs, only if tx commits. Call the
// returned AfterCommitFunc after the commit to start it on this process at
// once. A committed or rolled-back tx is ErrTxDone; a failed create leaves
// tx usable. See client.Client.CreateTx.
func (b *Binding[P, O]) CreateTx(ctx context.Context, tx any, opts CreateOptions[P]) (*Instance[O], AfterCommitFunc, error) {
	e, err := b.registry.txEngine()
	if err != nil {
		return nil, noWake, err
	}
	req, err := createRequest("params", opts)
	if err != nil {
		return nil, noWake, err
	}
	info, wake, err := e.CreateTx(ctx, tx, b.name, req)
	if err != nil {
		return nil, noWake, err
	}
	return b.handle(info.ID), wake, nil
}

// CreateBatchTx creates up to the engine's batch limit instances as
// CreateBatch does, inside the caller's database transaction tx, as
// CreateTx does for one.
func (b *Binding[P, O]) CreateBatchTx(ctx context.Context, tx any, opts []CreateOptions[P]) ([]*Instance[O], AfterCommitFunc, error) {
	e, err := b.registry.txEngine()
	if err != nil {
		return nil, noWake, err
	}
	reqs := make([]dftype.CreateRequest, len(opts))
	for i, o := range opts {
		if reqs[i], err = createRequest(fmt.Sprintf("params of instance %d", i), o); err != nil {
			return nil, noWake, err
		}
	}
	infos, wake, err := e.CreateBatchTx(ctx, tx, b.name, reqs)
	if err != nil {
		return nil, noWake, err
	}
	out := make([]*Instance[O], len(infos))
	for i, info := range infos {
		out[i] = b.handle(info.ID)
	}
	return out, wake, nil
}

// createRequest is the request of a typed create: the options with their
// params encoded (what names the params in an error).
func createRequest[P any](what string, opts CreateOptions[P]) (dftype.CreateRequest, error) {
	params, err := encodePayload(what, opts.Params)
	if err != nil {
		return dftype.CreateRequest{}, err
	}
	return dftype.CreateRequest{
		ID: opts.ID, Params: params,
		Namespace: opts.Namespace, Queue: opts.Queue, Priority: opts.Priority, DedupeKey: opts.DedupeKey,
	}, nil
}
