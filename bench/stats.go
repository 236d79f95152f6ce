package bench

import (
	"math"
	"slices"
	"time"
)

// Percentile returns the nearest-rank p-th percentile (0 < p ≤ 100) of
// sorted, which must be in ascending order: the smallest sample that at
// least p percent of the samples are less than or equal to. It is always one
// of the samples, never an interpolation; 0 for no samples.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// Summary describes a sample of latencies, in milliseconds.
type Summary struct {
	// Count is the number of samples.
	Count int `json:"count"`
	// Min, Mean, P50, P90, P99 and Max are in milliseconds.
	Min  float64 `json:"min_ms"`
	Mean float64 `json:"mean_ms"`
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P99  float64 `json:"p99_ms"`
	Max  float64 `json:"max_ms"`
}

// Summarize sorts a copy of samples and describes it.
func Summarize(samples []time.Duration) Summary {
	if len(samples) == 0 {
		return Summary{}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return Summary{
		Count: len(s),
		Min:   ms(s[0]),
		Mean:  ms(sum / time.Duration(len(s))),
		P50:   ms(Percentile(s, 50)),
		P90:   ms(Percentile(s, 90)),
		P99:   ms(Percentile(s, 99)),
		Max:   ms(s[len(s)-1]),
	}
}

// ms converts a duration to fractional milliseconds.
func ms(d time.Duration) float64 {
	return float64(d) / float64(time.Millisecond)
}

// rate is count per second over elapsed; 0 when elapsed is not positive.
func rate(count int, elapsed time.Duration) float64 {
	if elapsed <= 0 {
		return 0
	}
	return float64(count) / elapsed.Seconds()
}
