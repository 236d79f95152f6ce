package flow_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/duraflow/duraflow/flow"
	"github.com/duraflow/duraflow/workflow"
)

func ExampleParse() {
	def, err := flow.Parse([]byte(`{
	  "id": "greet", "version": "1.0.0", "initialStepId": "hello",
	  "steps": {
	    "hello": {"id": "hello", "type": "transform", "config": {"preset": "upper"},
	              "input": {"template": "hello, ${name}"}, "outputKey": "greeting"}
	  },
	  "output": "greeting"
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	compiled, err := flow.Compile(def, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	reg := workflow.NewRegistry()
	if _, err := workflow.Register(reg, compiled.ID(), compiled.Run); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(reg.Names(), compiled.Version())
	// Output: [greet] 1.0.0
}

func ExampleValidate() {
	def, _ := flow.Parse([]byte(`{
	  "id": "broken", "version": "1.0", "initialStepId": "start",
	  "steps": {
	    "start": {"id": "start", "type": "http", "config": {"url": "ftp://example.com"}, "transitions": {"onSuccess": "next"}},
	    "lost": {"id": "lost", "type": "delay", "config": {"duration": "1 minute"}}
	  }
	}`))
	warnings, err := flow.Validate(def, nil)
	var ve *flow.ValidationError
	if errors.As(err, &ve) {
		for _, p := range ve.Problems {
			fmt.Println(p)
		}
	}
	for _, w := range warnings {
		fmt.Println("warning:", w)
	}
	// Output:
	// steps.start.config.url: only http and https URLs are allowed, not "ftp://example.com"
	// steps.start.transitions.onSuccess: no step "next" (steps: lost, start, or "$end" to end the flow)
	// version: invalid version "1.0": want a semantic version MAJOR.MINOR.PATCH such as "1.0.0" or "2.1.0-beta.1"
	// warning: steps.lost: step "lost" is unreachable from the initial step "start"
}

func ExampleCompareVersions() {
	versions := []string{"1.10.0", "1.9.0", "1.10.0-rc.1", "2.0.0-beta"}
	flow.SortVersions(versions)
	latest, _ := flow.LatestVersion(versions)
	fmt.Println(versions, flow.CompareVersions("1.10.0", "1.9.0"), latest)
	// Output: [1.9.0 1.10.0-rc.1 1.10.0 2.0.0-beta] 1 1.10.0
}

func ExampleExpand() {
	var ctx map[string]any
	_ = json.Unmarshal([]byte(`{"user": {"name": "Ada"}, "items": [{"sku": "A-1"}]}`), &ctx)
	s, _ := flow.Expand("${user.name} ordered ${items.0.sku} for $$5", ctx)
	fmt.Println(s)
	// Output: Ada ordered A-1 for $5
}

func ExampleNewHandlers() {
	// A host allows its flows to call one internal service and to run one
	// program; everything else internal stays unreachable.
	httpHandler, err := flow.NewHTTPHandler(&flow.HTTPHandlerConfig{Allow: []string{"billing.internal", "10.20.0.0/16"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	execHandler, err := flow.NewExecHandler(&flow.ExecHandlerConfig{Commands: []flow.ExecCommand{
		{Name: "render-invoice", Path: "/usr/local/bin/render-invoice", Env: []string{"LANG=C.UTF-8"}},
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	hs, err := flow.NewHandlers(flow.WithHandler(httpHandler), flow.WithHandler(execHandler))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(hs.Types())
	// Output: [branch delay exec http set subflow transform wait-for-event]
}
