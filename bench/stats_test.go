package bench_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/bench"
)

func TestPercentile(t *testing.T) {
	t.Parallel()

	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one sample is every percentile", ms(7), 99, 7 * time.Millisecond},
		{"median of an odd count", ms(1, 2, 3, 4, 5), 50, 3 * time.Millisecond},
		{"median of an even count is the lower middle", ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"p99 of 100 is the 99th", hundred, 99, 99 * time.Millisecond},
		{"p100 is the maximum", hundred, 100, 100 * time.Millisecond},
		{"p1 of 100 is the first", hundred, 1, time.Millisecond},
		{"a tiny percentile is the minimum", ms(3, 4), 0.001, 3 * time.Millisecond},
		{"p99 of 10 is the maximum", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 99, 10 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, bench.Percentile(tt.sorted, tt.p))
		})
	}
}

func TestSummarize(t *testing.T) {
	t.Parallel()

	t.Run("sorts a copy", func(t *testing.T) {
		t.Parallel()
		in := []time.Duration{4 * time.Millisecond, time.Millisecond, 3 * time.Millisecond, 2 * time.Millisecond}
		s := bench.Summarize(in)
		require.Equal(t, bench.Summary{Count: 4, Min: 1, Mean: 2.5, P50: 2, P90: 4, P99: 4, Max: 4}, s)
		require.Equal(t, 4*time.Millisecond, in[0], "the input is left alone")
	})
	t.Run("fractions of a millisecond", func(t *testing.T) {
		t.Parallel()
		s := bench.Summarize([]time.Duration{250 * time.Microsecond})
		require.InDelta(t, 0.25, s.P50, 1e-9)
	})
	t.Run("no samples", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, bench.Summary{}, bench.Summarize(nil))
	})
}
