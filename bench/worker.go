package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/duraflow/duraflow/db/dburl"
)

// workerReady is the line a worker prints once its runner runs.
const workerReady = "duraflow-bench-worker ready"

// WorkerConfig configures one worker process of a run: a runner of the bench
// workflows on the run's database.
type WorkerConfig struct {
	// DatabaseURL is the run's database, as the run hands it over (on
	// Postgres with the run's schema as search_path). Required.
	DatabaseURL string
	// WakeChannel is the run's Postgres notification channel.
	WakeChannel string
	// Concurrency is the runner's MaxConcurrency.
	Concurrency int
	// PollInterval is the runner's PollInterval.
	PollInterval time.Duration
}

// AddFlags defines the flags that fill the config; Args produces them.
func (w *WorkerConfig) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&w.DatabaseURL, "db", "", "the run's database URL")
	fs.StringVar(&w.WakeChannel, "wake-channel", "", "the run's Postgres wake channel")
	fs.IntVar(&w.Concurrency, "concurrency", 16, "the runner's MaxConcurrency")
	fs.DurationVar(&w.PollInterval, "poll-interval", time.Second, "the runner's PollInterval")
}

// Args returns the command-line arguments that AddFlags parses back into w.
func (w *WorkerConfig) Args() []string {
	return []string{
		"--db", w.DatabaseURL,
		"--wake-channel", w.WakeChannel,
		"--concurrency", strconv.Itoa(w.Concurrency),
		"--poll-interval", w.PollInterval.String(),
	}
}

// RunWorker runs a worker process of a run: it starts a runner of the bench
// workflows, prints a ready line to stdout, and runs until ctx is done or
// stdin reaches its end (the run closes it, and so does the run's death),
// then stops the runner.
func RunWorker(ctx context.Context, w *WorkerConfig, stdin io.Reader, stdout io.Writer, logger *slog.Logger) error {
	if w.DatabaseURL == "" {
		return errors.New("bench worker: --db is required")
	}
	if w.Concurrency < 1 {
		return fmt.Errorf("bench worker: --concurrency %d must be at least 1", w.Concurrency)
	}
	backend, _, err := dburl.Parse(w.DatabaseURL)
	if err != nil {
		return err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	h, err := startHost(ctx, hostOptions{
		backend: backend, url: w.DatabaseURL, wakeChannel: w.WakeChannel, runner: true,
		concurrency: w.Concurrency, pollInterval: w.PollInterval, logger: logger,
	})
	if err != nil {
		return err
	}
	defer h.stop(context.WithoutCancel(ctx))
	if _, err := fmt.Fprintln(stdout, workerReady); err != nil {
		return err
	}
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		close(eof)
	}()
	select {
	case <-ctx.Done():
	case <-eof:
	}
	return nil
}

// workers are the worker processes of a run.
type workers struct {
	cmds   []*exec.Cmd
	stdins []io.WriteCloser
	waits  []chan error
}

// startWorkers starts n workers and waits until each is ready.
func startWorkers(ctx context.Context, cfg *Config, d *database, n int, stderr io.Writer) (_ *workers, err error) {
	ws := &workers{}
	defer func() {
		if err != nil {
			ws.stop()
		}
	}()
	wc := &WorkerConfig{DatabaseURL: d.url, WakeChannel: d.wakeChannel, Concurrency: cfg.Concurrency, PollInterval: cfg.PollInterval}
	for i := range n {
		cmd := cfg.WorkerCommand(wc.Args())
		cmd.Stderr = stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("starting worker %d: %w", i+1, err)
		}
		wait := make(chan error, 1)
		ws.cmds, ws.stdins, ws.waits = append(ws.cmds, cmd), append(ws.stdins, stdin), append(ws.waits, wait)
		ready := make(chan bool, 1)
		go func() {
			sc := bufio.NewScanner(stdout)
			ok := false
			for sc.Scan() {
				if strings.TrimSpace(sc.Text()) == workerReady && !ok {
					ok = true
					ready <- true
				}
			}
			if !ok {
				ready <- false
			}
			wait <- cmd.Wait()
		}()
		select {
		case ok := <-ready:
			if !ok {
				return nil, fmt.Errorf("worker %d exited before it was ready (its errors are above)", i+1)
			}
		case <-time.After(60 * time.Second):
			return nil, fmt.Errorf("worker %d was not ready within 60 seconds", i+1)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return ws, nil
}

// cpu adds up the CPU time of the worker processes so far; false when it
// cannot be read (not Linux).
func (ws *workers) cpu() (time.Duration, bool) {
	var total time.Duration
	if ws == nil {
		return 0, true
	}
	for _, cmd := range ws.cmds {
		d, ok := procCPU(cmd.Process.Pid)
		if !ok {
			return 0, false
		}
		total += d
	}
	return total, true
}

// stop closes every worker's stdin, which makes it drain and exit, and kills
// the ones still running after 30 seconds.
func (ws *workers) stop() {
	if ws == nil {
		return
	}
	for _, in := range ws.stdins {
		_ = in.Close()
	}
	var wg sync.WaitGroup
	for i, cmd := range ws.cmds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-ws.waits[i]:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-ws.waits[i]
			}
		}()
	}
	wg.Wait()
}
