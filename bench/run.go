package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/pprof"
	"time"

	"github.com/duraflow/duraflow/db/dburl"
)

// run is the state the workloads of one Run share.
type run struct {
	// id tells this run's wake instances from another run's in the same
	// process (see resumedSignals).
	id     string
	cfg    *Config
	db     *database
	host   *host
	tracer *sqlTracer
}

// Run sets up a fresh database, runs the ceiling when asked, starts the
// runners and runs the configured workloads one after the other. It returns
// the report with every workload that finished, also when a later one
// failed, and drops the database (unless Config.Keep) before it returns.
func Run(ctx context.Context, cfg *Config) (rep *Report, err error) {
	if cfg == nil {
		return nil, errors.New("bench: nil Config")
	}
	c := cfg.WithDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	rep = newReport(c)
	defer func() { rep.Finished = time.Now().UTC() }()

	d, err := openDatabase(ctx, c)
	if err != nil {
		return rep, err
	}
	defer func() {
		kept, cerr := d.close(context.WithoutCancel(ctx), c.Keep)
		rep.Kept = kept
		err = errors.Join(err, cerr)
	}()
	rep.Database.Backend, rep.Database.Where = string(d.backend), d.where
	if rep.Database.Version, rep.Database.Settings, err = d.probe.info(ctx); err != nil {
		return rep, fmt.Errorf("reading the database's settings: %w", err)
	}

	if c.Ceiling {
		if rep.Ceiling, err = runCeiling(ctx, c, d); err != nil {
			return rep, fmt.Errorf("measuring the ceiling: %w", err)
		}
	}

	r := &run{id: randomHex(3), cfg: c, db: d}
	if c.SQLStats && d.backend == dburl.Postgres {
		r.tracer = newSQLTracer()
	}
	r.host, err = startHost(ctx, hostOptions{
		backend: d.backend, url: d.url, wakeChannel: d.wakeChannel, runner: !c.ExternalRunners,
		concurrency: c.Concurrency, pollInterval: c.PollInterval, noEager: c.NoEagerStart, noLog: c.NoLifecycleLog, metrics: c.Metrics, logger: c.Logger, tracer: r.tracer,
	})
	if err != nil {
		return rep, fmt.Errorf("starting the in-process host: %w", err)
	}
	defer r.host.stop(context.WithoutCancel(ctx))
	rep.Settings.PoolMaxConns = r.host.poolMaxConns
	var ws *workers
	if n := c.workerCount(); n > 0 {
		var stderr io.Writer = io.Discard
		if c.Progress != nil {
			stderr = c.Progress
		}
		var startErr error
		if ws, startErr = startWorkers(ctx, c, d, n, stderr); startErr != nil {
			return rep, fmt.Errorf("starting worker processes: %w", startErr)
		}
		defer ws.stop()
	}

	if c.Maintenance > 0 && d.backend == dburl.Postgres {
		m, startErr := startMaintenance(ctx, d.url, c.Maintenance)
		if startErr != nil {
			return rep, fmt.Errorf("starting the maintenance: %w", startErr)
		}
		defer func() {
			vacuums, analyzes, merr := m.close()
			rep.Settings.MaintenanceVacuums, rep.Settings.MaintenanceAnalyzes = vacuums, analyzes
			if merr != nil {
				err = errors.Join(err, fmt.Errorf("maintenance: %w", merr))
			}
		}()
	}
	if c.CPUProfile != nil {
		if err := pprof.StartCPUProfile(c.CPUProfile); err != nil {
			return rep, fmt.Errorf("starting the CPU profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	for _, w := range c.ordered() {
		r.tracer.take(0) // statements of setup or of the previous workload
		start := readCPU()
		commits, checkpoints := r.host.groupCommits()
		pgStart, pgKnown := d.probe.backendCPU(ctx)
		wStart, wKnown := ws.cpu()
		res, err := r.workload(ctx, w)
		if err != nil {
			return rep, fmt.Errorf("workload %s: %w", w, err)
		}
		pgEnd, pgEndKnown := d.probe.backendCPU(ctx)
		wEnd, wEndKnown := ws.cpu()
		cpu := cpuSince(start, pgStart, pgEnd, pgKnown && pgEndKnown)
		if wKnown && wEndKnown && ws != nil {
			cpu.WorkerCores = float64(wEnd-wStart) / float64(time.Since(start.at))
		}
		res.CPU = &cpu
		if c2, k2 := r.host.groupCommits(); c2 > commits {
			res.Metrics = append(res.Metrics, Metric{
				Name: "checkpoints per group commit (this process)", Value: float64(k2-checkpoints) / float64(c2-commits), Unit: "steps",
			})
		}
		res.Metrics = append(res.Metrics, Metric{Name: "CPU of this process", Value: cpu.ProcessCores, Unit: "cores"})
		if cpu.PostgresCores > 0 {
			res.Metrics = append(res.Metrics, Metric{Name: "CPU of the run's Postgres backends", Value: cpu.PostgresCores, Unit: "cores"})
		}
		if ws != nil {
			res.Metrics = append(res.Metrics, Metric{Name: "CPU of the worker processes", Value: cpu.WorkerCores, Unit: "cores"})
		}
		if cpu.MachineBusyPercent > 0 {
			cores := float64(rep.Machine.CPUs)
			cpu.OtherCores = max(0, cpu.MachineBusyPercent/100*cores-cpu.ProcessCores-cpu.WorkerCores-cpu.PostgresCores)
			res.Metrics = append(res.Metrics,
				Metric{Name: "CPU of the machine", Value: cpu.MachineBusyPercent, Unit: fmt.Sprintf("%% of %d cores busy", rep.Machine.CPUs)},
				Metric{Name: "CPU of everything else (other processes, Postgres' own)", Value: cpu.OtherCores, Unit: "cores"},
				Metric{Name: "I/O wait of the machine", Value: cpu.MachineIOWaitPercent, Unit: "% of cores"})
			if cpu.MachineStealPercent > 0 {
				res.Metrics = append(res.Metrics,
					Metric{Name: "CPU stolen by the hypervisor (other virtual machines)", Value: cpu.MachineStealPercent, Unit: "% of cores"})
			}
		}
		rep.Results = append(rep.Results, res)
		rep.applyCeiling()
	}
	return rep, nil
}

// workload runs one workload.
func (r *run) workload(ctx context.Context, name string) (*Result, error) {
	switch name {
	case WorkloadEmpty:
		return r.empty(ctx)
	case WorkloadSteps10:
		return r.steps10(ctx)
	case WorkloadKeyed:
		return r.keyed(ctx)
	case WorkloadWake:
		return r.wake(ctx)
	case WorkloadCreate:
		return r.create(ctx)
	case WorkloadSoak:
		return r.soak(ctx)
	}
	return nil, fmt.Errorf("unknown workload %q", name)
}

// wakePath says how a wake-up reaches the runner that resumes an instance.
func (r *run) wakePath() string {
	local := ""
	direct := "the client wakes it directly"
	if !r.cfg.NoEagerStart {
		direct = "the send leases the woken run to it when it has a free slot (eager resume; otherwise the client wakes it directly)"
	}
	switch {
	case !r.cfg.ExternalRunners && r.cfg.Runners == 1:
		return "in-process runner: " + direct
	case !r.cfg.ExternalRunners:
		local = "the runner of this process: " + direct + "; "
	}
	if r.db.backend == dburl.Postgres {
		return local + "runners in other processes are woken by LISTEN/NOTIFY"
	}
	return local + fmt.Sprintf("runners in other processes on SQLite find work by polling every %s", r.cfg.PollInterval)
}
