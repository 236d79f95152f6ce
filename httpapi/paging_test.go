package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/schedule"
	"github.com/duraflow/duraflow/testharness"
)

// walkPages follows a list route one item a page (pageSize=1, or the
// deprecated alias given as sizeParam) and checks the paging shape of every
// page: "cursor" and "hasNextPage": true on every page but the last, which
// has neither a cursor nor "hasNextPage": true, and never "nextCursor". It
// returns how many items the pages held under key.
func walkPages(t *testing.T, b *testBundle, path, key, sizeParam string) int {
	t.Helper()
	n, cursor := 0, ""
	for range 100 {
		q := url.Values{sizeParam: {"1"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		r := b.call(t, http.MethodGet, path+sep+q.Encode(), "")
		var page map[string]json.RawMessage
		r.requireOK(t, http.StatusOK, &page)
		require.NotContains(t, page, "nextCursor", "%s: %s", path, r.body)
		var items []json.RawMessage
		require.NoError(t, json.Unmarshal(page[key], &items), "%s: %s", path, r.body)
		n += len(items)
		var more bool
		require.NoError(t, json.Unmarshal(page["hasNextPage"], &more), "%s: %s", path, r.body)
		if !more {
			require.NotContains(t, page, "cursor", "%s: %s", path, r.body)
			return n
		}
		require.NoError(t, json.Unmarshal(page["cursor"], &cursor), "%s: %s", path, r.body)
		require.NotEmpty(t, cursor, "%s: %s", path, r.body)
	}
	require.FailNow(t, "too many pages", path)
	return 0
}

// TestEveryListPagesOneWay: instances, history, schedules, flows and
// workers all page with the pageSize and cursor parameters and answer
// cursor and hasNextPage.
func TestEveryListPagesOneWay(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setupOn(t, backend, "", withSchedules(t, nil), withFlows(t, nil))
		for i := range 3 {
			_, err := b.api.Create(b.ctx, "greet", dftype.CreateRequest{ID: fmt.Sprintf("p-%d", i)})
			require.NoError(t, err)
			_, err = b.api.CreateSchedule(b.ctx, schedule.CreateRequest{ID: fmt.Sprintf("s-%d", i), WorkflowName: "greet", Cron: "@hourly"})
			require.NoError(t, err)
			b.call(t, "POST", "/api/flows", strings.Replace(doubler("1.0.0"), `"doubler"`, fmt.Sprintf(`"doubler-%d"`, i), 1)).
				requireOK(t, http.StatusCreated, nil)
			registerWorker(t, b, fmt.Sprintf("w-%d", i), "default")
		}
		_, err := b.api.Create(b.ctx, "steps", dftype.CreateRequest{ID: "h"})
		require.NoError(t, err)
		b.h.RunUntilIdle()

		require.Equal(t, 3, walkPages(t, b, "/api/workflows/greet/instances", "instances", "pageSize"))
		require.Equal(t, 3, walkPages(t, b, "/api/workflows/greet/instances?status=complete&queue=default", "instances", "pageSize"))
		require.Equal(t, numSteps, walkPages(t, b, "/api/workflows/steps/instances/h/history", "steps", "pageSize"))
		require.Equal(t, 3, walkPages(t, b, "/api/schedules", "schedules", "pageSize"))
		require.Equal(t, 3, walkPages(t, b, "/api/flows", "flows", "pageSize"))
		require.Equal(t, 3, walkPages(t, b, "/api/workers", "workers", "pageSize"))
		// limit is the deprecated alias of pageSize on the workers route.
		require.Equal(t, 3, walkPages(t, b, "/api/workers", "workers", "limit"))
	})
}
