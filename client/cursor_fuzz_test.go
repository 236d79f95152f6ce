package client

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/workflow"
)

// FuzzInstanceCursor checks that decoding an instance list cursor, which
// comes from the caller, never panics, and that a cursor it accepts encodes
// back to one that decodes to the same position.
func FuzzInstanceCursor(f *testing.F) {
	f.Add(encodeCursor(&db.InstanceCursor{UpdatedAt: time.Date(2026, 11, 25, 1, 2, 3, 4, time.UTC), WorkflowName: "hello", ID: "inv-1"}))
	for _, s := range []string{
		"", "x", "!!!", "e30", "bnVsbA", "W10", // "", {}, null, []
		base64.RawURLEncoding.EncodeToString([]byte(`{"u":"0001-01-01T00:00:00Z","w":"a","i":"b"}`)),
		base64.RawURLEncoding.EncodeToString([]byte(`{"u":"9999-12-31T23:59:59.999999999+14:00","w":"../x","i":"\u0000"}`)),
		base64.RawURLEncoding.EncodeToString([]byte(`{"u":"2026-11-25T01:02:03Z","w":1,"i":[]}`)),
		base64.StdEncoding.EncodeToString([]byte(`{"u":"2026-11-25T01:02:03Z"}`)), // padded: refused
		"eyJ1IjoiMjAyNi0xMS0yNVQwMTowMjowM1oiLCJ3IjoiYSIsImkiOiJiIn0%00",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := decodeCursor(s)
		if err != nil {
			return
		}
		require.NoError(t, workflow.ValidateWorkflowName(c.WorkflowName), "an accepted cursor names a valid workflow")
		require.NoError(t, workflow.ValidateInstanceID(c.ID), "an accepted cursor names a valid instance id")
		back, err := decodeCursor(encodeCursor(c))
		require.NoError(t, err)
		require.True(t, c.UpdatedAt.Equal(back.UpdatedAt), "%v != %v", c.UpdatedAt, back.UpdatedAt)
		require.Equal(t, c.WorkflowName, back.WorkflowName)
		require.Equal(t, c.ID, back.ID)
	})
}

// FuzzHistoryCursor checks the same of history cursors: no panic, no
// negative position accepted, and a round trip keeps the position.
func FuzzHistoryCursor(f *testing.F) {
	f.Add(encodeHistoryCursor(historyCursor{Run: 1, Step: 10, Event: 3}))
	for _, s := range []string{
		"", "e30", "eyJyIjowfQ", "eyJyIjotMX0", // {}, {"r":0}, {"r":-1}
		base64.RawURLEncoding.EncodeToString([]byte(`{"r":1,"s":-5,"e":0}`)),
		base64.RawURLEncoding.EncodeToString([]byte(`{"r":9223372036854775808,"s":0,"e":0}`)),
		base64.RawURLEncoding.EncodeToString([]byte(`{"r":1.5,"s":1e3,"e":"x"}`)),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := decodeHistoryCursor(s)
		if err != nil {
			return
		}
		require.GreaterOrEqual(t, c.Run, 1)
		require.GreaterOrEqual(t, c.Step, int64(0))
		require.GreaterOrEqual(t, c.Event, int64(0))
		back, err := decodeHistoryCursor(encodeHistoryCursor(c))
		require.NoError(t, err)
		require.Equal(t, c, back)
	})
}
