// Package onboarding is the quickstart's workflow: it welcomes a new user,
// waits for them to verify their email address, and sends them tips a little
// later. It shows the three kinds of steps (Do, Sleep and WaitForEvent) and
// a typed binding, and is what `go run ./examples/quickstart` runs.
package onboarding

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/workflow"
)

// Name is the workflow's registered name.
const Name = "onboarding"

// VerifiedEvent is the event type the workflow waits for.
const VerifiedEvent = "email-verified"

// Params is the input of an onboarding instance.
type Params struct {
	// Email is the new user's address.
	Email string `json:"email"`
	// TipsAfter is how long after verification the tips email goes out.
	// Zero means DefaultTipsAfter.
	TipsAfter dftype.Duration `json:"tipsAfter,omitempty"`
}

// Verification is the payload of a VerifiedEvent.
type Verification struct {
	// Method says how the address was verified, such as "link".
	Method string `json:"method"`
}

// Output is what a finished onboarding instance reports.
type Output struct {
	// WelcomeID is the message id of the welcome email.
	WelcomeID string `json:"welcomeId"`
	// Verified reports whether the user verified their address in time.
	Verified bool `json:"verified"`
	// Method is how they verified it.
	Method string `json:"method,omitempty"`
	// TipsID is the message id of the tips email, sent only to verified users.
	TipsID string `json:"tipsId,omitempty"`
}

// Defaults of the workflow.
const (
	// DefaultTipsAfter is the pause between verification and the tips email.
	DefaultTipsAfter = 24 * time.Hour
	// DefaultVerifyTimeout is how long the workflow waits for verification.
	DefaultVerifyTimeout = 7 * 24 * time.Hour
)

// Mailer sends email. Send returns the provider's message id; it may be
// called more than once for the same message when an attempt fails, so a
// real implementation passes the idempotency key on to its provider.
type Mailer interface {
	Send(ctx context.Context, m Message) (string, error)
}

// Message is one email.
type Message struct {
	// IdempotencyKey is the same on every attempt of one step.
	IdempotencyKey string
	To             string
	Subject        string
}

// MailerFunc adapts a function to Mailer.
type MailerFunc func(ctx context.Context, m Message) (string, error)

// Send calls f.
func (f MailerFunc) Send(ctx context.Context, m Message) (string, error) { return f(ctx, m) }

// Config configures the workflow's dependencies.
type Config struct {
	// Mailer sends the emails.
	//
	// Defaults to a mailer that sends nothing and returns "msg-" plus the
	// idempotency key.
	Mailer Mailer
	// VerifyTimeout is how long the workflow waits for VerifiedEvent.
	//
	// Defaults to 7 days.
	VerifyTimeout time.Duration
	// EmailRetries is the retry policy of the email steps.
	//
	// Defaults to 3 retries, 5 seconds apart, growing exponentially.
	EmailRetries *workflow.RetryPolicy
}

// Workflows holds the typed bindings of the package's workflows.
type Workflows struct {
	// Onboarding creates and finds onboarding instances.
	Onboarding *workflow.Binding[Params, Output]
}

// Register registers the onboarding workflow in reg. cfg may be nil.
func Register(reg *workflow.Registry, cfg *Config) (*Workflows, error) {
	w := &Onboarding{}
	if cfg != nil {
		w.mailer, w.verifyTimeout, w.retries = cfg.Mailer, cfg.VerifyTimeout, cfg.EmailRetries
	}
	if w.mailer == nil {
		w.mailer = MailerFunc(func(_ context.Context, m Message) (string, error) { return "msg-" + m.IdempotencyKey, nil })
	}
	if w.verifyTimeout == 0 {
		w.verifyTimeout = DefaultVerifyTimeout
	}
	if w.retries == nil {
		w.retries = &workflow.RetryPolicy{Limit: 3, Delay: 5 * time.Second, Backoff: workflow.BackoffExponential}
	}
	b, err := workflow.Register(reg, Name, w.Run)
	if err != nil {
		return nil, fmt.Errorf("registering %s: %w", Name, err)
	}
	return &Workflows{Onboarding: b}, nil
}

// Onboarding is the workflow. Create it through Register.
type Onboarding struct {
	mailer        Mailer
	verifyTimeout time.Duration
	retries       *workflow.RetryPolicy
}

// Run welcomes the user, waits for verification, sleeps, and sends tips. A
// user who does not verify in time gets no tips; the instance still completes.
func (w *Onboarding) Run(ctx context.Context, event workflow.Event[Params], step workflow.Step) (Output, error) {
	var out Output
	p := event.Payload

	welcome, err := workflow.Do(step, "send welcome email", func(ctx context.Context) (string, error) {
		return w.mailer.Send(ctx, Message{IdempotencyKey: event.InstanceID + "-welcome", To: p.Email, Subject: "Welcome!"})
	}, workflow.WithRetries(*w.retries))
	if err != nil {
		return out, err
	}
	out.WelcomeID = welcome

	v, err := workflow.WaitForEvent[Verification](step, "wait for verification", workflow.WaitOptions{
		Type: VerifiedEvent, Timeout: w.verifyTimeout,
	})
	switch {
	case errors.Is(err, workflow.ErrEventTimeout):
		return out, nil
	case err != nil:
		return out, err
	}
	out.Verified, out.Method = true, v.Method

	tipsAfter := p.TipsAfter.Std()
	if tipsAfter <= 0 {
		tipsAfter = DefaultTipsAfter
	}
	if err := step.Sleep("wait before tips", tipsAfter); err != nil {
		return out, err
	}

	tips, err := workflow.Do(step, "send tips email", func(ctx context.Context) (string, error) {
		return w.mailer.Send(ctx, Message{IdempotencyKey: event.InstanceID + "-tips", To: p.Email, Subject: "Three tips to get started"})
	}, workflow.WithRetries(*w.retries))
	if err != nil {
		return out, err
	}
	out.TipsID = tips
	return out, nil
}
