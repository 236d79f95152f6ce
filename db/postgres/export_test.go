package postgres

// ClaimPlanSettings exposes the planner settings of the claim to the plan
// tests.
var ClaimPlanSettings = claimPlanSettings
