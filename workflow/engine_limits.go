package workflow

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
)

// The ranges of the settings of EngineLimits and of WithMaxStepsPerRun: a
// host refuses a setting outside them when it is built, and Register an
// option outside them.
const (
	// MinPayloadBytesLimit is the lowest EngineLimits.MaxPayloadBytes: 1
	// KiB, room for the metadata the engine records itself (a flow's
	// pinned version, a trigger's provenance).
	MinPayloadBytesLimit = 1 << 10
	// MaxPayloadBytesLimit is the highest EngineLimits.MaxPayloadBytes: 64
	// MiB. A payload is held in memory whole wherever it goes (a request
	// body, a step's replay, a page of history); larger data belongs in an
	// object store, with its key in the payload.
	MaxPayloadBytesLimit = 64 << 20
	// MaxStepsPerRunLimit is the highest EngineLimits.MaxStepsPerRun and
	// WithMaxStepsPerRun: 100,000. Every run pass loads and replays each
	// step the run has recorded, so a run's cost grows with its steps.
	MaxStepsPerRunLimit = 100_000
	// MaxBatchSizeLimit is the highest EngineLimits.MaxBatchSize: 1,000.
	MaxBatchSizeLimit = 1000
)

// EngineLimits are the limits of the engine that a host may raise or lower
// from their defaults (the constants MaxPayloadBytes, MaxStepsPerRun and
// MaxBatchSize): duraflow.Config.EngineLimits sets them for a host's
// client, runner, scheduler and flows, runner.Config.EngineLimits and
// client.Config.EngineLimits for a runner or a client built alone, and the
// command's --max-payload-bytes, --max-steps-per-run and --max-batch-size
// for dev, serve and worker. A zero field is its default. The other limits
// of the engine (names, ids, event types, step names, sleeps, event
// timeouts, nesting) are fixed: every process that reads the database must
// agree on them.
//
// The limits are checked where data enters: a create or an event by the
// client that takes it, a step result, an output or an Invoke step's
// params by the runner that runs the step, so the processes of one
// deployment should share them (a payload one process took is read by
// every other, whatever its limits).
type EngineLimits struct {
	// MaxPayloadBytes bounds each payload: params, metadata, event
	// payloads, step results, outputs, schedule params and the params of
	// an Invoke step. A larger one is ErrPayloadTooLarge (HTTP 413
	// PAYLOAD_TOO_LARGE); a step result past it fails its step without
	// retries.
	//
	// Defaults to MaxPayloadBytes (1 MiB); MinPayloadBytesLimit (1 KiB) to
	// MaxPayloadBytesLimit (64 MiB).
	MaxPayloadBytes int
	// MaxStepsPerRun bounds the Do, WaitForEvent and Invoke steps of one
	// run (sleeps don't count): the step past it returns ErrTooManySteps.
	// A workflow registered WithMaxStepsPerRun has its own.
	//
	// Defaults to MaxStepsPerRun (1024); 1 to MaxStepsPerRunLimit
	// (100,000).
	MaxStepsPerRun int
	// MaxBatchSize bounds the instances of one CreateBatch call (and its
	// Tx form, and the HTTP API's batch); more is ErrInvalidRequest.
	//
	// Defaults to MaxBatchSize (100); 1 to MaxBatchSizeLimit (1,000).
	MaxBatchSize int
}

// DefaultEngineLimits returns the limits a zero EngineLimits stands for.
func DefaultEngineLimits() EngineLimits {
	return EngineLimits{MaxPayloadBytes: MaxPayloadBytes, MaxStepsPerRun: MaxStepsPerRun, MaxBatchSize: MaxBatchSize}
}

// WithDefaults returns l with its zero fields filled from
// DefaultEngineLimits.
func (l EngineLimits) WithDefaults() EngineLimits {
	return EngineLimits{
		MaxPayloadBytes: cmp.Or(l.MaxPayloadBytes, MaxPayloadBytes),
		MaxStepsPerRun:  cmp.Or(l.MaxStepsPerRun, MaxStepsPerRun),
		MaxBatchSize:    cmp.Or(l.MaxBatchSize, MaxBatchSize),
	}
}

// Validate reports every setting outside its range, each naming the
// field, its value and the range, in an errors.Join of one error a
// setting; a zero field is its default and passes.
func (l EngineLimits) Validate() error {
	l = l.WithDefaults()
	var errs []error
	for _, f := range []struct {
		name           string
		v, least, most int
	}{
		{"MaxPayloadBytes", l.MaxPayloadBytes, MinPayloadBytesLimit, MaxPayloadBytesLimit},
		{"MaxStepsPerRun", l.MaxStepsPerRun, 1, MaxStepsPerRunLimit},
		{"MaxBatchSize", l.MaxBatchSize, 1, MaxBatchSizeLimit},
	} {
		if f.v < f.least || f.v > f.most {
			errs = append(errs, fmt.Errorf("EngineLimits.%s %d must be between %d and %d", f.name, f.v, f.least, f.most))
		}
	}
	return errors.Join(errs...)
}

// ValidatePayload checks b as the package's ValidatePayload does, with
// l.MaxPayloadBytes as the size limit.
func (l EngineLimits) ValidatePayload(what string, b []byte) error {
	return validatePayload(what, b, cmp.Or(l.MaxPayloadBytes, MaxPayloadBytes))
}

// MarshalPayload encodes v as JSON and checks it as l.ValidatePayload
// does.
func (l EngineLimits) MarshalPayload(what string, v any) (json.RawMessage, error) {
	return marshalPayload(what, v, cmp.Or(l.MaxPayloadBytes, MaxPayloadBytes))
}

// CheckBatchSize checks the size n of a batch create: 1 to
// l.MaxBatchSize, else ErrInvalidRequest.
func (l EngineLimits) CheckBatchSize(n int) error {
	if n == 0 {
		return fmt.Errorf("%w: a batch needs at least one instance", ErrInvalidRequest)
	}
	if most := cmp.Or(l.MaxBatchSize, MaxBatchSize); n > most {
		return fmt.Errorf("%w: a batch holds at most %d instances, got %d", ErrInvalidRequest, most, n)
	}
	return nil
}

// WithMaxStepsPerRun bounds the Do, WaitForEvent and Invoke steps of one
// run of the workflow at n, instead of its host's
// EngineLimits.MaxStepsPerRun, higher or lower: for a workflow that loops
// over more items than the host allows others. n must be 1 to
// MaxStepsPerRunLimit (100,000); Register fails with ErrInvalidLimit
// otherwise.
func WithMaxStepsPerRun(n int) Option {
	return func(d *Definition) error {
		if n < 1 || n > MaxStepsPerRunLimit {
			return fmt.Errorf("%w: max steps per run must be between 1 and %d, got %d", ErrInvalidLimit, MaxStepsPerRunLimit, n)
		}
		d.MaxStepsPerRun = n
		return nil
	}
}
