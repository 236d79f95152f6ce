package testharness_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// suiteSize is the size of the suite the benchmarks time: the harness must
// run 100 workflow tests on in-memory SQLite in well under a second.
const suiteSize = 100

// registerBenchWorkflow registers what a typical author's test runs: a
// step, a sleep the harness jumps over, a mocked step and one more step.
func registerBenchWorkflow(h *testharness.Harness) *workflow.Binding[int, int] {
	return workflow.MustRegister(h.Registry, "order", func(ctx context.Context, ev workflow.Event[int], step workflow.Step) (int, error) {
		v, err := workflow.Do(step, "reserve", func(ctx context.Context) (int, error) { return ev.Payload + 1, nil })
		if err != nil {
			return 0, err
		}
		if err := step.Sleep("cool off", time.Hour); err != nil {
			return 0, err
		}
		charge, err := workflow.Do(step, "charge", func(ctx context.Context) (int, error) { return 0, fmt.Errorf("the real gateway") })
		if err != nil {
			return 0, err
		}
		return workflow.Do(step, "ship", func(ctx context.Context) (int, error) { return v + charge, nil })
	})
}

// benchTB is one test of a benchmarked suite: it runs the harness's
// cleanups when the test ends instead of when the benchmark does.
type benchTB struct {
	testing.TB
	mu       sync.Mutex
	cleanups []func()
}

func (t *benchTB) Cleanup(fn func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, fn)
}

func (t *benchTB) end() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
	t.cleanups = nil
}

// runOneTest is one author's test: a fresh harness on in-memory SQLite,
// one instance run to completion with a mocked step.
func runOneTest(b *testing.B) {
	tb := &benchTB{TB: b}
	defer tb.end()
	h := testharness.New(tb, testharness.WithBackend(testharness.SQLiteMemory))
	order := registerBenchWorkflow(h)
	h.OnStep("charge").Return(10)
	if _, err := order.Create(h.Context(), workflow.CreateOptions[int]{ID: "o-1", Params: 1}); err != nil {
		b.Fatal(err)
	}
	h.RunUntilIdle()
	var out int
	h.RequireOutput("order", "o-1", &out)
	if out != 12 {
		b.Fatalf("output %d, want 12", out)
	}
}

// BenchmarkHarnessNew times testharness.New on in-memory SQLite, with its
// cleanup: the fixed cost of every test.
func BenchmarkHarnessNew(b *testing.B) {
	cpu := processCPU()
	for b.Loop() {
		tb := &benchTB{TB: b}
		testharness.New(tb, testharness.WithBackend(testharness.SQLiteMemory))
		tb.end()
	}
	reportCPU(b, cpu, b.N, "cpu-ns/op")
}

// reportCPU reports the process's CPU time since cpu per n units.
func reportCPU(b *testing.B, cpu time.Duration, n int, unit string) {
	b.ReportMetric(float64((processCPU()-cpu).Nanoseconds())/float64(n), unit)
}

// BenchmarkHarnessSuite times a suite of 100 tests, each its own harness
// and instance, one after the other (as `go test` runs them without
// t.Parallel); ns/instance is the cost of one test.
func BenchmarkHarnessSuite(b *testing.B) {
	cpu := processCPU()
	for b.Loop() {
		for range suiteSize {
			runOneTest(b)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*suiteSize), "ns/instance")
	reportCPU(b, cpu, b.N*suiteSize, "cpu-ns/instance")
}

// BenchmarkHarnessSuiteParallel is BenchmarkHarnessSuite with the tests run
// in parallel on GOMAXPROCS goroutines, as t.Parallel tests run.
func BenchmarkHarnessSuiteParallel(b *testing.B) {
	cpu := processCPU()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			runOneTest(b)
		}
	})
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/instance")
	reportCPU(b, cpu, b.N, "cpu-ns/instance")
}

// BenchmarkHarnessInstances times 100 instances run to completion in one
// harness by one RunUntilIdle; ns/instance is the cost of one.
func BenchmarkHarnessInstances(b *testing.B) {
	cpu := processCPU()
	for b.Loop() {
		tb := &benchTB{TB: b}
		h := testharness.New(tb, testharness.WithBackend(testharness.SQLiteMemory))
		order := registerBenchWorkflow(h)
		h.OnStep("charge").Return(10)
		for i := range suiteSize {
			if _, err := order.Create(h.Context(), workflow.CreateOptions[int]{ID: fmt.Sprintf("o-%d", i), Params: i}); err != nil {
				b.Fatal(err)
			}
		}
		h.RunUntilIdle()
		h.RequireStatus("order", fmt.Sprintf("o-%d", suiteSize-1), dftype.StatusComplete)
		tb.end()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*suiteSize), "ns/instance")
	reportCPU(b, cpu, b.N*suiteSize, "cpu-ns/instance")
}
