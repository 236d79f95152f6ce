package cli_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/cli"
)

// --namespace-queues and --namespace-max-priority are checked when the
// server starts: a malformed item, a bad name or a priority out of range
// is a usage error.
func TestServeRefusesBadNamespacePlacement(t *testing.T) {
	t.Parallel()
	db := sqliteDB(t)
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		msg  string
	}{
		{"NoEquals", []string{"--namespace-queues", "acme"}, nil, "want namespace=queue1,queue2"},
		{"NoQueue", []string{"--namespace-queues", "acme="}, nil, "want namespace=queue1,queue2"},
		{"BadQueue", []string{"--namespace-queues", "acme=bad queue"}, nil, `NamespaceQueues["acme"]`},
		{"BadNamespace", []string{"--namespace-queues", "-acme=q"}, nil, "NamespaceQueues"},
		{"BadFromEnvironment", nil, map[string]string{"DURAFLOW_NAMESPACE_QUEUES": "acme"}, "want namespace=queue1,queue2"},
		{"PriorityPastTheLimit", []string{"--namespace-max-priority", "1001"}, nil, "NamespaceMaxPriority 1001"},
		{"BadTriggerNamespace", []string{"--trigger", "/hooks/x=hello@bad ns"}, nil, "--trigger"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"DURAFLOW_DATABASE_URL": db}
			for k, v := range tc.env {
				env[k] = v
			}
			r := run(t, env, append([]string{"serve", "--addr", "127.0.0.1:0"}, tc.args...)...)
			require.Equal(t, cli.ExitUsage, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			require.Contains(t, r.stderr, tc.msg)
		})
	}
}
