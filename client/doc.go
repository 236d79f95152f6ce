// Package client is Duraflow's management service: it creates, lists,
// inspects and controls workflow instances over a db.Store.
//
// It validates every input against the limits of package workflow before
// anything is written, maps the store's sentinel errors onto workflow's
// (ErrInstanceNotFound, ErrInstanceTerminal, ...), and signals a waker after a
// commit that made work due. Typed bindings (workflow.Binding), the HTTP API
// and the command line all go through it.
//
// It knows nothing about HTTP, about how a runner executes workflow code, or
// about a particular database backend.
package client
