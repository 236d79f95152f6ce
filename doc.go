// Package duraflow builds a whole Duraflow host from a store and one
// configuration: the composition root.
//
//	reg := workflow.NewRegistry()
//	greet := workflow.MustRegister(reg, "greet", Greet)
//	host, err := duraflow.New(store, &duraflow.Config{Registry: reg})
//	...
//	err = host.Start(ctx)
//	defer host.Stop(context.WithoutCancel(ctx))
//	inst, err := greet.Create(ctx, workflow.CreateOptions[GreetParams]{Params: p})
//
// New builds, in this order and each from the configuration alone, the
// pieces a host program would otherwise wire by hand: the hook deliverer
// (Config.Hooks), the flow registry (Config.Flows), the runner
// (Config.Runner), the management client, which hands new instances to
// that runner at once (eager start), the scheduler (Config.Scheduler), the
// in-process wake-ups between them, and on a store that offers
// db.WakeListener (Postgres) the listener that wakes them when another
// process made work due. It binds the registry's typed bindings to the
// client. Nothing is attached to any of them afterwards, and whether hook
// entries are recorded is decided once, by Config.Hooks, for the client,
// the runner and the scheduler together.
//
// A program that wants only a part can still build it alone with
// client.New, runner.New, schedule.New, hook.NewDeliverer or flow.New;
// each package's Config says what it needs.
//
// The package sees backends only through db's interfaces: it never imports
// db/postgres or db/sqlite, and knows nothing of HTTP or the command line.
package duraflow
