package metrics_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/sqlite/sqlitetest"
	"github.com/duraflow/duraflow/metrics"
)

// TestDocsNameEveryMetric: docs/metrics.md lists every metric, and the
// Grafana dashboard uses no name that does not exist.
func TestDocsNameEveryMetric(t *testing.T) {
	t.Parallel()
	store := sqlitetest.NewStore(t)
	_, err := store.InstanceCreate(t.Context(), &db.InstanceCreateParams{WorkflowName: "w", ID: "a"})
	require.NoError(t, err)
	m, err := metrics.New(&metrics.Config{Store: store})
	require.NoError(t, err)
	// One observation each, so every vector has a child to gather.
	m.ObserveCreated("w", 1)
	m.ObserveRunEnd("w", false)
	m.ObserveRunEnd("w", true)
	m.ObserveCrashLoop("w")
	m.ObserveStep("w", time.Millisecond)
	m.ObserveWake("w", time.Millisecond)
	m.ObserveClaim(time.Millisecond, 1)
	reg := prometheus.NewRegistry()
	require.NoError(t, m.Register(reg))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	for _, want := range []string{"duraflow_instances", "duraflow_tasks_ready", "duraflow_schedule_lag_seconds"} {
		require.True(t, names[want], "the database gauge %s is gathered", want)
	}
	doc, err := os.ReadFile("../docs/metrics.md")
	require.NoError(t, err)
	for name := range names {
		require.Contains(t, string(doc), "`"+name+"`", "docs/metrics.md lists %s", name)
	}
	dash, err := os.ReadFile("../docs/grafana-dashboard.json")
	require.NoError(t, err)
	used := regexp.MustCompile(`duraflow_[a-z_]+`).FindAllString(string(dash), -1)
	require.NotEmpty(t, used)
	for _, u := range used {
		if u == "duraflow_datasource" {
			continue
		}
		base := u
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			if b, ok := strings.CutSuffix(u, suffix); ok && names[b] {
				base = b
			}
		}
		require.True(t, names[base], "the dashboard's %s exists", u)
	}
}
