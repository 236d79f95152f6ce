package apiclient

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/duraflow/duraflow/schedule"
	"github.com/duraflow/duraflow/workflow"
)

// ScheduleList is the answer of GET /schedules: a page of schedules ordered
// by id, and the cursor of the next page.
type ScheduleList = schedule.ListResult

// ListSchedules returns a page of schedules ordered by id, of one workflow
// when p.WorkflowName is set (GET /schedules).
func (c *Client) ListSchedules(ctx context.Context, p schedule.ListParams) (*ScheduleList, error) {
	q := url.Values{}
	if p.WorkflowName != "" {
		q.Set("workflow", p.WorkflowName)
	}
	if p.PageSize != 0 {
		q.Set("pageSize", strconv.Itoa(p.PageSize))
	}
	if p.Cursor != "" {
		q.Set("cursor", p.Cursor)
	}
	var out ScheduleList
	return &out, c.do(ctx, http.MethodGet, c.api("/schedules"), q, nil, &out)
}

// CreateSchedule creates a schedule (POST /schedules).
func (c *Client) CreateSchedule(ctx context.Context, req schedule.CreateRequest) (*schedule.Info, error) {
	var out schedule.Info
	return &out, c.do(ctx, http.MethodPost, c.api("/schedules"), nil, req, &out)
}

// GetSchedule returns a schedule with its next fire time (GET /schedules/:id).
func (c *Client) GetSchedule(ctx context.Context, id string) (*schedule.Info, error) {
	path, err := c.schedulePath(id, "")
	if err != nil {
		return nil, err
	}
	var out schedule.Info
	return &out, c.do(ctx, http.MethodGet, path, nil, nil, &out)
}

// UpdateSchedule changes the fields req sets (PATCH /schedules/:id).
func (c *Client) UpdateSchedule(ctx context.Context, id string, req schedule.UpdateRequest) (*schedule.Info, error) {
	path, err := c.schedulePath(id, "")
	if err != nil {
		return nil, err
	}
	var out schedule.Info
	return &out, c.do(ctx, http.MethodPatch, path, nil, req, &out)
}

// EnableSchedule makes a schedule fire again from its next fire time after
// now (POST /schedules/:id/enable).
func (c *Client) EnableSchedule(ctx context.Context, id string) (*schedule.Info, error) {
	return c.toggleSchedule(ctx, id, "/enable")
}

// DisableSchedule stops a schedule from firing (POST /schedules/:id/disable).
func (c *Client) DisableSchedule(ctx context.Context, id string) (*schedule.Info, error) {
	return c.toggleSchedule(ctx, id, "/disable")
}

// DeleteSchedule deletes a schedule; the instances it started stay
// (DELETE /schedules/:id).
func (c *Client) DeleteSchedule(ctx context.Context, id string) error {
	path, err := c.schedulePath(id, "")
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodDelete, path, nil, nil, nil)
}

func (c *Client) toggleSchedule(ctx context.Context, id, suffix string) (*schedule.Info, error) {
	path, err := c.schedulePath(id, suffix)
	if err != nil {
		return nil, err
	}
	var out schedule.Info
	return &out, c.do(ctx, http.MethodPost, path, nil, nil, &out)
}

func (c *Client) schedulePath(id, suffix string) (string, error) {
	if id == "" {
		return "", fmt.Errorf("%w: empty schedule id", workflow.ErrInvalidRequest)
	}
	return c.api("/schedules/" + url.PathEscape(id) + suffix), nil
}
