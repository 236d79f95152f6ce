// Package clitranscript holds only a test: it regenerates the transcript
// in docs/cli.md by running its commands against a real dev server (the
// duraflow command with the demo workflows, on a fresh SQLite file), and
// fails when the document differs from what they print. The commands are
// the lines of the "transcript commands" comment in docs/cli.md, one a
// line, so adding a command is adding a line; `make cli-transcript`
// rewrites the output. Timestamps, the server's address and cursors are
// replaced by fixed stand-ins so that the transcript is stable.
//
// TestReadmeQuickstart holds README.md to the same standard: the duraflow
// commands it shows exist and take their flags, those of its shell blocks
// run, and the output of `instances create hello` and the answer of its
// curl that it shows are what a dev server prints and answers, but for ids
// and times.
//
// It must not know about anything but the command line: it runs cli.Run
// as the binary's main does (and sends README's curl request with
// net/http).
package clitranscript
