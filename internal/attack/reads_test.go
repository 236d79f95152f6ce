//go:build attack

package attack_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// pagePayloadBytes is the byte budget of a page of instances or history.
const pagePayloadBytes = 4 << 20

// TestReadsHoldTheirByteBudget reads lists and histories whose pages, by
// their page size, would hold far more payload than a page's byte budget
// (a page used to be read, held and answered whole, whatever its rows
// weighed): every page ends once it holds the budget, with a cursor, so an
// answer is at most the budget, one more instance's or event's payload and
// the JSON around them; and the pages together hold every instance and
// event once.
func TestReadsHoldTheirByteBudget(t *testing.T) {
	t.Parallel()
	for _, s := range backends(t) {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			const n, size = 24, 300 << 10
			name := strings.Repeat("x", size)
			for i := range n {
				r := s.call(t, http.MethodPost, "/api/workflows/hello/instances", fmt.Sprintf(`{"id":"big-%02d","params":{"name":%q}}`, i, name))
				require.Equal(t, http.StatusCreated, r.status, "body: %.300s", r.body)
			}
			// hello copies its name into a step result and its output: an
			// instance holds about 600 KiB of payload once it ran.
			for i := range n {
				s.waitSettled(t, "hello", fmt.Sprintf("big-%02d", i), time.Minute)
			}
			const perInstance = 2*size + 1<<10
			for _, path := range []string{"/api/workflows/hello/instances?pageSize=1000", "/api/instances?pageSize=1000"} {
				seen := map[string]bool{}
				next := path
				for pages := 0; next != ""; pages++ {
					require.Less(t, pages, n+1, "pagination does not end")
					r := s.call(t, http.MethodGet, next, "")
					require.Equal(t, http.StatusOK, r.status, "body: %.300s", r.body)
					require.LessOrEqual(t, len(r.body), pagePayloadBytes+perInstance+n*(2<<10), "a page of %d bytes", len(r.body))
					var page struct {
						Instances []struct {
							ID string `json:"id"`
						} `json:"instances"`
						Cursor      string `json:"cursor"`
						HasNextPage bool   `json:"hasNextPage"`
					}
					require.NoError(t, json.Unmarshal(r.body, &page))
					require.NotEmpty(t, page.Instances)
					for _, in := range page.Instances {
						require.False(t, seen[in.ID], "instance %s on two pages", in.ID)
						seen[in.ID] = true
					}
					require.Equal(t, page.Cursor != "", page.HasNextPage)
					next = ""
					if page.HasNextPage {
						next = path + "&cursor=" + url.QueryEscape(page.Cursor)
					}
				}
				require.Len(t, seen, n, path)
			}

			// An instance with 40 events of 300 KiB: its history pages.
			id := newApproval(t, s)
			payload := fmt.Sprintf("%q", name)
			for range 40 {
				r := s.call(t, http.MethodPost, "/api/workflows/approval/instances/"+id+"/events", `{"type":"note","payload":`+payload+`}`)
				require.Equal(t, http.StatusAccepted, r.status, "body: %.300s", r.body)
			}
			events := 0
			path := "/api/workflows/approval/instances/" + id + "/history?pageSize=1000"
			next := path
			for pages := 0; next != ""; pages++ {
				require.Less(t, pages, 41, "pagination does not end")
				r := s.call(t, http.MethodGet, next, "")
				require.Equal(t, http.StatusOK, r.status, "body: %.300s", r.body)
				require.LessOrEqual(t, len(r.body), pagePayloadBytes+size+64<<10, "a history page of %d bytes", len(r.body))
				var page struct {
					Events      []json.RawMessage `json:"events"`
					Cursor      string            `json:"cursor"`
					HasNextPage bool              `json:"hasNextPage"`
				}
				require.NoError(t, json.Unmarshal(r.body, &page))
				events += len(page.Events)
				next = ""
				if page.HasNextPage {
					next = path + "&cursor=" + url.QueryEscape(page.Cursor)
				}
			}
			require.Equal(t, 40, events)
			s.requireHealthy(t)
		})
	}
}
