package httpapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/flow"
	"github.com/duraflow/duraflow/schedule"
	"github.com/duraflow/duraflow/workflow"
)

// DefaultMaxBodyBytes is the default bound of a request body, and the
// largest Config.MaxBodyBytes may be, with the engine's default limits: one
// payload at the limit of workflow.MaxPayloadBytes plus 64 KiB for the JSON
// around it (the id, the event type, field names). A batch shares the same
// bound, so a batch whose params add up to more than about 1 MiB must be
// split. With another Limits.MaxPayloadBytes, or a client whose
// EngineLimits.MaxPayloadBytes is another, the default and the largest
// are that plus 64 KiB (MaxBodyBytesFor).
const DefaultMaxBodyBytes = workflow.MaxPayloadBytes + envelopeBytes

// envelopeBytes is the room a body has for the JSON around its payload.
const envelopeBytes = 64 << 10

// Limits bound what one request may carry. Each defaults to the engine's
// own limit (ARCHITECTURE.md, "Defaults and limits"): for the payload and
// batch limits, those of the server's client (client.Client.EngineLimits,
// which a host may raise or lower), and may be lowered, never raised past
// it: the engine checks its limits behind the API whatever the server
// allows. A request past a limit is refused before anything is written,
// with the code the engine's own check answers.
type Limits struct {
	// MaxPayloadBytes bounds the params of a create (each instance of a
	// batch, and a trigger's), of a schedule, and the payload of an event:
	// 413 PAYLOAD_TOO_LARGE.
	//
	// Defaults to the client's EngineLimits.MaxPayloadBytes
	// (workflow.MaxPayloadBytes, 1 MiB, unless the host sets another).
	MaxPayloadBytes int
	// MaxBatchSize bounds the instances of one batch: 400 INVALID_REQUEST.
	//
	// Defaults to the client's EngineLimits.MaxBatchSize
	// (workflow.MaxBatchSize, 100, unless the host sets another).
	MaxBatchSize int
	// MaxIDLength bounds an instance id, in a path or a body: 400
	// INVALID_INSTANCE_ID.
	//
	// Defaults to workflow.MaxIDLength (100).
	MaxIDLength int
	// MaxEventTypeLength bounds an event type: 400 INVALID_EVENT_TYPE.
	//
	// Defaults to workflow.MaxIDLength (100).
	MaxEventTypeLength int
	// MaxWorkflowNameLength bounds the workflow name of an instance route:
	// 400 INVALID_REQUEST.
	//
	// Defaults to workflow.MaxWorkflowNameLength (64).
	MaxWorkflowNameLength int
	// MaxPageSize bounds the pageSize of every list (instances, history,
	// schedules, flows, workers): 400 INVALID_REQUEST.
	//
	// Defaults to MaxPageSize (1000).
	MaxPageSize int
}

// DefaultLimits returns the limits a zero Limits stands for on an engine
// with the default limits: LimitsFor(workflow.EngineLimits{}).
func DefaultLimits() Limits { return LimitsFor(workflow.EngineLimits{}) }

// LimitsFor returns the limits a zero Limits stands for on an engine with
// the limits e (client.Client.EngineLimits): e's payload and batch limits,
// and the engine's fixed limits for the rest. They are also the highest
// the server takes.
func LimitsFor(e workflow.EngineLimits) Limits {
	e = e.WithDefaults()
	return Limits{
		MaxPayloadBytes: e.MaxPayloadBytes, MaxBatchSize: e.MaxBatchSize,
		MaxIDLength: workflow.MaxIDLength, MaxEventTypeLength: workflow.MaxIDLength,
		MaxWorkflowNameLength: workflow.MaxWorkflowNameLength, MaxPageSize: MaxPageSize,
	}
}

// WithDefaults returns l with its zero fields filled from DefaultLimits.
func (l Limits) WithDefaults() Limits { return l.WithDefaultsFor(workflow.EngineLimits{}) }

// WithDefaultsFor returns l with its zero fields filled from LimitsFor(e).
func (l Limits) WithDefaultsFor(e workflow.EngineLimits) Limits {
	d := LimitsFor(e)
	return Limits{
		MaxPayloadBytes:       cmp.Or(l.MaxPayloadBytes, d.MaxPayloadBytes),
		MaxBatchSize:          cmp.Or(l.MaxBatchSize, d.MaxBatchSize),
		MaxIDLength:           cmp.Or(l.MaxIDLength, d.MaxIDLength),
		MaxEventTypeLength:    cmp.Or(l.MaxEventTypeLength, d.MaxEventTypeLength),
		MaxWorkflowNameLength: cmp.Or(l.MaxWorkflowNameLength, d.MaxWorkflowNameLength),
		MaxPageSize:           cmp.Or(l.MaxPageSize, d.MaxPageSize),
	}
}

// Validate refuses a limit that is negative or past the engine's default
// limits; a zero one is the engine's: ValidateFor(workflow.EngineLimits{}).
func (l Limits) Validate() error { return l.ValidateFor(workflow.EngineLimits{}) }

// ValidateFor refuses a limit that is negative or past those of an engine
// with the limits e (LimitsFor(e)); a zero one is the engine's. New
// validates Config.Limits against its client's.
func (l Limits) ValidateFor(e workflow.EngineLimits) error {
	l = l.WithDefaultsFor(e)
	d := LimitsFor(e)
	for _, f := range []struct {
		name     string
		v, limit int
	}{
		{"MaxPayloadBytes", l.MaxPayloadBytes, d.MaxPayloadBytes},
		{"MaxBatchSize", l.MaxBatchSize, d.MaxBatchSize},
		{"MaxIDLength", l.MaxIDLength, d.MaxIDLength},
		{"MaxEventTypeLength", l.MaxEventTypeLength, d.MaxEventTypeLength},
		{"MaxWorkflowNameLength", l.MaxWorkflowNameLength, d.MaxWorkflowNameLength},
		{"MaxPageSize", l.MaxPageSize, d.MaxPageSize},
	} {
		if f.v < 1 || f.v > f.limit {
			return fmt.Errorf("httpapi: Limits.%s %d must be between 1 and %d (the engine's limit)", f.name, f.v, f.limit)
		}
	}
	return nil
}

// DefaultMaxBodyBytes returns the bound of a request body that goes with
// l when none is configured: its MaxPayloadBytes plus 64 KiB for the JSON
// around a payload (DefaultMaxBodyBytes with the engine's limits).
func (l Limits) DefaultMaxBodyBytes() int64 {
	return int64(l.WithDefaults().MaxPayloadBytes) + envelopeBytes
}

// MaxBodyBytesFor returns the largest Config.MaxBodyBytes over an engine
// with the limits e: its payload limit plus 64 KiB (DefaultMaxBodyBytes
// with the default limits).
func MaxBodyBytesFor(e workflow.EngineLimits) int64 {
	return int64(e.WithDefaults().MaxPayloadBytes) + envelopeBytes
}

// CheckPayload checks params or an event payload against MaxPayloadBytes:
// workflow.ErrPayloadTooLarge past it. what names the payload in the
// error ("params", "the event payload").
func (l Limits) CheckPayload(what string, b []byte) error {
	if max := l.WithDefaults().MaxPayloadBytes; len(b) > max {
		return fmt.Errorf("%w: %s is %d bytes, the limit is %d", workflow.ErrPayloadTooLarge, what, len(b), max)
	}
	return nil
}

// CheckInstanceID checks an instance id against MaxIDLength:
// workflow.ErrInvalidInstanceID past it.
func (l Limits) CheckInstanceID(id string) error {
	if max := l.WithDefaults().MaxIDLength; len(id) > max {
		return fmt.Errorf("%w: the instance id is %d characters, the limit is %d", workflow.ErrInvalidInstanceID, len(id), max)
	}
	return nil
}

// CheckEventType checks an event type against MaxEventTypeLength:
// workflow.ErrInvalidEventType past it.
func (l Limits) CheckEventType(eventType string) error {
	if max := l.WithDefaults().MaxEventTypeLength; len(eventType) > max {
		return fmt.Errorf("%w: the event type is %d characters, the limit is %d", workflow.ErrInvalidEventType, len(eventType), max)
	}
	return nil
}

// CheckWorkflowName checks the workflow name of an instance route against
// MaxWorkflowNameLength: workflow.ErrInvalidWorkflowName past it.
func (l Limits) CheckWorkflowName(name string) error {
	if max := l.WithDefaults().MaxWorkflowNameLength; len(name) > max {
		return fmt.Errorf("%w: the workflow name is %d characters, the limit is %d", workflow.ErrInvalidWorkflowName, len(name), max)
	}
	return nil
}

// PageSize returns want capped at MaxPageSize: the length of a page a
// reader beside the API (the web console) asks for.
func (l Limits) PageSize(want int) int {
	return min(want, l.WithDefaults().MaxPageSize)
}

// Default timeouts of the *http.Server that Server.HTTPServer returns.
const (
	// DefaultReadHeaderTimeout bounds the reading of a request's headers.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultBodyTimeout bounds the reading of a request's body: a body of
	// DefaultMaxBodyBytes arrives within it at about 37 KB/s, a slow but
	// real client.
	DefaultBodyTimeout = 30 * time.Second
	// DefaultWriteTimeout bounds a request from the end of its headers to
	// the end of its answer. No route waits for long except the tick, which
	// is not bound by it (a tick writes its answer within WriteTimeout after
	// its work is done, over HTTP/1.1 or HTTP/2).
	DefaultWriteTimeout = 60 * time.Second
	// DefaultIdleTimeout bounds how long a kept-alive connection waits for
	// its next request.
	DefaultIdleTimeout = 120 * time.Second
)

// MaxTickInstances bounds maxInstances of one tick request.
const MaxTickInstances = 1000

// TickFunc runs the due work of a runner once, within maxInstances claimed
// instances and maxSteps new step attempts (0 means the runner's default
// and no step budget), and returns how many claimed tasks it ran; the tick
// route answers 200 with apiclient.TickResult, {"processed": n,
// "maxInstances": …, "maxSteps": …}. An error wrapping
// workflow.ErrInvalidRequest answers 400; any other error answers 500 and
// is logged. dispatcher.TickFunc builds one over a runner.
type TickFunc func(ctx context.Context, maxInstances, maxSteps int) (processed int, err error)

// Config configures a Server.
type Config struct {
	// Client is the management service the routes call. Required.
	Client *client.Client
	// Prefix is the path the API routes are mounted under; "/" mounts them
	// at the root. /healthz and /readyz are always at the root. A host
	// program that embeds the API in its own server chooses where with
	// Prefix, and mounts it there: Server.Register on an echo group with
	// that prefix, or Handler at Prefix+"/" of a net/http ServeMux.
	//
	// Defaults to "/api".
	Prefix string
	// Tokens are the bearer tokens the server accepts, each with its scopes
	// (see ParseToken). Ignored when Authorize is set.
	//
	// Defaults to none. With no tokens and no Authorize the API is
	// unauthenticated: it then answers only requests whose Host is a
	// loopback name or address, and the host should check its listen address
	// with CheckListenAddr.
	Tokens []Token
	// Authorize, when set, replaces the token check: every route except
	// /healthz and /readyz calls it with the route's action.
	//
	// Defaults to nil (the token check).
	Authorize AuthorizeFunc
	// Tick runs the runner for POST /_runner/tick, which needs ActionTick.
	//
	// Defaults to nil: the route does not exist (404 NOT_FOUND).
	Tick TickFunc
	// MaxConcurrentTicks is how many tick requests run at once. Another
	// request that arrives while all are taken is answered at once with 429
	// TICK_BUSY and "Retry-After: 1": the running tick is doing the due work
	// already, and a scheduler can simply try again. Concurrent ticks would
	// be safe (the runner fences every write), this only bounds the load.
	//
	// Defaults to 1.
	MaxConcurrentTicks int
	// Ready reports whether the host can serve: GET /readyz answers 200 when
	// it returns nil and 503 NOT_READY with its error's text otherwise.
	//
	// Defaults to nil: /readyz always answers 200.
	Ready func(ctx context.Context) error
	// Logger receives failures the caller only sees as 500 INTERNAL.
	//
	// Defaults to slog.Default().
	Logger *slog.Logger
	// MaxBodyBytes bounds a request body. A larger body is refused with 413
	// PAYLOAD_TOO_LARGE before anything is decoded or written. Like the
	// Limits, it may be lowered, not raised: New refuses more than the
	// client's payload limit plus 64 KiB (MaxBodyBytesFor;
	// DefaultMaxBodyBytes with the default limits).
	//
	// Defaults to Limits.MaxPayloadBytes + 64 KiB (DefaultMaxBodyBytes, 1
	// MiB + 64 KiB, with the default limits).
	MaxBodyBytes int64
	// Limits bound the payloads, batches, ids, event types, workflow names
	// and page sizes of requests (see Limits); a zero field is the engine's
	// limit, the client's EngineLimits for payloads and batches.
	Limits Limits
	// Schedules serves the schedule routes (/schedules…, see
	// addScheduleRoutes): reading them needs ActionRead, changing them
	// ActionSchedules.
	//
	// Defaults to nil: the routes do not exist (404 NOT_FOUND).
	Schedules *schedule.Scheduler
	// Flows serves the flow registry routes (/flows…, see addFlowRoutes):
	// reading flows needs ActionRead, applying one ActionFlows. GET
	// /workflows marks the workflows it registered as flows.
	//
	// Defaults to nil: the routes do not exist (404 NOT_FOUND).
	Flows *flow.Registry
	// Triggers are HTTP routes at the server's root that start workflows
	// (see Trigger); each needs ActionCreate.
	//
	// Defaults to none.
	Triggers []Trigger
	// NamespaceQueues lists, by namespace, the task queues that a create
	// of a caller limited to namespaces (a token with Token.Namespaces, or
	// one an AuthorizeFunc does not allow in AllNamespaces) may name in
	// that namespace, besides the queue the workflow gives its instances
	// anyway. Another queue is 403 FORBIDDEN and creates nothing: queues
	// and their limits are shared by every namespace, so a tenant must not
	// fill another's.
	//
	// Defaults to none: such a caller's instances run on their workflow's
	// queue.
	NamespaceQueues map[string][]string
	// NamespaceMaxPriority is the highest priority a create of a caller
	// limited to namespaces may ask for; a higher one is 403 FORBIDDEN and
	// creates nothing. Priorities order the claims of every namespace, so a
	// tenant must not get ahead of the others.
	//
	// Defaults to 0 (workflow's default priority): such a caller may lower
	// its instances' priority, not raise it.
	NamespaceMaxPriority int
	// Clock supplies the receivedAt of the provenance that triggers record.
	//
	// Defaults to the real clock.
	Clock clock.Clock
	// ReadHeaderTimeout bounds the reading of a request's headers (see
	// HTTPServer).
	//
	// Defaults to DefaultReadHeaderTimeout (10 seconds).
	ReadHeaderTimeout time.Duration
	// BodyTimeout bounds the reading of a request's body: once the request
	// is authorized, its body must arrive within BodyTimeout, or the
	// request is answered 408 REQUEST_TIMEOUT and its connection closed.
	// It holds under any *http.Server that serves Handler (it sets the
	// connection's read deadline); HTTPServer also sets ReadTimeout to
	// ReadHeaderTimeout + BodyTimeout. A request without the credentials
	// for its route is answered before its body is read, and its
	// connection closed.
	//
	// Defaults to DefaultBodyTimeout (30 seconds).
	BodyTimeout time.Duration
	// WriteTimeout bounds a request from the end of its headers to the end
	// of its answer (see HTTPServer). A tick is not bound by it, over
	// HTTP/1.1 or HTTP/2: it has no write deadline while it works, and
	// WriteTimeout to write its answer once its work is done.
	//
	// Defaults to DefaultWriteTimeout (60 seconds).
	WriteTimeout time.Duration
	// IdleTimeout bounds how long a kept-alive connection waits for its
	// next request (see HTTPServer).
	//
	// Defaults to DefaultIdleTimeout (120 seconds).
	IdleTimeout time.Duration
	// Version is the version the index at GET <prefix> reports
	// (apiclient.APIIndex).
	//
	// Defaults to the main module's version in the binary's build
	// information, or "dev" when it has none.
	Version string
	// ConsolePath is the path of a web console the host mounts beside the
	// API, which the index links to.
	//
	// Defaults to "": no console, and the index has no console link.
	ConsolePath string
	// LifecycleWakeups, when set, returns a channel that is signalled when
	// lifecycle events may have been written (the wake-ups the runners
	// get; duraflow.Host.LifecycleWakeups) and a function that stops it:
	// GET /events/stream reads the log at each signal, besides every
	// StreamPollInterval.
	//
	// Defaults to nil: the stream polls only.
	LifecycleWakeups func() (<-chan struct{}, func())
	// LifecyclePollInterval is how often GET /events/stream reads the log
	// when no wake-up came.
	//
	// Defaults to StreamPollInterval (500 ms).
	LifecyclePollInterval time.Duration
}

// WithDefaults returns a copy of the config with zero fields filled in.
func (c *Config) WithDefaults() *Config {
	out := *c
	out.Prefix = cmp.Or(out.Prefix, "/api")
	if out.Prefix != "/" {
		out.Prefix = strings.TrimSuffix(out.Prefix, "/")
	}
	out.MaxConcurrentTicks = cmp.Or(out.MaxConcurrentTicks, 1)
	out.Version = cmp.Or(out.Version, buildVersion())
	out.Limits = out.Limits.WithDefaultsFor(out.engineLimits())
	out.MaxBodyBytes = cmp.Or(out.MaxBodyBytes, out.Limits.DefaultMaxBodyBytes())
	out.ReadHeaderTimeout = cmp.Or(out.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	out.BodyTimeout = cmp.Or(out.BodyTimeout, DefaultBodyTimeout)
	out.WriteTimeout = cmp.Or(out.WriteTimeout, DefaultWriteTimeout)
	out.IdleTimeout = cmp.Or(out.IdleTimeout, DefaultIdleTimeout)
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	if out.Clock == nil {
		out.Clock = clock.New()
	}
	return &out
}

// engineLimits are the limits of the config's client, the default ones
// without a client (which validate refuses).
func (c *Config) engineLimits() workflow.EngineLimits {
	if c.Client == nil {
		return workflow.DefaultEngineLimits()
	}
	return c.Client.EngineLimits()
}

func (c *Config) validate() error {
	if c.Client == nil {
		return errors.New("httpapi: Config.Client is required")
	}
	if !strings.HasPrefix(c.Prefix, "/") || strings.ContainsAny(c.Prefix, ":*?#{} ") || strings.Contains(c.Prefix, "//") {
		return fmt.Errorf("httpapi: Prefix %q must be a plain path starting with '/'", c.Prefix)
	}
	if c.MaxConcurrentTicks < 1 {
		return fmt.Errorf("httpapi: MaxConcurrentTicks %d must be at least 1", c.MaxConcurrentTicks)
	}
	if err := c.Limits.ValidateFor(c.engineLimits()); err != nil {
		return err
	}
	if most := MaxBodyBytesFor(c.engineLimits()); c.MaxBodyBytes < 1 || c.MaxBodyBytes > most {
		return fmt.Errorf("httpapi: MaxBodyBytes %d must be between 1 and %d (the engine's payload limit plus 64 KiB): it may be lowered, not raised", c.MaxBodyBytes, most)
	}
	if c.NamespaceMaxPriority < workflow.MinPriority || c.NamespaceMaxPriority > workflow.MaxPriority {
		return fmt.Errorf("httpapi: NamespaceMaxPriority %d must be between %d and %d", c.NamespaceMaxPriority, workflow.MinPriority, workflow.MaxPriority)
	}
	for ns, queues := range c.NamespaceQueues {
		if err := workflow.ValidateNamespace(ns); err != nil {
			return fmt.Errorf("httpapi: NamespaceQueues: %w", err)
		}
		for _, q := range queues {
			if err := workflow.ValidateQueueName(q); err != nil {
				return fmt.Errorf("httpapi: NamespaceQueues[%q]: %w", ns, err)
			}
		}
	}
	for _, d := range []struct {
		name string
		d    time.Duration
	}{{"ReadHeaderTimeout", c.ReadHeaderTimeout}, {"BodyTimeout", c.BodyTimeout}, {"WriteTimeout", c.WriteTimeout}, {"IdleTimeout", c.IdleTimeout}} {
		if d.d <= 0 {
			return fmt.Errorf("httpapi: %s %s must be positive", d.name, d.d)
		}
	}
	return nil
}
