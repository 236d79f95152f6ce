package schedule_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/duraflow/duraflow/schedule"
)

// Fixed-time expressions fire once per day across daylight-saving changes:
// 02:30 does not exist in New York on 8 March 2026 and fires at 03:00, the
// moment of the change.
func ExampleParse() {
	spec, err := schedule.Parse("30 2 * * *", "America/New_York")
	if err != nil {
		panic(err)
	}
	ny, _ := time.LoadLocation("America/New_York")
	t := time.Date(2026, 3, 6, 12, 0, 0, 0, ny)
	for range 3 {
		t = spec.Next(t)
		fmt.Println(t.In(ny).Format("Mon 2006-01-02 15:04 MST"))
	}
	// Output:
	// Sat 2026-03-07 02:30 EST
	// Sun 2026-03-08 03:00 EDT
	// Mon 2026-03-09 02:30 EDT
}

func ExampleInstanceIDPrefix() {
	due := time.Date(2026, 3, 14, 1, 0, 0, 0, time.UTC)
	fmt.Println(schedule.InstanceIDPrefix("nightly", due))
	id := schedule.InstanceID("nightly", due)
	fmt.Println(len(id), strings.HasPrefix(id, schedule.InstanceIDPrefix("nightly", due)+"-"))
	// Output:
	// nightly-20260314T010000Z
	// 41 true
}
