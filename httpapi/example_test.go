package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/db/dburl"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/runner"
	"github.com/duraflow/duraflow/workflow"
)

// A host wires the API over its management client and runner, checks its
// listen address, and serves.
func ExampleNew() {
	ctx := context.Background()
	store, err := dburl.OpenMigrated(ctx, "sqlite:duraflow.db")
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	reg := workflow.NewRegistry()
	// ... register workflows ...
	c, err := client.New(&client.Config{Store: store, Registry: reg})
	if err != nil {
		log.Fatal(err)
	}
	r, err := runner.New(&runner.Config{Store: store, Registry: reg})
	if err != nil {
		log.Fatal(err)
	}
	// The spec names the secret "s3cret" by its SHA-256, so the
	// configuration holds no secret.
	admin, err := httpapi.ParseToken("admin:sha256=1ec1c26b50d5d3c58d9583181af8076655fe00756bf7285940ba3670f99fcba0:*")
	if err != nil {
		log.Fatal(err)
	}
	srv, err := httpapi.New(&httpapi.Config{
		Client: c,
		Tokens: []httpapi.Token{admin, httpapi.NewToken("cron", "tick-secret", httpapi.ActionTick)},
		Tick: func(ctx context.Context, maxInstances, maxSteps int) (int, error) {
			return r.RunDueLimited(ctx, maxInstances, maxSteps)
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	addr := ":8080"
	if err := httpapi.CheckListenAddr(addr, srv.AuthConfigured()); err != nil {
		log.Fatal(err)
	}
	log.Fatal(http.ListenAndServe(addr, srv.Handler()))
}

// The typed client answers with the same types as client.Client, and its
// errors match the workflow package's sentinels.
func ExampleClient() {
	ctx := context.Background()
	store, err := dburl.OpenMigrated(ctx, "sqlite::memory:")
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	reg := workflow.NewRegistry()
	workflow.MustRegister(reg, "greet", func(ctx context.Context, ev workflow.Event[json.RawMessage], step workflow.Step) (string, error) {
		return "hello", nil
	})
	c, err := client.New(&client.Config{Store: store, Registry: reg})
	if err != nil {
		log.Fatal(err)
	}
	srv, err := httpapi.New(&httpapi.Config{Client: c, Tokens: []httpapi.Token{httpapi.NewToken("me", "secret", httpapi.ActionRead, httpapi.ActionCreate)}})
	if err != nil {
		log.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()

	api := apiclient.New(ts.URL, "secret", nil)
	inst, err := api.Create(ctx, "greet", dftype.CreateRequest{ID: "hi-1", Params: json.RawMessage(`{"to":"ada"}`)})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(inst.ID, inst.Status, string(inst.Params))

	_, err = api.Get(ctx, "greet", "hi-2")
	fmt.Println(errors.Is(err, workflow.ErrInstanceNotFound))
	fmt.Println(err)

	_, err = api.Pause(ctx, "greet", "hi-1")
	fmt.Println(errors.Is(err, httpapi.ErrForbidden))
	// Output:
	// hi-1 queued {"to":"ada"}
	// true
	// INSTANCE_NOT_FOUND (HTTP 404): instance not found: greet/hi-2
	// true
}

func ExampleParseToken() {
	tok, err := httpapi.ParseToken("ci:s3cret:read,create,events")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(tok.Name, tok.Scopes)

	// "*" is every action but tick, which is always named.
	tok, _ = httpapi.ParseToken("ops:sha256=1ec1c26b50d5d3c58d9583181af8076655fe00756bf7285940ba3670f99fcba0:*")
	fmt.Println(tok.Name, tok.Scopes)
	tok, _ = httpapi.ParseToken("cron:t1ck:tick")
	fmt.Println(tok.Name, tok.Scopes)

	_, err = httpapi.ParseToken("ci:s3cret:admin")
	fmt.Println(err)
	// Output:
	// ci [read create events]
	// ops [read create manage events flows schedules metrics]
	// cron [tick]
	// httpapi: token "ci": unknown scope "admin" (want read, create, manage, events, flows, schedules, tick, metrics or *)
}

func ExampleCheckListenAddr() {
	for _, addr := range []string{"127.0.0.1:8080", "[::1]:8080", ":8080", "0.0.0.0:8080"} {
		fmt.Printf("%-15s without auth: %v\n", addr, httpapi.CheckListenAddr(addr, false) == nil)
	}
	fmt.Println(httpapi.CheckListenAddr(":8080", true) == nil)
	// Output:
	// 127.0.0.1:8080  without auth: true
	// [::1]:8080      without auth: true
	// :8080           without auth: false
	// 0.0.0.0:8080    without auth: false
	// true
}
