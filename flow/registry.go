package flow

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/internal/flowapi"
	"github.com/duraflow/duraflow/internal/wfcore"
	"github.com/duraflow/duraflow/workflow"
)

// DefaultRefreshInterval is the default of Config.RefreshInterval.
const DefaultRefreshInterval = 10 * time.Second

// Config configures a Registry.
type Config struct {
	// Store keeps the flows and the instances. Required.
	Store db.Store
	// Registry is the host's workflow registry, where flows are registered
	// under their ids beside the Go workflows. Required.
	Registry *workflow.Registry
	// Handlers are the step types flows are validated and compiled against.
	//
	// Defaults to NewHandlers(): the built-ins, with no internal http
	// address and no exec command allowed.
	Handlers *Handlers
	// Clock supplies the creation time of applied versions.
	//
	// Defaults to the real clock.
	Clock clock.Clock
	// Logger receives the flows a refresh skips and store errors it retries.
	//
	// Defaults to slog.Default().
	Logger *slog.Logger
	// RefreshInterval is how often a started registry loads the flows other
	// processes applied.
	//
	// Defaults to 10 seconds.
	RefreshInterval time.Duration
	// WakeFunc is called with the id of every flow a refresh registered, so
	// that a runner claims its waiting instances at once.
	//
	// Defaults to nothing.
	WakeFunc func(workflowName string)
	// MaxStepsPerRun bounds the step visits of one run of a flow, delays
	// included (see WithStepLimit), and is the flows' own
	// workflow.WithMaxStepsPerRun, so that the runner lets their steps
	// reach it; 1 to workflow.MaxStepsPerRunLimit.
	//
	// Defaults to the host's workflow.EngineLimits.MaxStepsPerRun
	// (duraflow.New sets it), or workflow.MaxStepsPerRun (1024) for a
	// registry built alone.
	MaxStepsPerRun int
}

// WithDefaults returns a copy of the config with zero fields filled in.
func (c *Config) WithDefaults() (*Config, error) {
	out := *c
	if out.Handlers == nil {
		hs, err := NewHandlers()
		if err != nil {
			return nil, err
		}
		out.Handlers = hs
	}
	if out.Clock == nil {
		out.Clock = clock.New()
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	out.RefreshInterval = cmp.Or(out.RefreshInterval, DefaultRefreshInterval)
	out.MaxStepsPerRun = cmp.Or(out.MaxStepsPerRun, workflow.MaxStepsPerRun)
	if out.WakeFunc == nil {
		out.WakeFunc = func(string) {}
	}
	return &out, nil
}

func (c *Config) validate() error {
	if c.Store == nil || c.Registry == nil {
		return errors.New("flow: Config.Store and Config.Registry are required")
	}
	if c.RefreshInterval < 0 {
		return fmt.Errorf("flow: RefreshInterval %s must not be negative", c.RefreshInterval)
	}
	if c.MaxStepsPerRun < 0 || c.MaxStepsPerRun > workflow.MaxStepsPerRunLimit {
		return fmt.Errorf("flow: MaxStepsPerRun %d must be between 1 and %d (0 for the default)", c.MaxStepsPerRun, workflow.MaxStepsPerRunLimit)
	}
	return nil
}

// Registry is the flow registry of one host. It is safe for concurrent use.
type Registry struct {
	cfg *Config
	log *slog.Logger

	mu sync.RWMutex
	// flows are the ids registered in cfg.Registry as flows.
	flows map[string]bool
	// skipped are the latest versions of stored flows that did not
	// validate here, so a refresh warns about each once.
	skipped map[string]string

	runs *runCache

	poke     chan struct{}
	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
	started  bool

	// loaded is closed by the first Load that succeeds.
	loaded     chan struct{}
	loadedOnce sync.Once
}

// New returns a registry for cfg; see Config for the defaults. It registers
// nothing until Apply, Load or Start.
func New(cfg *Config) (*Registry, error) {
	if cfg == nil {
		return nil, errors.New("flow: Config is required")
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c, err := cfg.WithDefaults()
	if err != nil {
		return nil, err
	}
	r := &Registry{
		cfg:     c,
		log:     c.Logger,
		flows:   map[string]bool{},
		skipped: map[string]string{},
		poke:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		loaded:  make(chan struct{}),
	}
	r.runs = newRunCache(r)
	return r, nil
}

// Handlers returns the handlers flows are validated and compiled against.
func (r *Registry) Handlers() *Handlers { return r.cfg.Handlers }

// IsFlow reports whether name is registered as a flow (not a Go workflow).
func (r *Registry) IsFlow(name string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.flows[name]
}

// ApplyResult is what Apply did.
type ApplyResult = flowapi.ApplyResult

// Apply validates a definition against the handlers, stores it and
// registers the flow. It fails with a *ValidationError (matching
// ErrInvalidDefinition) listing every problem, with ErrVersionConflict
// when the version is stored with another definition, and with
// workflow.ErrPayloadTooLarge for a definition over MaxDefinitionBytes,
// with workflow.ErrPayloadTooDeep for one nested deeper than
// workflow.MaxPayloadDepth (checked before anything decodes it), and with
// workflow.ErrInvalidRequest for values some backend could not store (see
// workflow.ValidatePayloadPortable).
// Applying a stored version again with the same JSON (spaced differently or
// not) changes nothing; the stored bytes stay. The result's warnings list
// unreachable steps and subflow steps whose child this server does not
// know (no such flow stored or Go workflow registered, a flow version not
// stored): such a step fails with InvokeRefusedError if its child is still
// unknown when it runs.
func (r *Registry) Apply(ctx context.Context, definition []byte) (*ApplyResult, error) {
	if len(definition) > MaxDefinitionBytes {
		return nil, fmt.Errorf("%w: the definition is %d bytes, the limit is %d", workflow.ErrPayloadTooLarge, len(definition), MaxDefinitionBytes)
	}
	if err := workflow.ValidatePayloadDepth("the flow definition", definition, workflow.MaxPayloadDepth); err != nil {
		return nil, err
	}
	def, warnings, err := ParseAndValidate(definition, r.cfg.Handlers)
	if err != nil {
		return nil, err
	}
	if r.isGoWorkflow(def.ID) {
		return nil, &ValidationError{Problems: []Problem{{
			Path: "id", Message: fmt.Sprintf("%q is the name of a Go workflow of this server; a flow needs an id of its own", def.ID),
		}}}
	}
	compiled, err := Compile(def, r.cfg.Handlers, WithStepLimit(r.cfg.MaxStepsPerRun))
	if err != nil {
		return nil, err
	}
	if err := r.checkSubflowCycles(ctx, def); err != nil {
		return nil, err
	}
	unknown, err := r.subflowWarnings(ctx, def)
	if err != nil {
		return nil, err
	}
	warnings = append(warnings, unknown...)
	// A valid flow may still hold a value some backend cannot store; what
	// validation refuses is answered with the problem's path first.
	if err := workflow.ValidatePayloadPortable("the flow definition", definition); err != nil {
		return nil, err
	}
	res := &ApplyResult{ID: def.ID, Version: def.Version, Warnings: warnings}
	if res.Warnings == nil {
		res.Warnings = []Problem{}
	}
	put, err := r.cfg.Store.FlowPut(ctx, &db.FlowPutParams{
		ID: def.ID, Version: def.Version, Name: def.Name, Definition: bytes.Clone(definition), Now: r.now(),
	})
	switch {
	case errors.Is(err, db.ErrFlowVersionConflict):
		stored, gerr := r.cfg.Store.FlowGet(ctx, db.FlowRef{ID: def.ID, Version: def.Version})
		if gerr != nil {
			return nil, fmt.Errorf("applying flow %s %s: %w", def.ID, def.Version, gerr)
		}
		if !sameJSON(stored.Definition, definition) {
			return nil, fmt.Errorf("%w: flow %q version %s is stored with another definition; give the changed flow a new version",
				ErrVersionConflict, def.ID, def.Version)
		}
		latest, gerr := r.cfg.Store.FlowGet(ctx, db.FlowRef{ID: def.ID})
		if gerr != nil {
			return nil, fmt.Errorf("applying flow %s %s: %w", def.ID, def.Version, gerr)
		}
		res.Latest = latest.Version
	case err != nil:
		return nil, fmt.Errorf("applying flow %s %s: %w", def.ID, def.Version, err)
	default:
		res.Created, res.Latest = put.Created, put.Latest
	}
	r.runs.put(def.ID, def.Version, compiled)
	if err := r.register(def.ID); err != nil {
		return nil, err
	}
	return res, nil
}

// sameJSON reports whether two JSON documents hold the same value: the same
// objects (in any key order), arrays, strings, literals and numbers
// (written the same way).
func sameJSON(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	decode := func(raw []byte) (any, bool) {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v any
		return v, dec.Decode(&v) == nil
	}
	va, okA := decode(a)
	vb, okB := decode(b)
	return okA && okB && reflect.DeepEqual(va, vb)
}

func (r *Registry) now() *time.Time {
	t := r.cfg.Clock.Now().UTC().Truncate(time.Microsecond)
	return &t
}

// isGoWorkflow reports whether name is registered, and not as a flow.
func (r *Registry) isGoWorkflow(name string) bool {
	if r.IsFlow(name) {
		return false
	}
	_, ok := wfcore.Lookup(r.cfg.Registry, name)
	return ok
}

// register registers the flow id in the workflow registry, once.
func (r *Registry) register(id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.flows[id] {
		return nil
	}
	if _, err := workflow.Register(r.cfg.Registry, id, (&flowWorkflow{id: id, runs: r.runs}).Run,
		workflow.WithSettingsFunc(r.settingsFunc(id)), workflow.WithMaxStepsPerRun(r.cfg.MaxStepsPerRun)); err != nil {
		return fmt.Errorf("registering flow %q: %w", id, err)
	}
	r.flows[id] = true
	delete(r.skipped, id)
	return nil
}

// Info is a stored flow version.
type Info = flowapi.Info

// Get returns a version of a flow with its definition, or the latest one
// when version is empty. It fails with ErrNotFound.
func (r *Registry) Get(ctx context.Context, id, version string) (*Info, error) {
	if err := workflow.ValidateWorkflowName(id); err != nil {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	if version != "" {
		if _, err := ParseVersion(version); err != nil {
			return nil, fmt.Errorf("%w: %v", workflow.ErrInvalidRequest, err)
		}
	}
	f, err := r.cfg.Store.FlowGet(ctx, db.FlowRef{ID: id, Version: version})
	if errors.Is(err, db.ErrNotFound) {
		if version == "" {
			return nil, fmt.Errorf("%w: %q", ErrNotFound, id)
		}
		return nil, fmt.Errorf("%w: %q version %s", ErrNotFound, id, version)
	}
	if err != nil {
		return nil, err
	}
	info := &Info{ID: f.ID, Version: f.Version, Name: f.Name, CreatedAt: f.CreatedAt, Definition: f.Definition, Latest: version == ""}
	if version != "" {
		latest, err := r.cfg.Store.FlowGet(ctx, db.FlowRef{ID: id})
		if err != nil {
			return nil, err
		}
		info.Latest = latest.Version == f.Version
	}
	return info, nil
}

// Page sizes of ListParams.
const (
	// DefaultPageSize is the page length of List when none is given.
	DefaultPageSize = flowapi.DefaultPageSize
	// MaxPageSize bounds ListParams.PageSize.
	MaxPageSize = flowapi.MaxPageSize
)

// ListParams select a page of flows.
type ListParams = flowapi.ListParams

// ListResult is a page of flows, each at its latest version.
type ListResult = flowapi.ListResult

// List returns a page of the stored flows ordered by id, each at its latest
// version, without definitions.
func (r *Registry) List(ctx context.Context, p ListParams) (*ListResult, error) {
	if p.PageSize == 0 {
		p.PageSize = DefaultPageSize
	}
	if p.PageSize < 1 || p.PageSize > MaxPageSize {
		return nil, fmt.Errorf("%w: pageSize must be between 1 and %d", workflow.ErrInvalidRequest, MaxPageSize)
	}
	if p.Cursor != "" {
		if err := workflow.ValidateWorkflowName(p.Cursor); err != nil {
			return nil, fmt.Errorf("%w: malformed cursor", workflow.ErrInvalidRequest)
		}
	}
	rows, err := r.cfg.Store.FlowList(ctx, &db.FlowListParams{AfterID: p.Cursor, Limit: p.PageSize + 1})
	if err != nil {
		return nil, err
	}
	res := &ListResult{Flows: []*Info{}}
	if len(rows) > p.PageSize {
		rows = rows[:p.PageSize]
		res.NextCursor = rows[len(rows)-1].ID
	}
	for _, f := range rows {
		res.Flows = append(res.Flows, &Info{ID: f.ID, Version: f.Version, Name: f.Name, CreatedAt: f.CreatedAt, Latest: true})
	}
	return res, nil
}

// VersionList is every version of one flow, lowest first.
type VersionList = flowapi.VersionList

// Versions returns every version of a flow, lowest first by semantic
// version, without definitions. It fails with ErrNotFound.
func (r *Registry) Versions(ctx context.Context, id string) (*VersionList, error) {
	if err := workflow.ValidateWorkflowName(id); err != nil {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	rows, err := r.cfg.Store.FlowVersions(ctx, id)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	out := &VersionList{ID: id, Versions: make([]*Info, len(rows))}
	versions := make([]string, len(rows))
	for i, f := range rows {
		versions[i] = f.Version
	}
	out.Latest, _ = LatestVersion(versions)
	for i, f := range rows {
		out.Versions[i] = &Info{ID: f.ID, Version: f.Version, Name: f.Name, CreatedAt: f.CreatedAt, Latest: f.Version == out.Latest}
	}
	return out, nil
}

// LatestVersions returns the latest version of every stored flow, by id.
func (r *Registry) LatestVersions(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	for after := ""; ; {
		page, err := r.cfg.Store.FlowList(ctx, &db.FlowListParams{AfterID: after, Limit: listBatch})
		if err != nil {
			return nil, fmt.Errorf("listing flows: %w", err)
		}
		for _, f := range page {
			out[f.ID] = f.Version
		}
		if len(page) < listBatch {
			return out, nil
		}
		after = page[len(page)-1].ID
	}
}

// listBatch is the page size Load and LatestVersions read the store with.
const listBatch = 500
