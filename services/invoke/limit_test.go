package invoke

import (
	"context"
	"testing"

	"toolbelt/models"
	"toolbelt/services/tooldef"
)

// TestLimitGuard runs the rate limit alone: per tool and principal.
func TestLimitGuard(t *testing.T) {
	inv := &Invoker{admission: admission{limits: newRateLimits(nil)}}
	step := inv.limit(func(context.Context, *call) ToolResult { return ToolResult{Success: true} })
	def := tooldef.Definition{Name: "t", Security: tooldef.Security{RateLimit: &tooldef.RateLimit{MaxCalls: 2, WindowMs: 60_000}}}
	a, b := &models.Principal{ID: 1}, &models.Principal{ID: 2}
	want := []bool{true, true, false}
	for i, w := range want {
		if res := step(context.Background(), &call{def: def, caller: a}); res.Success != w {
			t.Fatalf("call %d: %+v", i, res.Error)
		} else if !w && (res.Error.Code != models.CodeRateLimit || res.Error.RetryAfter < 1) {
			t.Errorf("refusal %+v", res.Error)
		}
	}
	if res := step(context.Background(), &call{def: def, caller: b}); !res.Success {
		t.Error("another principal shares the budget")
	}
	unlimited := tooldef.Definition{Name: "u"}
	for range 5 {
		if res := step(context.Background(), &call{def: unlimited, caller: a}); !res.Success {
			t.Fatal("a tool without a rate limit was limited")
		}
	}
}
