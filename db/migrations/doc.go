// Package migrations embeds the goose SQL migrations of every backend, one
// folder per engine, so that a binary can migrate its database without files
// on disk.
//
// It holds data only: it must not know how migrations are run (that is each
// backend's Migrate) nor anything above the db layer.
package migrations
