package wfcore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/internal/wfcore"
	"github.com/duraflow/duraflow/workflow"
)

func TestDeadlineAt(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	d, err := wfcore.DeadlineAt(workflow.Definition{Deadline: time.Hour}, time.Time{}, now)
	require.NoError(t, err)
	require.Equal(t, now.Add(time.Hour), *d)
	d, err = wfcore.DeadlineAt(workflow.Definition{Deadline: time.Hour}, now.Add(time.Minute), now)
	require.NoError(t, err)
	require.Equal(t, now.Add(time.Minute), *d, "the create's deadline overrides the workflow's")
	d, err = wfcore.DeadlineAt(workflow.Definition{}, time.Time{}, now)
	require.NoError(t, err)
	require.Nil(t, d)
	for _, bad := range []time.Time{now, now.Add(-time.Second), now.Add(workflow.MaxSleep + time.Second)} {
		_, err = wfcore.DeadlineAt(workflow.Definition{}, bad, now)
		require.ErrorIs(t, err, workflow.ErrInvalidRequest)
	}
}

func TestValidateCreatePlacement(t *testing.T) {
	t.Parallel()
	require.NoError(t, wfcore.ValidateCreatePlacement(&dftype.CreateRequest{}))
	require.NoError(t, wfcore.ValidateCreatePlacement(&dftype.CreateRequest{Namespace: "acme", Queue: "payments", Priority: workflow.MaxPriority, DedupeKey: "user-42"}))
	for _, bad := range []dftype.CreateRequest{
		{Namespace: "bad namespace"},
		{Queue: "bad queue"},
		{Priority: workflow.MaxPriority + 1},
		{DedupeKey: "a\x00b"},
	} {
		require.Error(t, wfcore.ValidateCreatePlacement(&bad), "%+v", bad)
	}
}
