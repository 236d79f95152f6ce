// Package metrics exports Duraflow's Prometheus metrics through
// github.com/prometheus/client_golang.
//
// A Metrics is two things at once. It is the duraflow.Observer of a host
// (duraflow.Config.Observer, or runner.Config.Observer and
// client.Config.Observer): the runner and the client report claims, step
// durations, run ends, crash loops, wake latencies and creates to it, in
// memory, as counter increments and histogram observations; no database
// statement is added to the hot path. And it is a prometheus.Collector: at a
// scrape it reads the gauges that live in the database (instances by
// status, ready and leased tasks, the hook outbox backlog, the schedule lag
// and the workers online) with db.StatsStore.StatsGet, cached for
// Config.CacheTTL so that a storm of scrapes costs one read.
//
// A host program registers it in its own registry:
//
//	m, err := metrics.New(&metrics.Config{Store: store})
//	prometheus.MustRegister(m)
//	host, err := duraflow.New(store, &duraflow.Config{Registry: reg, Observer: m})
//
// Labels are bounded: a workflow name (registered workflows and flows only)
// and an instance status; never an instance id or a step name. docs/metrics.md
// lists every metric.
//
// The package sits beside the root host package: it imports db, runner and
// client for their interfaces, and no backend, httpapi or cli.
package metrics
