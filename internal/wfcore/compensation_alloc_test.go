package wfcore_test

import (
	"testing"

	"github.com/duraflow/duraflow/internal/wfcore"
	"github.com/duraflow/duraflow/workflow"
)

// A step without a compensation pays no allocation for the feature: every
// Do asks for its compensation. (Not parallel: AllocsPerRun refuses it.)
func TestCompensationOfDoesNotAllocateWithoutOne(t *testing.T) {
	cfg := wfcore.NewStepConfig(workflow.WithTimeout(5))
	n := testing.AllocsPerRun(100, func() { _, _ = wfcore.CompensationOf(cfg) })
	if n != 0 {
		t.Fatalf("allocs %v", n)
	}
}
