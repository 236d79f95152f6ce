package flow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/internal/backoff"
	"github.com/duraflow/duraflow/internal/wfcore"
	"github.com/duraflow/duraflow/workflow"
)

// Load registers every stored flow that is not registered yet and returns
// their ids. A flow whose id is a Go workflow of the host, or whose latest
// version does not validate with the host's handlers, is skipped with a
// warning (once per latest version). Only store errors fail it.
func (r *Registry) Load(ctx context.Context) ([]string, error) {
	var added []string
	for after := ""; ; {
		page, err := r.cfg.Store.FlowList(ctx, &db.FlowListParams{AfterID: after, Limit: listBatch})
		if err != nil {
			return added, fmt.Errorf("loading flows: %w", err)
		}
		for _, f := range page {
			ok, err := r.loadVersion(ctx, f.ID, f.Version)
			if err != nil {
				return added, err
			}
			if ok {
				added = append(added, f.ID)
			}
		}
		if len(page) < listBatch {
			r.loadedOnce.Do(func() { close(r.loaded) })
			return added, nil
		}
		after = page[len(page)-1].ID
	}
}

// Loaded returns a channel that is closed once a Load succeeded: every flow
// stored then is registered (or skipped). A host is ready to run flows
// from then on (duraflow.Host.Ready).
func (r *Registry) Loaded() <-chan struct{} { return r.loaded }

// loadOne registers the flow id from the store, if it is stored and valid
// here.
func (r *Registry) loadOne(ctx context.Context, id string) error {
	if err := workflow.ValidateWorkflowName(id); err != nil {
		return nil
	}
	f, err := r.cfg.Store.FlowGet(ctx, db.FlowRef{ID: id})
	if errors.Is(err, db.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("looking up flow %q: %w", id, err)
	}
	_, err = r.loadVersion(ctx, id, f.Version)
	return err
}

// loadVersion registers flow id after compiling its latest version, which
// it reports; it returns false when the flow was registered already or is
// skipped.
func (r *Registry) loadVersion(ctx context.Context, id, latest string) (bool, error) {
	r.mu.RLock()
	known, skippedAt := r.flows[id], r.skipped[id]
	r.mu.RUnlock()
	if known || skippedAt == latest {
		return false, nil
	}
	if r.isGoWorkflow(id) {
		r.skip(id, latest, "its id is the name of a Go workflow of this host")
		return false, nil
	}
	if _, err := r.runs.compiled(ctx, id, latest, false); err != nil {
		if isRunError(err) {
			r.skip(id, latest, err.Error())
			return false, nil
		}
		return false, err
	}
	if err := r.register(id); err != nil {
		return false, err
	}
	return true, nil
}

func (r *Registry) skip(id, version, why string) {
	r.mu.Lock()
	r.skipped[id] = version
	r.mu.Unlock()
	r.log.Warn("flow: a stored flow is not registered on this host", "flow", id, "version", version, "reason", why)
}

// Start refreshes the registry in the background until Stop: every
// RefreshInterval, and at once after Notify, it loads the flows other
// processes applied (see Load) and calls WakeFunc with each id it
// registered. It loads at once only when no Load has succeeded yet (call
// Load first to load before Start returns). While the database is
// unavailable it loads again with backoff (backoff.Loop, in real time)
// instead of at the next refresh, and logs the outage once.
func (r *Registry) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started {
		return errors.New("flow: already started")
	}
	r.started = true
	// The ticker exists when Start returns, so a fake clock moved after
	// Start always ticks it.
	ticker := r.cfg.Clock.Ticker(r.cfg.RefreshInterval)
	go r.loop(context.WithoutCancel(ctx), ticker)
	return nil
}

func (r *Registry) loop(ctx context.Context, ticker *clock.Ticker) {
	defer close(r.done)
	defer ticker.Stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-r.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	outage := backoff.NewOutage(r.log, "loading flows", backoff.Loop)
	var retry <-chan time.Time // set while the database is unavailable
	select {
	case <-r.loaded:
	default:
		retry = closedTime // never loaded: load at once
	}
	for {
		select {
		case <-r.stop:
			return
		case <-ticker.C:
		case <-r.poke:
		case <-retry:
		}
		retry = nil
		added, err := r.Load(ctx)
		if ctx.Err() != nil {
			return
		}
		if unavailable, wait := outage.Round(err); unavailable {
			retry = time.After(wait)
		} else if err != nil {
			r.log.Warn("flow: refreshing flows failed", "error", err)
		}
		for _, id := range added {
			r.log.Info("flow: registered a flow applied elsewhere", "flow", id)
			r.cfg.WakeFunc(id)
		}
	}
}

// closedTime is a channel that is always ready.
var closedTime = func() <-chan time.Time {
	c := make(chan time.Time)
	close(c)
	return c
}()

// Stop ends the background refresh and waits for a refresh in flight, or
// for ctx.
func (r *Registry) Stop(ctx context.Context) error {
	r.mu.RLock()
	started := r.started
	r.mu.RUnlock()
	if !started {
		return nil
	}
	r.stopOnce.Do(func() { close(r.stop) })
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Notify tells the registry of a workflow name that work is due for (a
// wake-up): when the host does not know it, a started registry refreshes at
// once, since the name may be a flow applied elsewhere. It never blocks.
func (r *Registry) Notify(workflowName string) {
	if workflowName == "" || r.IsFlow(workflowName) {
		return
	}
	if _, ok := wfcore.Lookup(r.cfg.Registry, workflowName); ok {
		return
	}
	select {
	case r.poke <- struct{}{}:
	default:
	}
}

// Resolve registers workflowName when it is a stored flow that the host has
// not registered yet (applied by another process since the last refresh).
// A name the host knows, or that no stored flow has, is left alone: that is
// no error. It is the ResolveFunc of schedule.Config.
func (r *Registry) Resolve(ctx context.Context, workflowName string) error {
	if r.IsFlow(workflowName) {
		return nil
	}
	if _, ok := wfcore.Lookup(r.cfg.Registry, workflowName); ok {
		return nil
	}
	return r.loadOne(ctx, workflowName)
}
