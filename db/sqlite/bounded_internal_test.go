package sqlite

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db/sqlite/internal/litesqlc"
)

// TestBoundedRowsHoldEveryColumn pins that the rows of the bounded lists
// have every column of their table, in order, and one flag more, so that a
// column a migration adds cannot be left out of them (the converters copy
// them field by field), and that the two instance lists' rows are one type
// in all but name (instanceFromBoundedRow converts both).
func TestBoundedRowsHoldEveryColumn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		model, row any
		flag       string
	}{
		{litesqlc.WorkflowInstance{}, litesqlc.InstanceListBoundedRow{}, "PayloadsOmitted"},
		{litesqlc.WorkflowInstance{}, litesqlc.InstanceListWorkflowBoundedRow{}, "PayloadsOmitted"},
		{litesqlc.WorkflowStep{}, litesqlc.StepListBoundedRow{}, "PayloadsOmitted"},
		{litesqlc.WorkflowEvent{}, litesqlc.EventListBoundedRow{}, "PayloadOmitted"},
	} {
		require.Equal(t, append(fieldNames(reflect.TypeOf(tc.model)), tc.flag), fieldNames(reflect.TypeOf(tc.row)), "%T", tc.row)
	}
}

func fieldNames(t reflect.Type) []string {
	out := make([]string, t.NumField())
	for i := range out {
		out[i] = t.Field(i).Name
	}
	return out
}
