package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres/internal/pgsqlc"
	"github.com/duraflow/duraflow/db/transition"
)

// WorkerRegister registers a worker, or the same row again, and with
// p.ReleaseHeld releases the tasks its id still holds, in one transaction.
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
		})
		if err != nil {
			return err
		}
		w = workerFromRow(&row)
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

// WorkerDeregister marks a worker offline on a clean stop.
func (s *Store) WorkerDeregister(ctx context.Context, p *db.WorkerDeregisterParams) (*db.Worker, error) {
	row, err := s.queries.WorkerDeregister(ctx, pgsqlc.WorkerDeregisterParams{Now: p.Now, WorkerID: p.ID})
	if err != nil {
		return nil, fmt.Errorf("deregistering worker: %w", interpretError(err))
	}
	return workerFromRow(&row), nil
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
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("draining worker: %w", interpretError(err))
	}
	return w, nil
}

// WorkerReap marks the workers whose heartbeat is too old offline and
// releases their tasks in one transaction; the release runs only when it
// marked one.
func (s *Store) WorkerReap(ctx context.Context, p *db.WorkerReapParams) (db.WorkerReapResult, error) {
	var res db.WorkerReapResult
	err := s.inTx(ctx, func(q *pgsqlc.Queries) error {
		ids, err := q.WorkerMarkOffline(ctx, p.Now.Add(-p.OfflineAfter))
		if err != nil || len(ids) == 0 {
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
