// Package testharness runs real workflow code against a real store with a
// fake clock, for workflow authors' tests and Duraflow's own.
//
//	h := testharness.New(t)
//	billing := workflow.MustRegister(h.Registry, "billing", Billing{})
//	inst, _ := billing.Create(h.Context(), workflow.CreateOptions[Params]{ID: "inv-1"})
//	h.RunUntilIdle()  // runs due work, jumps the clock over sleeps and retry delays
//	h.RequireStatus("billing", "inv-1", dftype.StatusWaiting)
//	h.SendEvent("billing", "inv-1", "approval", map[string]bool{"ok": true})
//	h.RunUntilIdle()
//
// RunUntilIdle never jumps the clock to an event timeout by itself: an
// instance that waits only for an event is idle, so the test can send the
// event. To take the timeout path, Advance the clock first.
package testharness
