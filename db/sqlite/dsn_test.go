package sqlite

import (
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseDSN(t *testing.T) {
	t.Parallel()

	query := func(t *testing.T, dsn string) (string, url.Values) {
		t.Helper()
		name, raw, ok := strings.Cut(dsn, "?")
		require.True(t, ok, dsn)
		q, err := url.ParseQuery(raw)
		require.NoError(t, err)
		return name, q
	}

	t.Run("FilePath", func(t *testing.T) {
		t.Parallel()
		cfg, err := parseDSN("/var/lib/duraflow.db")
		require.NoError(t, err)
		require.False(t, cfg.memory)

		name, write := query(t, cfg.write)
		require.Equal(t, "/var/lib/duraflow.db", name)
		require.Equal(t, "immediate", write.Get("_txlock"))
		require.ElementsMatch(t, []string{"busy_timeout(10000)", "foreign_keys(1)", "journal_mode(WAL)", "synchronous(NORMAL)"}, write["_pragma"])

		name, read := query(t, cfg.read)
		require.Equal(t, "/var/lib/duraflow.db", name)
		require.Empty(t, read.Get("_txlock"))
		require.ElementsMatch(t, []string{"busy_timeout(10000)", "foreign_keys(1)", "query_only(1)"}, read["_pragma"])
	})

	t.Run("UserPragmasWin", func(t *testing.T) {
		t.Parallel()
		cfg, err := parseDSN("file:/data/d.db?_pragma=synchronous(FULL)&_pragma=busy_timeout%3D500&_pragma=cache_size(-20000)&_txlock=deferred&cache=private")
		require.NoError(t, err)
		require.False(t, cfg.memory)

		name, write := query(t, cfg.write)
		require.Equal(t, "file:/data/d.db", name)
		require.Equal(t, "immediate", write.Get("_txlock"), "writes always take the lock up front")
		require.Equal(t, "private", write.Get("cache"))
		require.ElementsMatch(t, []string{"synchronous(FULL)", "busy_timeout=500", "cache_size(-20000)", "foreign_keys(1)", "journal_mode(WAL)"}, write["_pragma"])

		_, read := query(t, cfg.read)
		require.ElementsMatch(t, []string{"busy_timeout=500", "cache_size(-20000)", "foreign_keys(1)", "query_only(1)"}, read["_pragma"])
	})

	t.Run("Memory", func(t *testing.T) {
		t.Parallel()
		for _, dsn := range []string{":memory:", "file::memory:", "file:mem1?mode=memory&cache=shared", ":memory:?_pragma=cache_size(100)"} {
			cfg, err := parseDSN(dsn)
			require.NoError(t, err, dsn)
			require.True(t, cfg.memory, dsn)
			require.Empty(t, cfg.read, "reads share the one connection")
			_, write := query(t, cfg.write)
			require.Equal(t, "immediate", write.Get("_txlock"))
			require.Contains(t, write["_pragma"], "foreign_keys(1)", dsn)
			require.NotContains(t, write["_pragma"], "journal_mode(WAL)", dsn)
		}
	})

	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		_, err := parseDSN("")
		require.Error(t, err)
		_, err = parseDSN("d.db?_pragma=%zz")
		require.Error(t, err)
	})
}
