// Package flowversion owns the ordering of flow versions: semantic version
// precedence, and which version of a flow is its latest. Package flow
// (CompareVersions, LatestVersion) and package db (CompareFlowVersions,
// FlowVersionSupersedes, which the backends apply when they store a version)
// both delegate here, so the rule is written once. SQL never orders
// versions: the stores sort in Go with Compare and keep the latest version
// in a row of its own, moved on with Supersedes.
//
// It imports nothing of the module, so package db can import it.
package flowversion

import "golang.org/x/mod/semver"

// Compare returns -1, 0 or +1 as version a is lower than, equal to or higher
// than b by semantic version precedence: numerically part by part ("1.10.0" >
// "1.9.0"), and a pre-release below its release ("1.0.0-rc.1" < "1.0.0").
// Versions are written without the "v" prefix; an invalid version sorts
// below every valid one and equal to other invalid ones.
func Compare(a, b string) int {
	return semver.Compare("v"+a, "v"+b)
}

// Supersedes reports whether version v replaces current as the latest
// version of a flow: a release supersedes any pre-release, and otherwise the
// higher version wins.
func Supersedes(v, current string) bool {
	vRelease := semver.Prerelease("v"+v) == ""
	cRelease := semver.Prerelease("v"+current) == ""
	if vRelease != cRelease {
		return vRelease
	}
	return Compare(v, current) > 0
}

// Latest returns the latest of versions by Supersedes, considering only the
// versions valid reports true for; ok is false when there is none.
func Latest(versions []string, valid func(string) bool) (latest string, ok bool) {
	for _, v := range versions {
		if !valid(v) {
			continue
		}
		if !ok || Supersedes(v, latest) {
			latest, ok = v, true
		}
	}
	return latest, ok
}
