package invoke

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"toolbelt/services/ops"
)

// Each guard's timing is its own time: the guards after it and the
// execution are not in it, nor is a guard's time lost when the one before
// it is untimed. The chain's clock moves only in the steps: 20 ms in one
// guard, 300 ms in the execution, so every timing is exact.
func TestGuardTimingsExcludeLaterSteps(t *testing.T) {
	clock := time.Unix(1_700_000_000, 0)
	inv := &Invoker{metrics: ops.NewMetrics(""), pipeline: pipeline{now: func() time.Time { return clock }}}
	pass := func(next step) step { return next }
	slow := func(next step) step {
		return func(ctx context.Context, c *call) ToolResult {
			clock = clock.Add(20 * time.Millisecond)
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
		clock = clock.Add(300 * time.Millisecond) // the execution
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
		switch {
		case name == "approve" && sum != 0.020:
			t.Errorf("approve (20 ms) took %v ms by its timing", sum*1000)
		case name != "approve" && sum != 0:
			t.Errorf("%s (no time) took %v ms by its timing: another step counted in", name, sum*1000)
		}
	}
}

// A call's stages name the guards that ran, in the chain's order, then
// the execution and its attempts; they read as encoding/json writes them.
func TestStagesJSON(t *testing.T) {
	names := []string{"resolve", "validate", "authorize", "", "secure", "queue"}
	build := func(refuseAt string) (*Invoker, func(context.Context, *call) ToolResult) {
		inv := &Invoker{metrics: ops.NewMetrics("")}
		guards := make([]namedGuard, len(names))
		for i, name := range names {
			guards[i] = namedGuard{name, func(next step) step {
				return func(ctx context.Context, c *call) ToolResult {
					if name == refuseAt && name != "" {
						return ToolResult{Status: "refused"}
					}
					return next(ctx, c)
				}
			}}
		}
		return inv, inv.timedChain(guards...)(func(_ context.Context, c *call) ToolResult {
			c.timing.tries = append(c.timing.tries, try{took: 1500 * time.Microsecond, code: `ODD "CODE"\` + "\n"}, try{took: 3 * time.Millisecond})
			return ToolResult{Success: true}
		})
	}
	type stage struct {
		Stage string `json:"stage"`
		Us    int64  `json:"us"`
		N     int    `json:"n,omitempty"`
		Error string `json:"error,omitempty"`
	}
	for refuseAt, want := range map[string][]string{
		"secure": {"resolve", "validate", "authorize", "secure"},
		"":       {"resolve", "validate", "authorize", "secure", "queue", "execute", "attempt", "attempt"},
	} {
		inv, run := build(refuseAt)
		c := &call{}
		run(context.Background(), c)
		raw := inv.stages(c)
		var got []stage
		if err := json.Unmarshal([]byte(raw), &got); err != nil {
			t.Fatalf("stages %s do not decode: %v", raw, err)
		}
		var gotNames []string
		for _, s := range got {
			gotNames = append(gotNames, s.Stage)
		}
		if !slices.Equal(gotNames, want) {
			t.Errorf("refused at %q: stages %v, want %v", refuseAt, gotNames, want)
		}
		if std, _ := json.Marshal(got); string(std) != raw {
			t.Errorf("stages\n%s\nencoding/json writes\n%s", raw, std)
		}
		if refuseAt == "" && (got[6] != stage{"attempt", 1500, 1, `ODD "CODE"\` + "\n"} || got[7] != stage{"attempt", 3000, 2, ""}) {
			t.Errorf("attempts %+v", got[6:])
		}
	}
	if got := (&Invoker{}).stages(&call{}); got != "" {
		t.Errorf("an untimed call's stages = %q, want none", got)
	}
}
