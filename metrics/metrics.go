package metrics

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/runner"
)

// Namespace is the prefix of every metric name.
const Namespace = "duraflow"

// DefaultCacheTTL is the default of Config.CacheTTL.
const DefaultCacheTTL = 5 * time.Second

// Config configures Metrics.
type Config struct {
	// Store is read for the gauges that live in the database
	// (db.StatsStore.StatsGet). Nil leaves those gauges out: the metrics
	// are then the observations of this process alone.
	Store db.StatsStore
	// CacheTTL is how long a read of the database gauges is reused: scrapes
	// within it cost no query.
	//
	// Defaults to 5 seconds.
	CacheTTL time.Duration
	// ReadTimeout bounds one read of the database gauges.
	//
	// Defaults to 5 seconds.
	ReadTimeout time.Duration
	// Clock supplies "now" for the cache and the schedule lag.
	//
	// Defaults to the real clock.
	Clock clock.Clock
	// Logger receives a warning when a read of the gauges fails.
	//
	// Defaults to slog.Default().
	Logger *slog.Logger
}

// Metrics collects Duraflow's metrics: see the package documentation. It
// implements prometheus.Collector and duraflow.Observer (runner.Observer and
// client.Observer), and is safe for concurrent use.
type Metrics struct {
	cfg Config

	created   *prometheus.CounterVec
	completed *prometheus.CounterVec
	errored   *prometheus.CounterVec
	crashes   *prometheus.CounterVec
	steps     *prometheus.HistogramVec
	wakes     *prometheus.HistogramVec
	claims    prometheus.Histogram
	claimed   prometheus.Counter
	readFails prometheus.Counter

	instancesDesc   *prometheus.Desc
	readyDesc       *prometheus.Desc
	leasedDesc      *prometheus.Desc
	backlogDesc     *prometheus.Desc
	scheduleLagDesc *prometheus.Desc
	workersDesc     *prometheus.Desc

	// mu guards the cache and serialises reads: concurrent scrapes wait
	// for the one read in flight.
	mu       sync.Mutex
	cached   *db.Stats
	cachedAt time.Time
}

var (
	_ prometheus.Collector = (*Metrics)(nil)
	_ runner.Observer      = (*Metrics)(nil)
	_ client.Observer      = (*Metrics)(nil)
)

// New returns the metrics for cfg; register them with a
// prometheus.Registerer (Register, or the registerer's own MustRegister).
func New(cfg *Config) (*Metrics, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	c := *cfg
	if c.CacheTTL < 0 || c.ReadTimeout < 0 {
		return nil, errors.New("metrics: CacheTTL and ReadTimeout must not be negative")
	}
	if c.CacheTTL == 0 {
		c.CacheTTL = DefaultCacheTTL
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = 5 * time.Second
	}
	if c.Clock == nil {
		c.Clock = clock.New()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	wf := []string{"workflow"}
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, wf)
	}
	m := &Metrics{
		cfg:       c,
		created:   counter("instances_created_total", "Instances created through this process's client (API, Go, triggers, child invokes), by workflow."),
		completed: counter("instances_completed_total", "Instances this process's runner completed, by workflow."),
		errored:   counter("instances_errored_total", "Instances this process's runner ended errored (crash loops and deadlines included), by workflow."),
		crashes:   counter("crash_loops_total", "Instances this process's runner errored because their task lost its runner MaxLeaseLosses times (RunnerLostError), by workflow."),
		steps: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "step_duration_seconds",
			Help:    "Duration of the Do step attempts this process ran (replayed results excluded), by workflow.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, wf),
		wakes: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "wake_latency_seconds",
			Help:    "From an event's stored created_at to the moment the run waiting for it went on, by workflow.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, wf),
		claims: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "claim_duration_seconds",
			Help:    "Duration of the runner's claim round trips (TaskClaim), those that found nothing included.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		claimed: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "tasks_claimed_total", Help: "Tasks this process's runner claimed (eager starts are not claims).",
		}),
		readFails: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "stats_read_errors_total", Help: "Reads of the database gauges that failed; the scrape then leaves those gauges out.",
		}),
		instancesDesc: prometheus.NewDesc(Namespace+"_instances", "Instances by workflow and status, read from the database (cached).", []string{"workflow", "status"}, nil),
		readyDesc:     prometheus.NewDesc(Namespace+"_tasks_ready", "Pending tasks that are due (run_at <= now), read from the database (cached).", nil, nil),
		leasedDesc:    prometheus.NewDesc(Namespace+"_tasks_leased", "Tasks a runner holds under a lease, read from the database (cached).", nil, nil),
		backlogDesc:   prometheus.NewDesc(Namespace+"_hook_outbox_backlog", "Hook outbox entries not delivered yet, read from the database (cached).", nil, nil),
		scheduleLagDesc: prometheus.NewDesc(Namespace+"_schedule_lag_seconds",
			"Now minus the fire time of the enabled schedule due the longest (0 when none is due), read from the database (cached).", nil, nil),
		workersDesc: prometheus.NewDesc(Namespace+"_workers_online", "Workers whose status is online, read from the database (cached).", nil, nil),
	}
	return m, nil
}

// Register registers the metrics with reg.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	return reg.Register(m)
}

// statuses are the instance statuses the instances gauge reports for every
// workflow it has seen, 0 when none has it.
var statuses = []dftype.InstanceStatus{
	dftype.StatusQueued, dftype.StatusRunning, dftype.StatusWaiting, dftype.StatusWaitingForPause,
	dftype.StatusPaused, dftype.StatusComplete, dftype.StatusErrored, dftype.StatusTerminated,
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.created, m.completed, m.errored, m.crashes, m.steps, m.wakes, m.claims, m.claimed, m.readFails}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
	if m.cfg.Store != nil {
		for _, d := range []*prometheus.Desc{m.instancesDesc, m.readyDesc, m.leasedDesc, m.backlogDesc, m.scheduleLagDesc, m.workersDesc} {
			ch <- d
		}
	}
}

// Collect implements prometheus.Collector: the observations, and the
// database gauges from the cache or a fresh read.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
	if m.cfg.Store == nil {
		return
	}
	st, now := m.stats()
	if st == nil {
		return
	}
	// Every status of every workflow seen, so a status that empties shows
	// 0 instead of vanishing.
	counts := map[string]map[dftype.InstanceStatus]int64{}
	for _, c := range st.Instances {
		if counts[c.WorkflowName] == nil {
			counts[c.WorkflowName] = map[dftype.InstanceStatus]int64{}
		}
		counts[c.WorkflowName][c.Status] += c.Count
	}
	for name, byStatus := range counts {
		for _, s := range statuses {
			ch <- prometheus.MustNewConstMetric(m.instancesDesc, prometheus.GaugeValue, float64(byStatus[s]), name, string(s))
		}
	}
	ch <- prometheus.MustNewConstMetric(m.readyDesc, prometheus.GaugeValue, float64(st.TasksReady))
	ch <- prometheus.MustNewConstMetric(m.leasedDesc, prometheus.GaugeValue, float64(st.TasksLeased))
	ch <- prometheus.MustNewConstMetric(m.backlogDesc, prometheus.GaugeValue, float64(st.OutboxBacklog))
	lag := 0.0
	if st.OldestDueSchedule != nil {
		lag = max(now.Sub(*st.OldestDueSchedule).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(m.scheduleLagDesc, prometheus.GaugeValue, lag)
	ch <- prometheus.MustNewConstMetric(m.workersDesc, prometheus.GaugeValue, float64(st.WorkersOnline))
}

// stats returns the database gauges, from the cache while it is fresh, and
// the time they were read at; nil when the read failed.
func (m *Metrics) stats() (*db.Stats, time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.cfg.Clock.Now()
	if m.cached != nil && now.Sub(m.cachedAt) < m.cfg.CacheTTL {
		return m.cached, m.cachedAt
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.ReadTimeout)
	defer cancel()
	st, err := m.cfg.Store.StatsGet(ctx, &db.StatsGetParams{Now: now.UTC().Truncate(time.Microsecond)})
	if err != nil {
		m.readFails.Inc()
		m.cfg.Logger.Warn("metrics: reading the database gauges failed", "error", err)
		return nil, now
	}
	m.cached, m.cachedAt = st, now
	return st, now
}

// ObserveCreated implements client.Observer.
func (m *Metrics) ObserveCreated(workflowName string, n int) {
	m.created.WithLabelValues(workflowName).Add(float64(n))
}

// ObserveClaim implements runner.Observer.
func (m *Metrics) ObserveClaim(d time.Duration, tasks int) {
	m.claims.Observe(d.Seconds())
	if tasks > 0 {
		m.claimed.Add(float64(tasks))
	}
}

// ObserveStep implements runner.Observer.
func (m *Metrics) ObserveStep(workflowName string, d time.Duration) {
	m.steps.WithLabelValues(workflowName).Observe(d.Seconds())
}

// ObserveRunEnd implements runner.Observer.
func (m *Metrics) ObserveRunEnd(workflowName string, errored bool) {
	if errored {
		m.errored.WithLabelValues(workflowName).Inc()
		return
	}
	m.completed.WithLabelValues(workflowName).Inc()
}

// ObserveCrashLoop implements runner.Observer.
func (m *Metrics) ObserveCrashLoop(workflowName string) {
	m.crashes.WithLabelValues(workflowName).Inc()
}

// ObserveWake implements runner.Observer.
func (m *Metrics) ObserveWake(workflowName string, d time.Duration) {
	m.wakes.WithLabelValues(workflowName).Observe(max(d, 0).Seconds())
}
