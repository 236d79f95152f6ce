package migrations

import (
	"embed"
	"io/fs"
)

//go:embed postgres/*.sql sqlite/*.sql
var embedded embed.FS

// Postgres returns the goose migrations of the PostgreSQL backend, with the
// files at the root of the returned file system.
func Postgres() fs.FS {
	return sub("postgres")
}

// SQLite returns the goose migrations of the SQLite backend, with the files
// at the root of the returned file system.
func SQLite() fs.FS {
	return sub("sqlite")
}

func sub(dir string) fs.FS {
	fsys, err := fs.Sub(embedded, dir)
	if err != nil {
		// fs.Sub fails only on an invalid path, and dir is a valid one.
		panic(err)
	}
	return fsys
}
