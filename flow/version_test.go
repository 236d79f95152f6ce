package flow_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/flow"
)

func TestCompareVersions(t *testing.T) {
	t.Parallel()
	cases := []struct {
		a, b string
		want int
	}{
		{"1.10.0", "1.9.0", 1},
		{"1.9.0", "1.10.0", -1},
		{"2.0.0", "1.99.99", 1},
		{"1.0.10", "1.0.9", 1},
		{"1.2.3", "1.2.3", 0},
		{"1.0.0-rc.1", "1.0.0", -1},
		{"1.0.0-alpha", "1.0.0-beta", -1},
		{"1.0.0-alpha.10", "1.0.0-alpha.9", 1}, // numeric identifiers compare as numbers
		{"1.0.0-alpha.1", "1.0.0-alpha", 1},
		{"10.0.0", "9.0.0", 1},
		{"nonsense", "0.0.1", -1}, // invalid sorts first
	}
	for _, tc := range cases {
		require.Equal(t, tc.want, flow.CompareVersions(tc.a, tc.b), "%s vs %s", tc.a, tc.b)
		if tc.a != "nonsense" {
			va, vb := flow.MustParseVersion(tc.a), flow.MustParseVersion(tc.b)
			require.Equal(t, tc.want, va.Compare(vb), "%s vs %s", tc.a, tc.b)
		}
	}

	vs := []string{"1.10.0", "1.2.0", "1.9.0", "1.10.0-rc.1", "0.9.12", "2.0.0-beta"}
	flow.SortVersions(vs)
	require.Equal(t, []string{"0.9.12", "1.2.0", "1.9.0", "1.10.0-rc.1", "1.10.0", "2.0.0-beta"}, vs)

	latest, ok := flow.LatestVersion(vs)
	require.True(t, ok)
	require.Equal(t, "1.10.0", latest, "a release wins over a newer pre-release")
	latest, ok = flow.LatestVersion([]string{"1.0.0-rc.1", "1.0.0-rc.2", "junk"})
	require.True(t, ok)
	require.Equal(t, "1.0.0-rc.2", latest)
	_, ok = flow.LatestVersion([]string{"junk"})
	require.False(t, ok)
}

func TestParseVersion(t *testing.T) {
	t.Parallel()
	for _, good := range []string{"0.0.0", "1.2.3", "1.10.0", "2.0.0-rc.1", "1.0.0-alpha-1.x"} {
		v, err := flow.ParseVersion(good)
		require.NoError(t, err, good)
		require.Equal(t, good, v.String())
	}
	bad := map[string]string{
		"":            "empty",
		"v1.2.3":      `without the "v" prefix`,
		"1.2":         "MAJOR.MINOR.PATCH",
		"1":           "MAJOR.MINOR.PATCH",
		"01.2.3":      "MAJOR.MINOR.PATCH",
		"1.2.3+build": "build metadata",
		"1.2.3.4":     "MAJOR.MINOR.PATCH",
		"latest":      "MAJOR.MINOR.PATCH",
		"1.2.3-":      "MAJOR.MINOR.PATCH",
	}
	for in, msg := range bad {
		_, err := flow.ParseVersion(in)
		require.ErrorContains(t, err, msg, "%q", in)
	}
	require.True(t, flow.MustParseVersion("1.0.0-rc.1").Prerelease())
	require.True(t, flow.Version{}.IsZero())
}
