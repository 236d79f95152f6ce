package runner

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
)

// batchStore records the size of every CheckpointBatch and blocks the first
// one until released, so that checkpoints queue behind it.
type batchStore struct {
	db.Store
	mu      sync.Mutex
	sizes   []int
	first   chan struct{}
	release chan struct{}
	lost    map[int64]bool
}

func (s *batchStore) CheckpointBatch(ctx context.Context, ps []*db.CheckpointParams) ([]db.CheckpointBatchResult, error) {
	s.mu.Lock()
	n := len(s.sizes)
	s.sizes = append(s.sizes, len(ps))
	s.mu.Unlock()
	if n == 0 {
		close(s.first)
		<-s.release
	}
	out := make([]db.CheckpointBatchResult, len(ps))
	for i, p := range ps {
		if s.lost[p.Task.ID] {
			out[i].Err = db.ErrLeaseLost
			continue
		}
		out[i].Result = &db.CheckpointResult{Status: dftype.StatusRunning, PauseRequested: p.Task.ID%2 == 0}
	}
	return out, nil
}

func TestGroupCommitBatchesWhatQueuesBehindACommit(t *testing.T) {
	t.Parallel()
	store := &batchStore{first: make(chan struct{}), release: make(chan struct{}), lost: map[int64]bool{7: true}}
	stop := make(chan struct{})
	defer close(stop)
	g := newGroupCommit(store, 64, 1, stop)

	type answer struct {
		res *db.CheckpointResult
		err error
	}
	answers := make([]answer, 11)
	var wg sync.WaitGroup
	commit := func(i int) {
		defer wg.Done()
		res, err := g.commit(&db.CheckpointParams{Task: db.TaskRef{ID: int64(i)}, Outcome: db.OutcomeContinue})
		answers[i] = answer{res, err}
	}
	wg.Add(1)
	go commit(0)
	<-store.first // the first checkpoint commits alone, at once
	for i := 1; i <= 10; i++ {
		wg.Add(1)
		go commit(i)
	}
	// The ten others queue while the first commit is in flight; wait until
	// they are all blocked in commit, then let the first finish.
	require.Eventually(t, func() bool { return len(g.reqs) == 10 }, 10*time.Second, time.Millisecond)
	close(store.release)
	wg.Wait()

	store.mu.Lock()
	sizes := append([]int(nil), store.sizes...)
	store.mu.Unlock()
	require.Equal(t, 1, sizes[0])
	total := 0
	for _, n := range sizes {
		total += n
	}
	require.Equal(t, 11, total, "every checkpoint committed exactly once")
	commits, checkpoints := g.commits.Load(), g.checkpoints.Load()
	require.EqualValues(t, len(sizes), commits)
	require.EqualValues(t, 11, checkpoints)
	require.Less(t, len(sizes), 11, "queued checkpoints were committed together")
	for i, a := range answers {
		if i == 7 {
			require.ErrorIs(t, a.err, db.ErrLeaseLost, "an item's own fence failure reaches only that item")
			continue
		}
		require.NoError(t, a.err)
		require.Equal(t, i%2 == 0, a.res.PauseRequested, "each caller gets its own result")
	}
}

// TestGroupCommitAfterStopReturns shows that a checkpoint given to a group
// commit whose workers have stopped is answered with errRunnerStopped: the
// queue has room, so commit's select may queue it after the last worker
// left, where before nothing answered it and Stop waited forever.
func TestGroupCommitAfterStopReturns(t *testing.T) {
	t.Parallel()
	store := &batchStore{first: make(chan struct{}), release: make(chan struct{})}
	stop := make(chan struct{})
	g := newGroupCommit(store, 64, 2, stop)
	close(stop)
	<-g.exited
	errs := make(chan error, 200)
	go func() {
		defer close(errs)
		for range 200 { // the select picks the free queue slot about half the time
			_, err := g.commit(&db.CheckpointParams{Task: db.TaskRef{ID: 1}, Outcome: db.OutcomeContinue})
			errs <- err
			for len(g.reqs) > 0 { // keep the queue free, as a live runner would
				<-g.reqs
			}
		}
	}()
	timeout := time.After(10 * time.Second)
	for n := 0; n < 200; n++ {
		select {
		case err := <-errs:
			require.ErrorIs(t, err, errRunnerStopped)
		case <-timeout:
			t.Fatalf("commit %d after stop did not return", n)
		}
	}
	require.Empty(t, store.sizes, "nothing was committed")
}
