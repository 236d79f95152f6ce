package benchmarks

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
)

// claimMax is how many tasks one claim of BenchmarkClaim takes, a runner's
// batch.
const claimMax = 16

// BenchmarkClaim measures TaskClaim alone, the hot path of every runner:
// each iteration claims claimMax due tasks from a queue of b.N*claimMax
// pending ones (created before the timer starts), on the default queue.
func BenchmarkClaim(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) { benchmarkClaim(b, be.newStore(b), nil) })
	}
}

// BenchmarkClaimPriorities is BenchmarkClaim with instances of 21
// priorities (-1000 to 1000) on two queues, claimed by a runner serving
// one: the claim walks the pending index in priority order and skips the
// other queue's tasks.
func BenchmarkClaimPriorities(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			benchmarkClaim(b, be.newStore(b), func(i int, item *db.InstanceCreateItem) {
				item.Priority = (i%21 - 10) * 100
				if i%10 == 0 {
					item.Queue = "other"
				}
			})
		})
	}
}

func benchmarkClaim(b *testing.B, store db.Store, place func(i int, item *db.InstanceCreateItem)) {
	ctx := b.Context()
	now := time.Date(2041, 3, 4, 10, 0, 0, 0, time.UTC)
	total := b.N * claimMax
	if place != nil {
		total = total*10/9 + 10 // and the other queue's tenth
	}
	for i := 0; i < total; i += 100 {
		items := make([]db.InstanceCreateItem, min(100, total-i))
		for j := range items {
			items[j].ID = fmt.Sprintf("i%07d", i+j)
			if place != nil {
				place(i+j, &items[j])
			}
		}
		at := now.Add(-time.Duration(total-i) * time.Millisecond)
		_, err := store.InstanceCreateMany(ctx, &db.InstanceCreateManyParams{WorkflowName: "w", Instances: items, Now: &at})
		require.NoError(b, err)
	}
	p := &db.TaskClaimParams{
		Owner: "bench", WorkflowNames: []string{"w"}, Queues: []string{"default"},
		Max: claimMax, Now: now, LockedUntil: now.Add(time.Hour),
	}
	b.ResetTimer()
	for range b.N {
		claims, err := store.TaskClaim(ctx, p)
		if err != nil || len(claims) != claimMax {
			b.Fatalf("claimed %d: %v", len(claims), err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*claimMax)/b.Elapsed().Seconds(), "tasks/s")
}
