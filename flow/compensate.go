package flow

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/duraflow/duraflow/workflow"
)

// compensate checks the compensate field of step key: it names another
// step, and both run handlers or invoke a child (a sleep, a wait or a
// branch has nothing to undo and cannot undo anything); a compensation has
// none of its own. A subflow step may be compensated (once its child
// completed) and may compensate (its child is invoked to undo the step).
func (v *validator) compensate(path, key string, s *Step) {
	c := s.Compensate
	if c == "" {
		return
	}
	target := v.def.Steps[c]
	switch {
	case c == End:
		v.add(path, "%q ends the flow; name the step that undoes %q", End, key)
		return
	case target == nil:
		v.add(path, "no step %q (steps: %s)", c, strings.Join(sortedKeys(v.def.Steps), ", "))
		return
	case c == key:
		v.add(path, "a step cannot compensate itself")
		return
	}
	if kind := v.nonHandler(s.Type); kind != "" {
		v.add(path, "a %s step has nothing to compensate", kind)
	}
	if kind := v.nonHandler(target.Type); kind != "" {
		v.add(path, "step %q is a %s step, which cannot undo anything", c, kind)
	}
	if target.Compensate != "" {
		v.add(path, "step %q has a compensation of its own; a compensation cannot have one", c)
	}
}

// nonHandler returns the type of a step that does not run a handler in a
// Do step (a sleep, a wait or a branch), or "".
func (v *validator) nonHandler(typ string) string {
	h, ok := v.hs.Lookup(typ)
	if !ok {
		return ""
	}
	switch h.(type) {
	case sleeper, waiter, router:
		return typ
	}
	return ""
}

// compensation is the compensation option of step s (visit visit): the
// handler of the step it names, run on the context as it is when the
// compensation runs (workflow.Compensate), or, when that step is a
// subflow, the invoke of its child with its input selected then
// (workflow.CompensateWithInvoke).
func (f *Flow) compensation(s *Step, visit int, state map[string]any) workflow.StepOption {
	c := f.def.Steps[s.Compensate]
	h, _ := f.hs.Lookup(c.Type)
	if inv, ok := h.(invoker); ok {
		return workflow.CompensateWithInvoke(func(json.RawMessage) (workflow.InvokeOptions, error) {
			// As below: nothing else changes the context while the
			// compensations run.
			input, _, err := c.Input.Select(state)
			if err != nil {
				return workflow.InvokeOptions{}, fmt.Errorf("compensation %q of step %q: %w", c.ID, s.ID, err)
			}
			opts, err := inv.invokeOptions(c.Config, input)
			if err != nil {
				return workflow.InvokeOptions{}, fmt.Errorf("compensation %q of step %q: %w", c.ID, s.ID, err)
			}
			return opts, nil
		})
	}
	return workflow.Compensate(func(ctx context.Context) error {
		// The run has returned (or stopped at a step boundary) when a
		// compensation runs: nothing else changes the context.
		input, _, err := c.Input.Select(state)
		if err != nil {
			return fmt.Errorf("compensation %q of step %q: %w", c.ID, s.ID, err)
		}
		_, err = h.Run(ctx, &Invocation{
			FlowID: f.def.ID, FlowVersion: f.def.Version,
			StepID: c.ID, Visit: visit,
			Config: c.Config, Input: input, Context: deepCopy(state).(map[string]any),
		})
		return err
	}, f.stepOptions(c)...)
}
