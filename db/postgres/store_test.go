package postgres_test

import (
	"testing"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres/pgtest"
	"github.com/duraflow/duraflow/db/storetest"
)

func TestStore(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) db.Store { return pgtest.NewStore(t) })
}
