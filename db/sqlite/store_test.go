package sqlite_test

import (
	"testing"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/sqlite/sqlitetest"
	"github.com/duraflow/duraflow/db/storetest"
)

func TestStore(t *testing.T) {
	t.Parallel()
	t.Run("Memory", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T) db.Store { return sqlitetest.NewStore(t) })
	})
	t.Run("File", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T) db.Store { return sqlitetest.NewFileStore(t) })
	})
}
