package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/sqlite/sqlitetest"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/internal/backoff"
	"github.com/duraflow/duraflow/internal/outagetest"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// onStore is a backend whose store is the one given.
func onStore(name string, store db.Store) testharness.Backend {
	return testharness.Backend{Name: name, NewStore: func(testing.TB) db.Store { return store }}
}

// unavailableCall sends a request through a validator of the served
// document and requires 503 DATABASE_UNAVAILABLE with Retry-After and a
// message that names no part of the database.
func unavailableCall(t *testing.T, v *validator, b *testBundle, method, path, body string) {
	t.Helper()
	req, err := http.NewRequestWithContext(b.ctx, method, b.srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := (&http.Client{Transport: v}).Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	ex := v.last
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s %s: %s", method, path, ex.body)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	var e apiclient.ErrorResponse
	require.NoError(t, json.Unmarshal(ex.body, &e))
	require.Equal(t, apiclient.CodeDatabaseUnavailable, e.Error.Code)
	require.Equal(t, "the database is unavailable; try again shortly", e.Error.Message, "the cause stays in the server")
	require.NoError(t, ex.reqErr)
	require.NoError(t, ex.respErr, "the document has the answer: %s", ex.body)
}

// TestAnswersDatabaseUnavailable takes the server's database away: writes
// (and, on Postgres, reads) answer 503 DATABASE_UNAVAILABLE with
// Retry-After, as the document says, never 500; once the database is back
// the same requests succeed.
func TestAnswersDatabaseUnavailable(t *testing.T) {
	t.Parallel()
	outagetest.ForEachBackend(t, func(t *testing.T, d *outagetest.DB) {
		b := setupOn(t, onStore(d.Name, d.Store), adminToken, withTokens(conformanceTokens()...))
		v := newValidator(t, b.server.OpenAPI(), b.srv.Client().Transport)
		ctx := b.ctx
		_, err := b.api.Create(ctx, "greet", dftype.CreateRequest{ID: "before"})
		require.NoError(t, err)

		d.Down(t)
		unavailableCall(t, v, b, "POST", "/api/workflows/greet/instances", `{"id":"during"}`)
		unavailableCall(t, v, b, "POST", "/api/workflows/greet/instances/before/pause", "")
		if d.ReadsFail {
			unavailableCall(t, v, b, "GET", "/api/workflows/greet/instances/before", "")
			unavailableCall(t, v, b, "GET", "/api/workflows/greet/instances", "")
			unavailableCall(t, v, b, "GET", "/api/instances", "")
		}

		d.Up(t)
		_, err = b.api.Create(ctx, "greet", dftype.CreateRequest{ID: "after"})
		require.NoError(t, err)
		_, err = b.api.Get(ctx, "greet", "before")
		require.NoError(t, err)
		_, err = b.api.Get(ctx, "greet", "during")
		require.ErrorIs(t, err, workflow.ErrInstanceNotFound, "the refused create wrote nothing")
	})
}

// failingStore fails the next reads of one instance (InstanceGet) and
// every create with db.ErrUnavailable, counting the calls.
type failingStore struct {
	db.Store
	getFailures        atomic.Int32
	gets, createsTried atomic.Int32
	createsFail        atomic.Bool
}

var errDown = fmt.Errorf("%w: dial tcp 127.0.0.1:5432: connect: connection refused", db.ErrUnavailable)

func (s *failingStore) InstanceGet(ctx context.Context, ref db.InstanceRef) (*db.Instance, error) {
	s.gets.Add(1)
	if s.getFailures.Add(-1) >= 0 {
		return nil, errDown
	}
	return s.Store.InstanceGet(ctx, ref)
}

func (s *failingStore) InstanceCreate(ctx context.Context, p *db.InstanceCreateParams) (db.CreateResult, error) {
	if s.createsFail.Load() {
		s.createsTried.Add(1)
		return db.CreateResult{}, errDown
	}
	return s.Store.InstanceCreate(ctx, p)
}

// TestReadsAreTriedAgain fails an instance's reads: a GET that meets fewer
// failures than backoff.RequestAttempts answers 200, one that meets as
// many answers 503 after that many tries, and a write is tried once.
func TestReadsAreTriedAgain(t *testing.T) {
	t.Parallel()
	store := &failingStore{Store: sqlitetest.NewStore(t)}
	b := setupOn(t, onStore("failing", store), "")
	ctx := b.ctx
	_, err := b.api.Create(ctx, "greet", dftype.CreateRequest{ID: "g"})
	require.NoError(t, err)

	store.gets.Store(0)
	store.getFailures.Store(backoff.RequestAttempts - 1)
	_, err = b.api.Get(ctx, "greet", "g")
	require.NoError(t, err, "a short outage costs a read some time, not an error")
	require.Equal(t, int32(backoff.RequestAttempts), store.gets.Load())

	store.gets.Store(0)
	store.getFailures.Store(backoff.RequestAttempts)
	_, err = b.api.Get(ctx, "greet", "g")
	require.ErrorIs(t, err, &apiclient.APIError{Code: apiclient.CodeDatabaseUnavailable})
	require.ErrorIs(t, err, db.ErrUnavailable, "the client's error matches the store's sentinel")
	require.Equal(t, int32(backoff.RequestAttempts), store.gets.Load())

	store.createsFail.Store(true)
	_, err = b.api.Create(ctx, "greet", dftype.CreateRequest{ID: "w"})
	require.ErrorIs(t, err, &apiclient.APIError{Code: apiclient.CodeDatabaseUnavailable})
	require.Equal(t, int32(1), store.createsTried.Load(), "a write is never repeated: its answer may have been lost after its commit")
}

func TestOpenAPIDocumentsDatabaseUnavailable(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t, httpapi.OpenAPIDocument())
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.Security != nil && len(*op.Security) == 0 {
				continue // health: no database behind
			}
			resp := op.Responses.Status(http.StatusServiceUnavailable)
			require.NotNil(t, resp, "%s %s documents 503", method, path)
			require.Contains(t, *resp.Value.Description, string(apiclient.CodeDatabaseUnavailable), "%s %s", method, path)
			require.Contains(t, resp.Value.Headers, "Retry-After", "%s %s", method, path)
		}
	}
}

// TestLifecycleStreamOutlivesAnOutage keeps a lifecycle stream open while
// the database is down: the stream reads again with backoff instead of
// ending (an EventSource would not reconnect past the 503 a new request
// meets), and delivers the events committed once the database is back.
// Only Postgres refuses reads.
func TestLifecycleStreamOutlivesAnOutage(t *testing.T) {
	t.Parallel()
	d := outagetest.Postgres(t)
	log := outagetest.NewLog()
	b := setupOn(t, onStore(d.Name, d.Store), "", func(c *httpapi.Config, _ *testharness.Harness) { c.Logger = log.Logger() })
	s := openStream(t, b, "/api/events/stream?workflow=greet&type=instance.created")

	d.Down(t)
	log.Wait(t, "httpapi: lifecycle stream: database unavailable; retrying with backoff")
	d.Up(t)
	_, err := b.api.Create(b.ctx, "greet", dftype.CreateRequest{ID: "after"})
	require.NoError(t, err)
	require.Equal(t, "after", s.next(t).InstanceID)
}
