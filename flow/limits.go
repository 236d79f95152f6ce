package flow

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/workflow"
)

// Concurrency is a flow's concurrency key: Key selects a string from the
// instance's params (a path, a key or a template, evaluated at create), and
// at most Max instances of one key are admitted and not yet terminal at
// once. A key that is missing or not a string fails the create with
// workflow.ErrConcurrencyKey (HTTP 400 INVALID_CONCURRENCY_KEY), and
// nothing is written.
//
//	"concurrency": {"key": {"path": "customer.id"}, "max": 1}
type Concurrency struct {
	Key *Selector `json:"key"`
	Max int       `json:"max"`
	// Rate limits the starts per key.
	Rate *Rate `json:"rate,omitempty"`
}

// Rate is a flow's rate limit: at most Limit starts per Period (fixed
// windows).
//
//	"rateLimit": {"limit": 100, "period": "1 minute"}
type Rate struct {
	Limit  int             `json:"limit"`
	Period dftype.Duration `json:"period"`
}

// limits validates the definition's limits.
func (v *validator) limits() {
	def := v.def
	if def.MaxRunning != nil && *def.MaxRunning <= 0 {
		v.add("maxRunning", "must be positive, got %d (leave it out for no limit)", *def.MaxRunning)
	}
	v.rate("rateLimit", def.RateLimit)
	if c := def.Concurrency; c != nil {
		switch {
		case c.Key == nil:
			v.add("concurrency.key", "is required: a selector of the key in the params, such as {\"path\": \"customer.id\"}")
		default:
			for _, p := range c.Key.validate() {
				p.Path = "concurrency.key" + dotted(p.Path)
				v.problems = append(v.problems, p)
			}
		}
		if c.Max <= 0 {
			v.add("concurrency.max", "must be positive, got %d", c.Max)
		}
		v.rate("concurrency.rate", c.Rate)
	}
}

func dotted(p string) string {
	if p == "" {
		return ""
	}
	return "." + p
}

func (v *validator) rate(path string, r *Rate) {
	if r == nil {
		return
	}
	if r.Limit <= 0 {
		v.add(path+".limit", "must be positive, got %d", r.Limit)
	}
	if time.Duration(r.Period) < time.Millisecond {
		v.add(path+".period", "must be at least 1 millisecond, got %s", r.Period)
	}
}

// workflowLimits are the definition's limits as the client applies them.
func (d *Definition) workflowLimits() *workflow.Limits {
	l := &workflow.Limits{}
	if d.MaxRunning != nil {
		l.MaxRunning = *d.MaxRunning
	}
	if d.RateLimit != nil {
		l.Rate = workflow.RateLimit{Limit: d.RateLimit.Limit, Period: time.Duration(d.RateLimit.Period)}
	}
	if c := d.Concurrency; c != nil && c.Key != nil {
		key := c.Key
		l.Key = func(params json.RawMessage) (string, error) {
			var ctx map[string]any
			if len(params) > 0 {
				v, err := decodeValue(params)
				if err != nil {
					return "", fmt.Errorf("decoding params: %w", err)
				}
				ctx, _ = v.(map[string]any)
			}
			v, found, err := key.Select(ctx)
			if err != nil {
				return "", err
			}
			s, ok := v.(string)
			if !found || !ok {
				return "", fmt.Errorf("the key selector must give a string, got %s", describe(v, found))
			}
			return s, nil
		}
		l.KeyMaxRunning = c.Max
		if c.Rate != nil {
			l.KeyRate = workflow.RateLimit{Limit: c.Rate.Limit, Period: time.Duration(c.Rate.Period)}
		}
	}
	if !l.Limited() {
		return nil
	}
	return l
}

func describe(v any, found bool) string {
	if !found {
		return "nothing (not in the params)"
	}
	if v == nil {
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// Limits returns the concurrency and rate limits of the flow version an
// instance is pinned to (its metadata, as Metadata pinned it), for the
// client's LimitsFunc; nil for a Go workflow or a flow without limits.
func (r *Registry) Limits(ctx context.Context, workflowName string, metadata json.RawMessage) (*workflow.Limits, error) {
	if !r.IsFlow(workflowName) {
		return nil, nil
	}
	pin, err := PinOf(metadata)
	if err != nil || pin == nil || pin.Version == "" {
		return nil, err
	}
	f, err := r.runs.compiled(ctx, workflowName, pin.Version, false)
	if err != nil {
		return nil, fmt.Errorf("reading the limits of flow %q %s: %w", workflowName, pin.Version, err)
	}
	return f.def.workflowLimits(), nil
}
