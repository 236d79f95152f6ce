package cli

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestVersionOf reads the version, the commit and whether the tree was
// modified from the build information, for Duraflow's own binary and for a
// program that embeds the command.
func TestVersionOf(t *testing.T) {
	t.Parallel()
	settings := []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123"},
		{Key: "vcs.time", Value: "2026-11-25T15:22:31Z"},
		{Key: "vcs.modified", Value: "true"},
	}

	v := versionOf("", &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Path: duraflowModule, Version: "v1.4.0"}, Settings: settings})
	require.Equal(t, "v1.4.0", v.Version)
	require.Equal(t, "v1.4.0", v.Duraflow)
	require.Equal(t, "0123456789abcdef0123", v.Commit)
	require.Equal(t, "2026-11-25T15:22:31Z", v.CommitTime)
	require.True(t, v.Modified)
	require.Equal(t, "go1.26.1", v.Go)
	require.Equal(t, "v1.4.0 (0123456789ab, modified)", v.short())

	v = versionOf("", &debug.BuildInfo{Main: debug.Module{Path: duraflowModule, Version: "(devel)"}})
	require.Equal(t, "dev", v.Version)
	require.Equal(t, "dev", v.Duraflow, "not (devel)")
	require.Empty(t, v.Commit)
	require.Equal(t, "dev", v.short())

	// A build from a git checkout, stamped by the toolchain (-buildvcs):
	// the version is a pseudo-version of the commit, +dirty when modified.
	v = versionOf("", &debug.BuildInfo{Main: debug.Module{Path: duraflowModule, Version: "v0.0.0-20261125182229-0123456789ab+dirty"}, Settings: settings})
	require.Equal(t, "v0.0.0-20261125182229-0123456789ab+dirty", v.Version)
	require.Equal(t, v.Version, v.Duraflow)
	require.Equal(t, "v0.0.0-20261125182229-0123456789ab+dirty (0123456789ab, modified)", v.short())

	v = versionOf("2.0.0", &debug.BuildInfo{
		Main: debug.Module{Path: "example.com/billing", Version: "v0.3.0"},
		Deps: []*debug.Module{{Path: duraflowModule, Version: "v1.4.0"}},
	})
	require.Equal(t, "2.0.0", v.Version)
	require.Equal(t, "example.com/billing", v.Module)
	require.Equal(t, "v1.4.0", v.Duraflow)

	v = versionOf("", &debug.BuildInfo{
		Main: debug.Module{Path: "example.com/billing", Version: "(devel)"},
		Deps: []*debug.Module{{Path: duraflowModule, Version: "v0.0.0-00010101000000-000000000000", Replace: &debug.Module{Path: "../duraflow"}}},
	})
	require.Equal(t, "dev", v.Version)
	require.Equal(t, "v0.0.0-00010101000000-000000000000 => ../duraflow", v.Duraflow, "no trailing space for a replace by a directory")

	v = versionOf("", nil)
	require.Equal(t, "dev", v.Version)
}
