// Package workflow is the authoring API of Duraflow.
//
// A workflow is a Go value or function with
//
//	Run(ctx context.Context, event workflow.Event[P], step workflow.Step) (O, error)
//
// that calls step.Do (or the typed workflow.Do), step.Sleep, step.SleepUntil
// and step.WaitForEvent. Every completed step is checkpointed; when an
// instance resumes after a sleep, an event, a retry delay or a crash, Run is
// called again from the top and completed steps return their recorded results
// instead of running again. Step results and workflow outputs are always JSON
// round-tripped, on the first run as on replay, so the code can never observe
// a difference between the two.
//
// The host registers each workflow in a Registry and gets a typed Binding,
// through which instances are created, inspected and controlled:
//
//	reg := workflow.NewRegistry()
//	billing := workflow.MustRegister(reg, "billing", BillingWorkflow{})
//	inst, err := billing.Create(ctx, workflow.CreateOptions[BillingParams]{ID: "inv-42", Params: p})
//
// This package knows nothing about databases, HTTP or the runner: it defines
// the Step interface that the runner implements and the Engine interface that
// the management client implements, and it owns the validation rules and
// limits that every entry point shares.
package workflow
