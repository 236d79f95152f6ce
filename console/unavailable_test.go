package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/console"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/sqlite/sqlitetest"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/internal/backoff"
	"github.com/duraflow/duraflow/internal/outagetest"
	"github.com/duraflow/duraflow/testharness"
)

// onStore is a backend whose store is the one given.
func onStore(name string, store db.Store) testharness.Backend {
	return testharness.Backend{Name: name, NewStore: func(testing.TB) db.Store { return store }}
}

// requireUnavailablePage requires the database unavailable page: 503,
// Retry-After, the code and a message that names no part of the database.
func requireUnavailablePage(t *testing.T, a *answer) {
	t.Helper()
	a.requireStatus(t, http.StatusServiceUnavailable)
	require.Equal(t, "1", a.header.Get("Retry-After"))
	require.Contains(t, a.body, `<h2 id="error-title">Database unavailable</h2>`)
	require.Contains(t, a.body, `<code id="error-code">DATABASE_UNAVAILABLE</code>`)
	require.Contains(t, a.body, "reload this page in a moment")
	require.Contains(t, a.body, "<title>Database unavailable")
	require.NotContains(t, a.body, "127.0.0.1")
	require.NotContains(t, a.body, "SQLITE")
}

// TestDatabaseUnavailablePage takes the console's database away: a form
// that writes (and, on Postgres, every page) answers the database
// unavailable page with 503, never the internal error page; once the
// database is back the same pages and forms work.
func TestDatabaseUnavailablePage(t *testing.T) {
	t.Parallel()
	outagetest.ForEachBackend(t, func(t *testing.T, d *outagetest.DB) {
		b := setup(t, onStore(d.Name, d.Store))
		b.create(t, "approve", "a1")
		b.h.RunUntilIdle()
		br := b.browser(t)
		form := url.Values{"action": {"pause"}}
		confirm := br.get("/ui/instances/approve/a1/confirm?"+form.Encode()).requireStatus(t, http.StatusOK)
		form.Set("csrf", csrfRE.FindStringSubmatch(confirm.body)[1])

		d.Down(t)
		requireUnavailablePage(t, br.post("/ui/instances/approve/a1/action", form))
		if d.ReadsFail {
			for _, page := range []string{"/ui/", "/ui/instances", "/ui/instances/approve/a1", "/ui/workers"} {
				requireUnavailablePage(t, br.get(page))
			}
		}

		d.Up(t)
		br.get("/ui/instances/approve/a1").requireStatus(t, http.StatusOK)
		done := br.post("/ui/instances/approve/a1/action", form)
		require.Equal(t, http.StatusSeeOther, done.status, "body: %s", done.body)
		b.h.RequireStatus("approve", "a1", dftype.StatusPaused)
	})
}

// failingStore fails the next reads of one instance (InstanceGet) with
// db.ErrUnavailable, counting them.
type failingStore struct {
	db.Store
	failures, gets atomic.Int32
}

func (s *failingStore) InstanceGet(ctx context.Context, ref db.InstanceRef) (*db.Instance, error) {
	s.gets.Add(1)
	if s.failures.Add(-1) >= 0 {
		return nil, fmt.Errorf("%w: dial tcp 127.0.0.1:5432: connect: connection refused", db.ErrUnavailable)
	}
	return s.Store.InstanceGet(ctx, ref)
}

// TestPagesAreTriedAgain fails an instance's reads: a page that meets
// fewer failures than backoff.RequestAttempts renders, one that meets as
// many answers the database unavailable page after that many tries.
func TestPagesAreTriedAgain(t *testing.T) {
	t.Parallel()
	store := &failingStore{Store: sqlitetest.NewStore(t)}
	b := setupWith(t, onStore("failing", store), func(*console.Config) {})
	b.create(t, "greet", "g1")
	br := b.browser(t)

	store.gets.Store(0)
	store.failures.Store(backoff.RequestAttempts - 1)
	br.get("/ui/instances/greet/g1").requireStatus(t, http.StatusOK)
	require.Equal(t, int32(backoff.RequestAttempts), store.gets.Load())

	store.gets.Store(0)
	store.failures.Store(backoff.RequestAttempts)
	requireUnavailablePage(t, br.get("/ui/instances/greet/g1"))
	require.Equal(t, int32(backoff.RequestAttempts), store.gets.Load())
}
