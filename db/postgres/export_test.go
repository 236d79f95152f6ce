package postgres

// PlanSettings exposes the planner settings of the claim and the group
// commit to the plan tests.
var PlanSettings = planSettings

// InterpretError exposes the error mapping to the error tests.
var InterpretError = interpretError
