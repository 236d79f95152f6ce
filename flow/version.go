package flow

import (
	"fmt"
	"slices"
	"strings"

	"golang.org/x/mod/semver"

	"github.com/duraflow/duraflow/internal/flowversion"
)

// Version is a validated semantic version: MAJOR.MINOR.PATCH with an optional
// pre-release ("1.4.0", "2.0.0-rc.1"). The zero Version is invalid.
type Version struct {
	v string // canonical, with the "v" prefix x/mod/semver wants
}

// ParseVersion reads a semantic version strictly (SemVer 2.0): three numeric
// parts without leading zeros and an optional pre-release. A "v" prefix,
// shorthand ("1.2") and build metadata ("1.2.3+build.5") are rejected,
// because two spellings of one version would otherwise name two stored
// versions of a flow (build metadata does not take part in ordering).
func ParseVersion(s string) (Version, error) {
	switch {
	case s == "":
		return Version{}, fmt.Errorf("invalid version %q: empty (use a semantic version such as \"1.0.0\")", s)
	case strings.HasPrefix(s, "v") || strings.HasPrefix(s, "V"):
		return Version{}, fmt.Errorf("invalid version %q: write it without the \"v\" prefix (\"%s\")", s, s[1:])
	case strings.Contains(s, "+"):
		return Version{}, fmt.Errorf("invalid version %q: build metadata (\"+...\") is not allowed, it does not order versions", s)
	}
	v := "v" + s
	if !semver.IsValid(v) || semver.Canonical(v) != v {
		return Version{}, fmt.Errorf("invalid version %q: want a semantic version MAJOR.MINOR.PATCH such as \"1.0.0\" or \"2.1.0-beta.1\"", s)
	}
	return Version{v: v}, nil
}

// MustParseVersion is ParseVersion for constants; it panics on a malformed
// version.
func MustParseVersion(s string) Version {
	v, err := ParseVersion(s)
	if err != nil {
		panic(err)
	}
	return v
}

// String returns the version as written ("1.10.0"); empty for the zero Version.
func (v Version) String() string { return strings.TrimPrefix(v.v, "v") }

// IsZero reports whether v is the zero (invalid) Version.
func (v Version) IsZero() bool { return v.v == "" }

// Prerelease reports whether v has a pre-release part ("1.0.0-rc.1").
func (v Version) Prerelease() bool { return semver.Prerelease(v.v) != "" }

// Compare returns -1, 0 or +1 as v is lower than, equal to or higher than w,
// by SemVer precedence: numerically part by part ("1.10.0" > "1.9.0"), and a
// pre-release below its release ("1.0.0-rc.1" < "1.0.0").
func (v Version) Compare(w Version) int { return semver.Compare(v.v, w.v) }

// CompareVersions compares two version strings as Version.Compare does; the
// rule is owned by internal/flowversion, which package db applies too. An
// invalid version sorts below every valid one and equal to other invalid
// ones, so sorting never fails; validate versions with ParseVersion first.
func CompareVersions(a, b string) int { return flowversion.Compare(a, b) }

// SortVersions sorts version strings from lowest to highest (see
// CompareVersions).
func SortVersions(versions []string) {
	slices.SortStableFunc(versions, CompareVersions)
}

// LatestVersion returns the highest valid version of versions, preferring a
// release over any pre-release unless only pre-releases are given; ok is
// false when none is valid.
func LatestVersion(versions []string) (latest string, ok bool) {
	return flowversion.Latest(versions, func(s string) bool {
		_, err := ParseVersion(s)
		return err == nil
	})
}
