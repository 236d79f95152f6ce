package storetest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
)

// lifecycleLog is the store's lifecycle event log; a store without the
// capability skips the test.
func (b *testBundle) lifecycleLog(t *testing.T) db.LifecycleStore {
	t.Helper()
	log, ok := b.store.(db.LifecycleStore)
	if !ok {
		t.Skip("the store offers no db.LifecycleStore")
	}
	return log
}

// logTail reads the lifecycle events written since its last call.
type logTail struct {
	b     *testBundle
	log   db.LifecycleStore
	after int64
}

func (b *testBundle) tail(t *testing.T) *logTail {
	t.Helper()
	return &logTail{b: b, log: b.lifecycleLog(t)}
}

// next returns the events written since the last call, in id order.
func (l *logTail) next(t *testing.T) []*db.LifecycleEvent {
	t.Helper()
	events, err := l.log.LifecycleList(l.b.ctx, &db.LifecycleListParams{AfterID: l.after, Limit: 1000})
	require.NoError(t, err)
	if n := len(events); n > 0 {
		l.after = events[n-1].ID
	}
	return events
}

// requireNext checks that exactly the events of want (type, instance and
// step key) were written since the last call, in that order, and returns
// them.
func (l *logTail) requireNext(t *testing.T, msg string, want ...string) []*db.LifecycleEvent {
	t.Helper()
	events := l.next(t)
	got := make([]string, len(events))
	for i, e := range events {
		got[i] = lifecycleKey(e)
	}
	if want == nil {
		want = []string{}
	}
	require.Equal(t, want, got, msg)
	return events
}

// lifecycleKey is "type instance", "type instance/step" or, for a worker
// event, "type @worker".
func lifecycleKey(e *db.LifecycleEvent) string {
	if e.WorkerID != "" {
		return fmt.Sprintf("%s @%s", e.Type, e.WorkerID)
	}
	if e.StepKey != "" {
		return fmt.Sprintf("%s %s/%s", e.Type, e.InstanceID, e.StepKey)
	}
	return fmt.Sprintf("%s %s", e.Type, e.InstanceID)
}

func testLifecycleLog(t *testing.T, newStore func(t *testing.T) db.Store) {
	t.Run("EachTransitionWritesItsEvents", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		l := b.tail(t)

		b.create(t, "a")
		created := l.requireNext(t, "a create", "instance.created a")
		require.Equal(t, workflowName, created[0].WorkflowName)
		require.Equal(t, 1, created[0].RunNumber)
		require.True(t, created[0].At.Equal(b.now), "at the create's now")

		task := b.claim(t, "a")
		evs := l.requireNext(t, "the claim of a run that never started logs its start", "instance.started a")
		require.True(t, evs[0].At.Equal(b.now), "instance.started is at the claim, the run's start")
		require.Equal(t, 1, evs[0].RunNumber)

		started := b.at(time.Second)
		p := b.checkpoint(task)
		p.Now = b.at(2 * time.Second)
		p.Steps = []db.StepWrite{{Key: "charge", Type: db.StepTypeDo, Status: db.StepStatusComplete, Attempts: 1, MaxAttempts: 3,
			Result: json.RawMessage(`1`), StartedAt: &started}}
		_, err := b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		evs = l.requireNext(t, "the run's first checkpoint: a completed step", "step.started a/charge", "step.completed a/charge")
		require.True(t, evs[0].At.Equal(started), "step.started is at the attempt's start")
		require.Equal(t, 1, evs[0].Attempt)
		require.True(t, evs[1].At.Equal(p.Now))

		p = b.checkpoint(task)
		p.Steps = []db.StepWrite{{Key: "ship", Type: db.StepTypeDo, Status: db.StepStatusRetrying, Attempts: 1, MaxAttempts: 3,
			ErrorName: "Timeout", ErrorMessage: "too slow", NextRetryAt: new(b.at(time.Minute)), StartedAt: &started}}
		p.Outcome, p.NextRunAt, p.NextKind = db.OutcomeSuspend, b.at(time.Minute), db.TaskKindRetry
		_, err = b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		evs = l.requireNext(t, "a retry", "step.started a/ship", "step.retrying a/ship", "instance.waiting a")
		require.Equal(t, "Timeout: too slow", evs[1].Detail)
		require.Equal(t, 1, evs[1].Attempt)
		require.Equal(t, "retry", evs[2].Detail)

		task = b.claimIDAt(t, "a", b.at(time.Minute))
		p = b.checkpoint(task)
		p.Steps = []db.StepWrite{{Key: "wait", Type: db.StepTypeWaitForEvent, Status: db.StepStatusWaiting, WaitEventType: "approved"}}
		p.Outcome, p.NextRunAt, p.WaitEventTypes = db.OutcomeSuspend, b.at(time.Hour), []string{"approved"}
		_, err = b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		evs = l.requireNext(t, "a waits for an event", "instance.waiting a")
		require.Equal(t, "event:approved", evs[0].Detail)

		b.send(t, "a", "approved", `{"ok":true}`)
		evs = l.requireNext(t, "a send", "event.received a")
		require.Equal(t, "approved", evs[0].Detail)

		_, err = b.store.InstancePause(b.ctx, b.change("a"))
		require.NoError(t, err)
		l.requireNext(t, "a pause", "instance.paused a")
		_, err = b.store.InstanceResume(b.ctx, b.change("a"))
		require.NoError(t, err)
		l.requireNext(t, "a resume", "instance.resumed a")
		_, err = b.store.InstanceResume(b.ctx, b.change("a"))
		require.NoError(t, err)
		l.requireNext(t, "a resume of a queued instance changes nothing and logs nothing")

		task = b.claimIDAt(t, "a", b.at(time.Minute))
		p = b.checkpoint(task)
		p.Outcome, p.Output = db.OutcomeComplete, json.RawMessage(`"done"`)
		_, err = b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		l.requireNext(t, "a completes", "instance.completed a")

		_, err = b.store.InstanceRestart(b.ctx, b.change("a"))
		require.NoError(t, err)
		evs = l.requireNext(t, "a restart", "instance.restarted a")
		require.Equal(t, 2, evs[0].RunNumber)

		task = b.claimIDAt(t, "a", b.at(time.Minute))
		evs = l.requireNext(t, "run 2 is fresh again: its claim logs its start", "instance.started a")
		require.Equal(t, 2, evs[0].RunNumber)
		require.True(t, evs[0].At.Equal(b.at(time.Minute)))
		p = b.checkpoint(task)
		p.Steps = []db.StepWrite{{Key: "charge", Type: db.StepTypeDo, Status: db.StepStatusErrored, Attempts: 3, MaxAttempts: 3,
			ErrorName: "Declined", ErrorMessage: "card declined"}}
		p.Outcome, p.ErrorName, p.ErrorMessage = db.OutcomeError, "Declined", "card declined"
		_, err = b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		evs = l.requireNext(t, "run 2 errors", "step.failed a/charge", "instance.errored a")
		require.Equal(t, 2, evs[1].RunNumber)
		require.Equal(t, "Declined: card declined", evs[1].Detail)

		b.create(t, "t")
		l.next(t)
		_, err = b.store.InstanceTerminate(b.ctx, b.change("t"))
		require.NoError(t, err)
		l.requireNext(t, "t terminate", "instance.terminated t")
		_, err = b.store.InstanceTerminate(b.ctx, b.change("t"))
		require.ErrorIs(t, err, db.ErrTerminal)
		l.requireNext(t, "a refused terminate logs nothing")
		_, err = b.store.EventSend(b.ctx, &db.EventSendParams{WorkflowName: workflowName, InstanceID: "t", Type: "x", Now: new(b.now)})
		require.ErrorIs(t, err, db.ErrTerminal)
		_, err = b.store.EventSend(b.ctx, &db.EventSendParams{WorkflowName: workflowName, InstanceID: "missing", Type: "x", Now: new(b.now)})
		require.ErrorIs(t, err, db.ErrNotFound)
		l.requireNext(t, "a refused send logs nothing")
	})

	t.Run("PauseOfARunningInstanceThenPark", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		l := b.tail(t)
		b.create(t, "p")
		task := b.claim(t, "p")
		l.next(t)
		_, err := b.store.InstancePause(b.ctx, b.change("p"))
		require.NoError(t, err)
		evs := l.requireNext(t, "the pause request", "instance.paused p")
		require.Equal(t, "requested", evs[0].Detail)
		p := b.checkpoint(task)
		p.Outcome, p.NextRunAt = db.OutcomePark, b.now
		_, err = b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		evs = l.requireNext(t, "the park", "instance.paused p")
		require.Equal(t, "parked", evs[0].Detail)
	})

	t.Run("StepStartAndOutcomeShareARow", func(t *testing.T) {
		// A step attempt's start and outcome are stored as one row and
		// listed as two events with consecutive ids, each found by its own
		// type and time, and paged one at a time.
		t.Parallel()
		b := setup(t, newStore)
		log := b.lifecycleLog(t)
		l := b.tail(t)
		b.create(t, "s")
		task := b.claim(t, "s")
		l.next(t)
		started := b.at(time.Second)
		p := b.checkpoint(task)
		p.Now = b.at(3 * time.Second)
		p.Steps = []db.StepWrite{{Key: "a", Type: db.StepTypeDo, Status: db.StepStatusComplete, Attempts: 1, MaxAttempts: 1,
			Result: json.RawMessage(`1`), StartedAt: &started}}
		_, err := b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		evs := l.requireNext(t, "the step's start and outcome", "step.started s/a", "step.completed s/a")
		require.Equal(t, evs[0].ID+1, evs[1].ID, "consecutive ids")
		require.True(t, evs[0].At.Equal(started))
		require.True(t, evs[1].At.Equal(p.Now))
		last, err := log.LifecycleLastID(b.ctx)
		require.NoError(t, err)
		require.Equal(t, evs[1].ID, last)

		list := func(lp db.LifecycleListParams) []string {
			t.Helper()
			lp.WorkflowName, lp.InstanceID = workflowName, "s"
			events, err := log.LifecycleList(b.ctx, &lp)
			require.NoError(t, err)
			keys := []string{}
			for _, e := range events {
				keys = append(keys, lifecycleKey(e))
			}
			return keys
		}
		require.Equal(t, []string{"step.started s/a"}, list(db.LifecycleListParams{Types: []db.LifecycleEventType{db.LifecycleStepStarted}}))
		require.Equal(t, []string{"step.completed s/a"}, list(db.LifecycleListParams{Types: []db.LifecycleEventType{db.LifecycleStepCompleted}}))
		require.Equal(t, []string{"step.started s/a"}, list(db.LifecycleListParams{Since: b.at(time.Second), Until: b.at(2 * time.Second)}))
		require.Equal(t, []string{"step.completed s/a"}, list(db.LifecycleListParams{AfterID: evs[0].ID}))
		require.Equal(t, []string{"step.started s/a"}, list(db.LifecycleListParams{AfterID: evs[0].ID - 1, Limit: 1}))
		require.Equal(t, []string{"step.started s/a"}, list(db.LifecycleListParams{Newest: true, BeforeID: evs[1].ID, Limit: 1}))
		require.Equal(t, []string{"step.completed s/a", "step.started s/a"}, list(db.LifecycleListParams{Newest: true, AfterID: evs[0].ID - 1}))
	})

	t.Run("ConsumedEvent", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		l := b.tail(t)
		b.create(t, "c")
		task := b.claim(t, "c")
		_, err := b.store.EventSend(b.ctx, &db.EventSendParams{WorkflowName: workflowName, InstanceID: "c", Type: "go", Now: new(b.now)})
		require.NoError(t, err)
		l.requireNext(t, "create, claim and send", "instance.created c", "instance.started c", "event.received c")
		p := b.checkpoint(task)
		p.ConsumeEvent = &db.ConsumeEvent{Type: "go", StepKey: "wait"}
		res, err := b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		require.NotNil(t, res.Event)
		evs := l.requireNext(t, "the consume", "step.completed c/wait")
		require.Equal(t, "event:go", evs[0].Detail)
	})

	t.Run("CreatesLogOneEventPerCreatedInstance", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		l := b.tail(t)
		res, err := b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{
			WorkflowName: workflowName, ID: "eager", Now: new(b.now), Lease: b.eagerLease(0),
		})
		require.NoError(t, err)
		require.NotNil(t, res.LeasedTask)
		l.requireNext(t, "an eager start", "instance.created eager", "instance.started eager")

		_, err = b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{WorkflowName: workflowName, ID: "eager", Now: new(b.now)})
		require.ErrorIs(t, err, db.ErrAlreadyExists)
		l.requireNext(t, "a refused create logs nothing")

		created, err := b.store.InstanceCreateMany(b.ctx, &db.InstanceCreateManyParams{
			WorkflowName: workflowName, Now: new(b.now),
			Instances: []db.InstanceCreateItem{{ID: "m1"}, {ID: "eager"}, {ID: "m2"}},
		})
		require.NoError(t, err)
		require.Len(t, created, 2)
		l.requireNext(t, "a batch create skips the existing id", "instance.created m1", "instance.created m2")

		created, err = b.store.InstanceCreateMany(b.ctx, &db.InstanceCreateManyParams{
			WorkflowName: workflowName, Now: new(b.now), Lease: b.eagerLease(1),
			Instances: []db.InstanceCreateItem{{ID: "l1"}, {ID: "l2"}},
		})
		require.NoError(t, err)
		require.Len(t, created, 2)
		l.requireNext(t, "a batch create with a lease",
			"instance.created l1", "instance.started l1", "instance.created l2")

		s := b.createSchedule(t, "nightly", time.Hour)
		fired, err := b.fire(s, b.at(2*time.Hour), b.at(time.Hour))
		require.NoError(t, err)
		require.Len(t, fired.Created, 1)
		l.requireNext(t, "a schedule's firing", "instance.created "+fired.Created[0].ID)
		_, err = b.fire(s, b.at(2*time.Hour), b.at(time.Hour))
		require.ErrorIs(t, err, db.ErrScheduleChanged)
		l.requireNext(t, "a firing fenced out logs nothing")
	})

	t.Run("FencedOutCheckpointWritesNone", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		l := b.tail(t)
		b.create(t, "f")
		stale := b.claim(t, "f")
		_, err := b.store.InstanceRestart(b.ctx, b.change("f"))
		require.NoError(t, err)
		l.next(t)
		for _, outcome := range []db.CheckpointOutcome{db.OutcomeContinue, db.OutcomeSuspend, db.OutcomePark, db.OutcomeComplete, db.OutcomeError} {
			p := b.checkpoint(stale)
			p.Outcome, p.NextRunAt = outcome, b.at(time.Minute)
			p.Steps = []db.StepWrite{{Key: "s", Type: db.StepTypeDo, Status: db.StepStatusComplete, Attempts: 1, MaxAttempts: 1, Result: json.RawMessage(`1`)}}
			_, err := b.store.Checkpoint(b.ctx, p)
			require.ErrorIs(t, err, db.ErrLeaseLost, "outcome %d", outcome)
			l.requireNext(t, fmt.Sprintf("a fenced-out checkpoint (outcome %d)", outcome))
		}
		p := b.checkpoint(stale)
		p.ConsumeEvent = &db.ConsumeEvent{Type: "go", StepKey: "wait"}
		_, err = b.store.Checkpoint(b.ctx, p)
		require.ErrorIs(t, err, db.ErrLeaseLost)
		l.requireNext(t, "a fenced-out consume")
	})

	t.Run("GroupCommit", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		batcher := b.batcher(t)
		l := b.tail(t)
		var tasks []*db.Task
		for _, id := range []string{"g1", "g2", "g3"} {
			b.create(t, id)
			tasks = append(tasks, b.claim(t, id))
		}
		_, err := b.store.InstanceRestart(b.ctx, b.change("g2")) // g2's lease is lost
		require.NoError(t, err)
		l.next(t)
		started := b.at(time.Second)
		var ps []*db.CheckpointParams
		for i, task := range tasks {
			p := b.checkpoint(task)
			p.Now = b.at(2 * time.Second)
			p.Steps = []db.StepWrite{{Key: "s", Type: db.StepTypeDo, Status: db.StepStatusComplete, Attempts: 1, MaxAttempts: 1,
				Result: json.RawMessage(`1`), StartedAt: &started}}
			if i == 2 {
				p.Outcome, p.Output = db.OutcomeComplete, json.RawMessage(`3`)
			}
			ps = append(ps, p)
		}
		results, err := batcher.CheckpointBatch(b.ctx, ps)
		require.NoError(t, err)
		require.NoError(t, results[0].Err)
		require.ErrorIs(t, results[1].Err, db.ErrLeaseLost)
		require.NoError(t, results[2].Err)
		evs := l.requireNext(t, "the batch: the held items' events only",
			"step.started g1/s", "step.completed g1/s",
			"step.started g3/s", "step.completed g3/s", "instance.completed g3")
		require.True(t, evs[0].At.Equal(started))
		require.True(t, evs[4].At.Equal(ps[2].Now))
	})

	t.Run("Off", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		log := b.lifecycleLog(t)
		l := b.tail(t)
		log.LifecycleLogSet(false)
		b.create(t, "o")
		task := b.claim(t, "o")
		p := b.checkpoint(task)
		p.Steps = []db.StepWrite{{Key: "s", Type: db.StepTypeDo, Status: db.StepStatusComplete, Attempts: 1, MaxAttempts: 1, Result: json.RawMessage(`1`)}}
		_, err := b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		if batcher, ok := b.store.(db.BatchCheckpointer); ok {
			p := b.checkpoint(task)
			p.Outcome = db.OutcomeComplete
			_, err := batcher.CheckpointBatch(b.ctx, []*db.CheckpointParams{p})
			require.NoError(t, err)
		}
		b.create(t, "o2")
		b.send(t, "o2", "x", `1`)
		_, err = b.store.InstanceTerminate(b.ctx, b.change("o2"))
		require.NoError(t, err)
		l.requireNext(t, "nothing is logged while the log is off")
		log.LifecycleLogSet(true)
		b.create(t, "o3")
		l.requireNext(t, "on again", "instance.created o3")
	})

	t.Run("WaitingForALimit", func(t *testing.T) {
		t.Parallel()
		testLifecycleLogLimitWait(t, newStore)
	})

	t.Run("WorkerEvents", func(t *testing.T) {
		t.Parallel()
		testLifecycleLogWorkers(t, newStore)
	})

	t.Run("TerminateCascade", func(t *testing.T) {
		t.Parallel()
		testLifecycleLogCascade(t, newStore)
	})

	t.Run("ListFiltersAndPages", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		log := b.lifecycleLog(t)
		last, err := log.LifecycleLastID(b.ctx)
		require.NoError(t, err)
		require.Zero(t, last, "an empty log")
		for i, id := range []string{"x1", "x2", "x3"} {
			b.createAt(t, workflowName, id, b.at(time.Duration(i)*time.Minute))
		}
		b.createAt(t, otherName, "y1", b.at(time.Minute))
		_, err = b.store.InstanceTerminate(b.ctx, b.change("x2"))
		require.NoError(t, err)

		list := func(p db.LifecycleListParams) []string {
			t.Helper()
			events, err := log.LifecycleList(b.ctx, &p)
			require.NoError(t, err)
			keys := []string{}
			for _, e := range events {
				keys = append(keys, lifecycleKey(e))
			}
			return keys
		}
		require.Equal(t, []string{"instance.created x1", "instance.created x2", "instance.created x3", "instance.created y1", "instance.terminated x2"},
			list(db.LifecycleListParams{}))
		require.Equal(t, []string{"instance.created y1"}, list(db.LifecycleListParams{WorkflowName: otherName}))
		require.Equal(t, []string{"instance.created x2", "instance.terminated x2"},
			list(db.LifecycleListParams{WorkflowName: workflowName, InstanceID: "x2"}))
		require.Equal(t, []string{"instance.terminated x2"}, list(db.LifecycleListParams{Types: []db.LifecycleEventType{db.LifecycleTerminated}}))
		require.Equal(t, []string{"instance.created x2", "instance.created y1"},
			list(db.LifecycleListParams{Types: []db.LifecycleEventType{db.LifecycleCreated}, Since: b.at(time.Minute), Until: b.at(2 * time.Minute)}))

		// Pages: a cursor continues after the last id.
		var pages [][]string
		after := int64(0)
		for {
			events, err := log.LifecycleList(b.ctx, &db.LifecycleListParams{AfterID: after, Limit: 2})
			require.NoError(t, err)
			if len(events) == 0 {
				break
			}
			var keys []string
			for _, e := range events {
				require.Greater(t, e.ID, after)
				keys = append(keys, lifecycleKey(e))
			}
			pages = append(pages, keys)
			after = events[len(events)-1].ID
		}
		last, err = log.LifecycleLastID(b.ctx)
		require.NoError(t, err)
		require.Equal(t, after, last, "the last id is the newest event's")
		require.Equal(t, [][]string{
			{"instance.created x1", "instance.created x2"},
			{"instance.created x3", "instance.created y1"},
			{"instance.terminated x2"},
		}, pages)

		// Newest first: pages continue before the last id.
		pages = nil
		before := int64(0)
		for {
			events, err := log.LifecycleList(b.ctx, &db.LifecycleListParams{Newest: true, BeforeID: before, Limit: 2})
			require.NoError(t, err)
			if len(events) == 0 {
				break
			}
			var keys []string
			for _, e := range events {
				if before != 0 {
					require.Less(t, e.ID, before)
				}
				keys = append(keys, lifecycleKey(e))
			}
			pages = append(pages, keys)
			before = events[len(events)-1].ID
		}
		require.Equal(t, [][]string{
			{"instance.terminated x2", "instance.created y1"},
			{"instance.created x3", "instance.created x2"},
			{"instance.created x1"},
		}, pages)
		require.Equal(t, []string{"instance.terminated x2", "instance.created x2"},
			list(db.LifecycleListParams{WorkflowName: workflowName, InstanceID: "x2", Newest: true}), "an instance's, newest first")
		require.Equal(t, []string{"instance.terminated x2"},
			list(db.LifecycleListParams{WorkflowName: workflowName, InstanceID: "x2", Newest: true, Limit: 1}))
	})

	t.Run("PruneInBatchesByAge", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		log := b.lifecycleLog(t)
		for i := range 5 {
			b.createAt(t, workflowName, fmt.Sprintf("old%d", i), b.at(-48*time.Hour+time.Duration(i)*time.Minute))
		}
		b.createAt(t, workflowName, "new", b.now)
		n, err := log.LifecyclePrune(b.ctx, &db.LifecyclePruneParams{Before: b.at(-24 * time.Hour), Max: 2})
		require.NoError(t, err)
		require.Equal(t, 2, n, "a batch is at most Max")
		n, err = log.LifecyclePrune(b.ctx, &db.LifecyclePruneParams{Before: b.at(-24 * time.Hour), Max: 10})
		require.NoError(t, err)
		require.Equal(t, 3, n)
		n, err = log.LifecyclePrune(b.ctx, &db.LifecyclePruneParams{Before: b.at(-24 * time.Hour), Max: 10})
		require.NoError(t, err)
		require.Zero(t, n)
		events, err := log.LifecycleList(b.ctx, &db.LifecycleListParams{})
		require.NoError(t, err)
		require.Len(t, events, 1)
		require.Equal(t, "new", events[0].InstanceID, "the newer event is kept")
	})
	t.Run("PruneLooksPastAYoungerEvent", func(t *testing.T) {
		// Times follow ids only roughly (a step.started is as old as its
		// attempt, runners' clocks differ): a younger event among the
		// oldest ids holds up none of the older ones after it.
		t.Parallel()
		b := setup(t, newStore)
		log := b.lifecycleLog(t)
		b.createAt(t, workflowName, "old0", b.at(-48*time.Hour))
		b.createAt(t, workflowName, "young", b.at(-time.Hour))
		b.createAt(t, workflowName, "old1", b.at(-47*time.Hour))
		b.createAt(t, workflowName, "old2", b.at(-46*time.Hour))
		b.createAt(t, workflowName, "new", b.now)
		before := b.at(-24 * time.Hour)
		n, err := log.LifecyclePrune(b.ctx, &db.LifecyclePruneParams{Before: before, Max: 2})
		require.NoError(t, err)
		require.Equal(t, 2, n, "a full batch, past the younger event")
		n, err = log.LifecyclePrune(b.ctx, &db.LifecyclePruneParams{Before: before, Max: 2})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		events, err := log.LifecycleList(b.ctx, &db.LifecycleListParams{})
		require.NoError(t, err)
		var left []string
		for _, e := range events {
			left = append(left, e.InstanceID)
		}
		require.Equal(t, []string{"young", "new"}, left)
	})

	t.Run("PruneNeverReusesAnID", func(t *testing.T) {
		// A cursor (a follower's, a subscriber's) is an id: an event
		// written after a prune must take an id past every earlier one,
		// even when the prune took every event old enough.
		t.Parallel()
		b := setup(t, newStore)
		log := b.lifecycleLog(t)
		for i := range 3 {
			b.createAt(t, workflowName, fmt.Sprintf("old%d", i), b.at(-48*time.Hour+time.Duration(i)*time.Minute))
		}
		before, err := log.LifecycleList(b.ctx, &db.LifecycleListParams{})
		require.NoError(t, err)
		require.NotEmpty(t, before)
		last := before[len(before)-1].ID
		for {
			n, err := log.LifecyclePrune(b.ctx, &db.LifecyclePruneParams{Before: b.at(time.Hour), Max: 10})
			require.NoError(t, err)
			if n == 0 {
				break
			}
		}
		b.createAt(t, workflowName, "after", b.now)
		after, err := log.LifecycleList(b.ctx, &db.LifecycleListParams{InstanceID: "after", WorkflowName: workflowName})
		require.NoError(t, err)
		require.NotEmpty(t, after)
		for _, e := range after {
			require.Greater(t, e.ID, last, "an id written after the prune is past every earlier one")
		}
		lastID, err := log.LifecycleLastID(b.ctx)
		require.NoError(t, err)
		require.Equal(t, after[len(after)-1].ID, lastID)
	})
}

// testLifecycleLogCascade: a terminate that ends its children (policy
// terminate, recursively) logs one instance.terminated per instance, in
// the same transaction.
func testLifecycleLogCascade(t *testing.T, newStore func(t *testing.T) db.Store) {
	b := setup(t, newStore)
	l := b.tail(t)
	b.create(t, "parent")
	for _, id := range []string{"child", "grandchild"} {
		parent := map[string]string{"child": "parent", "grandchild": "child"}[id]
		_, err := b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{
			WorkflowName: workflowName, ID: id, Now: new(b.now),
			Parent: &db.ParentLink{WorkflowName: workflowName, InstanceID: parent, RunNumber: 1, StepKey: "sub", Policy: db.ParentPolicyTerminate},
		})
		require.NoError(t, err)
	}
	l.next(t)
	_, err := b.store.InstanceTerminate(b.ctx, b.change("parent"))
	require.NoError(t, err)
	got := l.requireNext(t, "the cascade", "instance.terminated parent", "instance.terminated child", "instance.terminated grandchild")
	for _, e := range got {
		require.Equal(t, 1, e.RunNumber)
	}
}

// testLifecycleLogLimitWait: an instance a limit holds back logs
// instance.waiting ("limit:<scope>" for a concurrency limit, "rate:<scope>"
// for a rate limit) in the transaction that makes it wait, once each time
// it starts waiting: at a create (single or batch) and at a restart of an
// ended instance, not when it goes on waiting.
func testLifecycleLogLimitWait(t *testing.T, newStore func(t *testing.T) db.Store) {
	b := setup(t, newStore)
	l := b.tail(t)
	k1 := db.KeyScope(workflowName, "k1")

	require.True(t, b.createKeyed(t, "h", "k1", b.now))
	l.requireNext(t, "an admitted create", "instance.created h")

	at := b.at(time.Second)
	res, err := b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{
		WorkflowName: workflowName, ID: "w", Now: new(at),
		Limits: []db.LimitSpec{{Scope: k1, Define: true, MaxRunning: 1}},
	})
	require.NoError(t, err)
	evs := l.requireNext(t, "a create the key's limit holds back", "instance.created w", "instance.waiting w")
	require.Equal(t, "limit:"+k1, evs[1].Detail)
	require.Equal(t, 1, evs[1].RunNumber)
	require.True(t, evs[1].At.Equal(at), "at the create's now")
	b.requireWaits(t, "w", "k1")
	require.Equal(t, b.get(t, "w").WaitingFor, res.Instance.WaitingFor, "the create's result says what it waits for, as a get does")

	k2 := db.KeyScope(workflowName, "k2")
	created, err := b.store.InstanceCreateMany(b.ctx, &db.InstanceCreateManyParams{
		WorkflowName: workflowName, Now: new(at),
		Instances: []db.InstanceCreateItem{
			{ID: "m1", Limits: []db.LimitSpec{{Scope: k2, Define: true, MaxRunning: 1}}},
			{ID: "m2", Limits: []db.LimitSpec{{Scope: k2, Define: true, MaxRunning: 1}}},
		},
	})
	require.NoError(t, err)
	require.Len(t, created, 2)
	evs = l.requireNext(t, "a batch create: the second waits", "instance.created m1", "instance.created m2", "instance.waiting m2")
	require.Equal(t, "limit:"+k2, evs[2].Detail)

	rated := []db.LimitSpec{{Scope: db.KeyScope(workflowName, "r"), Define: true, RateLimit: 1, RatePeriod: time.Hour}}
	for _, id := range []string{"r1", "r2"} {
		_, err := b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{WorkflowName: workflowName, ID: id, Now: new(at), Limits: rated})
		require.NoError(t, err)
	}
	evs = l.requireNext(t, "a rate limit puts the second start in the next window",
		"instance.created r1", "instance.created r2", "instance.waiting r2")
	require.Equal(t, "rate:"+rated[0].Scope, evs[2].Detail)
	require.Equal(t, db.LimitKindRate, b.get(t, "r2").WaitingFor.Kind)

	// m2 goes on waiting through a pause, a resume and a restart.
	_, err = b.store.InstancePause(b.ctx, b.change("m2"))
	require.NoError(t, err)
	_, err = b.store.InstanceResume(b.ctx, b.change("m2"))
	require.NoError(t, err)
	_, err = b.store.InstanceRestart(b.ctx, b.change("m2"))
	require.NoError(t, err)
	l.requireNext(t, "a waiting instance goes on waiting: no new wait",
		"instance.paused m2", "instance.resumed m2", "instance.restarted m2")
	b.requireWaits(t, "m2", "k2")

	// h ends: its slot goes to w, which stops waiting (nothing logged for
	// it); h restarted then waits for the slot w took.
	end := b.at(2 * time.Second)
	var task *db.Task
	for _, c := range b.claimAt(t, end, 10) {
		if c.InstanceID == "h" {
			task = c
		}
	}
	require.NotNil(t, task)
	var claimedIDs []string
	for _, e := range l.next(t) {
		require.Equal(t, db.LifecycleStarted, e.Type, "a claim logs the starts of the runs it takes fresh")
		require.True(t, e.At.Equal(end))
		claimedIDs = append(claimedIDs, e.InstanceID)
	}
	require.Contains(t, claimedIDs, "h")
	_, err = b.store.Checkpoint(b.ctx, b.end(task, end))
	require.NoError(t, err)
	l.requireNext(t, "h ends and admits w (its task due, not leased: no start yet)", "instance.completed h")
	require.Nil(t, b.get(t, "w").WaitingFor)
	_, err = b.store.InstanceRestart(b.ctx, b.change("h"))
	require.NoError(t, err)
	evs = l.requireNext(t, "a restart of an ended instance that must wait", "instance.restarted h", "instance.waiting h")
	require.Equal(t, 2, evs[1].RunNumber)
	require.Equal(t, "limit:"+k1, evs[1].Detail)
	b.requireWaits(t, "h", "k1")
}

// testLifecycleLogWorkers: a worker's changes of status log worker.online,
// worker.draining and worker.offline in their transactions, once each
// (a second drain or deregistration logs nothing), naming the worker and
// no instance; lists filter by worker and type.
func testLifecycleLogWorkers(t *testing.T, newStore func(t *testing.T) db.Store) {
	b := setup(t, newStore)
	log := b.lifecycleLog(t)
	l := b.tail(t)
	register := func(id string, at time.Time) {
		t.Helper()
		_, err := b.store.WorkerRegister(b.ctx, &db.WorkerRegisterParams{
			ID: id, Hostname: "host", PID: 1, Queues: []string{"default"}, MaxConcurrency: 4, Now: at, ReleaseHeld: true,
		})
		require.NoError(t, err)
	}

	register("w1", b.now)
	evs := l.requireNext(t, "a registration", "worker.online @w1")
	require.Equal(t, "w1", evs[0].WorkerID)
	require.Empty(t, evs[0].WorkflowName)
	require.Empty(t, evs[0].InstanceID)
	require.Zero(t, evs[0].RunNumber)
	require.True(t, evs[0].At.Equal(b.now), "at the registration's now")

	_, err := b.store.WorkerHeartbeat(b.ctx, &db.WorkerHeartbeatParams{ID: "w1", Now: b.at(time.Second)})
	require.NoError(t, err)
	l.requireNext(t, "a heartbeat logs nothing")

	for range 2 {
		_, err = b.store.WorkerDrain(b.ctx, &db.WorkerDrainParams{ID: "w1", Now: b.at(2 * time.Second)})
		require.NoError(t, err)
	}
	evs = l.requireNext(t, "a drain, then one of a draining worker", "worker.draining @w1")
	require.True(t, evs[0].At.Equal(b.at(2*time.Second)))

	for range 2 {
		_, err = b.store.WorkerDeregister(b.ctx, &db.WorkerDeregisterParams{ID: "w1", Now: b.at(3 * time.Second)})
		require.NoError(t, err)
	}
	evs = l.requireNext(t, "a deregistration, then one of an offline worker", "worker.offline @w1")
	require.Equal(t, "deregistered", evs[0].Detail)
	_, err = b.store.WorkerDrain(b.ctx, &db.WorkerDrainParams{ID: "w1", Now: b.at(4 * time.Second)})
	require.ErrorIs(t, err, db.ErrWorkerOffline)
	_, err = b.store.WorkerDeregister(b.ctx, &db.WorkerDeregisterParams{ID: "missing", Now: b.at(4 * time.Second)})
	require.ErrorIs(t, err, db.ErrNotFound)
	l.requireNext(t, "refused changes log nothing")

	register("w1", b.at(time.Minute))
	register("w2", b.at(time.Minute))
	register("w3", b.at(time.Minute))
	l.requireNext(t, "registrations, one again", "worker.online @w1", "worker.online @w2", "worker.online @w3")

	_, err = b.store.WorkerHeartbeat(b.ctx, &db.WorkerHeartbeatParams{ID: "w1", Now: b.at(time.Hour - 10*time.Second)})
	require.NoError(t, err)
	reaped, err := b.store.WorkerReap(b.ctx, &db.WorkerReapParams{Now: b.at(time.Hour), OfflineAfter: 30 * time.Second})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"w2", "w3"}, reaped.WorkerIDs)
	evs = l.next(t)
	var keys []string
	for _, e := range evs {
		keys = append(keys, lifecycleKey(e))
		require.Equal(t, "heartbeat stopped", e.Detail)
		require.True(t, e.At.Equal(b.at(time.Hour)), "at the reap's now")
	}
	require.ElementsMatch(t, []string{"worker.offline @w2", "worker.offline @w3"}, keys, "the reap")
	_, err = b.store.WorkerReap(b.ctx, &db.WorkerReapParams{Now: b.at(time.Hour), OfflineAfter: 30 * time.Second})
	require.NoError(t, err)
	l.requireNext(t, "a reap that marks none logs nothing")

	list := func(p db.LifecycleListParams) []string {
		t.Helper()
		events, err := log.LifecycleList(b.ctx, &p)
		require.NoError(t, err)
		keys := []string{}
		for _, e := range events {
			keys = append(keys, lifecycleKey(e))
		}
		return keys
	}
	require.Equal(t, []string{"worker.online @w2", "worker.offline @w2"}, list(db.LifecycleListParams{WorkerID: "w2"}))
	require.Equal(t, []string{"worker.online @w1", "worker.online @w1"},
		list(db.LifecycleListParams{WorkerID: "w1", Types: []db.LifecycleEventType{db.LifecycleWorkerOnline}}))
	require.Empty(t, list(db.LifecycleListParams{WorkerID: "w1", WorkflowName: workflowName}), "worker events have no workflow")

	log.LifecycleLogSet(false)
	register("w4", b.at(2*time.Hour))
	_, err = b.store.WorkerDrain(b.ctx, &db.WorkerDrainParams{ID: "w4", Now: b.at(2 * time.Hour)})
	require.NoError(t, err)
	_, err = b.store.WorkerDeregister(b.ctx, &db.WorkerDeregisterParams{ID: "w4", Now: b.at(2 * time.Hour)})
	require.NoError(t, err)
	l.requireNext(t, "nothing is logged while the log is off")
	log.LifecycleLogSet(true)
}
