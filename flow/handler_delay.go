package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/workflow"
)

// TypeDelay is the step type of the built-in delay handler.
const TypeDelay = "delay"

// DelayConfig is the config of a delay step: a durable sleep (step.Sleep),
// which holds no runner while it waits.
//
//	{"duration": "10 seconds"}
//	{"duration": "${retryAfter}"}
type DelayConfig struct {
	// Duration is how long to sleep, at most 365 days: "10 seconds", "1 hour",
	// "1h30m", or a template filled from the context that yields one. A
	// templated duration that does not parse fails the flow.
	Duration string `json:"duration"`
}

type delayHandler struct{}

func (delayHandler) Type() string { return TypeDelay }

func (delayHandler) Validate(config json.RawMessage) error {
	var c DelayConfig
	if err := DecodeConfig(config, &c); err != nil {
		return err
	}
	if c.Duration == "" {
		return &ValidationError{Problems: []Problem{{Path: "duration", Message: `is required, such as "10 seconds"`}}}
	}
	t, err := parseTemplate(c.Duration)
	if err != nil {
		return &ValidationError{Problems: []Problem{{Path: "duration", Message: err.Error()}}}
	}
	if !t.hasPlaceholders() {
		if _, err := parseSleep(c.Duration); err != nil {
			return &ValidationError{Problems: []Problem{{Path: "duration", Message: err.Error()}}}
		}
	}
	return nil
}

func (delayHandler) Run(context.Context, *Invocation) (any, error) {
	return nil, errors.New("a delay step runs as a durable sleep, not through Run")
}

func (delayHandler) sleepFor(config json.RawMessage, ctx map[string]any) (time.Duration, error) {
	var c DelayConfig
	if err := DecodeConfig(config, &c); err != nil {
		return 0, err
	}
	s, err := Expand(c.Duration, ctx)
	if err != nil {
		return 0, err
	}
	return parseSleep(s)
}

func parseSleep(s string) (time.Duration, error) {
	d, err := dftype.ParseDuration(s)
	if err != nil {
		return 0, err
	}
	if d > workflow.MaxSleep {
		return 0, fmt.Errorf("a delay of %s is longer than %s", dftype.FormatDuration(d), dftype.FormatDuration(workflow.MaxSleep))
	}
	return d, nil
}
