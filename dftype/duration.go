package dftype

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strings"
	"time"
)

// Duration is a time.Duration that reads and writes JSON as a human string such
// as "10 seconds", "1 hour" or "24 hours". It also accepts Go duration strings
// ("1h30m") and JSON numbers, which are milliseconds.
type Duration time.Duration

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// String formats d the way ParseDuration reads it.
func (d Duration) String() string { return FormatDuration(time.Duration(d)) }

// MarshalJSON writes d as a string such as "10 seconds".
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(FormatDuration(time.Duration(d)))
}

// UnmarshalJSON reads a string ("10 seconds", "1h") or a number of milliseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := ParseDuration(s)
		if err != nil {
			return err
		}
		*d = Duration(v)
		return nil
	}
	var ms float64
	if err := json.Unmarshal(b, &ms); err != nil {
		return fmt.Errorf("duration must be a string such as \"10 seconds\" or a number of milliseconds: %w", err)
	}
	*d = Duration(time.Duration(ms * float64(time.Millisecond)))
	return nil
}

var durationUnits = []struct {
	names []string
	unit  time.Duration
}{
	{[]string{"ms", "msec", "msecs", "millisecond", "milliseconds"}, time.Millisecond},
	{[]string{"s", "sec", "secs", "second", "seconds"}, time.Second},
	{[]string{"m", "min", "mins", "minute", "minutes"}, time.Minute},
	{[]string{"h", "hr", "hrs", "hour", "hours"}, time.Hour},
	{[]string{"d", "day", "days"}, 24 * time.Hour},
	{[]string{"w", "week", "weeks"}, 7 * 24 * time.Hour},
}

// ParseDuration reads a duration written as "<number> <unit>" ("10 seconds",
// "1 hour", "24 hours", "1.5 minutes", "2 days"), or as a Go duration string
// ("1h30m", "250ms").
func ParseDuration(s string) (time.Duration, error) {
	str := strings.TrimSpace(s)
	if str == "" {
		return 0, fmt.Errorf("invalid duration %q: empty", s)
	}
	if d, err := time.ParseDuration(str); err == nil {
		return d, nil
	}
	fields := strings.Fields(str)
	if len(fields) == 1 {
		// "10seconds": split the number from the unit.
		i := strings.IndexFunc(str, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
		if i > 0 {
			fields = []string{str[:i], str[i:]}
		}
	}
	if len(fields) != 2 {
		return 0, fmt.Errorf("invalid duration %q: want \"<number> <unit>\" such as \"10 seconds\"", s)
	}
	if !decimalRE.MatchString(fields[0]) {
		return 0, fmt.Errorf("invalid duration %q: %q is not a non-negative decimal number", s, fields[0])
	}
	unit := strings.ToLower(fields[1])
	for _, u := range durationUnits {
		for _, name := range u.names {
			if unit == name {
				return scaleDecimal(s, fields[0], u.unit)
			}
		}
	}
	return 0, fmt.Errorf("invalid duration %q: unknown unit %q (use milliseconds, seconds, minutes, hours, days or weeks)", s, fields[1])
}

// decimalRE is the number of a "<number> <unit>" duration: digits with an
// optional fraction, no sign, exponent, Inf or NaN.
var decimalRE = regexp.MustCompile(`^([0-9]+(\.[0-9]*)?|\.[0-9]+)$`)

// scaleDecimal returns the decimal number times unit, exactly (a float64
// would turn "7000000001 seconds" into 7000000000.999999488 s), truncated to
// whole nanoseconds; past the longest time.Duration it is an error.
func scaleDecimal(s, number string, unit time.Duration) (time.Duration, error) {
	r, ok := new(big.Rat).SetString(number)
	if !ok {
		return 0, fmt.Errorf("invalid duration %q: %q is not a non-negative decimal number", s, number)
	}
	r.Mul(r, new(big.Rat).SetInt64(int64(unit)))
	ns := new(big.Int).Quo(r.Num(), r.Denom())
	if !ns.IsInt64() {
		return 0, fmt.Errorf("invalid duration %q: longer than %s", s, time.Duration(math.MaxInt64))
	}
	return time.Duration(ns.Int64()), nil
}

// MustParseDuration is ParseDuration for constants; it panics on a malformed string.
func MustParseDuration(s string) time.Duration {
	d, err := ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return d
}

// FormatDuration writes d in the largest unit that divides it ("10 seconds",
// "1 hour"), falling back to Go's notation.
func FormatDuration(d time.Duration) string {
	if d == 0 {
		return "0 seconds"
	}
	for i := len(durationUnits) - 1; i >= 0; i-- {
		u := durationUnits[i]
		if d%u.unit == 0 {
			n := int64(d / u.unit)
			name := u.names[len(u.names)-1]
			if n == 1 || n == -1 {
				name = strings.TrimSuffix(name, "s")
			}
			return fmt.Sprintf("%d %s", n, name)
		}
	}
	return d.String()
}
