package cli_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/cli"
)

// TestQueuesAndNamespacesFromTheCommandLine: dev serves only --queues; the
// client commands create on a queue with a priority and a dedupe key, list
// by queue, and act in --namespace.
func TestQueuesAndNamespacesFromTheCommandLine(t *testing.T) {
	t.Parallel()
	s := startServer(t, []string{"dev", "--db", sqliteDB(t), "--queues", "default,fast"})
	c := s.client(t)

	// Served queues run; another waits, shown with its queue.
	c.run(cli.ExitOK, "instances", "create", "hello", "f1", "--queue", "fast", "--priority", "7", "--dedupe-key", "k1")
	c.waitStatus("hello", "f1", "complete")
	r := c.run(cli.ExitOK, "instances", "create", "hello", "s1", "--queue", "slow", "--wait", "0")
	require.Regexp(t, `(?m)^Queue:\s+slow$`, r.stdout)
	require.Regexp(t, `(?m)^Status:\s+queued$`, r.stdout)
	// get and list say that no online worker serves it (the create's
	// answer does not look).
	r = c.run(cli.ExitOK, "instances", "get", "hello", "s1")
	require.Regexp(t, `(?m)^Queue:\s+slow \(no online worker serves it\)$`, r.stdout)
	r = c.run(cli.ExitOK, "instances", "list", "hello", "--queue", "slow")
	require.Contains(t, r.stdout, "slow (unserved)")

	var info map[string]any
	c.json(&info, "instances", "get", "hello", "f1")
	require.Equal(t, "fast", info["queue"])
	require.EqualValues(t, 7, info["priority"])
	require.Equal(t, "k1", info["dedupeKey"])
	require.Equal(t, "default", info["namespace"])
	require.Nil(t, info["unserved"], "a complete instance is not marked")
	c.json(&info, "instances", "get", "hello", "s1")
	require.Equal(t, true, info["unserved"], "no online worker serves queue slow")

	var list struct{ Instances []struct{ ID string } }
	c.json(&list, "instances", "list", "hello", "--queue", "slow")
	require.Len(t, list.Instances, 1)
	require.Equal(t, "s1", list.Instances[0].ID)

	// An active holder of a dedupe key answers instead of a new instance.
	c.run(cli.ExitOK, "instances", "create", "hello", "s2", "--queue", "slow", "--dedupe-key", "k2", "--wait", "0")
	r = c.run(cli.ExitOK, "instances", "create", "hello", "s3", "--queue", "slow", "--dedupe-key", "k2", "--wait", "0")
	require.Regexp(t, `(?m)^ID:\s+s2$`, r.stdout)
	require.Regexp(t, `(?m)^Deduplicated:`, r.stdout)

	// --namespace: instances of another namespace are not found.
	c.run(cli.ExitOK, "instances", "create", "hello", "n1", "--namespace", "acme", "--queue", "slow", "--wait", "0")
	c.run(cli.ExitNotFound, "instances", "get", "hello", "n1")
	c.run(cli.ExitOK, "instances", "get", "hello", "n1", "--namespace", "acme")
	c.json(&list, "instances", "list", "hello", "--namespace", "acme")
	require.Len(t, list.Instances, 1)

	// Bad input is refused with the API's message.
	r = c.run(cli.ExitInvalid, "instances", "create", "hello", "x", "--priority", "5000")
	require.Contains(t, r.stderr, "priority")
}
