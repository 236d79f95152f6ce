package cli

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/dftype"
)

// TestPrintInstanceShowsParentAndChildren: `instances get` prints the
// Invoke step that started an instance and the children its steps started.
func TestPrintInstanceShowsParentAndChildren(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	var out bytes.Buffer
	require.NoError(t, printInstance(&out, false, &dftype.InstanceInfo{
		WorkflowName: "middle", ID: "m1", Status: dftype.StatusWaiting, RunNumber: 1, CreatedAt: at, UpdatedAt: at,
		Parent: &dftype.ParentRef{WorkflowName: "top", InstanceID: "t1", RunNumber: 2, StepKey: "mid", Policy: dftype.ParentAbandon, Depth: 1},
		Children: []*dftype.ChildRef{
			{WorkflowName: "leaf", ID: "l1", Status: dftype.StatusComplete, RunNumber: 1, StepKey: "a"},
			{WorkflowName: "leaf", ID: "l2", Status: dftype.StatusRunning, RunNumber: 1, StepKey: "b"},
		},
	}))
	require.Regexp(t, `(?m)^Parent:\s+top/t1 run 2 step "mid" \(on terminate: abandon\)$`, out.String())
	require.Regexp(t, `(?m)^Children:\s+leaf/l1 complete \(run 1 step "a"\)\n\s+leaf/l2 running \(run 1 step "b"\)$`, out.String())
}
