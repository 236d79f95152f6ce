package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/workflow"
)

// stallTimeout is how long unfinished instances may make no progress
// before a workload gives up on them.
const stallTimeout = 2 * time.Minute

// empty runs N workflows without steps to completion.
func (r *run) empty(ctx context.Context) (*Result, error) {
	n := r.cfg.n(WorkloadEmpty)
	p := newProgress(r.cfg.Progress, WorkloadEmpty, n, "workflows")
	a, err := r.throughput(ctx, nameEmpty, "e", n, p)
	if err != nil {
		p.Finish("failed")
		return nil, err
	}
	wfs := rate(n, a.elapsed)
	lat, runLat := Summarize(a.startToComplete), Summarize(a.runTime)
	res := &Result{
		Workload: WorkloadEmpty,
		Description: fmt.Sprintf("%d workflows without steps, created in batches of %d with at most %d unfinished, run to completion",
			n, r.cfg.Batch, r.cfg.InFlight),
		N: n, ElapsedSeconds: a.elapsed.Seconds(),
		Metrics: []Metric{
			{Name: "workflows/s", Value: wfs, Unit: "workflows/s", Ceiling: CeilingStepTx},
			{Name: "created→completed p50", Value: lat.P50, Unit: "ms"},
			{Name: "created→completed p99", Value: lat.P99, Unit: "ms"},
			{Name: "started→completed p50", Value: runLat.P50, Unit: "ms"},
		},
		Latencies: map[string]Summary{"created_to_completed": lat, "started_to_completed": runLat},
		SQL:       r.tracer.take(n),
		Notes:     []string{"throughput is from the first created_at to the last completed_at in the database; created→completed includes the wait in the queue"},
	}
	p.Finish(formatValue(wfs, "workflows/s"))
	return res, nil
}

// steps10 runs N workflows of ten no-op steps to completion.
func (r *run) steps10(ctx context.Context) (*Result, error) {
	n := r.cfg.n(WorkloadSteps10)
	p := newProgress(r.cfg.Progress, WorkloadSteps10, n, "workflows")
	a, err := r.throughput(ctx, nameSteps10, "s", n, p)
	if err != nil {
		p.Finish("failed")
		return nil, err
	}
	steps := n * stepsPerWorkflow
	sps := rate(steps, a.elapsed)
	perStep := make([]time.Duration, len(a.runTime))
	for i, d := range a.runTime {
		perStep[i] = d / stepsPerWorkflow
	}
	lat, stepLat := Summarize(a.startToComplete), Summarize(perStep)
	res := &Result{
		Workload: WorkloadSteps10,
		Description: fmt.Sprintf("%d workflows of %d sequential no-op steps returning a %d-byte struct, created in batches of %d with at most %d unfinished",
			n, stepsPerWorkflow, stepResultSize(), r.cfg.Batch, r.cfg.InFlight),
		N: n, ElapsedSeconds: a.elapsed.Seconds(),
		Metrics: []Metric{
			{Name: "steps/s", Value: sps, Unit: "steps/s", Ceiling: CeilingStepTx},
			{Name: "steps/s", Value: sps, Unit: "steps/s", Ceiling: CeilingBatch10},
			{Name: "workflows/s", Value: rate(n, a.elapsed), Unit: "workflows/s"},
			{Name: "engine time per step (1/throughput)", Value: 1e6 / sps, Unit: "µs"},
			{Name: "step time p50 (run ÷ 10)", Value: stepLat.P50, Unit: "ms"},
			{Name: "step time p99 (run ÷ 10)", Value: stepLat.P99, Unit: "ms"},
			{Name: "created→completed p50", Value: lat.P50, Unit: "ms"},
			{Name: "created→completed p99", Value: lat.P99, Unit: "ms"},
		},
		Latencies: map[string]Summary{"created_to_completed": lat, "step_time": stepLat},
		SQL:       r.tracer.take(steps),
		Notes:     []string{"step time is an instance's started→completed divided by its 10 steps: what one step costs a running instance"},
	}
	p.Finish(formatValue(sps, "steps/s"))
	return res, nil
}

// keyed runs N workflows of ten no-op steps, as steps10, under a
// concurrency key of max 1 over KeyedKeys keys: at most KeyedKeys run at
// once, the others wait for their key's slot in the database.
func (r *run) keyed(ctx context.Context) (*Result, error) {
	n := r.cfg.n(WorkloadKeyed)
	p := newProgress(r.cfg.Progress, WorkloadKeyed, n, "workflows")
	a, err := r.throughput(ctx, nameKeyed, "k", n, p)
	if err != nil {
		p.Finish("failed")
		return nil, err
	}
	steps := n * stepsPerWorkflow
	sps := rate(steps, a.elapsed)
	lat := Summarize(a.startToComplete)
	res := &Result{
		Workload: WorkloadKeyed,
		Description: fmt.Sprintf("%d workflows of %d sequential no-op steps (as steps10) with a concurrency key of max 1 over %d keys, created in batches of %d with at most %d unfinished",
			n, stepsPerWorkflow, KeyedKeys, r.cfg.Batch, r.cfg.InFlight),
		N: n, ElapsedSeconds: a.elapsed.Seconds(),
		Metrics: []Metric{
			{Name: "steps/s", Value: sps, Unit: "steps/s"},
			{Name: "workflows/s", Value: rate(n, a.elapsed), Unit: "workflows/s"},
			{Name: "created→completed p50", Value: lat.P50, Unit: "ms"},
			{Name: "created→completed p99", Value: lat.P99, Unit: "ms"},
		},
		Latencies: map[string]Summary{"created_to_completed": lat},
		SQL:       r.tracer.take(steps),
		Notes:     []string{"compare with steps10 (no limits): admission, the waiting of instances whose key is taken, and the release that admits the next are the difference"},
	}
	p.Finish(formatValue(sps, "steps/s"))
	return res, nil
}

// stepResultSize is the size of a step result of steps10 in JSON.
func stepResultSize() int {
	b, _ := json.Marshal(stepResult("s1234", 0))
	return len(b)
}

// analysis is what the database says about the instances of a workload.
type analysis struct {
	// elapsed runs from the first created_at to the last completed_at.
	elapsed         time.Duration
	startToComplete []time.Duration
	runTime         []time.Duration
}

// throughput creates n instances of a workflow, waits until each is
// finished and reads their timestamps.
func (r *run) throughput(ctx context.Context, name, prefix string, n int, p *progress) (*analysis, error) {
	created, err := r.feed(ctx, name, prefix, n, time.Time{}, p.Set)
	if err != nil {
		return nil, err
	}
	if err := r.drain(ctx, name, created, p.Set); err != nil {
		return nil, err
	}
	times, err := r.db.probe.instances(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("reading instance timestamps: %w", err)
	}
	return analyze(times)
}

// analyze checks that every instance completed and derives the figures.
func analyze(times []instanceTimes) (*analysis, error) {
	a := &analysis{}
	var first, last time.Time
	bad := 0
	for _, t := range times {
		if t.status != string(dftype.StatusComplete) || t.completed.IsZero() {
			bad++
			continue
		}
		if first.IsZero() || t.created.Before(first) {
			first = t.created
		}
		if t.completed.After(last) {
			last = t.completed
		}
		a.startToComplete = append(a.startToComplete, t.completed.Sub(t.created))
		if !t.started.IsZero() {
			a.runTime = append(a.runTime, t.completed.Sub(t.started))
		}
	}
	if bad > 0 {
		return nil, fmt.Errorf("%d of %d instances did not complete (errored or unfinished); see the runner's log", bad, len(times))
	}
	if len(times) == 0 {
		return nil, errors.New("no instances were created")
	}
	a.elapsed = last.Sub(first)
	return a, nil
}

// feedPoll is how often feed counts the unfinished instances while it waits
// for some to finish: often enough that the runners never run dry (the
// default in-flight limit of 256 lasts 51 ms at 5,000 workflows/s), rarely
// enough that counting is not a load of its own on the database measured.
const feedPoll = 10 * time.Millisecond

// feed creates instances of a workflow, in batches of Config.Batch, until n
// are created (n < 0: until the until time), waiting while InFlight of them
// are unfinished. It reports the number finished so far to done, and
// returns the number created.
func (r *run) feed(ctx context.Context, name, prefix string, n int, until time.Time, done func(int)) (int, error) {
	created := 0
	want := min(r.cfg.Batch, r.cfg.InFlight)
	for n < 0 || created < n {
		if !until.IsZero() && !time.Now().Before(until) {
			break
		}
		inflight, err := r.db.probe.inFlight(ctx, name)
		if err != nil {
			return created, fmt.Errorf("counting unfinished instances: %w", err)
		}
		if done != nil {
			done(created - inflight)
		}
		k := want
		if n >= 0 {
			k = min(k, n-created)
		}
		if r.cfg.InFlight-inflight < k {
			if err := sleep(ctx, feedPoll); err != nil {
				return created, err
			}
			continue
		}
		if err := r.createInstances(ctx, name, prefix, created, k); err != nil {
			return created, err
		}
		created += k
	}
	return created, nil
}

// createInstances creates k instances with ids prefix+from … prefix+from+k-1,
// in one batch create (one create when k is 1).
func (r *run) createInstances(ctx context.Context, name, prefix string, from, k int) error {
	c := r.host.client
	if k == 1 {
		req := dftype.CreateRequest{ID: prefix + strconv.Itoa(from)}
		if name == nameKeyed {
			req.Params = keyedParamsOf(from)
		}
		_, err := c.Create(ctx, name, req)
		if err != nil {
			return fmt.Errorf("creating an instance: %w", err)
		}
		return nil
	}
	reqs := make([]dftype.CreateRequest, k)
	for i := range reqs {
		reqs[i].ID = prefix + strconv.Itoa(from+i)
		if name == nameKeyed {
			reqs[i].Params = keyedParamsOf(from + i)
		}
	}
	if _, err := c.CreateBatch(ctx, name, reqs); err != nil {
		return fmt.Errorf("creating a batch of instances: %w", err)
	}
	return nil
}

// drain waits until no instance of the workflow is unfinished, reporting
// the number finished to done; it fails when they make no progress for
// stallTimeout.
func (r *run) drain(ctx context.Context, name string, created int, done func(int)) error {
	last, since := -1, time.Now()
	for {
		inflight, err := r.db.probe.inFlight(ctx, name)
		if err != nil {
			return fmt.Errorf("counting unfinished instances: %w", err)
		}
		if done != nil {
			done(created - inflight)
		}
		if inflight == 0 {
			return nil
		}
		if inflight != last {
			last, since = inflight, time.Now()
		} else if time.Since(since) > stallTimeout {
			return fmt.Errorf("%d instances of %s made no progress for %s", inflight, name, stallTimeout)
		}
		if err := sleep(ctx, 5*time.Millisecond); err != nil {
			return err
		}
	}
}

// wake measures send→resumed latencies, idle and under a background load.
func (r *run) wake(ctx context.Context) (*Result, error) {
	n := r.cfg.n(WorkloadWake)
	p := newProgress(r.cfg.Progress, WorkloadWake, 2*n, "samples")
	fail := func(err error) (*Result, error) {
		p.Finish("failed")
		return nil, err
	}
	// Every sample's instance waits for its event before the samples start,
	// so that no sample waits behind the background load for its first run.
	if err := r.prepareWake(ctx, "wi"+r.id+"-", n); err != nil {
		return fail(fmt.Errorf("idle: %w", err))
	}
	if err := r.prepareWake(ctx, "wl"+r.id+"-", n); err != nil {
		return fail(fmt.Errorf("under load: %w", err))
	}
	idleStart := time.Now()
	idle, idleSend, err := r.wakeSamples(ctx, "wi"+r.id+"-", n, func(i int) { p.Set(i) })
	if err != nil {
		return fail(fmt.Errorf("idle: %w", err))
	}
	idleElapsed := time.Since(idleStart)

	loadCtx, stopLoad := context.WithCancel(ctx)
	loadErr := make(chan error, 1)
	go func() {
		_, err := r.feed(loadCtx, nameLoad, "l", -1, time.Time{}, nil)
		loadErr <- err
	}()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		stopLoad()
		if err := <-loadErr; err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("background load: %w", err)
		}
		return nil
	}
	defer func() { _ = stop() }()
	if err := r.waitLoad(ctx); err != nil {
		return fail(err)
	}
	loadedStart := time.Now()
	loaded, _, err := r.wakeSamples(ctx, "wl"+r.id+"-", n, func(i int) { p.Set(n + i) })
	if err != nil {
		return fail(fmt.Errorf("under load: %w", err))
	}
	loadedEnd := time.Now()
	if err := stop(); err != nil {
		return fail(err)
	}
	if err := r.drain(ctx, nameLoad, 0, nil); err != nil {
		return fail(err)
	}
	times, err := r.db.probe.instances(ctx, nameLoad)
	if err != nil {
		return fail(err)
	}
	loadDone := 0
	for _, t := range times {
		if !t.completed.IsZero() && !t.completed.Before(loadedStart) && t.completed.Before(loadedEnd) {
			loadDone++
		}
	}
	background := rate(loadDone*stepsPerWorkflow, loadedEnd.Sub(loadedStart))

	is, ls, ss := Summarize(idle), Summarize(loaded), Summarize(idleSend)
	res := &Result{
		Workload:       WorkloadWake,
		Description:    fmt.Sprintf("%d sequential samples idle, then %d under a background steps10 load: sendEvent → the step after waitForEvent starts", n, n),
		N:              n,
		ElapsedSeconds: idleElapsed.Seconds() + loadedEnd.Sub(loadedStart).Seconds(),
		Metrics: []Metric{
			{Name: "idle send→resumed p50", Value: is.P50, Unit: "ms", Ceiling: CeilingNotifyP50},
			{Name: "idle send→resumed p99", Value: is.P99, Unit: "ms", Ceiling: CeilingNotifyP99},
			{Name: "idle sendEvent call p50", Value: ss.P50, Unit: "ms"},
			{Name: "loaded send→resumed p50", Value: ls.P50, Unit: "ms"},
			{Name: "loaded send→resumed p99", Value: ls.P99, Unit: "ms"},
			{Name: "background load during samples", Value: background, Unit: "steps/s"},
		},
		Latencies: map[string]Summary{"idle": is, "loaded": ls, "idle_send_call": ss},
		SQL:       r.tracer.take(2 * n),
		Notes: []string{
			"send→resumed runs from just before sendEvent to the start of the step after the wait (its wall clock, recorded as the step's result); " + r.wakePath(),
		},
	}
	p.Finish(fmt.Sprintf("idle p50 %.2f ms p99 %.2f ms, loaded p50 %.2f ms p99 %.2f ms", is.P50, is.P99, ls.P50, ls.P99))
	return res, nil
}

// waitLoad waits until the background load has work in flight.
func (r *run) waitLoad(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		n, err := r.db.probe.inFlight(ctx, nameLoad)
		if err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
		if err := sleep(ctx, time.Millisecond); err != nil {
			return err
		}
	}
	return errors.New("the background load did not start within 30 seconds")
}

// prepareWake creates n instances of the wake workflow, with ids prefix0 …,
// and waits until each waits for its event.
func (r *run) prepareWake(ctx context.Context, prefix string, n int) error {
	for from := 0; from < n; from += workflow.MaxBatchSize {
		if err := r.createInstances(ctx, nameWake, prefix, from, min(workflow.MaxBatchSize, n-from)); err != nil {
			return err
		}
	}
	for i := range n {
		if err := r.waitStatus(ctx, nameWake, prefix+strconv.Itoa(i), dftype.StatusWaiting); err != nil {
			return err
		}
	}
	return nil
}

// wakeSamples takes n sequential samples of instances prepareWake made
// wait: send the event, wait until the instance completes, and read when
// its step after the wait started. It returns the send→resumed latencies
// and the durations of the sendEvent calls.
func (r *run) wakeSamples(ctx context.Context, prefix string, n int, done func(int)) (lat, send []time.Duration, err error) {
	c := r.host.client
	for i := range n {
		id := prefix + strconv.Itoa(i)
		signal := make(chan struct{}, 1)
		resumedSignals.Store(id, signal)
		start := time.Now()
		err := c.SendEvent(ctx, nameWake, id, wakeEventType, nil)
		send = append(send, time.Since(start))
		if err == nil {
			err = r.awaitComplete(ctx, id, signal)
		}
		resumedSignals.Delete(id)
		if err != nil {
			return nil, nil, fmt.Errorf("sample %s: %w", id, err)
		}
		resumed, err := r.resumedAt(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		// The resumed time is a wall clock, maybe of another process.
		lat = append(lat, resumed.Sub(start.Round(0)))
		done(i + 1)
	}
	return lat, send, nil
}

// awaitComplete waits until a wake instance is complete. It reads the
// instance when the resumed step signals that it ran in this process, and
// otherwise at growing intervals (2 ms to 50 ms), so that polling the
// database disturbs the measured wake-up as little as it can.
func (r *run) awaitComplete(ctx context.Context, id string, signal <-chan struct{}) error {
	deadline := time.Now().Add(stallTimeout)
	delay, signalled := 2*time.Millisecond, false
	for {
		if !signalled {
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-signal:
				signalled = true
			case <-t.C:
				delay = min(2*delay, 50*time.Millisecond)
			}
			t.Stop()
		} else if err := sleep(ctx, 500*time.Microsecond); err != nil {
			return err
		}
		info, err := r.host.client.Get(ctx, nameWake, id)
		if err != nil {
			return fmt.Errorf("reading %s: %w", id, err)
		}
		switch {
		case info.Status == dftype.StatusComplete:
			return nil
		case info.Status.Terminal():
			return fmt.Errorf("instance %s is %s", id, info.Status)
		case time.Now().After(deadline):
			return fmt.Errorf("instance %s is still %s %s after its event", id, info.Status, stallTimeout)
		}
	}
}

// waitStatus polls an instance every millisecond until it has the status,
// failing when it reaches another terminal status or after stallTimeout.
func (r *run) waitStatus(ctx context.Context, name, id string, want dftype.InstanceStatus) error {
	deadline := time.Now().Add(stallTimeout)
	for {
		info, err := r.host.client.Get(ctx, name, id)
		if err != nil {
			return fmt.Errorf("reading %s: %w", id, err)
		}
		switch {
		case info.Status == want:
			return nil
		case info.Status.Terminal():
			return fmt.Errorf("instance %s is %s, not %s", id, info.Status, want)
		case time.Now().After(deadline):
			return fmt.Errorf("instance %s is still %s after %s, not %s", id, info.Status, stallTimeout, want)
		}
		if err := sleep(ctx, time.Millisecond); err != nil {
			return err
		}
	}
}

// resumedAt reads the wall clock the wake workflow's step after the wait
// recorded.
func (r *run) resumedAt(ctx context.Context, id string) (time.Time, error) {
	steps, err := r.host.store.StepList(ctx, &db.StepListParams{WorkflowName: nameWake, InstanceID: id, RunNumber: 1})
	if err != nil {
		return time.Time{}, fmt.Errorf("reading the steps of %s: %w", id, err)
	}
	for _, s := range steps {
		if s.Key != wakeStepResumed {
			continue
		}
		var ns int64
		if err := json.Unmarshal(s.Result, &ns); err != nil {
			return time.Time{}, fmt.Errorf("decoding the %s step of %s: %w", wakeStepResumed, id, err)
		}
		return time.Unix(0, ns), nil
	}
	return time.Time{}, fmt.Errorf("instance %s completed without a %s step", id, wakeStepResumed)
}

// create measures single creates and batch creates per second, with no
// runner taking the instances.
func (r *run) create(ctx context.Context) (*Result, error) {
	n := r.cfg.n(WorkloadCreate)
	batches := (10*n + workflow.MaxBatchSize - 1) / workflow.MaxBatchSize
	total := batches * workflow.MaxBatchSize
	p := newProgress(r.cfg.Progress, WorkloadCreate, n+total, "instances")
	var made atomic.Int64
	c := r.host.creates

	single, singleElapsed, err := parallel(ctx, r.cfg.Concurrency, n, func(ctx context.Context, i int) error {
		_, err := c.Create(ctx, nameCreate, dftype.CreateRequest{ID: "c" + strconv.Itoa(i)})
		p.Set(int(made.Add(1)))
		return err
	})
	if err != nil {
		p.Finish("failed")
		return nil, fmt.Errorf("single creates: %w", err)
	}
	batch, batchElapsed, err := parallel(ctx, r.cfg.Concurrency, batches, func(ctx context.Context, i int) error {
		reqs := make([]dftype.CreateRequest, workflow.MaxBatchSize)
		for j := range reqs {
			reqs[j].ID = "b" + strconv.Itoa(i*workflow.MaxBatchSize+j)
		}
		_, err := c.CreateBatch(ctx, nameCreate, reqs)
		p.Set(int(made.Add(int64(len(reqs)))))
		return err
	})
	if err != nil {
		p.Finish("failed")
		return nil, fmt.Errorf("batch creates: %w", err)
	}
	ss, bs := Summarize(single), Summarize(batch)
	sps, bps := rate(n, singleElapsed), rate(total, batchElapsed)
	res := &Result{
		Workload: WorkloadCreate,
		Description: fmt.Sprintf("%d single creates, then %d instances in batches of %d, from %d goroutines; no runner takes them",
			n, total, workflow.MaxBatchSize, r.cfg.Concurrency),
		N: n, ElapsedSeconds: (singleElapsed + batchElapsed).Seconds(),
		Metrics: []Metric{
			{Name: "single creates/s", Value: sps, Unit: "creates/s", Ceiling: CeilingCheckpoint},
			{Name: "single create p50", Value: ss.P50, Unit: "ms"},
			{Name: "single create p99", Value: ss.P99, Unit: "ms"},
			{Name: "batch-created instances/s", Value: bps, Unit: "instances/s", Ceiling: CeilingBatch10},
			{Name: "batch create call p50", Value: bs.P50, Unit: "ms"},
			{Name: "batch create call p99", Value: bs.P99, Unit: "ms"},
		},
		Latencies: map[string]Summary{"single": ss, "batch": bs},
		SQL:       r.tracer.take(n + batches),
		Notes:     []string{"single creates compare with the checkpoint ceiling (two rows written per commit either way), batch creates with 10 rows per commit"},
	}
	p.Finish(fmt.Sprintf("%s creates/s single, %s instances/s in batches", formatNumber(sps), formatNumber(bps)))
	return res, nil
}

// parallel calls fn for 0 … n-1 from workers goroutines and returns each
// call's duration and the wall time of the whole.
func parallel(ctx context.Context, workers, n int, fn func(ctx context.Context, i int) error) ([]time.Duration, time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next     atomic.Int64
		mu       sync.Mutex
		lat      = make([]time.Duration, 0, n)
		firstErr error
		wg       sync.WaitGroup
	)
	start := time.Now()
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				t := time.Now()
				err := fn(ctx, i)
				d := time.Since(t)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
					cancel()
				}
				lat = append(lat, d)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return lat, time.Since(start), firstErr
}

// soak runs steps10 for Config.Duration and reports the throughput of each
// interval, so that a decay shows.
func (r *run) soak(ctx context.Context) (*Result, error) {
	d, iv := r.cfg.Duration, r.cfg.Interval
	intervals := int(d / iv)
	p := newProgress(r.cfg.Progress, WorkloadSoak, int(d.Seconds()), "s")
	fail := func(err error) (*Result, error) {
		p.Finish("failed")
		return nil, err
	}
	start := time.Now()
	until := start.Add(d)

	// Sample the queue table at the end of every interval.
	queue := make([]*QueueStats, intervals)
	sampleCtx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for i := range intervals {
			if sleep(sampleCtx, time.Until(start.Add(time.Duration(i+1)*iv))) != nil {
				return
			}
			queue[i], _ = r.db.probe.queueStats(sampleCtx)
		}
	}()
	created, err := r.feed(ctx, nameSoak, "k", -1, until, func(int) { p.Set(int(time.Since(start).Seconds())) })
	if err != nil {
		stopSampling()
		<-sampled
		return fail(err)
	}
	<-sampled
	stopSampling()
	if err := r.drain(ctx, nameSoak, created, nil); err != nil {
		return fail(err)
	}
	times, err := r.db.probe.instances(ctx, nameSoak)
	if err != nil {
		return fail(err)
	}
	if _, err := analyze(times); err != nil {
		return fail(err)
	}
	counts := make([]int, intervals)
	inWindow := 0
	for _, t := range times {
		k := int(t.completed.Sub(start.Round(0)) / iv)
		if t.completed.Before(start.Round(0)) || k >= intervals {
			continue
		}
		counts[k]++
		inWindow++
	}
	res := &Result{
		Workload: WorkloadSoak,
		Description: fmt.Sprintf("steps10 for %s (%d workflows created), throughput per %s interval",
			d, created, iv),
		N:              created,
		ElapsedSeconds: (time.Duration(intervals) * iv).Seconds(),
		SQL:            r.tracer.take(created * stepsPerWorkflow),
		Notes:          []string{"the first interval includes the start (empty queue, cold caches); instances finishing after the last full interval are not counted"},
	}
	for i, c := range counts {
		res.Intervals = append(res.Intervals, Interval{
			StartSeconds: (time.Duration(i) * iv).Seconds(), Workflows: c,
			StepsPerSecond: rate(c*stepsPerWorkflow, iv), Queue: queue[i],
		})
	}
	whole := rate(inWindow*stepsPerWorkflow, time.Duration(intervals)*iv)
	first, last := res.Intervals[0].StepsPerSecond, res.Intervals[len(res.Intervals)-1].StepsPerSecond
	res.Metrics = []Metric{
		{Name: "steps/s (whole soak)", Value: whole, Unit: "steps/s", Ceiling: CeilingStepTx},
		{Name: "first interval", Value: first, Unit: "steps/s"},
		{Name: "last interval", Value: last, Unit: "steps/s"},
	}
	if first > 0 {
		res.Metrics = append(res.Metrics, Metric{Name: "last ÷ first interval", Value: last / first, Unit: "×"})
	}
	p.Finish(fmt.Sprintf("%s steps/s, last interval %s", formatNumber(whole), formatNumber(last)))
	return res, nil
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
