package client

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/workflow"
)

// TestMapErrorInvalidData shows that a write the database refused for its
// values reaches the caller as ErrInvalidRequest (HTTP 400), not as an
// internal error, and keeps the store's message.
func TestMapErrorInvalidData(t *testing.T) {
	t.Parallel()
	err := mapError(fmt.Errorf("%w: invalid input syntax for type json", db.ErrInvalidData), "greet", "g-1")
	require.ErrorIs(t, err, workflow.ErrInvalidRequest)
	require.ErrorIs(t, err, db.ErrInvalidData)
	require.Contains(t, err.Error(), "invalid input syntax for type json")
}
