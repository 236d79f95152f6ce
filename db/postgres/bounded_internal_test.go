package postgres

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db/postgres/internal/pgsqlc"
)

// TestBoundedRowsHoldEveryColumn pins that the rows of the bounded lists
// have every column of their table, in order, and one flag more, so that a
// column a migration adds cannot be left out of them (the converters copy
// them field by field).
func TestBoundedRowsHoldEveryColumn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		model, row any
		flag       string
	}{
		{pgsqlc.WorkflowInstance{}, pgsqlc.InstanceListBoundedRow{}, "PayloadsOmitted"},
		{pgsqlc.WorkflowStep{}, pgsqlc.StepListBoundedRow{}, "PayloadsOmitted"},
		{pgsqlc.WorkflowEvent{}, pgsqlc.EventListBoundedRow{}, "PayloadOmitted"},
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
