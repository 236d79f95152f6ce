package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/sqlite/internal/litesqlc"
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
	err = s.inTx(ctx, func(q *litesqlc.Queries) error {
		row, err := q.WorkerUpsert(ctx, litesqlc.WorkerUpsertParams{
			WorkerID:       p.ID,
			Hostname:       p.Hostname,
			Pid:            int64(p.PID),
			Version:        p.Version,
			Labels:         labels,
			Queues:         listArg(p.Queues),
			Workflows:      listArg(p.Workflows),
			MaxConcurrency: int64(p.MaxConcurrency),
			Now:            micros(p.Now),
			OfflineAfterUs: offlineAfterArg(p.OfflineAfter),
		})
		if err != nil {
			return err
		}
		w = workerFromRow(&row)
		if err := s.logWorker(ctx, q, p.ID, "", db.WorkerStatusOnline, "", p.Now); err != nil {
			return err
		}
		if !p.ReleaseHeld {
			return nil
		}
		_, err = q.TaskReleaseOwned(ctx, litesqlc.TaskReleaseOwnedParams{
			Now: micros(p.Now), Reason: transition.WorkerReleaseReason(false), Owners: listArg([]string{p.ID}),
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("registering worker: %w", interpretError(err))
	}
	return w, nil
}

// WorkerHeartbeat records a live worker's heartbeat.
func (s *Store) WorkerHeartbeat(ctx context.Context, p *db.WorkerHeartbeatParams) (db.WorkerHeartbeatResult, error) {
	var res db.WorkerHeartbeatResult
	err := s.inTx(ctx, func(q *litesqlc.Queries) error {
		row, err := q.WorkerHeartbeat(ctx, litesqlc.WorkerHeartbeatParams{
			Now:            micros(p.Now),
			ActiveCount:    int64(p.ActiveCount),
			CompletedTotal: p.CompletedTotal,
			FailedTotal:    p.FailedTotal,
			WorkerID:       p.ID,
		})
		if isNoRows(err) {
			if _, err := q.WorkerGet(ctx, p.ID); err != nil {
				return err
			}
			res.Offline = true
			return nil
		}
		if err != nil {
			return err
		}
		res.DrainRequested = row.DrainRequestedAt != nil
		return nil
	})
	if err != nil {
		return db.WorkerHeartbeatResult{}, fmt.Errorf("worker heartbeat: %w", interpretError(err))
	}
	return res, nil
}

// WorkerDeregister marks a worker offline on a clean stop, logging
// worker.offline unless it was offline already.
func (s *Store) WorkerDeregister(ctx context.Context, p *db.WorkerDeregisterParams) (*db.Worker, error) {
	var w *db.Worker
	err := s.inTx(ctx, func(q *litesqlc.Queries) error {
		var from db.WorkerStatus
		if !s.lifecycleOff.Load() {
			cur, err := q.WorkerGet(ctx, p.ID)
			if err != nil {
				return err
			}
			from = db.WorkerStatus(cur.Status)
		}
		row, err := q.WorkerDeregister(ctx, litesqlc.WorkerDeregisterParams{Now: micros(p.Now), WorkerID: p.ID})
		if err != nil {
			return err
		}
		w = workerFromRow(&row)
		return s.logWorker(ctx, q, p.ID, from, db.WorkerStatusOffline, transition.WorkerOfflineDeregistered, p.Now)
	})
	if err != nil {
		return nil, fmt.Errorf("deregistering worker: %w", interpretError(err))
	}
	return w, nil
}

// WorkerGet returns one worker or db.ErrNotFound.
func (s *Store) WorkerGet(ctx context.Context, id string) (*db.Worker, error) {
	row, err := s.queriesFor(ctx, false).WorkerGet(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("getting worker: %w", interpretError(err))
	}
	return workerFromRow(&row), nil
}

// WorkerList returns a page of workers ordered by id.
func (s *Store) WorkerList(ctx context.Context, p *db.WorkerListParams) ([]*db.Worker, error) {
	limit := int64(p.Limit)
	if p.Limit <= 0 {
		limit = defaultListLimit
	}
	rows, err := s.queriesFor(ctx, false).WorkerList(ctx, litesqlc.WorkerListParams{
		Status:  string(p.Status),
		Queue:   p.Queue,
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
	err := s.inTx(ctx, func(q *litesqlc.Queries) error {
		cur, err := q.WorkerGet(ctx, p.ID)
		if err != nil {
			return err
		}
		if err := transition.WorkerDrain(p.ID, db.WorkerStatus(cur.Status)); err != nil {
			return err
		}
		row, err := q.WorkerSetDraining(ctx, litesqlc.WorkerSetDrainingParams{Now: micros(p.Now), WorkerID: p.ID})
		if err != nil {
			return err
		}
		w = workerFromRow(&row)
		return s.logWorker(ctx, q, p.ID, db.WorkerStatus(cur.Status), db.WorkerStatusDraining, "", p.Now)
	})
	if err != nil {
		return nil, fmt.Errorf("draining worker: %w", interpretError(err))
	}
	return w, nil
}

// WorkerReap marks the workers whose heartbeat is too old offline and
// releases their tasks in one transaction, which logs worker.offline for
// each.
func (s *Store) WorkerReap(ctx context.Context, p *db.WorkerReapParams) (db.WorkerReapResult, error) {
	var res db.WorkerReapResult
	err := s.inTx(ctx, func(q *litesqlc.Queries) error {
		ids, err := q.WorkerMarkOffline(ctx, litesqlc.WorkerMarkOfflineParams{Now: micros(p.Now), ReaperOfflineAfterUs: p.OfflineAfter.Microseconds()})
		if err != nil || len(ids) == 0 {
			return err
		}
		for _, id := range ids {
			// WorkerMarkOffline marks only workers that were not offline.
			if err := s.logWorker(ctx, q, id, db.WorkerStatusOnline, db.WorkerStatusOffline, transition.WorkerOfflineReaped, p.Now); err != nil {
				return err
			}
		}
		n, err := q.TaskReleaseOwned(ctx, litesqlc.TaskReleaseOwnedParams{
			Now: micros(p.Now), Reason: transition.WorkerReleaseReason(true), Owners: listArg(ids),
		})
		res = db.WorkerReapResult{WorkerIDs: ids, ReleasedTasks: int(n)}
		return err
	})
	if err != nil {
		return db.WorkerReapResult{}, fmt.Errorf("reaping workers: %w", interpretError(err))
	}
	return res, nil
}

// logWorker writes the lifecycle event of worker id's change of status
// from `from` to `to` (transition.WorkerEvent) in the change's write
// transaction; nothing while the log is off or when the change logs none.
func (s *Store) logWorker(ctx context.Context, q *litesqlc.Queries, id string, from, to db.WorkerStatus, detail string, now time.Time) error {
	if s.lifecycleOff.Load() {
		return nil
	}
	e, ok := transition.WorkerEvent(id, from, to, detail, now)
	if !ok {
		return nil
	}
	code, err := lifecycleCode(e.Type)
	if err != nil {
		return fmt.Errorf("logging a worker event: %w", err)
	}
	if err := q.WorkerLog(ctx, litesqlc.WorkerLogParams{
		Type: code, Detail: textArg(e.Detail), At: micros(e.At), WorkerID: &e.WorkerID,
	}); err != nil {
		return fmt.Errorf("logging %s: %w", e.Type, err)
	}
	return nil
}

func workerFromRow(r *litesqlc.WorkflowWorker) *db.Worker {
	var labels map[string]string
	_ = json.Unmarshal([]byte(r.Labels), &labels)
	queues, workflows := []string{}, []string{}
	_ = json.Unmarshal([]byte(r.Queues), &queues)
	_ = json.Unmarshal([]byte(r.Workflows), &workflows)
	return &db.Worker{
		ID:               r.WorkerID,
		Hostname:         r.Hostname,
		PID:              int(r.Pid),
		Version:          r.Version,
		Labels:           labels,
		Queues:           queues,
		Workflows:        workflows,
		MaxConcurrency:   int(r.MaxConcurrency),
		ActiveCount:      int(r.ActiveCount),
		CompletedTotal:   r.CompletedTotal,
		FailedTotal:      r.FailedTotal,
		RegisteredAt:     timeFromMicros(r.RegisteredAt),
		OfflineAfter:     offlineAfterFromRow(r.OfflineAfterUs),
		LastHeartbeatAt:  timeFromMicros(r.LastHeartbeatAt),
		Status:           db.WorkerStatus(r.Status),
		DrainRequestedAt: timePtrFromMicros(r.DrainRequestedAt),
		DeregisteredAt:   timePtrFromMicros(r.DeregisteredAt),
	}
}

// labelsArg is a worker's labels as a JSON object.
func labelsArg(labels map[string]string) (string, error) {
	if labels == nil {
		return "{}", nil
	}
	b, err := json.Marshal(labels)
	if err != nil {
		return "", fmt.Errorf("%w: labels: %v", db.ErrInvalidData, err)
	}
	return string(b), nil
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
