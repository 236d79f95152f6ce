package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
)

func testConcurrency(t *testing.T, newStore func(t *testing.T) db.Store) {
	t.Run("ConcurrentClaimsNeverShareATask", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		const instances, runners = 40, 4
		items := make([]db.InstanceCreateItem, instances)
		for i := range items {
			items[i].ID = fmt.Sprintf("i%02d", i)
		}
		_, err := b.store.InstanceCreateMany(b.ctx, &db.InstanceCreateManyParams{WorkflowName: workflowName, Instances: items, Now: new(b.now)})
		require.NoError(t, err)

		var (
			mu      sync.Mutex
			claimed = map[string]string{}
			wg      sync.WaitGroup
			errs    = make(chan error, runners)
		)
		for r := range runners {
			wg.Go(func() {
				name := fmt.Sprintf("runner-%d", r)
				for {
					claims, err := b.store.TaskClaim(b.ctx, &db.TaskClaimParams{
						Owner: name, WorkflowNames: []string{workflowName}, Max: 3, Now: b.now, LockedUntil: b.at(lease),
					})
					tasks := taskList(claims)
					if err != nil {
						errs <- err
						return
					}
					if len(tasks) == 0 {
						return
					}
					mu.Lock()
					for _, task := range tasks {
						if prev, ok := claimed[task.InstanceID]; ok {
							errs <- fmt.Errorf("%s claimed by %s and %s", task.InstanceID, prev, name)
						}
						claimed[task.InstanceID] = name
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.Len(t, claimed, instances)
	})

	// Runners checkpoint while clients send events, pause and resume: no call
	// may fail with anything but the documented conditions (no deadlock), and
	// every instance ends complete.
	t.Run("MixedWritersDoNotDeadlock", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		const instances = 8
		for i := range instances {
			b.create(t, fmt.Sprintf("i%d", i))
		}

		done := make(chan struct{})
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		report := func(err error) {
			select {
			case errs <- err:
			default:
			}
		}
		// Clients: events, pauses and resumes until the runners are done.
		for c := range 2 {
			wg.Go(func() {
				for n := 0; ; n++ {
					select {
					case <-done:
						return
					default:
					}
					id := fmt.Sprintf("i%d", (n+c)%instances)
					var err error
					switch n % 3 {
					case 0:
						_, err = b.store.EventSend(b.ctx, &db.EventSendParams{WorkflowName: workflowName, InstanceID: id, Type: "go", Payload: json.RawMessage(`1`), Now: new(b.now)})
					case 1:
						_, err = b.store.InstancePause(b.ctx, b.change(id))
					case 2:
						_, err = b.store.InstanceResume(b.ctx, b.change(id))
					}
					if err != nil && !errors.Is(err, db.ErrTerminal) {
						report(fmt.Errorf("client: %w", err))
						return
					}
				}
			})
		}
		// Runners: claim, write two steps (waiting for "go" in between), complete.
		var rwg sync.WaitGroup
		for r := range 2 {
			rwg.Go(func() {
				deadline := time.Now().Add(20 * time.Second)
				for time.Now().Before(deadline) {
					if completeAll(b) {
						return
					}
					claims, err := b.store.TaskClaim(b.ctx, &db.TaskClaimParams{
						Owner: fmt.Sprintf("r%d", r), WorkflowNames: []string{workflowName}, Max: 2, Now: b.now, LockedUntil: b.at(lease),
					})
					tasks := taskList(claims)
					if err != nil {
						report(fmt.Errorf("claim: %w", err))
						return
					}
					for _, task := range tasks {
						if err := step(b, task); err != nil && !errors.Is(err, db.ErrLeaseLost) {
							report(fmt.Errorf("checkpoint: %w", err))
							return
						}
					}
					if len(tasks) == 0 {
						// Only paused or waiting instances left: let the clients act.
						runtime.Gosched()
					}
				}
				report(fmt.Errorf("runner %d: instances did not complete in time", r))
			})
		}
		rwg.Wait()
		close(done)
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
	})
}

// step advances one claimed instance of MixedWritersDoNotDeadlock the way a
// runner would: park when a pause was requested, otherwise complete when its
// wait has the "go" event (delivered by the send that woke it, or consumed
// now), or suspend waiting for one.
func step(b *testBundle, task *db.Task) error {
	state, err := b.store.RunLoad(b.ctx, db.InstanceRef{WorkflowName: task.WorkflowName, ID: task.InstanceID})
	if err != nil {
		return err
	}
	p := b.checkpoint(task)
	if state.Instance.PauseRequested {
		p.Outcome = db.OutcomePark
		p.NextRunAt = b.now
		p.NextKind = db.TaskKindResume
		_, err = b.store.Checkpoint(b.ctx, p)
		return err
	}
	// Replay first: a send that woke the run may have delivered the event.
	delivered := false
	if st := state.Steps["wait"]; st != nil && st.Status == db.StepStatusComplete {
		delivered = true
	} else {
		p.ConsumeEvent = &db.ConsumeEvent{Type: "go", StepKey: "wait"}
		res, err := b.store.Checkpoint(b.ctx, p)
		if err != nil {
			return err
		}
		delivered = res.Event != nil
	}
	p = b.checkpoint(task)
	if delivered {
		p.Outcome = db.OutcomeComplete
		p.Output = json.RawMessage(`"ok"`)
	} else {
		p.Steps = []db.StepWrite{{Key: "wait", Type: db.StepTypeWaitForEvent, Status: db.StepStatusWaiting, WaitEventType: "go"}}
		p.Outcome = db.OutcomeSuspend
		p.NextRunAt = b.at(time.Hour)
		p.NextKind = db.TaskKindWake
		p.WaitEventTypes = []string{"go"}
	}
	_, err = b.store.Checkpoint(b.ctx, p)
	return err
}

// completeAll reports whether every instance of the bundle is complete.
func completeAll(b *testBundle) bool {
	list, err := b.store.InstanceList(b.ctx, &db.InstanceListParams{WorkflowName: workflowName, Statuses: []dftype.InstanceStatus{
		dftype.StatusQueued, dftype.StatusRunning, dftype.StatusWaiting, dftype.StatusWaitingForPause, dftype.StatusPaused,
	}, Limit: 1})
	return err == nil && len(list) == 0
}
