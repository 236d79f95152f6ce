package sqlite_test

import (
	"context"
	"fmt"
	"log"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/sqlite"
)

func ExampleOpen() {
	ctx := context.Background()
	// A file path gives a durable database; ":memory:" one that lives as
	// long as the store.
	store, err := sqlite.Open(ctx, ":memory:")
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	if err := sqlite.Migrate(ctx, store); err != nil {
		log.Fatal(err)
	}

	created, err := store.InstanceCreate(ctx, &db.InstanceCreateParams{WorkflowName: "billing", ID: "inv-1"})
	if err != nil {
		log.Fatal(err)
	}
	inst := created.Instance
	fmt.Println(inst.ID, inst.Status, inst.RunNumber)
	// Output: inv-1 queued 1
}
