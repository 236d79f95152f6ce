//go:build chaos && linux

package chaos_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// worker is one runner process.
type worker struct {
	slot int
	cmd  *exec.Cmd
	pid  int
	out  string
	// exited is closed once the process has exited.
	exited chan struct{}
	// killed is set before the test kills the process, so an exit without
	// it is a crash of its own (the crash-looping step kills its process).
	killed bool
}

// fleet runs a fixed number of worker slots and starts a new process in a
// slot whose process died of its own accord.
type fleet struct {
	t       *testing.T
	name    string
	dir     string
	env     []string
	mu      sync.Mutex
	slots   []*worker
	all     []*worker
	closing bool
	// crashed are the pids of the workers that died of their own accord
	// and were replaced, in order; killed those the test killed.
	crashed []int
	killed  []int
}

// newFleet starts n workers with the environment env (the worker settings)
// and kills them all when the test ends, logging the tail of each one's
// output if the test failed. Their output files are named after the fleet.
func newFleet(t *testing.T, name, dir string, n int, env []string) *fleet {
	f := &fleet{t: t, name: name, dir: dir, env: env, slots: make([]*worker, n)}
	t.Cleanup(f.cleanup)
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range n {
		f.startLocked(i)
	}
	return f
}

// startLocked starts a worker in the slot; f.mu is held.
func (f *fleet) startLocked(slot int) *worker {
	t := f.t
	out := filepath.Join(f.dir, fmt.Sprintf("%s-%d.out", f.name, len(f.all)+1))
	file, err := os.Create(out)
	if err != nil {
		t.Errorf("creating worker output: %v", err)
		return nil
	}
	defer func() { _ = file.Close() }()
	cmd := exec.Command(os.Args[0], "-test.run=^TestChaosWorker$", "-test.v")
	cmd.Env = append(append(os.Environ(), envWorker+"=1"), f.env...)
	cmd.Stdout, cmd.Stderr = file, file
	// A worker must not outlive the test process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Errorf("starting worker: %v", err)
		return nil
	}
	w := &worker{slot: slot, cmd: cmd, pid: cmd.Process.Pid, out: out, exited: make(chan struct{})}
	f.slots[slot] = w
	f.all = append(f.all, w)
	go f.watch(w)
	return w
}

// watch waits for the worker to exit and replaces it when it died on its own.
func (f *fleet) watch(w *worker) {
	_ = w.cmd.Wait()
	close(w.exited)
	f.mu.Lock()
	defer f.mu.Unlock()
	if w.killed || f.closing || f.slots[w.slot] != w {
		return
	}
	f.crashed = append(f.crashed, w.pid)
	f.startLocked(w.slot)
}

// pids returns the pids of the slots' processes.
func (f *fleet) pids() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var pids []int
	for _, w := range f.slots {
		if w != nil {
			pids = append(pids, w.pid)
		}
	}
	return pids
}

// kill kills the slot's process with SIGKILL, waits until it is gone, and
// after delay starts a new one in the slot. It returns the killed pid, or 0
// when the process had already exited (a crash of its own, which watch
// counts and replaces).
func (f *fleet) kill(slot int, delay time.Duration) int {
	f.mu.Lock()
	w := f.slots[slot]
	if w == nil || f.closing || exited(w) {
		f.mu.Unlock()
		return 0
	}
	w.killed = true
	f.killed = append(f.killed, w.pid)
	f.mu.Unlock()
	_ = w.cmd.Process.Signal(syscall.SIGKILL)
	<-w.exited
	<-time.After(delay)
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.closing && f.slots[slot] == w {
		f.startLocked(slot)
	}
	return w.pid
}

// slotOf returns the slot of the process with the pid, or -1.
func (f *fleet) slotOf(pid int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, w := range f.slots {
		if w != nil && w.pid == pid {
			return i
		}
	}
	return -1
}

// exited reports whether the worker's process has exited (and been waited
// for): a process that died of its own accord but whose slot watch has not
// yet replaced.
func exited(w *worker) bool {
	select {
	case <-w.exited:
		return true
	default:
		return false
	}
}

// crashedPids returns the pids of the workers that died without the test
// killing them (and were replaced).
func (f *fleet) crashedPids() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.crashed)
}

// killedPids returns the pids of the workers the test killed.
func (f *fleet) killedPids() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.killed)
}

// close kills every worker; it may be called more than once.
func (f *fleet) close() {
	f.mu.Lock()
	f.closing = true
	all := append([]*worker(nil), f.all...)
	f.mu.Unlock()
	for _, w := range all {
		_ = w.cmd.Process.Signal(syscall.SIGCONT)
		_ = w.cmd.Process.Signal(syscall.SIGKILL)
		<-w.exited
	}
}

// describe returns how the worker with the pid ended and the last lines of
// its output, for a failure message.
func (f *fleet) describe(pid int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range f.all {
		if w.pid != pid {
			continue
		}
		state := "still running"
		if exited(w) {
			state = w.cmd.ProcessState.String()
		}
		b, _ := os.ReadFile(w.out)
		return fmt.Sprintf("%s; output tail:\n%s", state, tail(string(b), 5))
	}
	return "not of this fleet"
}

// grep returns the lines of the output of the worker with the pid that
// mention s (at most the last 30), for a failure message.
func (f *fleet) grep(pid int, s string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range f.all {
		if w.pid != pid {
			continue
		}
		b, _ := os.ReadFile(w.out)
		var found []string
		for line := range strings.SplitSeq(string(b), "\n") {
			if strings.Contains(line, s) {
				found = append(found, line)
			}
		}
		return strings.Join(found[max(len(found)-30, 0):], "\n")
	}
	return ""
}

// cleanup closes the fleet and logs the tail of the last five workers'
// output if the test failed.
func (f *fleet) cleanup() {
	f.close()
	if !f.t.Failed() {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range f.all[max(len(f.all)-5, 0):] {
		b, _ := os.ReadFile(w.out)
		f.t.Logf("%s %d (%s), output tail:\n%s", f.name, w.pid, w.cmd.ProcessState, tail(string(b), 15))
	}
}

// stopped reports whether the process is in the stopped state.
func stopped(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'T'
}
