package db

import (
	"context"
	"log/slog"
)

// WakeListener is a capability a Store may offer: telling this process when
// another process made work due, so its runner starts it at once instead of
// at its next poll. The Postgres store offers it through LISTEN/NOTIFY; the
// host (package duraflow) discovers it by a type assertion on its store, so
// nothing above db names a backend. A store without it is polled only.
type WakeListener interface {
	// WakeListen calls p.WakeFunc for every wake-up other processes send
	// until ctx is done, reconnecting after failures, and then returns
	// ctx's error. It calls p.WakeFunc with "" once it listens and again
	// after every reconnection, since wake-ups sent while it was not
	// listening are lost: the callee looks for all due work then.
	WakeListen(ctx context.Context, p *WakeListenParams) error
}

// WakeListenParams are the parameters of WakeListener.WakeListen.
type WakeListenParams struct {
	// WakeFunc is called with the name of the workflow whose work became
	// due, or with "" when anything may have become due. It must not block.
	// Required.
	WakeFunc func(workflowName string)
	// Logger receives connection problems.
	//
	// Defaults to slog.Default().
	Logger *slog.Logger
}
