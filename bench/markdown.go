package bench

import (
	"cmp"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// WriteMarkdown writes the report as Markdown: what it ran on, the ceiling,
// one table of every workload's figures with their ratios to the ceiling,
// the soak's intervals and, when counted, the statements per workload. The
// tables of docs/benchmarks.md are pasted from it.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	commit := r.Build.Commit
	if commit == "" {
		commit = "unknown"
	}
	if r.Build.Modified {
		commit += " (with uncommitted changes)"
	}
	fmt.Fprintf(&b, "- date: %s, commit `%s`, %s\n", r.Started.Format(time.RFC3339), commit, r.Build.GoVersion)
	fmt.Fprintf(&b, "- machine: %d CPUs (GOMAXPROCS %d), %s/%s\n", r.Machine.CPUs, r.Machine.GOMAXPROCS, r.Machine.OS, r.Machine.Arch)
	fmt.Fprintf(&b, "- database: %s %s", r.Database.Backend, r.Database.Version)
	if len(r.Database.Settings) > 0 {
		keys := make([]string, 0, len(r.Database.Settings))
		for k := range r.Database.Settings {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = "`" + k + "=" + r.Database.Settings[k] + "`"
		}
		fmt.Fprintf(&b, "; %s", strings.Join(parts, ", "))
	}
	b.WriteString("\n")
	s := r.Settings
	fmt.Fprintf(&b, "- runners: %d (%s), concurrency %d, batch %d, in flight ≤ %d, poll %s",
		s.Runners, map[bool]string{true: "all in worker processes", false: "first in the bench process"}[s.ExternalRunners],
		s.Concurrency, s.Batch, s.InFlight, time.Duration(s.PollIntervalMs*float64(time.Millisecond)))
	if s.NoEagerStart {
		b.WriteString(", eager start off")
	}
	if s.NoLifecycleLog {
		b.WriteString(", lifecycle log off")
	}
	if s.PoolMaxConns > 0 {
		fmt.Fprintf(&b, ", pool %d connections", s.PoolMaxConns)
	}
	if s.MaintenanceSeconds > 0 {
		fmt.Fprintf(&b, ", autovacuum's work checked every %s (%d VACUUMs, %d ANALYZEs)",
			time.Duration(s.MaintenanceSeconds*float64(time.Second)), s.MaintenanceVacuums, s.MaintenanceAnalyzes)
	}
	b.WriteString("\n")

	if c := r.Ceiling; c != nil {
		fmt.Fprintf(&b, "\nCeiling (%s):\n\n", c.headline())
		if c.Settings != nil {
			fmt.Fprintf(&b, "Ceiling connection: `%s`\n\n", formatSettings(c.Settings))
		}
		if c.Skipped != "" {
			fmt.Fprintf(&b, "Skipped: %s\n\n", c.Skipped)
		}
		if len(c.Scripts) > 0 || c.Notify != nil {
			b.WriteString("| ceiling | measured with | steps/s | tx/s | latency | SQL shape |\n|---|---|--:|--:|--:|---|\n")
		}
		for _, sc := range c.Scripts {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %.2f ms | %s |\n", sc.Name, cmp.Or(sc.Via, "pgbench"), formatNumber(sc.StepsPerSecond), formatNumber(sc.TPS), sc.LatencyMs, sc.Description)
		}
		if c.Notify != nil {
			fmt.Fprintf(&b, "| notify | pgx | | | p50 %.2f ms, p99 %.2f ms | NOTIFY → received on a LISTENing connection |\n", c.Notify.P50, c.Notify.P99)
		}
	}

	if len(r.Results) > 0 {
		b.WriteString("\n| workload | metric | value | vs ceiling (same run) |\n|---|---|--:|---|\n")
		for _, res := range r.Results {
			for i, m := range res.Metrics {
				if i > 0 && m.CeilingValue == 0 && res.Metrics[i-1].Name == m.Name && res.Metrics[i-1].Value == m.Value {
					continue
				}
				fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", res.Workload, m.Name, formatValue(m.Value, m.Unit), formatRatio(m))
			}
		}
	}
	for _, res := range r.Results {
		if len(res.Intervals) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n%s, per interval:\n\n| from | workflows | steps/s | queue live rows | queue dead rows | queue size |\n|--:|--:|--:|--:|--:|--:|\n", res.Workload)
		for _, iv := range res.Intervals {
			live, dead, size := "-", "-", "-"
			if iv.Queue != nil {
				live, dead, size = fmt.Sprint(iv.Queue.LiveRows), fmt.Sprint(iv.Queue.DeadRows), formatBytes(iv.Queue.Bytes)
			}
			fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s |\n", time.Duration(iv.StartSeconds*float64(time.Second)),
				iv.Workflows, formatNumber(iv.StepsPerSecond), live, dead, size)
		}
	}
	for _, res := range r.Results {
		if len(res.SQL) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n%s, statements sent by the bench process:\n\n| statement | calls | per unit | mean ms | total s |\n|---|--:|--:|--:|--:|\n", res.Workload)
		for _, st := range res.SQL {
			fmt.Fprintf(&b, "| %s | %d | %.2f | %.3f | %.2f |\n", st.Statement, st.Calls, st.PerUnit, st.MeanMs, st.TotalSeconds)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
