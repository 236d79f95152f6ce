package apiclient

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/internal/flowapi"
	"github.com/duraflow/duraflow/workflow"
)

// TestErrorTableReadsBothWays checks that the server's answer to every
// error of the table (ErrorCode) comes back, through APIError.Is, as the
// error the table names first for its code.
func TestErrorTableReadsBothWays(t *testing.T) {
	t.Parallel()
	first := map[Code]error{}
	for _, k := range errorKinds {
		if _, ok := first[k.code]; !ok {
			first[k.code] = k.err
		}
	}
	for _, k := range errorKinds {
		status, code, ok := ErrorCode(fmt.Errorf("wrapped: %w", k.err))
		require.True(t, ok, "%v", k.err)
		require.Equal(t, k.code, code, "%v", k.err)
		require.Equal(t, k.status, status, "%v", k.err)
		answer := &APIError{Status: status, Code: code}
		require.ErrorIs(t, answer, first[code], "%v", k.err)
		require.ErrorIs(t, answer, &APIError{Code: code})
	}
	_, _, ok := ErrorCode(errors.New("unknown"))
	require.False(t, ok)

	// An invalid flow is INVALID_FLOW, not the INVALID_REQUEST it matches too.
	_, code, _ := ErrorCode(&flowapi.ValidationError{Problems: []Problem{{Message: "x"}}})
	require.Equal(t, CodeInvalidFlow, code)
	status, code, _ := ErrorCode(workflow.ErrInstanceNotFound)
	require.Equal(t, http.StatusNotFound, status)
	require.Equal(t, CodeInstanceNotFound, code)
}

// TestDatabaseUnavailableKeepsItsCause checks that an outage answers 503
// DATABASE_UNAVAILABLE whatever else its chain says, with a message that
// does not pass the driver's error (the database's address) on.
func TestDatabaseUnavailableKeepsItsCause(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("getting instance: %w: %w: failed to connect to `user=app database=prod`: 10.0.0.7:5432: connection refused",
		workflow.ErrInstanceNotFound, db.ErrUnavailable)
	status, code, ok := ErrorCode(err)
	require.True(t, ok)
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.Equal(t, CodeDatabaseUnavailable, code)
	msg := ErrorMessage(err)
	require.NotContains(t, msg, "10.0.0.7")
	require.NotContains(t, msg, "prod")
	require.Equal(t, "instance not found", ErrorMessage(workflow.ErrInstanceNotFound), "other codes answer the error's own text")
}
