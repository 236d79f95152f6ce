package demo

import (
	"context"
	"time"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/workflow"
)

// DefaultSleep is how long sleeper sleeps when its params set no duration.
const DefaultSleep = 2 * time.Second

// SleeperParams is the input of sleeper.
type SleeperParams struct {
	// Duration is how long to sleep ("2 seconds", "1 hour"), at most 365 days.
	//
	// Defaults to 2 seconds.
	Duration dftype.Duration `json:"duration,omitempty"`
}

// SleeperOutput is the output of sleeper.
type SleeperOutput struct {
	// Slept is the duration slept, written as "2 seconds".
	Slept dftype.Duration `json:"slept"`
}

// Sleeper sleeps durably and reports how long: {"duration":"2 seconds"} →
// {"slept":"2 seconds"}. While it sleeps the instance is waiting and holds no
// runner.
func Sleeper(_ context.Context, event workflow.Event[SleeperParams], step workflow.Step) (SleeperOutput, error) {
	d := event.Payload.Duration.Std()
	if d == 0 {
		d = DefaultSleep
	}
	if err := step.Sleep("sleep", d); err != nil {
		return SleeperOutput{}, err
	}
	return SleeperOutput{Slept: dftype.Duration(d)}, nil
}
