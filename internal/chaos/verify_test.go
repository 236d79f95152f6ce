//go:build chaos && linux

package chaos_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
)

// ledgerLine is one line of the side-effect ledger.
type ledgerLine struct {
	kind                  byte // 'S' an attempt started, 'D' it finished its work, 'C' a worker claimed the instance's task (step: its lease losses)
	pid                   int
	instance, step, token string
	// at is, for an S line, when the runner started the attempt
	// (workflow.StepInfo.StartedAt); for a C line the claim's Now; for a D
	// line when the work finished.
	at time.Time
}

// readLedger returns the ledger's lines in the order they were written.
func readLedger(path string) ([]ledgerLine, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading ledger: %w", err)
	}
	var lines []ledgerLine
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 6 || len(f[0]) != 1 {
			return nil, fmt.Errorf("reading ledger: malformed line %q", sc.Text())
		}
		pid, err := strconv.Atoi(f[1])
		if err != nil {
			return nil, fmt.Errorf("reading ledger: malformed line %q", sc.Text())
		}
		at, err := strconv.ParseInt(f[5], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("reading ledger: malformed line %q", sc.Text())
		}
		lines = append(lines, ledgerLine{kind: f[0][0], pid: pid, instance: f[2], step: f[3], token: f[4], at: time.Unix(0, at)})
	}
	return lines, sc.Err()
}

// restartStall is what one database restart stalled.
type restartStall struct {
	inFlight    int
	median, max time.Duration
	// slowest names the instance that stalled longest and its holder.
	slowest string
}

// summary is what one backend's run did and found.
type summary struct {
	backend  string
	duration time.Duration

	instances, completed, events int
	kills, stops                 int
	loopCrashes, sharedCrashes   int
	sharedCrashesRaced           int
	stopsHeld, stopsTaken        int
	restarts                     int
	listenerKills                int
	listenerReconnects           int
	stalls                       []restartStall

	lost, duplicated, wrongOutput int
	stepRowsDuplicated            int
	completedRerun                int
	// lateStarts are attempts whose ledger line comes after the recorded
	// attempt of their step finished, but which their runner started
	// (StepInfo.StartedAt) before the recorder's runner took the instance
	// over: the process stopped between the start and the function's
	// first line.
	lateStarts                   int
	reexecuted                   int
	maxAttemptsOneStep           int
	crashLooped                  int
	staleAttempts, staleFinished int
	staleWrites                  int
	crashLoopOutcome             string
	sharedLoopOutcome            string
	// victims are the ordinary instances with an attempt cut short by
	// the death of a worker in a shared crash-loop attempt; victimsBound
	// those of them the crash-loop bound ended.
	victims, victimsBound int
	// victimsInARow is the most crash-loop attempts in a row one ordinary
	// instance died beside.
	victimsInARow int
	// failures are the invariant violations the run found.
	failures []string
}

// maxFailuresShown bounds the failures printed again below the summary
// table.
const maxFailuresShown = 20

// verify checks, from the database and the ledger, everything the chaos must
// not have broken, and fills the summary's counts.
func (r *run) verify(ctx context.Context) {
	s := r.sum
	lines, err := readLedger(r.ledger)
	if err != nil {
		r.failf("%v", err)
		return
	}
	// starts: the ledger positions of the attempts of each step; done: the
	// position of each attempt's D line.
	starts := map[string][]int{}
	done := map[string]int{}
	for i, l := range lines {
		switch l.kind {
		case 'S':
			starts[l.instance+"/"+l.step] = append(starts[l.instance+"/"+l.step], i)
		case 'D':
			done[l.token] = i
		}
	}
	recorded := map[string]string{} // token -> instance/step of a complete step row
	want := map[string]db.StepType{"nap": db.StepTypeSleep, "go": db.StepTypeWaitForEvent}
	for _, name := range doSteps {
		want[name] = db.StepTypeDo
	}

	// The workers that died in a crash-loop attempt: the step writes its
	// S line, then kills its process.
	sharedPids, loopPids := map[int]bool{}, map[int]bool{}
	for _, l := range lines {
		if l.kind == 'S' && l.instance == sharedLoopID {
			sharedPids[l.pid] = true
		}
		if l.kind == 'S' && l.instance == crashLoopID {
			loopPids[l.pid] = true
		}
	}
	// Victims: ordinary instances with an attempt that started in such a
	// process and never finished its work. The process died in the crash
	// loop, so the attempt died with it.
	victims := map[string]bool{}
	victimsOf := map[int][]string{} // crashed pid -> the instances that died with it
	for _, l := range lines {
		if l.kind == 'S' && sharedPids[l.pid] && r.created[l.instance] != 0 {
			if _, ok := done[l.token]; !ok && !slices.Contains(victimsOf[l.pid], l.instance) {
				victims[l.instance] = true
				victimsOf[l.pid] = append(victimsOf[l.pid], l.instance)
			}
		}
	}
	s.victims = len(victims)
	// How many crash-loop attempts in a row an ordinary instance died
	// beside, with no step of it finishing between: the lease losses the
	// crash loop alone gave it. The quarantine bounds that by the lease
	// losses that make a task suspect (1, or 2), since two suspects never
	// run on one runner; without it the instances claimed with the crash
	// loop follow it to the bound.
	inARow := map[string]int{}
	worst := ""
	for _, l := range lines {
		switch {
		case l.kind == 'D':
			inARow[l.instance] = 0
		case l.kind == 'S' && l.instance == sharedLoopID:
			for _, id := range victimsOf[l.pid] {
				inARow[id]++
				if inARow[id] > s.victimsInARow {
					s.victimsInARow, worst = inARow[id], id
				}
			}
		}
	}
	if s.victimsInARow > maxSuspectLosses {
		r.failf("%s died beside %d shared crash-loop attempts in a row, want at most %d (the quarantine keeps a suspect task from running beside another)",
			worst, s.victimsInARow, maxSuspectLosses)
	}
	r.checkCrashes(s, sharedPids, loopPids)
	held := r.heldSinceProgress(lines, sharedPids, loopPids)

	ids := make([]string, 0, len(r.created))
	for id := range r.created {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	s.instances = len(ids)
	for _, id := range ids {
		n := r.created[id]
		ref := db.InstanceRef{WorkflowName: chaosWorkflow, ID: id}
		inst, err := r.store.InstanceGet(ctx, ref)
		if err != nil {
			s.lost++
			r.failf("%s: lost: %v", id, err)
			continue
		}
		steps, err := r.store.StepList(ctx, &db.StepListParams{WorkflowName: chaosWorkflow, InstanceID: id, RunNumber: 1})
		if err != nil {
			r.failf("%s: listing steps: %v", id, err)
			continue
		}
		dup := false
		byKey := map[string]*db.Step{}
		for _, st := range steps {
			if byKey[st.Key] != nil {
				s.stepRowsDuplicated++
				dup = true
				r.failf("%s: step %q recorded twice", id, st.Key)
			}
			byKey[st.Key] = st
			if res, ok := decodeResult(st); ok {
				recorded[res.Token] = id + "/" + st.Key
			}
		}
		mostAttempts := 0
		for _, name := range doSteps {
			k := id + "/" + name
			s.reexecuted += max(len(starts[k])-1, 0)
			mostAttempts = max(mostAttempts, len(starts[k]))
			st := byKey[name]
			res, ok := decodeResult(st)
			if st == nil || !ok {
				continue
			}
			d, ok := done[res.Token]
			if !ok {
				r.failf("%s: step %s records attempt %s of pid %d, which the ledger never saw finish", id, name, res.Token, res.Pid)
				continue
			}
			for _, p := range starts[k] {
				if p > d && startedBeforeTakeover(lines, starts[k], res.Token, lines[p]) {
					// Its runner started it while it held the instance,
					// then stopped before the attempt's first line; the
					// recorder took over only after that start. A stale
					// attempt, never recorded, not a rerun of a completed
					// step.
					s.lateStarts++
					continue
				}
				if p > d {
					s.completedRerun++
					dup = true
					r.failf("%s: step %s ran again (pid %d) after its recorded attempt %s (pid %d) had finished; its ledger:\n%s"+
						"what pid %d logged of it:\n%s\nwhat pid %d logged of it:\n%s",
						id, name, lines[p].pid, res.Token, res.Pid, r.instanceLedger(lines, id),
						lines[p].pid, r.fleet.grep(lines[p].pid, "instance="+id), res.Pid, r.fleet.grep(res.Pid, "instance="+id))
				}
			}
		}
		s.maxAttemptsOneStep = max(s.maxAttemptsOneStep, mostAttempts)
		switch {
		case inst.Status == dftype.StatusComplete:
			s.completed++
		case inst.Status == dftype.StatusErrored && strings.Contains(inst.ErrorMessage, "lost its runner"):
			// The crash-loop bound hit an ordinary instance: an expected
			// outcome of the fix for crash loops when one of its steps was
			// cut short crashLimit times, which the ledger must show.
			s.crashLooped++
			lost, beside := held[id].lost, lossesBeside(lines, id)
			if lost < crashLimit {
				r.failf("%s: errored %q, though only %d of its claims since it last made progress were in workers that died (most attempts of one step: %d)",
					id, inst.ErrorMessage, lost, mostAttempts)
			}
			if victims[id] {
				// Random kills may end an instance by the bound after it
				// died beside the crash loop: the quarantine bounds only
				// the deaths the crash loop gives it, to maxSuspectLosses
				// (two suspects never run on one runner).
				s.victimsBound++
				if beside > maxSuspectLosses {
					r.failf("%s: errored %q with %d of the lease losses the bound counted given by the shared crash loop, want at most %d (the quarantine let the crash loop take it down); its ledger:\n%s",
						id, inst.ErrorMessage, beside, maxSuspectLosses, r.instanceLedger(lines, id))
				}
			}
			continue
		default:
			s.lost++
			r.failf("%s: did not complete: status %s, error %s: %s", id, inst.Status, inst.ErrorName, inst.ErrorMessage)
			continue
		}
		var out chaosOutput
		if err := json.Unmarshal(inst.Output, &out); err != nil {
			s.wrongOutput++
			r.failf("%s: output %s: %v", id, inst.Output, err)
			continue
		}
		if w := expectedValue(n, eventValue(n)); out.V != w {
			s.wrongOutput++
			r.failf("%s: output value %d, want %d", id, out.V, w)
		}
		if len(byKey) != len(want) {
			r.failf("%s: %d steps recorded, want %d", id, len(byKey), len(want))
		}
		for key, typ := range want {
			st := byKey[key]
			if st == nil || st.Type != typ || st.Status != db.StepStatusComplete {
				r.failf("%s: step %q missing or not complete: %+v", id, key, st)
				continue
			}
			if typ == db.StepTypeDo {
				res, _ := decodeResult(st)
				if out.Tokens[key] != res.Token {
					dup = true
					r.failf("%s: output used attempt %s of step %s, the database recorded %s", id, out.Tokens[key], key, res.Token)
				}
			}
		}
		if dup {
			s.duplicated++
		}
	}

	s.staleAttempts = len(r.stale)
	for _, a := range r.stale {
		if _, ok := done[a.token]; ok {
			s.staleFinished++
		}
		if where, ok := recorded[a.token]; ok {
			s.staleWrites++
			r.failf("stale runner %d wrote step %s (attempt %s) after its lease was taken over", a.pid, where, a.token)
		}
	}

	if r.cfg.crashLoop {
		s.crashLoopOutcome = r.checkCrashLoop(ctx, db.InstanceRef{WorkflowName: crashLoopWorkflow, ID: crashLoopID}, len(starts[crashLoopID+"/boom"]))
		s.sharedLoopOutcome = r.checkCrashLoop(ctx, db.InstanceRef{WorkflowName: sharedLoopWorkflow, ID: sharedLoopID}, len(starts[sharedLoopID+"/boom"]))
	}
	for i, st := range s.stalls {
		if st.max > r.cfg.maxStall {
			r.failf("postgres restart %d: in-flight instances stalled up to %s after the database was back (median %s, %d instances; the slowest %s), want at most %s: a runner that meets an outage keeps its lease and retries",
				i+1, st.max.Round(10*time.Millisecond), st.median.Round(10*time.Millisecond), st.inFlight, st.slowest, r.cfg.maxStall)
		}
	}
}

// checkCrashLoop checks that the crash-looping instance ended errored with
// "lost its runner" after at most crashLimit attempts, each of which killed
// its runner (random kills of the runner holding it count as lost leases
// too, so the shared one may need fewer), and returns the outcome.
func (r *run) checkCrashLoop(ctx context.Context, ref db.InstanceRef, attempts int) string {
	inst, err := r.store.InstanceGet(ctx, ref)
	switch {
	case err != nil:
		r.failf("crash-looping instance %s: %v", ref.ID, err)
		return "lost"
	case inst.Status == dftype.StatusErrored && strings.Contains(inst.ErrorMessage, "lost its runner"):
		if attempts < 1 || attempts > crashLimit {
			r.failf("crash-looping instance %s: errored after %d attempts, want 1 to %d", ref.ID, attempts, crashLimit)
		}
		return fmt.Sprintf("errored after %d attempts", attempts)
	default:
		r.failf("crash-looping instance %s: %s after %d attempts that each killed their runner, want errored with \"lost its runner\" after %d (runner.Config.MaxLeaseLosses)",
			ref.ID, inst.Status, attempts, crashLimit)
		return fmt.Sprintf("%s after %d attempts", inst.Status, attempts)
	}
}

// checkCrashes checks that the fleets told self-crashes from test kills:
// every worker that died in a crash-loop attempt (sharedPids, loopPids from
// the ledger) was counted as a crash and replaced, or (a race) was being
// killed by the test at that moment; and no worker crashed otherwise.
func (r *run) checkCrashes(s *summary, sharedPids, loopPids map[int]bool) {
	crashed := map[int]bool{}
	for _, pid := range r.crashed {
		crashed[pid] = true
		if !sharedPids[pid] {
			r.failf("chaos worker %d died of its own accord outside the crash loop: %s", pid, r.fleet.describe(pid))
		}
	}
	for pid := range sharedPids {
		switch {
		case crashed[pid]:
			s.sharedCrashes++
		case slices.Contains(r.killed, pid):
			// The test killed it as the step killed it.
			s.sharedCrashes++
			s.sharedCrashesRaced++
		default:
			r.failf("chaos worker %d died in a crash-loop attempt, but the fleet neither counted nor replaced it", pid)
		}
	}
	s.loopCrashes = len(r.loopCrashed)
	for _, pid := range r.loopCrashed {
		if !loopPids[pid] {
			r.failf("crash-loop worker %d died without a crash-loop attempt", pid)
		}
	}
	if len(loopPids) != len(r.loopCrashed) {
		r.failf("the crash-loop worker died in %d attempts, the fleet replaced it %d times", len(loopPids), len(r.loopCrashed))
	}
}

// formatSummary returns the summary table: one row per measure, one column
// per backend.
func formatSummary(cfg config, sums []*summary) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(name string, f func(s *summary) string) {
		fmt.Fprintf(w, "%s\t", name)
		for _, s := range sums {
			fmt.Fprintf(w, "%s\t", f(s))
		}
		fmt.Fprintln(w)
	}
	num := func(f func(s *summary) int) func(s *summary) string {
		return func(s *summary) string { return strconv.Itoa(f(s)) }
	}
	row("", func(s *summary) string { return s.backend })
	row("chaos time", func(s *summary) string { return s.duration.String() })
	row("runner processes / lease", func(*summary) string { return fmt.Sprintf("%d / %s", cfg.workers, cfg.lease) })
	row("instances created", num(func(s *summary) int { return s.instances }))
	row("completed", num(func(s *summary) int { return s.completed }))
	row("events sent", num(func(s *summary) int { return s.events }))
	row("SIGKILLs", num(func(s *summary) int { return s.kills }))
	row("self-crashes (isolated crash loop)", num(func(s *summary) int { return s.loopCrashes }))
	row("self-crashes (shared crash loop)", func(s *summary) string {
		return fmt.Sprintf("%d (%d as the test killed it)", s.sharedCrashes, s.sharedCrashesRaced)
	})
	row("SIGSTOPs past the lease", num(func(s *summary) int { return s.stops }))
	row("  tasks held / taken over", func(s *summary) string { return fmt.Sprintf("%d / %d", s.stopsHeld, s.stopsTaken) })
	row("  stale attempts / their work done", func(s *summary) string { return fmt.Sprintf("%d / %d", s.staleAttempts, s.staleFinished) })
	row("  stale writes recorded", num(func(s *summary) int { return s.staleWrites }))
	pgOnly := func(f func(s *summary) string) func(s *summary) string {
		return func(s *summary) string {
			if s.backend != "postgres" {
				return "-"
			}
			return f(s)
		}
	}
	row("postgres restarts", pgOnly(num(func(s *summary) int { return s.restarts })))
	row("listener terminations / relistens", pgOnly(func(s *summary) string { return fmt.Sprintf("%d / %d", s.listenerKills, s.listenerReconnects) }))
	row("lost", num(func(s *summary) int { return s.lost }))
	row("duplicated", num(func(s *summary) int { return s.duplicated }))
	row("  step rows recorded twice", num(func(s *summary) int { return s.stepRowsDuplicated }))
	row("  completed steps run again", num(func(s *summary) int { return s.completedRerun }))
	row("  stale attempts started before a takeover, run after it", num(func(s *summary) int { return s.lateStarts }))
	row("wrong output", num(func(s *summary) int { return s.wrongOutput }))
	row("re-executed side effects", num(func(s *summary) int { return s.reexecuted }))
	row("most attempts of one step", num(func(s *summary) int { return s.maxAttemptsOneStep }))
	row("ended by the crash-loop bound", num(func(s *summary) int { return s.crashLooped }))
	row("crash-looping instance, isolated", func(s *summary) string { return cmp.Or(s.crashLoopOutcome, "-") })
	row("crash-looping instance, shared", func(s *summary) string { return cmp.Or(s.sharedLoopOutcome, "-") })
	row("died beside a shared crash-loop attempt", num(func(s *summary) int { return s.victims }))
	row("  of them ended by the crash-loop bound", num(func(s *summary) int { return s.victimsBound }))
	row("  most crash-loop deaths of one in a row", num(func(s *summary) int { return s.victimsInARow }))
	row("stall after restart (median / max)", func(s *summary) string {
		if len(s.stalls) == 0 {
			return "-"
		}
		if len(s.stalls) <= 3 {
			var parts []string
			for _, st := range s.stalls {
				parts = append(parts, fmt.Sprintf("%s / %s (%d)", st.median.Round(10*time.Millisecond), st.max.Round(10*time.Millisecond), st.inFlight))
			}
			return strings.Join(parts, ", ")
		}
		// Many restarts: the median of their medians and the worst of all,
		// over every instance in flight (each restart is logged apart).
		medians := make([]time.Duration, 0, len(s.stalls))
		var worst time.Duration
		inFlight := 0
		for _, st := range s.stalls {
			medians = append(medians, st.median)
			worst = max(worst, st.max)
			inFlight += st.inFlight
		}
		slices.Sort(medians)
		return fmt.Sprintf("%s / %s (%d restarts, %d in flight)", medians[len(medians)/2].Round(10*time.Millisecond), worst.Round(10*time.Millisecond), len(s.stalls), inFlight)
	})
	_ = w.Flush()
	return b.String()
}

// sinceProgress is what an instance's claims since it last made progress
// say: lost is how many were in workers that died (killed, crashed, or
// stopped past their lease).
type sinceProgress struct{ lost int }

// lossesBeside counts the lease losses of the instance's last streak (the
// one the crash-loop bound ended) that the shared crash loop gave it: the
// claims whose worker died in a crash-loop attempt (its S line, which kills
// it) before the instance was claimed again. Each C line carries the lease
// losses in a row the claim found: a claim the next one finds one loss
// further lost its lease; one the next finds at the same count ended
// without a loss (a suspect handed back by the quarantine). A claim whose
// worker lost it otherwise (stopped past its lease, its heartbeats late)
// and crash-looped only later is no loss beside the crash loop; nor is one
// whose C line is missing (its worker died between the claim and the line).
// Unlike the claims in those workers, this is the count the quarantine
// bounds.
func lossesBeside(lines []ledgerLine, id string) int {
	type claim struct{ at, pid, losses int }
	var claims []claim
	died := map[int]int{} // pid -> the ledger position of its crash-loop attempt
	for i, l := range lines {
		if l.kind == 'S' && l.instance == sharedLoopID {
			if _, ok := died[l.pid]; !ok {
				died[l.pid] = i
			}
		}
		if l.kind != 'C' || l.instance != id {
			continue
		}
		n, err := strconv.Atoi(l.step)
		if err != nil {
			continue
		}
		claims = append(claims, claim{at: i, pid: l.pid, losses: n})
	}
	beside := 0
	for i := len(claims) - 2; i >= 0; i-- {
		next, c := claims[i+1], claims[i]
		if next.losses == 0 {
			break
		}
		d, ok := died[c.pid]
		inLoop := ok && c.at < d && d < next.at
		switch {
		case c.losses == next.losses-1 && inLoop:
			beside++
		case c.losses > next.losses:
			// The claim's run made progress (which resets the count),
			// then lost the lease: the streak's first loss.
			if inLoop {
				beside++
			}
			return beside
		}
	}
	return beside
}

// heldSinceProgress counts, per ordinary instance, its claims (C lines)
// since it last made progress in workers that died: the most lease losses
// in a row it can have had. Progress is the first attempt of a later step
// than any before (that run's claim is kept: it is the one that started
// it), since a step only starts once the steps before it are recorded. The
// count is generous: a claim in a worker that died later may have ended
// cleanly before (suspending at the sleep or the event wait, which the
// ledger does not show). A claim is written before the runner sees the
// task, so a worker that died between its claim and the workflow code
// counts too.
func (r *run) heldSinceProgress(lines []ledgerLine, sharedPids, loopPids map[int]bool) map[string]sinceProgress {
	dead := map[int]bool{}
	for _, set := range []map[int]bool{sharedPids, loopPids} {
		for pid := range set {
			dead[pid] = true
		}
	}
	for _, pids := range [][]int{r.crashed, r.killed, r.stoppedPids(), r.everStopped()} {
		for _, pid := range pids {
			dead[pid] = true
		}
	}
	claims := map[string][]int{}
	furthest := map[string]int{}
	for _, l := range lines {
		if r.created[l.instance] == 0 {
			continue
		}
		switch l.kind {
		case 'C':
			claims[l.instance] = append(claims[l.instance], l.pid)
		case 'S':
			i := slices.Index(doSteps, l.step)
			if f, ok := furthest[l.instance]; ok && i <= f {
				continue
			}
			furthest[l.instance] = i
			if c := claims[l.instance]; len(c) > 0 {
				claims[l.instance] = c[len(c)-1:]
			}
		}
	}
	out := map[string]sinceProgress{}
	for id, pids := range claims {
		var sp sinceProgress
		for _, pid := range pids {
			if dead[pid] {
				sp.lost++
			}
		}
		out[id] = sp
	}
	return out
}

// instanceLedger returns the instance's ledger lines, one per line, with
// what the test did to each worker they name: what a failure needs to be
// read without the ledger, which the test removes.
func (r *run) instanceLedger(lines []ledgerLine, id string) string {
	var b strings.Builder
	for i, l := range lines {
		if l.instance != id {
			continue
		}
		var fate []string
		if slices.Contains(r.killed, l.pid) {
			fate = append(fate, "killed")
		}
		if slices.Contains(r.crashed, l.pid) {
			fate = append(fate, "crashed")
		}
		if slices.Contains(r.everStopped(), l.pid) {
			fate = append(fate, "stopped")
		}
		fmt.Fprintf(&b, "  #%d %c pid %d %s %s %s\n", i, l.kind, l.pid, l.step, l.token, strings.Join(fate, ","))
	}
	return b.String()
}

// startedBeforeTakeover reports whether the attempt of line late, which
// the ledger shows after the recorded attempt (token recorded, one of the
// step's S lines at positions starts) finished, was started by its runner
// before the recorder's runner took the instance over: another process's
// attempt whose StartedAt is before the claim under which the recorded
// attempt ran (the recorder's last C line for the instance before the
// recorded attempt's S line). Such an attempt was started under a lease
// its runner still held; the process then stopped before the function's
// first line (the ledger's S line) and ran it on when it resumed. Any other
// late attempt started after the takeover, which the runner must never do.
func startedBeforeTakeover(lines []ledgerLine, starts []int, recorded string, late ledgerLine) bool {
	rs := -1
	for _, p := range starts {
		if lines[p].token == recorded {
			rs = p
			break
		}
	}
	if rs < 0 || lines[rs].pid == late.pid {
		return false
	}
	for i := rs - 1; i >= 0; i-- {
		l := lines[i]
		if l.kind == 'C' && l.instance == late.instance && l.pid == lines[rs].pid {
			return late.at.Before(l.at)
		}
	}
	return false
}
