package onboarding_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/examples/quickstart/onboarding"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// sent is one call of the test mailer.
type sent struct {
	Subject string
	Attempt int
	At      time.Time
	Err     bool
}

// testMailer records every send at the fake clock's time and fails the first
// failures[subject] attempts of a subject.
type testMailer struct {
	h        *testharness.Harness
	mu       sync.Mutex
	failures map[string]int
	sends    []sent
}

func (m *testMailer) Send(ctx context.Context, msg onboarding.Message) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := sent{Subject: msg.Subject, Attempt: workflow.Attempt(ctx), At: m.h.Now()}
	if m.failures[msg.Subject] > 0 {
		m.failures[msg.Subject]--
		s.Err = true
		m.sends = append(m.sends, s)
		return "", errors.New("smtp: 421 service not available, try again later")
	}
	m.sends = append(m.sends, s)
	return fmt.Sprintf("msg-%s-%d", msg.IdempotencyKey, len(m.sends)), nil
}

func (m *testMailer) Sends() []sent {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]sent(nil), m.sends...)
}

type testBundle struct {
	h      *testharness.Harness
	wfs    *onboarding.Workflows
	mailer *testMailer
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	// The retry tests check each backoff exactly: the jitter draw is fixed
	// at its midpoint, where it moves no wait (its spread is tested in runner).
	h := testharness.New(t, testharness.WithJitter(0.5))
	mailer := &testMailer{h: h, failures: map[string]int{}}
	wfs, err := onboarding.Register(h.Registry, &onboarding.Config{Mailer: mailer})
	require.NoError(t, err)
	return &testBundle{h: h, wfs: wfs, mailer: mailer}
}

// stepNamed returns the step of the history with the name.
func stepNamed(t *testing.T, hist *client.History, name string) *client.StepInfo {
	t.Helper()
	for _, s := range hist.Steps {
		if s.Name == name {
			return s
		}
	}
	require.FailNow(t, "no step named "+name)
	return nil
}

func (b *testBundle) create(t *testing.T, id string) {
	t.Helper()
	_, err := b.wfs.Onboarding.Create(b.h.Context(), workflow.CreateOptions[onboarding.Params]{
		ID:     id,
		Params: onboarding.Params{Email: "ada@example.com", TipsAfter: dftype.Duration(2 * time.Hour)},
	})
	require.NoError(t, err)
}

func TestOnboardingVerified(t *testing.T) {
	t.Parallel()
	b := setup(t)
	start := b.h.Now()
	b.create(t, "user-1")

	b.h.RunUntilIdle()
	b.h.RequireStatus(onboarding.Name, "user-1", dftype.StatusWaiting)
	require.Equal(t, start, b.h.Now(), "RunUntilIdle must not jump to the verification timeout")

	b.h.Advance(30 * time.Minute)
	b.h.SendEvent(onboarding.Name, "user-1", onboarding.VerifiedEvent, onboarding.Verification{Method: "link"})
	b.h.RunUntilIdle()

	var out onboarding.Output
	b.h.RequireOutput(onboarding.Name, "user-1", &out)
	require.Equal(t, onboarding.Output{
		WelcomeID: "msg-user-1-welcome-1",
		Verified:  true,
		Method:    "link",
		TipsID:    "msg-user-1-tips-2",
	}, out)

	sends := b.mailer.Sends()
	require.Len(t, sends, 2)
	require.Equal(t, sent{Subject: "Welcome!", Attempt: 1, At: start}, sends[0])
	// The tips go out TipsAfter (2 hours) after the event arrived.
	require.Equal(t, sent{Subject: "Three tips to get started", Attempt: 1, At: start.Add(30*time.Minute + 2*time.Hour)}, sends[1])

	hist := b.h.History(onboarding.Name, "user-1")
	var names []string
	for _, s := range hist.Steps {
		names = append(names, s.Name+":"+s.Status)
	}
	require.ElementsMatch(t, []string{
		"send welcome email:complete", "wait for verification:complete", "wait before tips:complete", "send tips email:complete",
	}, names)
}

func TestOnboardingBufferedEvent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.create(t, "user-early")
	// Sent before the instance ran at all: the event is buffered and consumed
	// when the wait is reached, without suspending.
	b.h.SendEvent(onboarding.Name, "user-early", onboarding.VerifiedEvent, onboarding.Verification{Method: "code"})
	b.h.RunUntilIdle()

	var out onboarding.Output
	b.h.RequireOutput(onboarding.Name, "user-early", &out)
	require.True(t, out.Verified)
	require.Equal(t, "code", out.Method)
	require.NotEmpty(t, out.TipsID)
}

func TestOnboardingVerifyTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	start := b.h.Now()
	b.create(t, "user-silent")

	b.h.RunUntilIdle()
	b.h.RequireStatus(onboarding.Name, "user-silent", dftype.StatusWaiting)

	// RunUntilIdle never jumps to an event timeout; the test moves the clock.
	b.h.Advance(onboarding.DefaultVerifyTimeout)
	b.h.RunUntilIdle()

	var out onboarding.Output
	b.h.RequireOutput(onboarding.Name, "user-silent", &out)
	require.Equal(t, onboarding.Output{WelcomeID: "msg-user-silent-welcome-1"}, out)
	require.Len(t, b.mailer.Sends(), 1, "no tips for a user who never verified")

	wait := stepNamed(t, b.h.History(onboarding.Name, "user-silent"), "wait for verification")
	require.Equal(t, "errored", wait.Status)
	require.NotNil(t, wait.Error)
	require.Equal(t, workflow.ErrorNameEventTimeout, wait.Error.Name)
	require.Equal(t, start.Add(onboarding.DefaultVerifyTimeout), wait.WakeAt.UTC())

	// An event that comes too late is rejected: the instance is complete.
	err := b.h.Client.SendEvent(b.h.Context(), onboarding.Name, "user-silent", onboarding.VerifiedEvent, nil)
	require.ErrorIs(t, err, workflow.ErrInstanceTerminal)
}

func TestOnboardingWelcomeRetries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.mailer.failures["Welcome!"] = 2
	start := b.h.Now()
	b.create(t, "user-flaky")

	b.h.RunUntilIdle()
	b.h.RequireStatus(onboarding.Name, "user-flaky", dftype.StatusWaiting)

	// 3 retries, 5 seconds, exponential: retry n waits 5s·2^(n−1).
	require.Equal(t, []sent{
		{Subject: "Welcome!", Attempt: 1, At: start, Err: true},
		{Subject: "Welcome!", Attempt: 2, At: start.Add(5 * time.Second), Err: true},
		{Subject: "Welcome!", Attempt: 3, At: start.Add(15 * time.Second)},
	}, b.mailer.Sends())

	welcome := stepNamed(t, b.h.History(onboarding.Name, "user-flaky"), "send welcome email")
	require.Equal(t, "complete", welcome.Status)
	require.Equal(t, 3, welcome.Attempts)
	require.Equal(t, 4, welcome.MaxAttempts)
}

func TestOnboardingWelcomeRetriesExhausted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.mailer.failures["Welcome!"] = 100
	start := b.h.Now()
	b.create(t, "user-bounce")

	b.h.RunUntilIdle()
	info := b.h.RequireStatus(onboarding.Name, "user-bounce", dftype.StatusErrored)
	require.Contains(t, info.Error.Message, "smtp: 421")

	sends := b.mailer.Sends()
	require.Len(t, sends, 4, "the first attempt and 3 retries")
	require.Equal(t, start.Add(5*time.Second+10*time.Second+20*time.Second), sends[3].At)
}
