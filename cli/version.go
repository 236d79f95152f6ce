package cli

import (
	"cmp"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// buildVersion is what `duraflow version` prints: the version of the
// binary, of the Duraflow module inside it and of the commit it was built
// from, as the Go toolchain stamped them.
type buildVersion struct {
	// Version is the command's version: WithVersion's, else the main
	// module's: the tag of a go install module@version, a pseudo-version of
	// the commit (v0.0.0-20261125182229-38527bf4d45f, +dirty when the tree
	// was modified) for a build the toolchain stamped from a git checkout
	// (-buildvcs, on by default), "dev" for a build without VCS information.
	Version string `json:"version"`
	// Module is the path of the main module of the binary.
	Module string `json:"module,omitempty"`
	// Duraflow is the version of github.com/duraflow/duraflow in the
	// binary: the main module's when it is Duraflow itself ("dev" when
	// unstamped), with "=> path version" when a replace directive swapped
	// it.
	Duraflow string `json:"duraflow,omitempty"`
	// Commit is the VCS revision the binary was built from ("" when the
	// build had no VCS information, such as a go install of a module).
	Commit string `json:"commit,omitempty"`
	// CommitTime is the time of that revision, RFC 3339.
	CommitTime string `json:"commitTime,omitempty"`
	// Modified reports whether the work tree had uncommitted changes.
	Modified bool `json:"modified"`
	// Go is the Go version the binary was built with.
	Go string `json:"go"`
	// Platform is GOOS/GOARCH.
	Platform string `json:"platform"`
}

// duraflowModule is the module path of Duraflow.
const duraflowModule = "github.com/duraflow/duraflow"

// readBuildVersion reads the build information of the running binary;
// explicit is the version WithVersion set ("" for none).
func readBuildVersion(explicit string) buildVersion {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return versionOf(explicit, bi)
}

// versionOf reads a binary's build information (nil when it has none).
func versionOf(explicit string, bi *debug.BuildInfo) buildVersion {
	v := buildVersion{Version: explicit, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi == nil {
		v.Version = cmp.Or(v.Version, "dev")
		return v
	}
	if bi.GoVersion != "" {
		v.Go = bi.GoVersion
	}
	v.Module = bi.Main.Path
	main := moduleVersion(bi.Main.Version)
	v.Version = cmp.Or(v.Version, main)
	if bi.Main.Path == duraflowModule {
		v.Duraflow = main
	}
	for _, d := range bi.Deps {
		if d.Path == duraflowModule {
			v.Duraflow = moduleVersion(d.Version)
			if r := d.Replace; r != nil {
				v.Duraflow += " => " + strings.TrimSpace(r.Path+" "+r.Version)
			}
		}
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.CommitTime = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// moduleVersion is a module's version as the build information records
// it, "dev" for a build from a work tree the toolchain did not stamp
// ("(devel)", or none). A build that the toolchain stamped from VCS keeps
// its version: a tag, or a pseudo-version of the commit (v0.0.0-<time>-<rev>,
// with +dirty when the tree was modified).
func moduleVersion(v string) string {
	if v == "" || v == "(devel)" {
		return "dev"
	}
	return v
}

// short is the version on one line, for --version.
func (v buildVersion) short() string {
	s := v.Version
	if v.Commit != "" {
		c := v.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		s += " (" + c
		if v.Modified {
			s += ", modified"
		}
		s += ")"
	}
	return s
}

func newVersionCommand(o *Options) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Show the version of this binary, the commit it was built from and its Go version",
		Args:  args(cobra.NoArgs),
		RunE: func(_ *cobra.Command, _ []string) error {
			v := readBuildVersion(o.explicitVersion)
			if asJSON {
				return writeJSON(o.Stdout, v)
			}
			t := newTable(o.Stdout)
			t.row(o.Name+":", v.Version)
			if v.Module != "" && v.Module != duraflowModule {
				t.row("Module:", v.Module)
			}
			if v.Duraflow != "" && (v.Module != duraflowModule || v.Duraflow != v.Version) {
				t.row("Duraflow:", v.Duraflow)
			}
			commit := cmp.Or(v.Commit, "unknown")
			if v.Modified {
				commit += " (modified)"
			}
			t.row("Commit:", commit)
			if v.CommitTime != "" {
				t.row("Commit time:", v.CommitTime)
			}
			t.row("Go:", v.Go)
			t.row("Platform:", v.Platform)
			return t.flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
