package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/client"
)

// deliveryText says what became of a sent event, for events send.
func deliveryText(sent *apiclient.EventSent, eventType string) string {
	switch sent.Delivery {
	case apiclient.EventDelivered:
		if sent.Step != "" {
			return fmt.Sprintf(": delivered to step %q", sent.Step)
		}
		return ": delivered to a waiting step"
	case apiclient.EventBuffered:
		return fmt.Sprintf(": buffered, no step waits for %s now", eventType)
	}
	return ""
}

// waitedTypes returns the event types the current run of an instance
// waits for now, or nil when it cannot tell (the token may not read).
func waitedTypes(ctx context.Context, c *apiclient.Client, workflowName, id string) []string {
	var types []string
	p := client.HistoryParams{}
	for {
		h, err := c.History(ctx, workflowName, id, p)
		if err != nil {
			return nil
		}
		for _, s := range h.Steps {
			if s.Status == "waiting" && s.WaitEventType != "" && !slices.Contains(types, s.WaitEventType) {
				types = append(types, s.WaitEventType)
			}
		}
		if h.NextCursor == "" {
			return types
		}
		p.Cursor, p.Run = h.NextCursor, h.RunNumber
	}
}

// warnOtherWait warns on standard error when a buffered event's instance
// waits for events of other types: the type was probably mistyped.
func warnOtherWait(ctx context.Context, o *Options, c *apiclient.Client, workflowName, id, eventType string) {
	types := waitedTypes(ctx, c, workflowName, id)
	if len(types) == 0 {
		return
	}
	fmt.Fprintf(o.Stderr, "%s: warning: %s/%s waits for an event of type %s, not %s: the event is buffered until a step waits for %s\n",
		o.Name, workflowName, id, strings.Join(types, " or "), eventType, eventType)
}
