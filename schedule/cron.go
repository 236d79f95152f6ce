package schedule

import (
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // zone data for hosts and images without /usr/share/zoneinfo

	"github.com/robfig/cron/v3"

	"github.com/duraflow/duraflow/workflow"
)

// MaxCronLength bounds the text of a cron expression.
const MaxCronLength = 200

// parser reads standard five-field expressions (minute, hour, day of month,
// month, day of week, with names such as JAN and MON) and the descriptors
// @yearly, @annually, @monthly, @weekly, @daily, @midnight and @hourly.
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Spec is a parsed cron expression in a time zone. It is safe for
// concurrent use.
//
// Times are evaluated on the wall clock of the zone, with the rules of
// Vixie cron across daylight-saving changes. An expression whose minute or
// hour field is a wildcard ("*", "*/15"), or @hourly, follows elapsed time:
// it skips the hour that a spring-forward change removes and fires through
// both copies of the hour that a fall-back change repeats. Any other
// expression names fixed wall-clock times and fires once per such time: a
// time that a spring-forward change skips fires at the moment of the change
// (02:30 on a night that jumps from 02:00 to 03:00 fires at 03:00), and a
// time that a fall-back change repeats fires the first time only.
type Spec struct {
	expr string
	loc  *time.Location
	// zoned evaluates the expression in loc; naive on the wall clock as if
	// it were UTC, to find wall times that a spring-forward change skips.
	zoned, naive *cron.SpecSchedule
	// fixed is true for expressions of fixed wall-clock times.
	fixed bool
}

// Parse parses a cron expression evaluated in the named IANA time zone
// ("Europe/Berlin"; "UTC"). Errors wrap workflow.ErrInvalidRequest and say
// what is wrong.
func Parse(expr, timeZone string) (*Spec, error) {
	loc, err := LoadLocation(timeZone)
	if err != nil {
		return nil, err
	}
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return nil, fmt.Errorf("%w: empty cron expression", workflow.ErrInvalidRequest)
	}
	if len(expr) > MaxCronLength {
		return nil, fmt.Errorf("%w: the cron expression is longer than %d characters", workflow.ErrInvalidRequest, MaxCronLength)
	}
	fields := strings.Fields(expr)
	var fixed bool
	switch {
	case strings.HasPrefix(expr, "@every"):
		return nil, fmt.Errorf("%w: cron expression %q: @every is not supported; use a cron expression such as */5 * * * *", workflow.ErrInvalidRequest, expr)
	case strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ="):
		return nil, fmt.Errorf("%w: cron expression %q: give the time zone separately (timeZone)", workflow.ErrInvalidRequest, expr)
	case strings.HasPrefix(expr, "@"):
		fixed = expr != "@hourly"
	case len(fields) != 5:
		return nil, fmt.Errorf("%w: cron expression %q has %d fields; it needs 5: minute hour day-of-month month day-of-week", workflow.ErrInvalidRequest, expr, len(fields))
	default:
		fixed = !strings.HasPrefix(fields[0], "*") && !strings.HasPrefix(fields[1], "*")
	}
	parsed, err := parser.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("%w: cron expression %q: %v", workflow.ErrInvalidRequest, expr, err)
	}
	spec, ok := parsed.(*cron.SpecSchedule)
	if !ok {
		return nil, fmt.Errorf("%w: cron expression %q is not a calendar schedule", workflow.ErrInvalidRequest, expr)
	}
	zoned, naive := *spec, *spec
	zoned.Location, naive.Location = loc, time.UTC
	s := &Spec{expr: expr, loc: loc, zoned: &zoned, naive: &naive, fixed: fixed}
	// The parser takes days that no month has (30 2 for 30 February).
	if s.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return nil, fmt.Errorf("%w: cron expression %q never fires", workflow.ErrInvalidRequest, expr)
	}
	return s, nil
}

// LoadLocation loads an IANA time zone by name; "" is an error, and so is
// "Local", whose meaning changes from host to host. Errors wrap
// workflow.ErrInvalidRequest.
func LoadLocation(name string) (*time.Location, error) {
	if name == "" || name == "Local" {
		return nil, fmt.Errorf("%w: time zone %q: name an IANA time zone such as UTC or Europe/Berlin", workflow.ErrInvalidRequest, name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("%w: unknown time zone %q: name an IANA time zone such as UTC or Europe/Berlin", workflow.ErrInvalidRequest, name)
	}
	return loc, nil
}

// String returns the expression as parsed (trimmed).
func (s *Spec) String() string { return s.expr }

// Location returns the zone the expression is evaluated in.
func (s *Spec) Location() *time.Location { return s.loc }

// Next returns the first fire time strictly after t, in UTC, or the zero
// time when there is none within five years.
func (s *Spec) Next(t time.Time) time.Time {
	for range 4 {
		c := s.zoned.Next(t)
		if c.IsZero() || !s.fixed {
			return c.UTC()
		}
		if g := s.skippedFire(t, c); !g.IsZero() {
			return g.UTC()
		}
		if !s.repeated(c) {
			return c.UTC()
		}
		t = c
	}
	// A wall time repeats at most once per change, and changes are months
	// apart: the loop never gets here.
	return s.zoned.Next(t).UTC()
}

// skippedFire returns the moment of a spring-forward change between after
// and c that skipped a wall time the expression names, or the zero time.
func (s *Spec) skippedFire(after, c time.Time) time.Time {
	t := after
	for {
		_, end := t.In(s.loc).ZoneBounds()
		if end.IsZero() || !end.Before(c) {
			return time.Time{}
		}
		_, before := end.Add(-time.Nanosecond).In(s.loc).Zone()
		_, now := end.In(s.loc).Zone()
		if now > before {
			// Wall times [start, start + (now-before)) do not exist that day.
			start := time.Unix(end.Unix()+int64(before), 0).UTC()
			stop := start.Add(time.Duration(now-before) * time.Second)
			if m := s.naive.Next(start.Add(-time.Second)); !m.IsZero() && m.Before(stop) {
				return end
			}
		}
		t = end
	}
}

// repeated reports whether c is the second occurrence of a wall time that a
// fall-back change repeats.
func (s *Spec) repeated(c time.Time) bool {
	start, _ := c.In(s.loc).ZoneBounds()
	if start.IsZero() {
		return false
	}
	_, before := start.Add(-time.Nanosecond).In(s.loc).Zone()
	_, now := c.In(s.loc).Zone()
	overlap := time.Duration(before-now) * time.Second
	return overlap > 0 && c.Sub(start) < overlap
}

// dueTimes returns the fire times of s from first (itself a fire time, the
// schedule's next_fire_at) up to and including now, at most the max most
// recent of them, oldest first; whether it left older ones out; and the
// first fire time after now. It scans back from now in a window that
// doubles until the window holds max times or reaches first, so an outage
// of a year on a schedule of every minute costs a few thousand steps, not
// half a million.
func (s *Spec) dueTimes(first, now time.Time, max int) (due []time.Time, skipped bool, next time.Time) {
	next = s.Next(now)
	if first.After(now) {
		return nil, false, first
	}
	for window := time.Hour; ; window *= 2 {
		start := now.Add(-window)
		reachesFirst := !start.After(first)
		var times []time.Time
		if reachesFirst {
			times = append(times, first)
			start = first
		}
		for t := s.Next(start); !t.IsZero() && !t.After(now); t = s.Next(t) {
			times = append(times, t)
		}
		if len(times) >= max || reachesFirst {
			if len(times) > max {
				return times[len(times)-max:], true, next
			}
			return times, !reachesFirst, next
		}
	}
}
