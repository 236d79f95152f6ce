package db

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/duraflow/duraflow/internal/flowversion"
)

// ErrFlowVersionConflict means FlowPut was given a (flow id, version) that
// is stored already with a different definition. A stored version never
// changes: a changed definition needs a new version.
var ErrFlowVersionConflict = errors.New("db: flow version exists with a different definition")

// Flow is one stored version of a JSON flow definition. The store does not
// read definitions: validating them is the flow registry's job above it.
type Flow struct {
	// ID is the flow's id, the workflow name its instances run under.
	ID string
	// Version is a semantic version ("1.10.0"), unique per ID.
	Version string
	// Name is the definition's human-readable title, kept for listings.
	Name string
	// Definition is the JSON as it was put, byte for byte. Lists
	// (FlowList, FlowVersions) leave it nil; FlowGet fills it.
	Definition json.RawMessage
	// CreatedAt is when the version was put.
	CreatedAt time.Time
}

// FlowPutParams are the arguments of Store.FlowPut.
type FlowPutParams struct {
	ID      string
	Version string
	Name    string
	// Definition is stored byte for byte; it must be valid JSON.
	Definition json.RawMessage
	// Now is the creation time; nil means the database clock.
	Now *time.Time
}

// FlowPutResult says what FlowPut did.
type FlowPutResult struct {
	// Flow is the stored version: the new one, or the one that was stored
	// already with the same definition.
	Flow *Flow
	// Created is false when the version was stored already (a no-op).
	Created bool
	// Latest is the flow's latest version after the put.
	Latest string
}

// FlowRef names one version of a flow; an empty Version names the latest.
type FlowRef struct {
	ID      string
	Version string
}

// FlowListParams are the arguments of Store.FlowList. Flows are ordered by
// id; a page continues after AfterID.
type FlowListParams struct {
	// AfterID continues after the flow with this id; empty starts at the first.
	AfterID string
	// Limit is the page length.
	//
	// Defaults to 50.
	Limit int
}

// FlowStore is the persistence of the flow registry, part of Store: every
// version of every flow definition, and which version of each flow is the
// latest. Versions are immutable once put. Every method is one transaction.
//
// The latest version of a flow is the one FlowVersionSupersedes prefers over
// all others, the rule of flow.LatestVersion: a release over any
// pre-release, then the highest by semantic version precedence. SQL cannot
// order semantic versions, so the store keeps the latest version of each
// flow in a row of its own, moved on by FlowPut in the transaction that
// inserts a version; listings read it by primary key.
type FlowStore interface {
	// FlowPut stores a version of a flow and moves the flow's latest version
	// on when the new one supersedes it. Putting a version that is stored
	// already with a byte-identical definition changes nothing (Created is
	// false); with a different definition it returns
	// ErrFlowVersionConflict. Concurrent puts of one flow are serialized.
	FlowPut(ctx context.Context, p *FlowPutParams) (*FlowPutResult, error)
	// FlowGet returns one version of a flow with its definition, or its
	// latest version when ref.Version is empty; ErrNotFound when there is
	// none.
	FlowGet(ctx context.Context, ref FlowRef) (*Flow, error)
	// FlowList returns a page of flows ordered by id, each at its latest
	// version, without definitions.
	FlowList(ctx context.Context, p *FlowListParams) ([]*Flow, error)
	// FlowVersions returns every version of a flow, lowest first by semantic
	// version precedence (CompareFlowVersions), without definitions; an
	// empty list when the flow does not exist.
	FlowVersions(ctx context.Context, id string) ([]*Flow, error)
}

// CompareFlowVersions compares two flow versions by semantic version
// precedence ("1.10.0" > "1.9.0", "1.0.0-rc.1" < "1.0.0"), returning -1, 0
// or +1. Versions are written without the "v" prefix; an invalid one sorts
// below every valid one. It is the rule of package internal/flowversion,
// which flow.CompareVersions applies too.
func CompareFlowVersions(a, b string) int { return flowversion.Compare(a, b) }

// FlowVersionSupersedes reports whether version v replaces current as the
// latest version of a flow: a release supersedes any pre-release, and
// otherwise the higher version wins. It is the rule of package
// internal/flowversion, which flow.LatestVersion applies too.
func FlowVersionSupersedes(v, current string) bool { return flowversion.Supersedes(v, current) }
