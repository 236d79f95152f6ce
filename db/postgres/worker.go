package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres/internal/pgsqlc"
	"github.com/duraflow/duraflow/db/transition"
)

// WorkerRegister registers a worker, or the same row again, and with
// p.ReleaseHeld releases the tasks its id still holds, in one transaction,
// which logs worker.online.
func (s *Store) WorkerRegister(ctx context.Context, p *db.WorkerRegisterParams) (*db.Worker, error) {
	labels, err := labelsArg(p.Labels)
	if err != nil {
		return nil, fmt.Errorf("registering worker: %w", err)
	}
	var w *db.Worker
	err = s.inTx(ctx, func(q *pgsqlc.Queries) error {
		row, err := q.WorkerUpsert(ctx, pgsqlc.WorkerUpsertParams{
			WorkerID:       p.ID,
			Hostname:       p.Hostname,
			Pid:            int32(p.PID),
			Version:        p.Version,
			Labels:         labels,
			Queues:         emptyIfNil(p.Queues),
			Workflows:      emptyIfNil(p.Workflows),
			MaxConcurrency: int32(p.MaxConcurrency),
			Now:            p.Now,
			OfflineAfterUs: offlineAfterArg(p.OfflineAfter),
		})
		if err != nil {
			return err
		}
		w = workerFromRow(&row)
		if err := s.logWorkers(ctx, q, []string{p.ID}, "", db.WorkerStatusOnline, "", p.Now); err != nil {
			return err
		}
		if !p.ReleaseHeld {
			return nil
		}
		_, err = q.TaskReleaseOwned(ctx, pgsqlc.TaskReleaseOwnedParams{
			Now: p.Now, Reason: transition.WorkerReleaseReason(false), Owners: []string{p.ID},
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("registering worker: %w", interpretError(err))
	}
	return w, nil
}

// WorkerHeartbeat records a live worker's heartbeat. It takes one statement,
// and a second only when the worker is offline or unknown.
func (s *Store) WorkerHeartbeat(ctx context.Context, p *db.WorkerHeartbeatParams) (db.WorkerHeartbeatResult, error) {
	row, err := s.queries.WorkerHeartbeat(ctx, pgsqlc.WorkerHeartbeatParams{
		Now:            p.Now,
		ActiveCount:    int32(p.ActiveCount),
		CompletedTotal: p.CompletedTotal,
		FailedTotal:    p.FailedTotal,
		WorkerID:       p.ID,
	})
	if isNoRows(err) {
		if _, err := s.queries.WorkerGet(ctx, p.ID); err != nil {
			return db.WorkerHeartbeatResult{}, fmt.Errorf("worker heartbeat: %w", interpretError(err))
		}
		return db.WorkerHeartbeatResult{Offline: true}, nil
	}
	if err != nil {
		return db.WorkerHeartbeatResult{}, fmt.Errorf("worker heartbeat: %w", interpretError(err))
	}
	return db.WorkerHeartbeatResult{DrainRequested: row.DrainRequestedAt != nil}, nil
}

// WorkerDeregister marks a worker offline on a clean stop. With the
// lifecycle log on it locks the row first, in one transaction, to log
// worker.offline unless the worker was offline already; with it off it
// is one statement.
func (s *Store) WorkerDeregister(ctx context.Context, p *db.WorkerDeregisterParams) (*db.Worker, error) {
	if !s.logging() {
		row, err := s.queries.WorkerDeregister(ctx, pgsqlc.WorkerDeregisterParams{Now: p.Now, WorkerID: p.ID})
		if err != nil {
			return nil, fmt.Errorf("deregistering worker: %w", interpretError(err))
		}
		return workerFromRow(&row), nil
	}
	var w *db.Worker
	err := s.inTx(ctx, func(q *pgsqlc.Queries) error {
		cur, err := q.WorkerGetForUpdate(ctx, p.ID)
		if err != nil {
			return err
		}
		row, err := q.WorkerDeregister(ctx, pgsqlc.WorkerDeregisterParams{Now: p.Now, WorkerID: p.ID})
		if err != nil {
			return err
		}
		w = workerFromRow(&row)
		return s.logWorkers(ctx, q, []string{p.ID}, db.WorkerStatus(cur.Status), db.WorkerStatusOffline, transition.WorkerOfflineDeregistered, p.Now)
	})
	if err != nil {
		return nil, fmt.Errorf("deregistering worker: %w", interpretError(err))
	}
	return w, nil
}

// WorkerGet returns one worker or db.ErrNotFound.
func (s *Store) WorkerGet(ctx context.Context, id string) (*db.Worker, error) {
	row, err := s.queries.WorkerGet(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("getting worker: %w", interpretError(err))
	}
	return workerFromRow(&row), nil
}

// WorkerList returns a page of workers ordered by id.
func (s *Store) WorkerList(ctx context.Context, p *db.WorkerListParams) ([]*db.Worker, error) {
	limit := int32(p.Limit)
	if p.Limit <= 0 {
		limit = defaultListLimit
	}
	rows, err := s.queries.WorkerList(ctx, pgsqlc.WorkerListParams{
		Status:  textArg(string(p.Status)),
		Queue:   textArg(p.Queue),
		AfterID: p.AfterID,
		Max:     limit,
	})
	if err != nil {
		return nil, fmt.Errorf("listing workers: %w", interpretError(err))
	}
	out := make([]*db.Worker, len(rows))
	for i := range rows {
		out[i] = workerFromRow(&rows[i])
	}
	return out, nil
}

// WorkerDrain asks a worker to drain, as transition.WorkerDrain rules.
func (s *Store) WorkerDrain(ctx context.Context, p *db.WorkerDrainParams) (*db.Worker, error) {
	var w *db.Worker
	err := s.inTx(ctx, func(q *pgsqlc.Queries) error {
		cur, err := q.WorkerGetForUpdate(ctx, p.ID)
		if err != nil {
			return err
		}
		if err := transition.WorkerDrain(p.ID, db.WorkerStatus(cur.Status)); err != nil {
			return err
		}
		row, err := q.WorkerSetDraining(ctx, pgsqlc.WorkerSetDrainingParams{Now: p.Now, WorkerID: p.ID})
		if err != nil {
			return err
		}
		w = workerFromRow(&row)
		return s.logWorkers(ctx, q, []string{p.ID}, db.WorkerStatus(cur.Status), db.WorkerStatusDraining, "", p.Now)
	})
	if err != nil {
		return nil, fmt.Errorf("draining worker: %w", interpretError(err))
	}
	return w, nil
}

// WorkerReap marks the workers whose heartbeat is too old offline and
// releases their tasks in one transaction, which logs worker.offline for
// each; the release and the log run only when it marked one.
func (s *Store) WorkerReap(ctx context.Context, p *db.WorkerReapParams) (db.WorkerReapResult, error) {
	var res db.WorkerReapResult
	err := s.inTx(ctx, func(q *pgsqlc.Queries) error {
		ids, err := q.WorkerMarkOffline(ctx, pgsqlc.WorkerMarkOfflineParams{Now: p.Now, ReaperOfflineAfterUs: p.OfflineAfter.Microseconds()})
		if err != nil || len(ids) == 0 {
			return err
		}
		// WorkerMarkOffline marks only workers that were not offline.
		if err := s.logWorkers(ctx, q, ids, db.WorkerStatusOnline, db.WorkerStatusOffline, transition.WorkerOfflineReaped, p.Now); err != nil {
			return err
		}
		n, err := q.TaskReleaseOwned(ctx, pgsqlc.TaskReleaseOwnedParams{
			Now: p.Now, Reason: transition.WorkerReleaseReason(true), Owners: ids,
		})
		res = db.WorkerReapResult{WorkerIDs: ids, ReleasedTasks: int(n)}
		return err
	})
	if err != nil {
		return db.WorkerReapResult{}, fmt.Errorf("reaping workers: %w", interpretError(err))
	}
	return res, nil
}

// logWorkers writes, with one statement in the change's transaction, the
// lifecycle event of each worker of ids whose status goes from `from` to
// `to` (transition.WorkerEvent); nothing while the log is off or when the
// change logs none.
func (s *Store) logWorkers(ctx context.Context, q *pgsqlc.Queries, ids []string, from, to db.WorkerStatus, detail string, now time.Time) error {
	if !s.logging() || len(ids) == 0 {
		return nil
	}
	e, ok := transition.WorkerEvent("", from, to, detail, now)
	if !ok {
		return nil
	}
	if err := q.WorkerLog(ctx, pgsqlc.WorkerLogParams{Type: string(e.Type), Detail: e.Detail, At: e.At, WorkerIds: ids}); err != nil {
		return fmt.Errorf("logging %s: %w", e.Type, err)
	}
	return nil
}

func workerFromRow(r *pgsqlc.WorkflowWorker) *db.Worker {
	var labels map[string]string
	_ = json.Unmarshal(r.Labels, &labels)
	return &db.Worker{
		ID:               r.WorkerID,
		Hostname:         r.Hostname,
		PID:              int(r.Pid),
		Version:          r.Version,
		Labels:           labels,
		Queues:           emptyIfNil(r.Queues),
		Workflows:        emptyIfNil(r.Workflows),
		MaxConcurrency:   int(r.MaxConcurrency),
		ActiveCount:      int(r.ActiveCount),
		CompletedTotal:   r.CompletedTotal,
		FailedTotal:      r.FailedTotal,
		RegisteredAt:     r.RegisteredAt.UTC(),
		OfflineAfter:     offlineAfterFromRow(r.OfflineAfterUs),
		LastHeartbeatAt:  r.LastHeartbeatAt.UTC(),
		Status:           db.WorkerStatus(r.Status),
		DrainRequestedAt: utcPtr(r.DrainRequestedAt),
		DeregisteredAt:   utcPtr(r.DeregisteredAt),
	}
}

// labelsArg is a worker's labels as a JSON object.
func labelsArg(labels map[string]string) ([]byte, error) {
	if labels == nil {
		return []byte("{}"), nil
	}
	b, err := json.Marshal(labels)
	if err != nil {
		return nil, fmt.Errorf("%w: labels: %v", db.ErrInvalidData, err)
	}
	return b, nil
}

// offlineAfterArg is a worker's own reap threshold as stored: microseconds,
// or NULL for none.
func offlineAfterArg(d time.Duration) *int64 {
	if d <= 0 {
		return nil
	}
	us := d.Microseconds()
	return &us
}

// offlineAfterFromRow is the stored reap threshold of a worker; zero for
// none.
func offlineAfterFromRow(us *int64) time.Duration {
	if us == nil {
		return 0
	}
	return time.Duration(*us) * time.Microsecond
}
