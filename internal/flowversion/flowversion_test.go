package flowversion_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/internal/flowversion"
)

func TestCompare(t *testing.T) {
	t.Parallel()
	ordered := []string{"0.9.0", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-beta", "1.0.0-rc.1", "1.0.0", "1.2.0", "1.9.0", "1.10.0", "2.0.0"}
	for i := range ordered {
		for j := range ordered {
			want := 0
			switch {
			case i < j:
				want = -1
			case i > j:
				want = 1
			}
			require.Equal(t, want, flowversion.Compare(ordered[i], ordered[j]), "%s vs %s", ordered[i], ordered[j])
		}
	}
	require.Equal(t, -1, flowversion.Compare("not a version", "0.0.1"), "an invalid version sorts first")
}

func TestSupersedes(t *testing.T) {
	t.Parallel()
	require.True(t, flowversion.Supersedes("1.0.0", "2.0.0-rc.1"), "a release supersedes any pre-release")
	require.False(t, flowversion.Supersedes("2.0.0-rc.1", "1.0.0"))
	require.True(t, flowversion.Supersedes("1.10.0", "1.9.0"))
	require.True(t, flowversion.Supersedes("2.0.0-rc.2", "2.0.0-rc.1"))
	require.False(t, flowversion.Supersedes("1.0.0", "1.0.0"))
}

func TestLatest(t *testing.T) {
	t.Parallel()
	all := func(string) bool { return true }
	got, ok := flowversion.Latest([]string{"1.9.0", "3.0.0-rc.1", "1.10.0"}, all)
	require.True(t, ok)
	require.Equal(t, "1.10.0", got)
	got, ok = flowversion.Latest([]string{"3.0.0-rc.1", "3.0.0-rc.2"}, all)
	require.True(t, ok)
	require.Equal(t, "3.0.0-rc.2", got)
	_, ok = flowversion.Latest(nil, all)
	require.False(t, ok)
}
