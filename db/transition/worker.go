package transition

import (
	"fmt"
	"time"

	"github.com/duraflow/duraflow/db"
)

// WorkerDrain is the rule of a drain request on a worker whose status is
// status: an online worker becomes draining and a draining one stays so
// (both backends then write status draining, keeping the first request's
// time); an offline worker has nothing to drain, which is
// db.ErrWorkerOffline and writes nothing.
func WorkerDrain(id string, status db.WorkerStatus) error {
	if status == db.WorkerStatusOffline {
		return fmt.Errorf("%w: %q deregistered or stopped heartbeating", db.ErrWorkerOffline, id)
	}
	return nil
}

// WorkerReleaseReason is the last error a task released from a worker
// records: the reaper found its heartbeat too old, or it registered again
// (a restart under the same id).
func WorkerReleaseReason(reaped bool) string {
	if reaped {
		return "released: its worker stopped heartbeating and was marked offline"
	}
	return "released: its worker registered again (a restart)"
}

// Details of worker.offline: how the worker went offline.
const (
	WorkerOfflineDeregistered = "deregistered"
	WorkerOfflineReaped       = "heartbeat stopped"
)

// WorkerEvent returns the lifecycle event of a worker whose status goes
// from `from` to `to` at now, written in the transaction of that change;
// ok is false when the change logs none. A registration (to online) logs
// worker.online, also when the worker registers again; a drain logs
// worker.draining when it makes an online worker draining (a drain of a
// draining worker logs nothing); a deregistration or a reap logs
// worker.offline unless the worker was offline already, with detail (one
// of the WorkerOffline details).
func WorkerEvent(id string, from, to db.WorkerStatus, detail string, now time.Time) (db.LifecycleEvent, bool) {
	e := db.LifecycleEvent{WorkerID: id, At: now}
	switch {
	case to == db.WorkerStatusOnline:
		e.Type = db.LifecycleWorkerOnline
	case to == db.WorkerStatusDraining && from == db.WorkerStatusOnline:
		e.Type = db.LifecycleWorkerDraining
	case to == db.WorkerStatusOffline && from != db.WorkerStatusOffline:
		e.Type, e.Detail = db.LifecycleWorkerOffline, detail
	default:
		return db.LifecycleEvent{}, false
	}
	return e, true
}
