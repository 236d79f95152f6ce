package bench

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// progress shows how far a workload is. On a terminal it redraws one line
// in place ten times a second; elsewhere (a file, CI) it writes a line when
// the workload starts and one when it ends.
type progress struct {
	w     io.Writer
	tty   bool
	label string
	total int64
	unit  string
	start time.Time

	done atomic.Int64
	stop chan struct{}
	wg   sync.WaitGroup
}

// newProgress starts showing progress towards total units; w nil shows
// nothing.
func newProgress(w io.Writer, label string, total int, unit string) *progress {
	p := &progress{w: w, label: label, total: int64(total), unit: unit, start: time.Now(), stop: make(chan struct{})}
	if w == nil {
		return p
	}
	p.tty = isTerminal(w)
	if !p.tty {
		fmt.Fprintf(w, "bench: %s: %d %s…\n", label, total, unit)
		return p
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				fmt.Fprint(w, "\r"+p.line()+"\x1b[K")
			}
		}
	}()
	return p
}

// Set records how many units are done.
func (p *progress) Set(n int) { p.done.Store(int64(n)) }

// Finish stops the bar and writes its last state with a summary.
func (p *progress) Finish(summary string) {
	if p.w == nil {
		return
	}
	if p.tty {
		close(p.stop)
		p.wg.Wait()
		fmt.Fprint(p.w, "\r\x1b[K")
	}
	fmt.Fprintf(p.w, "bench: %s: done in %s  %s\n", p.label, time.Since(p.start).Round(10*time.Millisecond), summary)
}

// line renders the bar: label, bar, count, percentage, elapsed time.
func (p *progress) line() string {
	const width = 30
	done, total := p.done.Load(), p.total
	frac := 0.0
	if total > 0 {
		frac = min(1, float64(done)/float64(total))
	}
	filled := int(frac * width)
	return fmt.Sprintf("%-8s [%s%s] %d/%d %s %3.0f%% %s", p.label,
		strings.Repeat("#", filled), strings.Repeat(" ", width-filled),
		done, total, p.unit, frac*100, time.Since(p.start).Round(100*time.Millisecond))
}

// isTerminal reports whether w is a character device such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
