package polltimer_test

import (
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/internal/polltimer"
)

// A mock clock's timer that fired while nobody read it is reset without
// its stale tick, so its next tick neither blocks the clock's Add nor
// arrives early.
func TestResetDropsAStaleTickOfAMockTimer(t *testing.T) {
	clk := clock.NewMock()
	timer := clk.Timer(time.Minute)
	clk.Add(time.Minute) // fires; nobody reads it
	polltimer.Reset(timer, time.Minute)
	select {
	case <-timer.C:
		t.Fatal("the stale tick is still there after Reset")
	default:
	}
	added := make(chan struct{})
	go func() {
		clk.Add(time.Minute)
		close(added)
	}()
	select {
	case <-added:
	case <-time.After(10 * time.Second):
		t.Fatal("the mock clock's Add blocked on the timer's second tick")
	}
	select {
	case at := <-timer.C:
		require.Equal(t, clk.Now(), at)
	default:
		t.Fatal("the reset timer did not fire")
	}
}

// A timer that has not fired, or whose tick was read, is reset as
// time.Timer.Reset does; on a real clock too.
func TestResetPendingAndRealTimers(t *testing.T) {
	clk := clock.NewMock()
	timer := clk.Timer(time.Minute)
	polltimer.Reset(timer, 2*time.Minute)
	clk.Add(time.Minute)
	select {
	case <-timer.C:
		t.Fatal("fired at the old deadline")
	default:
	}
	clk.Add(time.Minute)
	select {
	case <-timer.C:
	default:
		t.Fatal("did not fire at the new deadline")
	}

	real := clock.New().Timer(time.Millisecond)
	time.Sleep(5 * time.Millisecond) // fired; nobody reads it
	polltimer.Reset(real, time.Hour)
	select {
	case <-real.C:
		t.Fatal("a real timer kept its stale tick")
	case <-time.After(20 * time.Millisecond):
	}
	real.Stop()
}
