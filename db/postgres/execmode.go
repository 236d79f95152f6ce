package postgres

import (
	"fmt"

	"github.com/jackc/pgx/v5"
)

// checkExecMode refuses the query exec modes (pgx's default_query_exec_mode
// of the URL, or ConnConfig.DefaultQueryExecMode) the store cannot run in:
// exec and simple_protocol encode each parameter in text by its Go type,
// without asking the server its type, and the store's JSON parameters are
// bytes, which they send as bytea: every write with a JSON value would fail
// as invalid JSON. The other modes learn the parameter types from the
// server: cache_statement (pgx's default) prepares named statements, which
// need a connection of their own; cache_describe and describe_exec use the
// unnamed statement only, and cache_describe sends each statement in one
// message sequence, which poolers in transaction mode keep on one server
// connection (see "Behind PgBouncer" in docs/operations.md).
func checkExecMode(conf *pgx.ConnConfig) error {
	var name string
	switch conf.DefaultQueryExecMode {
	case pgx.QueryExecModeExec:
		name = "exec"
	case pgx.QueryExecModeSimpleProtocol:
		name = "simple_protocol"
	default:
		return nil
	}
	return fmt.Errorf("postgres: default_query_exec_mode=%s is not supported: it sends JSON parameters as bytea; "+
		"use cache_statement (the default) on a direct connection, or cache_describe behind a pooler in transaction mode "+
		"(see \"Behind PgBouncer\" in docs/operations.md)", name)
}
