package flow

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/workflow"
)

// subflowTargets lists the subflow steps of def and the workflow each
// invokes, in step id order.
func subflowTargets(def *Definition) [][2]string {
	var out [][2]string
	for _, id := range sortedStepIDs(def) {
		s := def.Steps[id]
		if s.Type != TypeSubflow {
			continue
		}
		if target := subflowTarget(s.Config); target != "" {
			out = append(out, [2]string{id, target})
		}
	}
	return out
}

func sortedStepIDs(def *Definition) []string {
	ids := make([]string, 0, len(def.Steps))
	for id := range def.Steps {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// checkSubflowCycles refuses a definition whose subflow steps invoke, through
// the latest stored versions of the flows they name, the flow itself: the
// cycle is seen at apply time. Go workflows are opaque here; the runner's
// nesting limit (runner.Config.MaxInvokeDepth) stops a cycle through one at
// run time.
func (r *Registry) checkSubflowCycles(ctx context.Context, def *Definition) error {
	var problems []Problem
	for _, st := range subflowTargets(def) {
		path, err := r.cyclePath(ctx, def.ID, st[1], map[string]bool{})
		if err != nil {
			return err
		}
		if path != nil {
			problems = append(problems, Problem{
				Path: fmt.Sprintf("steps.%s.config.workflow", st[0]),
				Message: fmt.Sprintf("invokes %s: a cycle of flows invoking each other",
					strings.Join(append([]string{def.ID}, path...), " -> ")),
			})
		}
	}
	return newValidationError(problems, nil)
}

// cyclePath returns the chain of flows from target back to root, or nil
// when target's subflows (their latest stored versions) never reach root.
func (r *Registry) cyclePath(ctx context.Context, root, target string, seen map[string]bool) ([]string, error) {
	if target == root {
		return []string{target}, nil
	}
	if seen[target] {
		return nil, nil
	}
	seen[target] = true
	stored, err := r.cfg.Store.FlowGet(ctx, db.FlowRef{ID: target})
	if errors.Is(err, db.ErrNotFound) {
		return nil, nil // a Go workflow, or a flow not applied yet
	}
	if err != nil {
		return nil, fmt.Errorf("checking subflow cycles: %w", err)
	}
	def, err := Parse(stored.Definition)
	if err != nil {
		return nil, nil // a stored flow this server cannot read is checked when it runs
	}
	for _, st := range subflowTargets(def) {
		path, err := r.cyclePath(ctx, root, st[1], seen)
		if err != nil || path != nil {
			if path != nil {
				path = append([]string{target}, path...)
			}
			return path, err
		}
	}
	return nil, nil
}

// subflowWarnings warns about the subflow steps of def whose child this
// server does not know: no Go workflow of that name registered here and no
// flow of that name stored, or a pinned version the stored flow does not
// have (or a version pinned for a Go workflow, which has none). They are
// warnings, not problems: the child may be a Go workflow of other
// processes, or a flow applied next. A child still unknown when the step
// runs fails the step with InvokeRefusedError, which onFailure may catch.
func (r *Registry) subflowWarnings(ctx context.Context, def *Definition) ([]Problem, error) {
	var out []Problem
	for _, id := range sortedStepIDs(def) {
		s := def.Steps[id]
		if s.Type != TypeSubflow {
			continue
		}
		var c SubflowConfig
		if DecodeConfig(s.Config, &c) != nil || c.Workflow == def.ID {
			continue // invalid, or a cycle: refused already
		}
		path := "steps." + id + ".config."
		if r.isGoWorkflow(c.Workflow) {
			if c.Version != "" {
				out = append(out, Problem{Path: path + "version", Message: fmt.Sprintf(
					"%q is a Go workflow of this server, which has no versions: the pin %q is ignored", c.Workflow, c.Version)})
			}
			continue
		}
		found, err := r.flowStored(ctx, c.Workflow, c.Version)
		if err != nil {
			return nil, fmt.Errorf("checking subflow step %q: %w", id, err)
		}
		if found {
			continue
		}
		if c.Version != "" {
			other, err := r.flowStored(ctx, c.Workflow, "")
			if err != nil {
				return nil, fmt.Errorf("checking subflow step %q: %w", id, err)
			}
			if other {
				out = append(out, Problem{Path: path + "version", Message: fmt.Sprintf(
					"flow %q has no version %q yet: the step fails with %s unless it is applied before the step runs",
					c.Workflow, c.Version, workflow.ErrorNameInvokeRefused)})
				continue
			}
		}
		out = append(out, Problem{Path: path + "workflow", Message: fmt.Sprintf(
			"no flow %q is stored and no Go workflow %q is registered on this server: the step fails with %s unless one is by the time it runs",
			c.Workflow, c.Workflow, workflow.ErrorNameInvokeRefused)})
	}
	return out, nil
}

// flowStored reports whether the flow id is stored (at version, when set).
func (r *Registry) flowStored(ctx context.Context, id, version string) (bool, error) {
	_, err := r.cfg.Store.FlowGet(ctx, db.FlowRef{ID: id, Version: version})
	if errors.Is(err, db.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}
