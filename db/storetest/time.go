package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
)

func testTime(t *testing.T, newStore func(t *testing.T) db.Store) {
	// A runner computes times with nanoseconds in any location; every backend
	// keeps them to the microsecond, truncated, and returns them in UTC, so a
	// value read back equals the written one truncated to the microsecond.
	t.Run("TruncatedToMicrosecondsInUTC", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		zone := time.FixedZone("UTC+5", 5*60*60)
		at := func(d time.Duration) time.Time { return b.at(d + 999*time.Nanosecond).In(zone) }
		us := func(d time.Duration) time.Time { return b.at(d) }

		instRes, err := b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{
			WorkflowName: workflowName, ID: "a", Now: new(at(time.Microsecond)),
		})
		require.NoError(t, err)
		inst := instRes.Instance
		requireTime(t, us(time.Microsecond), inst.CreatedAt)
		requireTime(t, us(time.Microsecond), b.get(t, "a").CreatedAt)
		requireTime(t, us(time.Microsecond), b.task(t, "a").RunAt)

		claims, err := b.store.TaskClaim(b.ctx, &db.TaskClaimParams{
			Owner: owner, WorkflowNames: []string{workflowName}, Max: 1,
			Now: at(time.Microsecond), LockedUntil: at(lease + 3*time.Microsecond),
		})
		require.NoError(t, err)
		tasks := claimedTasks(t, b, claims)
		require.Len(t, tasks, 1, "a task due at the truncated time is due at the untruncated one")
		requireTimePtr(t, us(lease+3*time.Microsecond), tasks[0].LockedUntil)
		requireTimePtr(t, us(time.Microsecond), b.get(t, "a").StartedAt)

		p := b.checkpoint(tasks[0])
		p.Now = at(time.Second)
		p.Steps = []db.StepWrite{{
			Key: "s", Type: db.StepTypeDo, Status: db.StepStatusRetrying,
			NextRetryAt: new(at(time.Minute)), WakeAt: new(at(time.Hour)), Result: json.RawMessage(`1`),
		}}
		p.Outcome = db.OutcomeSuspend
		p.NextRunAt = at(time.Minute)
		_, err = b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		step := b.steps(t, "a", 1)[0]
		requireTime(t, us(time.Second), step.CreatedAt)
		requireTimePtr(t, us(time.Minute), step.NextRetryAt)
		requireTimePtr(t, us(time.Hour), step.WakeAt)
		requireTime(t, us(time.Minute), b.task(t, "a").RunAt)
		requireTimePtr(t, us(time.Minute), b.nextRunAt(t))

		ev := b.send(t, "a", "x", `1`).Event
		require.Equal(t, time.UTC, ev.CreatedAt.Location())
	})
}
