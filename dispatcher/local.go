package dispatcher

import (
	"sync"

	"github.com/duraflow/duraflow/runner"
)

// Local wakes the runners of this process at once when a commit made work
// due. Its Wake method is the WakeFunc of client.Config and runner.Config.
type Local struct {
	mu      sync.RWMutex
	runners []*runner.Runner
	funcs   []func(workflowName string)
}

// NewLocal returns a waker for the given runners.
func NewLocal(runners ...*runner.Runner) *Local {
	return &Local{runners: runners}
}

// Add registers another runner to wake.
func (l *Local) Add(r *runner.Runner) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runners = append(l.runners, r)
}

// AddFunc registers a function to call on every wake, such as a hook
// deliverer's Notify.
func (l *Local) AddFunc(f func(workflowName string)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.funcs = append(l.funcs, f)
}

// Wake notifies every registered runner; it never blocks. workflowName is the
// workflow whose work became due (every runner is woken, since claiming is cheap).
func (l *Local) Wake(workflowName string) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, r := range l.runners {
		r.Notify()
	}
	for _, f := range l.funcs {
		f(workflowName)
	}
}
