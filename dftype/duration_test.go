package dftype_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/dftype"
)

func TestParseDuration(t *testing.T) {
	t.Parallel()
	cases := map[string]time.Duration{
		"10 seconds":         10 * time.Second,
		"1 second":           time.Second,
		"1 hour":             time.Hour,
		"24 hours":           24 * time.Hour,
		"1.5 minutes":        90 * time.Second,
		"500 milliseconds":   500 * time.Millisecond,
		"2 days":             48 * time.Hour,
		"1 week":             7 * 24 * time.Hour,
		"  3 Minutes ":       3 * time.Minute,
		"10s":                10 * time.Second,
		"1h30m":              90 * time.Minute,
		"5sec":               5 * time.Second,
		"7000000001 seconds": 7000000001 * time.Second, // exact, not 7000000000.999999488 s
		"0.1 seconds":        100 * time.Millisecond,
		".5 minutes":         30 * time.Second,
	}
	for in, want := range cases {
		got, err := dftype.ParseDuration(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "ten seconds", "10 fortnights", "-1 second", "1 2 3",
		"NaN seconds", "Inf hours", "1e3 ms", "+5 seconds", "9223372036854775808 ms", "1e300 weeks"} {
		_, err := dftype.ParseDuration(bad)
		require.Error(t, err, bad)
	}
}

func TestDurationJSON(t *testing.T) {
	t.Parallel()
	var v struct {
		A dftype.Duration `json:"a"`
		B dftype.Duration `json:"b"`
	}
	require.NoError(t, json.Unmarshal([]byte(`{"a":"2 hours","b":1500}`), &v))
	require.Equal(t, 2*time.Hour, v.A.Std())
	require.Equal(t, 1500*time.Millisecond, v.B.Std())
	out, err := json.Marshal(v)
	require.NoError(t, err)
	require.JSONEq(t, `{"a":"2 hours","b":"1500 milliseconds"}`, string(out))
	require.Error(t, json.Unmarshal([]byte(`{"a":"soon"}`), &v))
}
