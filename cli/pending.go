package cli

import (
	"encoding/json"
	"fmt"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/workflow"
)

// printPending adds to instances get what the instance waits on (its
// pending steps) and the flow version it is pinned to.
func printPending(t *table, i *dftype.InstanceInfo) {
	if v := flowVersionOf(i.Metadata); v != "" {
		t.row("Flow version:", v)
	}
	for n, p := range i.Pending {
		label := ""
		if n == 0 {
			label = "Pending:"
		}
		t.row(label, formatPending(p))
	}
}

// formatPending says what one pending step waits for, on one line.
func formatPending(p *dftype.PendingStep) string {
	until := func(prefix string) string {
		if p.Until == nil {
			return ""
		}
		return prefix + formatTime(*p.Until)
	}
	switch p.Kind {
	case dftype.PendingEvent:
		return fmt.Sprintf("step %q waits for an event of type %s%s", p.Step, p.EventType, until(", until "))
	case dftype.PendingSleep:
		return fmt.Sprintf("step %q sleeps%s", p.Step, until(" until "))
	case dftype.PendingRetry:
		s := fmt.Sprintf("step %q retries: attempt %d", p.Step, p.Attempt)
		switch {
		case p.MaxAttempts == workflow.UnlimitedAttempts:
			s += " (unlimited)"
		case p.MaxAttempts > 0:
			s += fmt.Sprintf(" of %d", p.MaxAttempts)
		}
		s += until(" at ")
		if p.Error != nil {
			s += " (last error " + p.Error.Name + ": " + p.Error.Message + ")"
		}
		return s
	case dftype.PendingChild:
		s := fmt.Sprintf("step %q waits for its child", p.Step)
		if c := p.Child; c != nil {
			s += fmt.Sprintf(" %s/%s (%s)", c.WorkflowName, c.ID, c.Status)
		}
		return s + until(", until ")
	}
	return fmt.Sprintf("step %q (%s)", p.Step, p.Kind)
}

// flowVersionOf reads the flow version an instance of a flow is pinned to
// from its metadata ({"flow":{"id","version"}}); "" for other instances.
func flowVersionOf(metadata json.RawMessage) string {
	if len(metadata) == 0 {
		return ""
	}
	var md struct {
		Flow *struct {
			ID      string `json:"id"`
			Version string `json:"version"`
		} `json:"flow"`
	}
	if json.Unmarshal(metadata, &md) != nil || md.Flow == nil || md.Flow.Version == "" {
		return ""
	}
	return md.Flow.ID + " " + md.Flow.Version
}
