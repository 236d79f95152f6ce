package sqlite

import (
	"errors"
	"net/url"
	"strings"
)

// pragma is a per-connection setting Open adds to a DSN unless the DSN sets
// that pragma itself.
type pragma struct {
	name, value string
	// fileOnly pragmas mean nothing for an in-memory database.
	fileOnly bool
	// writeOnly pragmas are set on the write connection only. The write
	// connection is opened first, and journal_mode is a property of the file,
	// so read connections find it set.
	writeOnly bool
}

// defaultPragmas are the settings of every connection; see the package
// documentation for why.
var defaultPragmas = []pragma{
	{name: "busy_timeout", value: "10000"},
	{name: "foreign_keys", value: "1"},
	{name: "journal_mode", value: "WAL", fileOnly: true, writeOnly: true},
	{name: "synchronous", value: "NORMAL", fileOnly: true, writeOnly: true},
}

// dsnConfig is what Open derives from the caller's DSN.
type dsnConfig struct {
	// memory is set for an in-memory database, which lives on one
	// connection that reads and writes.
	memory bool
	// write is the DSN of the single write connection.
	write string
	// read is the DSN of the read-only pool; empty when memory is set.
	read string
}

// parseDSN accepts a file path, ":memory:", or a "file:" URI, each with
// optional query parameters of modernc.org/sqlite (_pragma, _time_format,
// ...) and, for URIs, of SQLite (mode, cache, vfs, ...). It adds the default
// pragmas the DSN does not set, makes write transactions BEGIN IMMEDIATE and
// read connections query-only.
func parseDSN(dsn string) (*dsnConfig, error) {
	if dsn == "" {
		return nil, errors.New(`empty DSN: name a database file, a "file:" URI or ":memory:"`)
	}
	name, rawQuery, _ := strings.Cut(dsn, "?")
	query, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, err
	}
	cfg := &dsnConfig{
		memory: name == ":memory:" || name == "file::memory:" ||
			strings.HasPrefix(name, "file:") && query.Get("mode") == "memory",
	}

	userPragmas := query["_pragma"]
	for _, p := range defaultPragmas {
		if p.fileOnly && cfg.memory || setsPragma(userPragmas, p.name) {
			continue
		}
		query.Add("_pragma", p.name+"("+p.value+")")
	}
	write := cloneValues(query)
	write.Set("_txlock", "immediate")
	cfg.write = name + "?" + write.Encode()
	if cfg.memory {
		return cfg, nil
	}

	read := cloneValues(query)
	read.Del("_txlock")
	read["_pragma"] = nil
	for _, v := range query["_pragma"] {
		if !isWriteOnly(v) {
			read.Add("_pragma", v)
		}
	}
	read.Add("_pragma", "query_only(1)")
	cfg.read = name + "?" + read.Encode()
	return cfg, nil
}

// setsPragma reports whether one of the _pragma values sets the named
// pragma: "name(value)", "name=value" or "name = value".
func setsPragma(values []string, name string) bool {
	for _, v := range values {
		if pragmaName(v) == name {
			return true
		}
	}
	return false
}

// isWriteOnly reports whether the _pragma value is a default that only the
// write connection sets.
func isWriteOnly(value string) bool {
	name := pragmaName(value)
	for _, p := range defaultPragmas {
		if p.writeOnly && p.name == name {
			return true
		}
	}
	return false
}

func pragmaName(value string) string {
	name, _, _ := strings.Cut(value, "(")
	name, _, _ = strings.Cut(name, "=")
	return strings.ToLower(strings.TrimSpace(name))
}

func cloneValues(v url.Values) url.Values {
	out := make(url.Values, len(v))
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}
