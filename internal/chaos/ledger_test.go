//go:build chaos && linux

package chaos_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLossesBeside checks the count of an instance's lease losses that the
// shared crash loop gave it, from the lease losses its claims found and
// where the crash loop killed their workers, on hand-made ledgers.
func TestLossesBeside(t *testing.T) {
	c := func(pid int, losses string) ledgerLine {
		return ledgerLine{kind: 'C', pid: pid, instance: "i", step: losses, token: "-"}
	}
	// boom is a crash-loop attempt, which kills its worker.
	boom := func(pid int) ledgerLine {
		return ledgerLine{kind: 'S', pid: pid, instance: sharedLoopID, step: "boom", token: "t"}
	}
	for _, tc := range []struct {
		name  string
		lines []ledgerLine
		want  int
	}{
		{"no claims", nil, 0},
		{
			// Two losses beside the crash loop, then three in killed workers.
			"a streak", []ledgerLine{c(1, "0"), c(10, "0"), boom(10), c(11, "1"), boom(11), c(2, "2"), c(3, "3"), c(4, "4"), c(5, "5")}, 2,
		},
		{
			// Hand-backs in crash-loop workers lose nothing: the next claim
			// finds the same count.
			"hand-backs", []ledgerLine{c(1, "0"), c(10, "1"), boom(10), c(11, "1"), boom(11), c(2, "1"), c(3, "2"), c(4, "3"), c(12, "4"), boom(12), c(5, "4"), c(6, "5")}, 0,
		},
		{
			// A claim lost otherwise (its worker stopped, say) in a worker
			// that crash-loops only after the next claim is no loss beside.
			"crash loop later", []ledgerLine{c(10, "0"), c(2, "1"), boom(10), c(3, "2"), c(4, "3"), c(5, "4"), c(6, "5")}, 0,
		},
		{
			// An earlier streak, ended by progress, does not count.
			"after progress", []ledgerLine{c(10, "0"), boom(10), c(11, "1"), boom(11), c(12, "2"), boom(12), c(1, "3"), c(2, "1"), c(3, "2"), c(4, "3"), c(5, "4"), c(6, "5")}, 0,
		},
		{
			// The claim that made progress and then died beside the crash
			// loop is the streak's first loss.
			"progress then a loss beside", []ledgerLine{c(1, "3"), c(10, "3"), boom(10), c(2, "1"), c(3, "2"), c(4, "3"), c(5, "4"), c(6, "5")}, 1,
		},
		{
			// Other instances' lines and other kinds are ignored.
			"other lines", []ledgerLine{c(10, "0"), {kind: 'C', pid: 11, instance: "j", step: "1", token: "-"}, {kind: 'S', pid: 10, instance: "i", step: "a", token: "x"}, boom(10), c(1, "1")}, 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, lossesBeside(tc.lines, "i"))
		})
	}
}

// TestStartedBeforeTakeover checks, on hand-made ledgers, which attempts of
// a completed step that the ledger shows after the recorded attempt
// finished were started before the recorder took the instance over (a
// stopped runner's stale attempt) and which after (a completed step run
// again).
func TestStartedBeforeTakeover(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(1_800_000_000+int64(s), 0) }
	c := func(pid, s int) ledgerLine {
		return ledgerLine{kind: 'C', pid: pid, instance: "i", step: "0", token: "-", at: at(s)}
	}
	start := func(pid int, token string, s int) ledgerLine {
		return ledgerLine{kind: 'S', pid: pid, instance: "i", step: "d0", token: token, at: at(s)}
	}
	done := func(pid int, token string, s int) ledgerLine {
		return ledgerLine{kind: 'D', pid: pid, instance: "i", step: "d0", token: token, at: at(s)}
	}
	for _, tc := range []struct {
		name  string
		lines []ledgerLine
		want  bool
	}{
		{
			// pid 1 started d0 at 5, then stopped; pid 2 claimed at 20,
			// ran and finished d0; pid 1's line comes after.
			"started before the takeover", []ledgerLine{c(1, 0), c(2, 20), start(2, "r", 21), done(2, "r", 22), start(1, "late", 5)}, true,
		},
		{
			"started after the takeover", []ledgerLine{c(1, 0), c(2, 20), start(2, "r", 21), done(2, "r", 22), start(1, "late", 25)}, false,
		},
		{
			// The recorder's own later attempt is a rerun whatever its time.
			"the recorder again", []ledgerLine{c(2, 20), start(2, "r", 21), done(2, "r", 22), start(2, "late", 10)}, false,
		},
		{
			// Without the recorder's claim nothing shows a takeover.
			"no claim", []ledgerLine{start(2, "r", 21), done(2, "r", 22), start(1, "late", 5)}, false,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var starts []int
			for i, l := range tc.lines {
				if l.kind == 'S' {
					starts = append(starts, i)
				}
			}
			require.Equal(t, tc.want, startedBeforeTakeover(tc.lines, starts, "r", tc.lines[len(tc.lines)-1]))
		})
	}
}
