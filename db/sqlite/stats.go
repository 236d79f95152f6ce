package sqlite

import (
	"context"
	"fmt"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/sqlite/internal/litesqlc"
	"github.com/duraflow/duraflow/dftype"
)

// StatsGet reads the engine's gauges in two statements: the instance counts
// and the rest (see db.Stats). A zero p.Now reads the database's clock.
func (s *Store) StatsGet(ctx context.Context, p *db.StatsGetParams) (*db.Stats, error) {
	q := s.queriesFor(ctx, false)
	now := p.Now
	if now.IsZero() {
		us, err := q.ClockNow(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading stats: %w", interpretError(err))
		}
		now = timeFromMicros(us)
	}
	rows, err := q.StatsInstanceCounts(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading stats: %w", interpretError(err))
	}
	g, err := q.StatsGauges(ctx, micros(now))
	if err != nil {
		return nil, fmt.Errorf("reading stats: %w", interpretError(err))
	}
	out := &db.Stats{
		Instances:     make([]db.StatusCount, len(rows)),
		TasksReady:    g.TasksReady,
		TasksLeased:   g.TasksLeased,
		OutboxBacklog: g.OutboxBacklog,
		WorkersOnline: g.WorkersOnline,
	}
	for i, r := range rows {
		out.Instances[i] = db.StatusCount{WorkflowName: r.WorkflowName, Status: dftype.InstanceStatus(r.Status), Count: r.Count}
	}
	if g.OldestDueSchedule != 0 {
		out.OldestDueSchedule = new(timeFromMicros(g.OldestDueSchedule))
	}
	return out, nil
}

// StatsEnded counts the instances that ended in a span of time by
// workflow, status and bucket (see db.StatsStore).
func (s *Store) StatsEnded(ctx context.Context, p *db.StatsEndedParams) ([]db.EndedCount, error) {
	if p.Bucket <= 0 || p.Max <= 0 {
		return nil, fmt.Errorf("counting ended instances: Bucket %s and Max %d must be positive", p.Bucket, p.Max)
	}
	rows, err := s.queriesFor(ctx, false).StatsEnded(ctx, litesqlc.StatsEndedParams{
		Since: micros(p.Since), Until: micros(p.Until), BucketUs: max(1, p.Bucket.Microseconds()),
		Namespace: p.Namespace, Max: int64(p.Max),
	})
	if err != nil {
		return nil, fmt.Errorf("counting ended instances: %w", interpretError(err))
	}
	out := make([]db.EndedCount, len(rows))
	for i, r := range rows {
		out[i] = db.EndedCount{WorkflowName: r.WorkflowName, Status: dftype.InstanceStatus(r.Status), Bucket: int(r.Bucket), Count: r.Count}
	}
	return out, nil
}
