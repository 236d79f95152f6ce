package sqlite

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
)

// TestLifecycleTypeCodes pins that every lifecycle event type has a stored
// code of its own, which reads back as that type.
func TestLifecycleTypeCodes(t *testing.T) {
	t.Parallel()
	seen := map[int64]db.LifecycleEventType{}
	for _, typ := range db.LifecycleEventTypes() {
		code, ok := lifecycleTypeCodes[typ]
		require.True(t, ok, "%s has no stored code", typ)
		require.Positive(t, code)
		require.NotContains(t, seen, code, "%s and %s share a code", typ, seen[code])
		seen[code] = typ
		require.Equal(t, typ, lifecycleTypeOf(code))
	}
	require.Len(t, lifecycleTypeCodes, len(db.LifecycleEventTypes()), "a code for a type that is not listed")
	require.Equal(t, db.LifecycleEventType(""), lifecycleTypeOf(0))
}

// TestLifecycleListInstanceUsesItsIndex pins that an instance's lifecycle
// events are found through lifecycle_event_instance_idx, in id order, not
// by a walk of the whole log (the type filter's JSON array is the only
// scan, of its few elements).
func TestLifecycleListInstanceUsesItsIndex(t *testing.T) {
	t.Parallel()
	s := openTest(t, ":memory:")
	for _, tc := range []struct {
		query string
		args  []any
	}{
		{"lifecycleListInstance", []any{"i", 0, "w", "", "[1]", 1, nil, nil, 50}},
		{"lifecycleListInstanceNewest", []any{"i", 1 << 62, 0, "w", "", "", 1, nil, nil, 50}},
	} {
		plan := queryPlan(t, s, tc.query, tc.args...)
		require.Regexp(t, `SEARCH e USING INDEX lifecycle_event_instance_idx \(instance_id=\? AND id[<>]\?`, plan, tc.query)
		require.NotContains(t, plan, "TEMP B-TREE", "%s:\n%s", tc.query, plan)
		require.NotRegexp(t, `(?m)^SCAN (e|lifecycle_event)\b`, plan, tc.query)
	}
}
