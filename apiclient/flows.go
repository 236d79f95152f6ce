package apiclient

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/duraflow/duraflow/internal/flowapi"
	"github.com/duraflow/duraflow/workflow"
)

// FlowApplied is the answer of POST /flows.
type FlowApplied = flowapi.ApplyResult

// FlowInfo is a stored flow version, the answer of GET /flows/:id and
// GET /flows/:id/versions/:version.
type FlowInfo = flowapi.Info

// FlowList is the answer of GET /flows: a page of flows at their latest
// versions, and the cursor of the next page.
type FlowList = flowapi.ListResult

// FlowVersionList is the answer of GET /flows/:id/versions.
type FlowVersionList = flowapi.VersionList

// FlowListParams select a page of flows (GET /flows).
type FlowListParams = flowapi.ListParams

// Problem is one thing wrong with a flow definition, as an INVALID_FLOW
// answer lists it (APIError.Problems).
type Problem = flowapi.Problem

// rawBody is a request body the client sends as it is, not encoded as
// JSON by do: a flow definition must reach the server byte for byte.
type rawBody []byte

// ApplyFlow applies a flow definition (POST /flows), sending it byte for
// byte. A definition that does not validate fails with an *APIError whose
// code is INVALID_FLOW and whose Problems list what is wrong; a version
// stored with another definition fails with FLOW_VERSION_CONFLICT.
func (c *Client) ApplyFlow(ctx context.Context, definition []byte) (*FlowApplied, error) {
	if len(bytes.TrimSpace(definition)) == 0 {
		return nil, fmt.Errorf("%w: the flow definition is empty", workflow.ErrInvalidRequest)
	}
	var out FlowApplied
	return &out, c.do(ctx, http.MethodPost, c.api("/flows"), nil, rawBody(definition), &out)
}

// ListFlows returns a page of flows at their latest versions, ordered by id
// (GET /flows).
func (c *Client) ListFlows(ctx context.Context, p FlowListParams) (*FlowList, error) {
	q := url.Values{}
	if p.PageSize != 0 {
		q.Set("pageSize", strconv.Itoa(p.PageSize))
	}
	if p.Cursor != "" {
		q.Set("cursor", p.Cursor)
	}
	var out FlowList
	return &out, c.do(ctx, http.MethodGet, c.api("/flows"), q, nil, &out)
}

// GetFlow returns a version of a flow with its definition, or the latest
// when version is empty (GET /flows/:id, GET /flows/:id/versions/:version).
func (c *Client) GetFlow(ctx context.Context, id, version string) (*FlowInfo, error) {
	if id == "" {
		return nil, fmt.Errorf("%w: empty flow id", workflow.ErrInvalidRequest)
	}
	path := c.api("/flows/" + url.PathEscape(id))
	if version != "" {
		path += "/versions/" + url.PathEscape(version)
	}
	var out FlowInfo
	return &out, c.do(ctx, http.MethodGet, path, nil, nil, &out)
}

// FlowVersions returns every version of a flow, lowest first (GET
// /flows/:id/versions).
func (c *Client) FlowVersions(ctx context.Context, id string) (*FlowVersionList, error) {
	if id == "" {
		return nil, fmt.Errorf("%w: empty flow id", workflow.ErrInvalidRequest)
	}
	var out FlowVersionList
	return &out, c.do(ctx, http.MethodGet, c.api("/flows/"+url.PathEscape(id)+"/versions"), nil, nil, &out)
}
