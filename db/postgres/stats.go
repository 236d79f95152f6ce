package postgres

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres/internal/pgsqlc"
	"github.com/duraflow/duraflow/dftype"
)

// StatsGet reads the engine's gauges in two statements: the instance counts
// and the rest (see db.Stats).
func (s *Store) StatsGet(ctx context.Context, p *db.StatsGetParams) (*db.Stats, error) {
	rows, err := s.queries.StatsInstanceCounts(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading stats: %w", interpretError(err))
	}
	g, err := s.queries.StatsGauges(ctx, nowArg(p.Now))
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
	if !g.OldestDueSchedule.Equal(time.Unix(0, 0)) {
		out.OldestDueSchedule = new(g.OldestDueSchedule.UTC())
	}
	return out, nil
}

// StatsEnded counts the instances that ended in a span of time by
// workflow, status and bucket (see db.StatsStore).
func (s *Store) StatsEnded(ctx context.Context, p *db.StatsEndedParams) ([]db.EndedCount, error) {
	if p.Bucket <= 0 || p.Max <= 0 {
		return nil, fmt.Errorf("counting ended instances: Bucket %s and Max %d must be positive", p.Bucket, p.Max)
	}
	rows, err := s.queries.StatsEnded(ctx, pgsqlc.StatsEndedParams{
		Since: p.Since, Until: p.Until, BucketMs: max(1, p.Bucket.Milliseconds()),
		Namespace: p.Namespace, Max: int32(min(p.Max, math.MaxInt32)),
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
