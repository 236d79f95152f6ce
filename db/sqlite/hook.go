package sqlite

import (
	"context"
	"database/sql"

	"github.com/duraflow/duraflow/db/sqlite/internal/sqlitehook"
)

func init() {
	sqlitehook.WriteDBFunc = func(store any) *sql.DB { return store.(*Store).write }
	sqlitehook.OpenLazyPrepareFunc = func(ctx context.Context, dsn string) (any, error) {
		return open(ctx, dsn, lazyDriverName)
	}
}
