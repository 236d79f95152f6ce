package transition

import (
	"fmt"

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
