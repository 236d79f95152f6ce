package storetest

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
)

// flowDef returns a definition of flow id at version, written with odd
// spacing, key order and escapes so that a store that normalizes JSON is
// caught.
func flowDef(id, version string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{ "version" : %q,"id":%q,
	"initialStepId":"a",  "name":"Caf\u00e9 \"flow\"", "steps":{"a":{"id":"a","type":"set","config":{"values":{"n":{"value":1.50}}}}} }`,
		version, id))
}

func (b *testBundle) putFlow(t *testing.T, id, version string, at time.Duration) *db.FlowPutResult {
	t.Helper()
	res, err := b.store.FlowPut(b.ctx, &db.FlowPutParams{
		ID: id, Version: version, Name: "flow " + id, Definition: flowDef(id, version), Now: new(b.at(at)),
	})
	require.NoError(t, err)
	return res
}

func flowVersions(list []*db.Flow) []string {
	out := make([]string, len(list))
	for i, f := range list {
		out[i] = f.Version
	}
	return out
}

func testFlow(t *testing.T, newStore func(t *testing.T) db.Store) {
	t.Run("PutAndGetKeepTheDefinitionByteForByte", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		res := b.putFlow(t, "order", "1.0.0", 0)
		require.True(t, res.Created)
		require.Equal(t, "1.0.0", res.Latest)
		require.Equal(t, "order", res.Flow.ID)
		require.Equal(t, "1.0.0", res.Flow.Version)
		require.Equal(t, "flow order", res.Flow.Name)
		require.Equal(t, string(flowDef("order", "1.0.0")), string(res.Flow.Definition))
		require.Equal(t, b.now, res.Flow.CreatedAt)

		got, err := b.store.FlowGet(b.ctx, db.FlowRef{ID: "order", Version: "1.0.0"})
		require.NoError(t, err)
		require.Equal(t, string(flowDef("order", "1.0.0")), string(got.Definition))
		require.Equal(t, b.now, got.CreatedAt)
		require.Equal(t, "flow order", got.Name)

		latest, err := b.store.FlowGet(b.ctx, db.FlowRef{ID: "order"})
		require.NoError(t, err)
		require.Equal(t, got, latest)
	})

	t.Run("PutOfAnIdenticalVersionIsANoOp", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		first := b.putFlow(t, "order", "1.0.0", 0)
		again := b.putFlow(t, "order", "1.0.0", time.Hour)
		require.False(t, again.Created)
		require.Equal(t, first.Flow, again.Flow, "the stored version, with its first creation time")
		require.Equal(t, "1.0.0", again.Latest)
		versions, err := b.store.FlowVersions(b.ctx, "order")
		require.NoError(t, err)
		require.Len(t, versions, 1)
	})

	t.Run("PutOfAChangedDefinitionConflicts", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.putFlow(t, "order", "1.0.0", 0)
		for _, def := range []string{
			`{"id":"order","version":"1.0.0","initialStepId":"b","steps":{}}`,
			// The same JSON spelled differently is a different definition
			// to the store: it compares bytes.
			string(flowDef("order", "1.0.0")) + " ",
		} {
			_, err := b.store.FlowPut(b.ctx, &db.FlowPutParams{
				ID: "order", Version: "1.0.0", Definition: json.RawMessage(def), Now: new(b.at(time.Minute)),
			})
			require.ErrorIs(t, err, db.ErrFlowVersionConflict)
		}
		got, err := b.store.FlowGet(b.ctx, db.FlowRef{ID: "order", Version: "1.0.0"})
		require.NoError(t, err)
		require.Equal(t, string(flowDef("order", "1.0.0")), string(got.Definition), "the stored version is unchanged")
	})

	t.Run("LatestIsOrderedBySemanticVersion", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		steps := []struct {
			put, latest string
		}{
			{"1.9.0", "1.9.0"},
			{"1.10.0", "1.10.0"}, // not "1.10.0" < "1.9.0" as strings
			{"1.2.0", "1.10.0"},  // an older version put later
			{"2.0.0-rc.1", "1.10.0"},
			{"1.10.1-beta", "1.10.0"}, // releases win over pre-releases
			{"2.0.0", "2.0.0"},
			{"10.0.0-alpha", "2.0.0"},
		}
		for i, s := range steps {
			res := b.putFlow(t, "order", s.put, time.Duration(i)*time.Minute)
			require.True(t, res.Created)
			require.Equal(t, s.latest, res.Latest, "after putting %s", s.put)
			latest, err := b.store.FlowGet(b.ctx, db.FlowRef{ID: "order"})
			require.NoError(t, err)
			require.Equal(t, s.latest, latest.Version, "after putting %s", s.put)
			require.Equal(t, string(flowDef("order", s.latest)), string(latest.Definition))
		}
		versions, err := b.store.FlowVersions(b.ctx, "order")
		require.NoError(t, err)
		require.Equal(t, []string{"1.2.0", "1.9.0", "1.10.0", "1.10.1-beta", "2.0.0-rc.1", "2.0.0", "10.0.0-alpha"}, flowVersions(versions))
		for _, v := range versions {
			require.Nil(t, v.Definition, "lists leave definitions out")
			require.Equal(t, "order", v.ID)
			require.Equal(t, "flow order", v.Name)
		}
		require.Equal(t, b.now, versions[1].CreatedAt)

		// With only pre-releases, the highest of them is the latest, until a
		// release comes, whatever its number.
		for _, s := range []struct{ put, latest string }{
			{"1.0.0-alpha", "1.0.0-alpha"},
			{"1.0.0-alpha.10", "1.0.0-alpha.10"},
			{"1.0.0-alpha.9", "1.0.0-alpha.10"},
			{"1.0.0-beta", "1.0.0-beta"},
			{"0.1.0", "0.1.0"},
		} {
			require.Equal(t, s.latest, b.putFlow(t, "pre", s.put, 0).Latest, "after putting %s", s.put)
		}
	})

	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.putFlow(t, "order", "1.0.0", 0)
		for _, ref := range []db.FlowRef{{ID: "nope"}, {ID: "nope", Version: "1.0.0"}, {ID: "order", Version: "1.0.1"}} {
			_, err := b.store.FlowGet(b.ctx, ref)
			require.ErrorIs(t, err, db.ErrNotFound, "%+v", ref)
		}
		versions, err := b.store.FlowVersions(b.ctx, "nope")
		require.NoError(t, err)
		require.Empty(t, versions)
	})

	t.Run("ListPagesThroughFlowsAtTheirLatestVersion", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		list, err := b.store.FlowList(b.ctx, &db.FlowListParams{})
		require.NoError(t, err)
		require.Empty(t, list)

		b.putFlow(t, "c-flow", "1.0.0", 0)
		b.putFlow(t, "a-flow", "1.9.0", 0)
		b.putFlow(t, "a-flow", "1.10.0", time.Minute)
		b.putFlow(t, "a-flow", "1.3.0", 2*time.Minute)
		b.putFlow(t, "b-flow", "0.1.0-rc.1", 0)
		b.putFlow(t, "d-flow", "3.0.0", 0)

		var (
			got   []string
			after string
		)
		for {
			page, err := b.store.FlowList(b.ctx, &db.FlowListParams{AfterID: after, Limit: 3})
			require.NoError(t, err)
			for _, f := range page {
				require.Nil(t, f.Definition)
				require.Equal(t, "flow "+f.ID, f.Name)
				got = append(got, f.ID+"@"+f.Version)
			}
			if len(page) < 3 {
				break
			}
			after = page[len(page)-1].ID
		}
		require.Equal(t, []string{"a-flow@1.10.0", "b-flow@0.1.0-rc.1", "c-flow@1.0.0", "d-flow@3.0.0"}, got)

		all, err := b.store.FlowList(b.ctx, &db.FlowListParams{})
		require.NoError(t, err)
		require.Len(t, all, 4)
		require.Equal(t, b.at(time.Minute), all[0].CreatedAt, "the creation time of the latest version")
	})

	t.Run("ConcurrentPutsOfOneFlow", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		versions := []string{"1.0.0", "1.2.0", "1.10.0", "1.9.3", "2.0.0-rc.1", "0.9.0", "1.11.0", "1.10.2"}
		const copies = 3 // each version put three times at once
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			created = map[string]int{}
			errs    = make(chan error, len(versions)*copies)
		)
		for _, v := range versions {
			for range copies {
				wg.Go(func() {
					res, err := b.store.FlowPut(b.ctx, &db.FlowPutParams{
						ID: "race", Version: v, Definition: flowDef("race", v), Now: new(b.now),
					})
					if err != nil {
						errs <- err
						return
					}
					if res.Created {
						mu.Lock()
						created[v]++
						mu.Unlock()
					}
				})
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		for _, v := range versions {
			require.Equal(t, 1, created[v], "version %s is created exactly once", v)
		}
		latest, err := b.store.FlowGet(b.ctx, db.FlowRef{ID: "race"})
		require.NoError(t, err)
		require.Equal(t, "1.11.0", latest.Version)
		stored, err := b.store.FlowVersions(b.ctx, "race")
		require.NoError(t, err)
		require.Equal(t, []string{"0.9.0", "1.0.0", "1.2.0", "1.9.3", "1.10.0", "1.10.2", "1.11.0", "2.0.0-rc.1"}, flowVersions(stored))
	})

	t.Run("DatabaseClock", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		res, err := b.store.FlowPut(b.ctx, &db.FlowPutParams{ID: "clock", Version: "1.0.0", Definition: flowDef("clock", "1.0.0")})
		require.NoError(t, err)
		require.WithinDuration(t, time.Now(), res.Flow.CreatedAt, time.Minute, "without Now, the database clock")
	})
}
