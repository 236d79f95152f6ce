package runner

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/duraflow/duraflow/db"
)

// commitReq is one checkpoint waiting for a group commit.
type commitReq struct {
	p    *db.CheckpointParams
	res  *db.CheckpointResult
	err  error
	done chan struct{}
}

// groupCommit commits the batchable checkpoints (db.CheckpointParams.Batchable:
// steps, and the ends of runs) of many running instances together: each
// worker takes one queued checkpoint and everything else queued at that
// moment (up to GroupCommitMax), commits them in one transaction with the
// store's db.BatchCheckpointer, and answers each. While a commit is in flight the
// next checkpoints queue, so under load commits grow and their number per
// step falls, and when idle a checkpoint commits alone at once.
type groupCommit struct {
	store db.BatchCheckpointer
	max   int
	reqs  chan *commitReq
	stop  <-chan struct{}
	// exited is closed once every worker has returned (after stop): a
	// checkpoint queued after that is taken by no one.
	exited chan struct{}

	commits     atomic.Int64
	checkpoints atomic.Int64
}

func newGroupCommit(store db.BatchCheckpointer, max, workers int, stop <-chan struct{}) *groupCommit {
	g := &groupCommit{store: store, max: max, reqs: make(chan *commitReq, max), stop: stop, exited: make(chan struct{})}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(g.work)
	}
	go func() {
		wg.Wait()
		close(g.exited)
	}()
	return g
}

var errRunnerStopped = errors.New("runner stopped")

// commit queues p and waits until the commit holding it is done. Once the
// runner stops, p may be queued after the last worker took its last batch
// (a select between a free queue slot and stop picks either): then no one
// answers, and commit returns errRunnerStopped with nothing written.
func (g *groupCommit) commit(p *db.CheckpointParams) (*db.CheckpointResult, error) {
	req := &commitReq{p: p, done: make(chan struct{})}
	select {
	case g.reqs <- req:
	case <-g.stop:
		return nil, errRunnerStopped
	}
	select {
	case <-req.done:
	case <-g.exited:
		select {
		case <-req.done: // committed in the workers' last batch
		default:
			return nil, errRunnerStopped
		}
	}
	return req.res, req.err
}

func (g *groupCommit) work() {
	batch := make([]*commitReq, 0, g.max)
	params := make([]*db.CheckpointParams, 0, g.max)
	for {
		batch, params = batch[:0], params[:0]
		select {
		case <-g.stop:
			return
		case req := <-g.reqs:
			batch = append(batch, req)
		}
	gather:
		for len(batch) < g.max {
			select {
			case req := <-g.reqs:
				batch = append(batch, req)
			default:
				break gather
			}
		}
		for _, req := range batch {
			params = append(params, req.p)
		}
		// A commit in flight finishes even while the runner stops: it either
		// commits whole or not at all.
		results, err := g.store.CheckpointBatch(context.Background(), params)
		g.commits.Add(1)
		g.checkpoints.Add(int64(len(params)))
		if errors.Is(err, db.ErrInvalidData) && len(batch) > 1 {
			// The database refused a value of some item, and so the whole
			// batch: commit each on its own, so that only the item at fault
			// fails.
			g.commitEach(batch)
			continue
		}
		for i, req := range batch {
			switch {
			case err != nil:
				req.err = err
			default:
				req.res, req.err = results[i].Result, results[i].Err
			}
			close(req.done)
		}
	}
}

// commitEach commits every request of a batch in a batch of its own.
func (g *groupCommit) commitEach(batch []*commitReq) {
	for _, req := range batch {
		results, err := g.store.CheckpointBatch(context.Background(), []*db.CheckpointParams{req.p})
		g.commits.Add(1)
		if err != nil {
			req.err = err
		} else {
			req.res, req.err = results[0].Result, results[0].Err
		}
		close(req.done)
	}
}
