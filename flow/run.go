package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/workflow"
)

// flowWorkflow is what a flow id is registered as: a workflow that runs, for
// each instance, the version the instance is pinned to.
type flowWorkflow struct {
	id   string
	runs *runCache
}

// Run runs the instance's version of the flow.
func (w *flowWorkflow) Run(ctx context.Context, event workflow.Event[json.RawMessage], step workflow.Step) (json.RawMessage, error) {
	version, err := w.runs.version(ctx, event)
	if err != nil {
		return nil, err
	}
	f, err := w.runs.compiled(ctx, w.id, version, true)
	if err != nil {
		return nil, err
	}
	return f.Run(ctx, event, step)
}

// maxPins bounds the cache of instance pins; it is emptied when full.
const maxPins = 10000

// Backoff of store reads on the run path.
const (
	retryFirst = 100 * time.Millisecond
	retryMax   = 5 * time.Second
)

// pinKey identifies an instance; the creation time tells apart two
// instances that had the same id at different times.
type pinKey struct {
	workflowName, id string
	createdAt        time.Time
}

// compileKey identifies a version of a flow.
type compileKey struct{ id, version string }

// compileEntry is a compiled version, or one being compiled: done is
// closed when f or err is set.
type compileEntry struct {
	done chan struct{}
	f    *Flow
	err  error
}

// runCache is what the run path keeps: the pinned version of each instance
// it ran and every version it compiled. Both never change once known, so
// nothing is ever invalidated.
type runCache struct {
	r *Registry

	mu       sync.Mutex
	pins     map[pinKey]string
	compiles map[compileKey]*compileEntry

	// compileCount counts compilations, for tests.
	compileCount atomic.Int64
}

func newRunCache(r *Registry) *runCache {
	return &runCache{r: r, pins: map[pinKey]string{}, compiles: map[compileKey]*compileEntry{}}
}

// put caches a version compiled elsewhere (by Apply).
func (c *runCache) put(id, version string, f *Flow) {
	done := make(chan struct{})
	close(done)
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.compiles[compileKey{id, version}]; ok && e.f != nil {
		return
	}
	c.compiles[compileKey{id, version}] = &compileEntry{done: done, f: f}
}

// compiled returns version of flow id compiled, compiling it once. A
// version that is not stored or does not compile fails with a *runError,
// which is remembered; store errors are not, and with persist they are
// retried until ctx ends (the run path) instead of returned.
func (c *runCache) compiled(ctx context.Context, id, version string, persist bool) (*Flow, error) {
	key := compileKey{id, version}
	for {
		c.mu.Lock()
		e, ok := c.compiles[key]
		if !ok {
			e = &compileEntry{done: make(chan struct{})}
			c.compiles[key] = e
		}
		c.mu.Unlock()
		if !ok {
			e.f, e.err = c.compile(ctx, id, version, persist)
			if e.err != nil && !isRunError(e.err) {
				// Not a property of the version: let the next caller try again.
				c.mu.Lock()
				delete(c.compiles, key)
				c.mu.Unlock()
			}
			close(e.done)
			return e.f, e.err
		}
		select {
		case <-e.done:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		if e.err == nil || isRunError(e.err) || !persist {
			return e.f, e.err
		}
		// The compiler's store read failed (or its context ended): try on
		// our own.
	}
}

func isRunError(err error) bool {
	var re *runError
	return errors.As(err, &re)
}

func (c *runCache) compile(ctx context.Context, id, version string, persist bool) (*Flow, error) {
	var stored *db.Flow
	read := func() (err error) {
		stored, err = c.r.cfg.Store.FlowGet(ctx, db.FlowRef{ID: id, Version: version})
		return err
	}
	var err error
	if persist {
		err = c.retry(ctx, "reading flow "+id+" "+version, read)
	} else {
		err = read()
	}
	if errors.Is(err, db.ErrNotFound) {
		return nil, &runError{name: ErrorNameVersionNotFound, err: fmt.Errorf("flow %q has no version %s", id, version)}
	}
	if err != nil {
		return nil, err
	}
	c.compileCount.Add(1)
	def, err := Parse(stored.Definition)
	if err == nil {
		var f *Flow
		if f, err = Compile(def, c.r.cfg.Handlers, WithStepLimit(c.r.cfg.MaxStepsPerRun)); err == nil {
			return f, nil
		}
	}
	return nil, &runError{name: ErrorNameInvalidFlow, err: fmt.Errorf("flow %q version %s does not compile on this host: %w", id, version, err)}
}

// version returns the flow version an instance runs: its pin, or for an
// instance without one, the version that was latest when it was created.
func (c *runCache) version(ctx context.Context, event workflow.Event[json.RawMessage]) (string, error) {
	key := pinKey{event.WorkflowName, event.InstanceID, event.Timestamp}
	c.mu.Lock()
	v, ok := c.pins[key]
	c.mu.Unlock()
	if ok {
		return v, nil
	}

	// The runner hands the instance's metadata and creation time to the run;
	// a caller that does not (a test calling Run directly) makes us read them.
	metadata, createdAt := event.Metadata, event.Timestamp
	if metadata == nil {
		var inst *db.Instance
		err := c.retry(ctx, "reading instance "+event.InstanceID, func() (err error) {
			inst, err = c.r.cfg.Store.InstanceGet(ctx, db.InstanceRef{WorkflowName: event.WorkflowName, ID: event.InstanceID})
			return err
		})
		if err != nil {
			return "", fmt.Errorf("reading the flow pin of %s/%s: %w", event.WorkflowName, event.InstanceID, err)
		}
		metadata, createdAt = inst.Metadata, inst.CreatedAt
	}
	pin, err := PinOf(metadata)
	if err != nil {
		return "", &runError{name: ErrorNameInvalidPin, err: err}
	}
	switch {
	case pin != nil && pin.Version != "":
		if pin.ID != event.WorkflowName {
			return "", &runError{name: ErrorNameInvalidPin, err: fmt.Errorf("the flow pin of %s/%s names flow %q", event.WorkflowName, event.InstanceID, pin.ID)}
		}
		v = pin.Version
	default:
		if v, err = c.latestAt(ctx, event.WorkflowName, createdAt); err != nil {
			return "", err
		}
	}

	c.mu.Lock()
	if len(c.pins) >= maxPins {
		clear(c.pins)
	}
	c.pins[key] = v
	c.mu.Unlock()
	return v, nil
}

// latestAt returns the version of a flow that was the latest at t: the
// latest of the versions created at or before t (or of all of them, when
// none was).
func (c *runCache) latestAt(ctx context.Context, id string, t time.Time) (string, error) {
	var versions []*db.Flow
	err := c.retry(ctx, "listing the versions of flow "+id, func() (err error) {
		versions, err = c.r.cfg.Store.FlowVersions(ctx, id)
		return err
	})
	if err != nil {
		return "", err
	}
	var before, all []string
	for _, f := range versions {
		all = append(all, f.Version)
		if !f.CreatedAt.After(t) {
			before = append(before, f.Version)
		}
	}
	if len(before) > 0 {
		all = before
	}
	latest, ok := LatestVersion(all)
	if !ok {
		return "", &runError{name: ErrorNameVersionNotFound, err: fmt.Errorf("flow %q has no versions", id)}
	}
	return latest, nil
}

// retry calls f until it succeeds, fails with db.ErrNotFound, or ctx ends,
// backing off between attempts: a store that is briefly unreachable must
// not fail an instance (its run is abandoned and taken up again when ctx
// ends instead).
func (c *runCache) retry(ctx context.Context, what string, f func() error) error {
	delay := retryFirst
	for {
		err := f()
		if err == nil || errors.Is(err, db.ErrNotFound) {
			return err
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		c.r.log.Warn("flow: store read failed; retrying", "what", what, "error", err, "in", delay)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		case <-t.C:
		}
		delay = min(2*delay, retryMax)
	}
}

// settingsFunc returns the workflow.SettingsFunc of the stored flow id: an
// instance follows the "deadline" and "retry" of the version its metadata
// pins (the latest at create, as the client pins it before it calls this).
func (r *Registry) settingsFunc(id string) workflow.SettingsFunc {
	return func(ctx context.Context, metadata json.RawMessage) (workflow.Settings, error) {
		pin, err := PinOf(metadata)
		if err != nil || pin == nil || pin.Version == "" || pin.ID != id {
			// No usable pin: the run reports it (ErrorNameInvalidPin), not
			// the create.
			return workflow.Settings{}, nil
		}
		f, err := r.runs.compiled(ctx, id, pin.Version, false)
		if isRunError(err) {
			// A version that cannot run fails its run (for example
			// ErrorNameVersionNotFound), not the create.
			return workflow.Settings{}, nil
		}
		if err != nil {
			return workflow.Settings{}, err
		}
		return f.settings(), nil
	}
}
