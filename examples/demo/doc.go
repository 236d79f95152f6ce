// Package demo holds the demo workflows that `duraflow dev` runs: small,
// self-contained workflows that show each kind of step from the command line
// or over HTTP, with nothing but the duraflow binary running.
//
//	hello     {"name":"Ada"}                      → {"greeting":"Hello, Ada!"}
//	approval  {"amount":120,"timeout":"1 hour"}   → waits for an "approval" event
//	                                                → {"approved":true,"amount":120}
//	                                                  or {"approved":false,"timedOut":true,"amount":120}
//	sleeper   {"duration":"2 seconds"}            → {"slept":"2 seconds"}
//	flaky     {"failures":2}                      → {"attempts":3} (errors with more than 5 failures)
//	parent    {}                                  → starts child <id>-child, {"child":"<id>-child"}
//	child     {"parent":"<id>"}                   → {"parent":"<id>"}
//
// The workflows use only the authoring API (package workflow); they know
// nothing about databases, runners or HTTP. Register adds them to a registry,
// which is what cli.WithWorkflows takes.
package demo
