package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/workflow"
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
		out.Instances[i] = db.StatusCount{WorkflowName: r.WorkflowName, Status: workflow.InstanceStatus(r.Status), Count: r.Count}
	}
	if !g.OldestDueSchedule.Equal(time.Unix(0, 0)) {
		out.OldestDueSchedule = new(g.OldestDueSchedule.UTC())
	}
	return out, nil
}
