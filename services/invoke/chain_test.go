package invoke

import (
	"context"
	"testing"
	"time"

	"toolbelt/services/ops"
)

// Each guard's timing is its own time: the guards after it and the
// execution are not in it, nor is a guard's time lost when the one before
// it is untimed.
func TestGuardTimingsExcludeLaterSteps(t *testing.T) {
	inv := &Invoker{metrics: ops.NewMetrics("")}
	pass := func(next step) step { return next }
	slow := func(next step) step {
		return func(ctx context.Context, c *call) ToolResult {
			time.Sleep(20 * time.Millisecond)
			return next(ctx, c)
		}
	}
	// The chain's shape: eight timed guards and an untimed one among them.
	names := []string{"resolve", "validate", "authorize", "approve", "secure", "cache", "", "limit", "queue"}
	guards := make([]namedGuard, len(names))
	for i, name := range names {
		g := guard(pass)
		if name == "approve" {
			g = slow
		}
		guards[i] = namedGuard{name, g}
	}
	run := inv.timedChain(guards...)(func(context.Context, *call) ToolResult {
		time.Sleep(300 * time.Millisecond) // the execution: far longer than any bound below
		return ToolResult{Success: true}
	})
	run(context.Background(), &call{})

	families, err := inv.metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "toolbelt_guard_duration_seconds" {
			continue
		}
		for _, m := range f.Metric {
			sums[m.Label[0].GetValue()] = m.Histogram.GetSampleSum()
		}
	}
	if len(sums) != len(names)-1 {
		t.Fatalf("timings of %d guards, want %d: %v", len(sums), len(names)-1, sums)
	}
	for name, sum := range sums {
		// Loose bounds for a loaded machine: counting the 300 ms execution
		// or the 20 ms guard in the wrong place still breaks them.
		switch {
		case name == "approve" && (sum < 0.019 || sum > 0.250):
			t.Errorf("approve (sleeps 20 ms) took %.1f ms by its timing", sum*1000)
		case name != "approve" && sum > 0.100:
			t.Errorf("%s (does nothing) took %.1f ms by its timing: later steps counted in", name, sum*1000)
		}
	}
}
