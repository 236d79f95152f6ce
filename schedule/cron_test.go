package schedule

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/workflow"
)

// utc parses "2006-01-02 15:04" in UTC.
func utc(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse("2006-01-02 15:04", s)
	require.NoError(t, err)
	return v
}

// nexts returns the n fire times after from, in UTC, formatted "2006-01-02 15:04".
func nexts(t *testing.T, spec *Spec, from time.Time, n int) []string {
	t.Helper()
	out := make([]string, 0, n)
	for range n {
		from = spec.Next(from)
		require.False(t, from.IsZero())
		require.Equal(t, time.UTC, from.Location())
		out = append(out, from.Format("2006-01-02 15:04"))
	}
	return out
}

func TestSpecNext(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, expr, zone, from string
		want                   []string
	}{
		{"EveryFiveMinutes", "*/5 * * * *", "UTC", "2026-01-01 09:03",
			[]string{"2026-01-01 09:05", "2026-01-01 09:10", "2026-01-01 09:15"}},
		{"StrictlyAfter", "*/5 * * * *", "UTC", "2026-01-01 09:05",
			[]string{"2026-01-01 09:10", "2026-01-01 09:15"}},
		{"WeekdayNames", "0 9 * * MON-FRI", "UTC", "2026-01-02 10:00", // a Friday
			[]string{"2026-01-05 09:00", "2026-01-06 09:00"}},
		{"MonthNamesAndLists", "15 6 1,15 JAN,JUL *", "UTC", "2026-01-10 00:00",
			[]string{"2026-01-15 06:15", "2026-07-01 06:15", "2026-07-15 06:15", "2027-01-01 06:15"}},
		{"Hourly", "@hourly", "UTC", "2026-01-01 09:30", []string{"2026-01-01 10:00", "2026-01-01 11:00"}},
		{"Daily", "@daily", "UTC", "2026-01-01 09:30", []string{"2026-01-02 00:00", "2026-01-03 00:00"}},
		{"LeapDay", "0 0 29 2 *", "UTC", "2026-01-01 00:00", []string{"2028-02-29 00:00", "2032-02-29 00:00"}},
		// 09:00 in Berlin is 08:00 UTC in winter and 07:00 UTC in summer.
		{"TimeZone", "0 9 * * *", "Europe/Berlin", "2026-03-27 12:00",
			[]string{"2026-03-28 08:00", "2026-03-29 07:00", "2026-03-30 07:00"}},
		{"TimeZoneAhead", "0 0 * * *", "Asia/Tokyo", "2026-01-01 00:00",
			[]string{"2026-01-01 15:00", "2026-01-02 15:00"}},
		// New York springs forward on 2026-03-08 at 02:00 EST (07:00 UTC) to
		// 03:00 EDT: 02:30 does not exist that night and fires at the change.
		{"SpringForwardFixedTimeFiresAtTheChange", "30 2 * * *", "America/New_York", "2026-03-06 12:00",
			[]string{"2026-03-07 07:30", "2026-03-08 07:00", "2026-03-09 06:30"}},
		{"SpringForwardSeveralSkippedTimesFireOnce", "0,15,45 2 * * *", "America/New_York", "2026-03-08 06:00",
			[]string{"2026-03-08 07:00", "2026-03-09 06:00"}},
		{"SpringForwardUnaffectedTime", "30 3 * * *", "America/New_York", "2026-03-07 12:00",
			[]string{"2026-03-08 07:30", "2026-03-09 07:30"}},
		// Wildcard expressions follow elapsed time: the missing hour has no runs.
		{"SpringForwardWildcardSkipsTheHour", "*/30 * * * *", "America/New_York", "2026-03-08 06:15",
			[]string{"2026-03-08 06:30", "2026-03-08 07:00", "2026-03-08 07:30"}},
		// New York falls back on 2026-11-01 at 02:00 EDT (06:00 UTC) to 01:00
		// EST: 01:30 happens twice and fires the first time only.
		{"FallBackFixedTimeFiresOnce", "30 1 * * *", "America/New_York", "2026-10-31 12:00",
			[]string{"2026-11-01 05:30", "2026-11-02 06:30"}},
		{"FallBackWildcardRunsThroughBothCopies", "0 * * * *", "America/New_York", "2026-11-01 04:30",
			[]string{"2026-11-01 05:00", "2026-11-01 06:00", "2026-11-01 07:00"}},
		// Europe/Berlin falls back on 2026-10-25 at 03:00 CEST (01:00 UTC).
		{"FallBackBerlin", "30 2 * * *", "Europe/Berlin", "2026-10-24 12:00",
			[]string{"2026-10-25 00:30", "2026-10-26 01:30"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			spec, err := Parse(tc.expr, tc.zone)
			require.NoError(t, err)
			require.Equal(t, tc.want, nexts(t, spec, utc(t, tc.from), len(tc.want)))
		})
	}
}

func TestParseRejects(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, expr, zone, msg string
	}{
		{"Empty", "  ", "UTC", "empty cron expression"},
		{"FourFields", "* * * *", "UTC", "has 4 fields; it needs 5"},
		{"SixFields", "0 * * * * *", "UTC", "has 6 fields"},
		{"MinuteOutOfRange", "61 * * * *", "UTC", `cron expression "61 * * * *"`},
		{"UnknownName", "0 0 * * FUNDAY", "UTC", "FUNDAY"},
		{"UnknownDescriptor", "@fortnightly", "UTC", "@fortnightly"},
		{"Every", "@every 5m", "UTC", "@every is not supported"},
		{"ZonePrefix", "CRON_TZ=UTC 0 * * * *", "UTC", "give the time zone separately"},
		{"Never", "0 0 30 2 *", "UTC", "never fires"},
		{"TooLong", strings.Repeat("1,", 120) + "1 * * * *", "UTC", "longer than 200"},
		{"UnknownZone", "* * * * *", "Mars/Olympus_Mons", `unknown time zone "Mars/Olympus_Mons"`},
		{"NoZone", "* * * * *", "", `time zone ""`},
		{"LocalZone", "* * * * *", "Local", `time zone "Local"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse(tc.expr, tc.zone)
			require.ErrorIs(t, err, workflow.ErrInvalidRequest)
			require.ErrorContains(t, err, tc.msg)
		})
	}
}

func TestDueTimes(t *testing.T) {
	t.Parallel()
	every5, err := Parse("*/5 * * * *", "UTC")
	require.NoError(t, err)
	first := utc(t, "2026-01-01 09:00")
	cases := []struct {
		name     string
		spec     *Spec
		now      string
		max      int
		want     []string
		skipped  bool
		wantNext string
	}{
		{"NotDue", every5, "2026-01-01 08:59", 1, nil, false, "2026-01-01 09:00"},
		{"OnTime", every5, "2026-01-01 09:00", 1, []string{"2026-01-01 09:00"}, false, "2026-01-01 09:05"},
		{"Late", every5, "2026-01-01 09:04", 3, []string{"2026-01-01 09:00"}, false, "2026-01-01 09:05"},
		{"TwoDueOneStarted", every5, "2026-01-01 09:05", 1, []string{"2026-01-01 09:05"}, true, "2026-01-01 09:10"},
		{"AllWithinMax", every5, "2026-01-01 09:12", 5,
			[]string{"2026-01-01 09:00", "2026-01-01 09:05", "2026-01-01 09:10"}, false, "2026-01-01 09:15"},
		{"ExactlyMax", every5, "2026-01-01 09:10", 3,
			[]string{"2026-01-01 09:00", "2026-01-01 09:05", "2026-01-01 09:10"}, false, "2026-01-01 09:15"},
		{"LongOutageMostRecent", every5, "2026-03-01 12:07", 3,
			[]string{"2026-03-01 11:55", "2026-03-01 12:00", "2026-03-01 12:05"}, true, "2026-03-01 12:10"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			due, skipped, next := tc.spec.dueTimes(first, utc(t, tc.now), tc.max)
			var got []string
			for _, d := range due {
				got = append(got, d.Format("2006-01-02 15:04"))
			}
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.skipped, skipped)
			require.Equal(t, tc.wantNext, next.Format("2006-01-02 15:04"))
		})
	}

	t.Run("YearOfMinutesIsCheap", func(t *testing.T) {
		t.Parallel()
		minutely, err := Parse("* * * * *", "Europe/Berlin")
		require.NoError(t, err)
		start := time.Now()
		due, skipped, next := minutely.dueTimes(first, first.AddDate(1, 0, 0), MaxCatchupLimit)
		require.Len(t, due, MaxCatchupLimit)
		require.True(t, skipped)
		require.Equal(t, first.AddDate(1, 0, 0), due[len(due)-1])
		require.Equal(t, first.AddDate(1, 0, 0).Add(time.Minute), next)
		require.Less(t, time.Since(start), 5*time.Second, "a window that doubles, not a scan of every minute")
	})
}

func TestInstanceID(t *testing.T) {
	t.Parallel()
	due := time.Date(2026, 3, 14, 2, 0, 0, 0, time.UTC)
	require.Equal(t, "nightly-20260314T020000Z", InstanceIDPrefix("nightly", due))
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	require.Equal(t, "nightly-20260314T020000Z", InstanceIDPrefix("nightly", due.In(berlin)), "always UTC")

	// An id is the prefix and 16 random hex digits: another each time.
	randomEnd := regexp.MustCompile(`^nightly-20260314T020000Z-[0-9a-f]{16}$`)
	seen := map[string]bool{}
	for range 100 {
		id := InstanceID("nightly", due)
		require.Regexp(t, randomEnd, id)
		require.False(t, seen[id], "the id %s came twice", id)
		seen[id] = true
	}

	fits := strings.Repeat("a", workflow.MaxIDLength-17-17)
	require.Equal(t, fits+"-20260314T020000Z", InstanceIDPrefix(fits, due))
	require.Len(t, InstanceID(fits, due), workflow.MaxIDLength)

	long1, long2 := strings.Repeat("b", 100), strings.Repeat("b", 99)+"c"
	id1, id2 := InstanceID(long1, due), InstanceID(long2, due)
	for _, id := range []string{id1, id2} {
		require.Len(t, id, workflow.MaxIDLength)
		require.NoError(t, workflow.ValidateInstanceID(id))
		require.Contains(t, id, "-20260314T020000Z-", id)
	}
	require.NotEqual(t, InstanceIDPrefix(long1, due), InstanceIDPrefix(long2, due), "cut ids keep a hash of the whole schedule id")
	require.NotEqual(t, InstanceIDPrefix("s", due), InstanceIDPrefix("s", due.Add(time.Second)))

	for _, id := range []string{"nightly", "a_b-c", "_x", strings.Repeat("z", 100)} {
		require.NoError(t, ValidateID(id), id)
	}
	for _, id := range []string{"", "-x", "a b", "a/b", strings.Repeat("z", 101), "é"} {
		err := ValidateID(id)
		require.ErrorIs(t, err, workflow.ErrInvalidRequest, id)
		require.ErrorContains(t, err, "schedule id", fmt.Sprint(id))
	}
}
