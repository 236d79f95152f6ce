// Package doclinks holds only a test: every relative link of the
// repository's Markdown documents (README.md, ARCHITECTURE.md,
// CONTRIBUTING.md, CHANGELOG.md and docs/*.md) must point to a file that
// exists and, when it names a #fragment, to a heading of that file, as
// GitHub renders its anchors. Moving a section of the documentation without
// fixing the links to it fails make test.
package doclinks
