// Package flowapi holds the vocabulary of the flow feature that crosses
// the HTTP API: the errors a flow registry answers with, a definition's
// problems, and the results of the registry's calls. Package flow (the
// feature) and package apiclient (the HTTP Go client) both re-export these
// names, so a caller of the API names them without linking the flow
// compiler and its expression library.
//
// It must not import the flow engine (package flow or anything under it),
// the HTTP server, or any expression library: apiclient's dependency test
// checks that.
package flowapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/duraflow/duraflow/internal/paging"
	"github.com/duraflow/duraflow/workflow"
)

// ErrInvalidDefinition is matched (errors.Is) by every *ValidationError, so a
// caller can tell a rejected definition from other failures. A
// *ValidationError also matches workflow.ErrInvalidRequest, which the HTTP
// API maps to 400 INVALID_REQUEST.
var ErrInvalidDefinition = errors.New("invalid flow definition")

// ErrNotFound means the flow, or the version of it, is not stored.
var ErrNotFound = errors.New("flow not found")

// ErrVersionConflict means a flow version was applied with a definition
// other than the one stored under that version. Stored versions never
// change: a changed flow needs a new version.
var ErrVersionConflict = errors.New("flow version exists with a different definition")

// Problem is one thing wrong with a definition (or a warning about it).
type Problem struct {
	// Path locates the problem in the definition's JSON, e.g.
	// "steps.fetch.config.url" or "steps.check.config.conditions[1].op".
	// Empty means the definition as a whole.
	Path string `json:"path"`
	// Message says what is wrong, as a sentence fragment.
	Message string `json:"message"`
}

// String formats the problem as "path: message".
func (p Problem) String() string {
	if p.Path == "" {
		return p.Message
	}
	return p.Path + ": " + p.Message
}

// ValidationError lists every problem found in a definition, not only the
// first. Parse, Validate and Compile return it; a handler's Validate may
// return one whose paths are relative to the step's config, and the flow
// validator prefixes them.
type ValidationError struct {
	// Problems make the definition invalid. Never empty in a returned error.
	Problems []Problem `json:"problems"`
	// Warnings don't, but deserve a look (an unreachable step).
	Warnings []Problem `json:"warnings,omitempty"`
}

// Error lists the problems on one line.
func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return fmt.Sprintf("%s: %s", ErrInvalidDefinition, strings.Join(parts, "; "))
}

// Is matches ErrInvalidDefinition and workflow.ErrInvalidRequest.
func (e *ValidationError) Is(target error) bool {
	return target == ErrInvalidDefinition || target == workflow.ErrInvalidRequest
}

// ApplyResult is what applying a definition did.
type ApplyResult struct {
	ID      string `json:"id"`
	Version string `json:"version"`
	// Created is false when the version was stored already with the same
	// definition.
	Created bool `json:"created"`
	// Latest is the flow's latest version after the apply: the version new
	// instances run.
	Latest string `json:"latest"`
	// Warnings don't stop a flow from being stored but deserve a look (an
	// unreachable step).
	Warnings []Problem `json:"warnings"`
}

// Info describes a stored flow version.
type Info struct {
	ID      string `json:"id"`
	Version string `json:"version"`
	Name    string `json:"name,omitempty"`
	// Latest is true when this is the version new instances run.
	Latest    bool      `json:"latest"`
	CreatedAt time.Time `json:"createdAt"`
	// Definition is the definition as applied; lists leave it out.
	Definition json.RawMessage `json:"definition,omitempty"`
}

// Page sizes of ListParams.
const (
	// DefaultPageSize is the page length of a list when none is given.
	DefaultPageSize = paging.DefaultPageSize
	// MaxPageSize bounds ListParams.PageSize.
	MaxPageSize = paging.MaxPageSize
)

// ListParams select a page of flows.
type ListParams struct {
	// PageSize is the page length, 1 to MaxPageSize.
	//
	// Defaults to DefaultPageSize.
	PageSize int
	// Cursor continues a previous page (ListResult.NextCursor).
	Cursor string
}

// ListResult is a page of flows, each at its latest version.
type ListResult struct {
	Flows []*Info `json:"flows"`
	// NextCursor is empty on the last page.
	NextCursor string `json:"cursor,omitempty"`
}

// MarshalJSON writes the page with "hasNextPage", true when NextCursor
// (JSON "cursor") is set: the paging shape of every list of the HTTP API.
func (r ListResult) MarshalJSON() ([]byte, error) {
	type plain ListResult
	return paging.MarshalPage(plain(r), r.NextCursor)
}

// VersionList is every version of one flow, lowest first.
type VersionList struct {
	ID string `json:"id"`
	// Latest is the version new instances run.
	Latest   string  `json:"latest"`
	Versions []*Info `json:"versions"`
}
