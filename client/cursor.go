package client

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/workflow"
)

type cursorJSON struct {
	U time.Time `json:"u"`
	W string    `json:"w"`
	I string    `json:"i"`
}

func encodeCursor(c *db.InstanceCursor) string {
	b, _ := json.Marshal(cursorJSON{U: c.UpdatedAt, W: c.WorkflowName, I: c.ID})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (*db.InstanceCursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: malformed cursor", workflow.ErrInvalidRequest)
	}
	var c cursorJSON
	if err := json.Unmarshal(b, &c); err != nil || c.U.IsZero() {
		return nil, fmt.Errorf("%w: malformed cursor", workflow.ErrInvalidRequest)
	}
	// A cursor comes from the caller: its names reach the store's keyset
	// comparison, so they must be names the store could have written.
	if workflow.ValidateWorkflowName(c.W) != nil || workflow.ValidateInstanceID(c.I) != nil {
		return nil, fmt.Errorf("%w: malformed cursor", workflow.ErrInvalidRequest)
	}
	return &db.InstanceCursor{UpdatedAt: c.U, WorkflowName: c.W, ID: c.I}, nil
}

type historyCursor struct {
	Run   int   `json:"r"`
	Step  int64 `json:"s"`
	Event int64 `json:"e"`
}

func encodeHistoryCursor(c historyCursor) string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeHistoryCursor(s string) (historyCursor, error) {
	var c historyCursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || json.Unmarshal(b, &c) != nil || c.Run < 1 || c.Step < 0 || c.Event < 0 {
		return historyCursor{}, fmt.Errorf("%w: malformed history cursor", workflow.ErrInvalidRequest)
	}
	return c, nil
}
