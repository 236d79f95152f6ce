// Package paging owns the page sizes of every listing: instances (package
// client), schedules (package schedule), flows (package flow) and the HTTP
// API over them. The public names (schedule.DefaultPageSize,
// flow.MaxPageSize, httpapi.MaxPageSize, …) are these constants, and
// MarshalPage writes the "hasNextPage" of every page.
package paging

const (
	// DefaultPageSize is the page length of a listing that names none.
	DefaultPageSize = 50
	// MaxPageSize is the longest page of any listing.
	MaxPageSize = 1000
	// PagePayloadBytes is the byte budget of a page of instances or of an
	// instance's history: once the payloads it read (params, metadata,
	// outputs, step results, event payloads, error messages) reach it, the
	// page ends, with a cursor to continue.
	PagePayloadBytes = 4 << 20
)
