package invoke

import (
	"context"
	"strings"
	"testing"
	"time"

	"toolbelt/models"
	"toolbelt/services/redact"
	"toolbelt/services/tooldef"
)

// TestCacheGuard runs the cache guard alone: hits for equal canonical
// arguments, misses for others, for failures, and after the TTL.
func TestCacheGuard(t *testing.T) {
	red, err := redact.New([]string{"hunter2-secret-value"})
	if err != nil {
		t.Fatal(err)
	}
	inv := &Invoker{redactor: red, memo: memos{results: newResultsCache()}}
	runs := 0
	step := inv.cache(func(_ context.Context, c *call) ToolResult {
		runs++
		if c.args["fail"] == true {
			return failure(models.CodeExecutionFailed, "no", false, "")
		}
		return ToolResult{Status: models.StatusSucceeded, Success: true}
	})
	def := tooldef.Definition{Name: "t", Category: "search", Execution: tooldef.Execution{Cacheable: true, CacheTTL: 60_000}}
	mk := func(args map[string]any) *call { return &call{def: def, version: 1, args: args} }
	cases := []struct {
		name   string
		c      *call
		cached bool
		runs   int
	}{
		{"first call runs", mk(map[string]any{"q": "go", "n": 1}), false, 1},
		{"same arguments, other key order", mk(map[string]any{"n": 1, "q": "go"}), true, 1},
		{"other arguments run", mk(map[string]any{"q": "rust", "n": 1}), false, 2},
		{"failures are not cached", mk(map[string]any{"fail": true}), false, 3},
		{"a failure runs again", mk(map[string]any{"fail": true}), false, 4},
		{"another version runs", &call{def: def, version: 2, args: map[string]any{"q": "go", "n": 1}}, false, 5},
	}
	for _, tc := range cases {
		step(context.Background(), tc.c)
		if tc.c.outcome.cached != tc.cached || runs != tc.runs {
			t.Errorf("%s: cached %v runs %d; want %v %d", tc.name, tc.c.outcome.cached, runs, tc.cached, tc.runs)
		}
	}
	// A hit's history record reuses the arguments redacted once.
	secret := map[string]any{"q": "hunter2-secret-value"}
	step(context.Background(), mk(secret))
	hit := mk(map[string]any{"q": "hunter2-secret-value"})
	step(context.Background(), hit)
	if !hit.outcome.cached || strings.Contains(hit.outcome.redactedArgs, "hunter2") || !strings.Contains(hit.outcome.redactedArgs, "REDACTED") {
		t.Errorf("cache hit: cached %v, redacted arguments %q", hit.outcome.cached, hit.outcome.redactedArgs)
	}
	short := tooldef.Definition{Name: "t", Category: "search", Execution: tooldef.Execution{Cacheable: true, CacheTTL: 1}}
	step(context.Background(), &call{def: short, version: 3, args: map[string]any{}})
	time.Sleep(20 * time.Millisecond)
	c := &call{def: short, version: 3, args: map[string]any{}}
	step(context.Background(), c)
	if c.outcome.cached {
		t.Error("an expired entry was served")
	}
}

// TestCacheKeyPerCaller: a result is served to the principal and session
// that made it, whatever the tool's category or runner kind, except for a
// tool free of per-caller state (tooldef.CallerFree), served to everyone.
func TestCacheKeyPerCaller(t *testing.T) {
	exec := tooldef.Execution{Cacheable: true, CacheTTL: 60_000}
	defs := map[string]tooldef.Definition{
		"file builtin": {Category: "filesystem", Runner: tooldef.Runner{Kind: tooldef.RunnerBuiltin, Builtin: "file_read"}},
		"command":      {Category: "shell", Runner: tooldef.Runner{Kind: tooldef.RunnerCommand, Argv: []string{"cat", "--", "{{path}}"}}},
		"code command": {Category: "code", Runner: tooldef.Runner{Kind: tooldef.RunnerCommand, Argv: []string{"cat", "--", "{{path}}"}}},
		"composite":    {Category: "api", Runner: tooldef.Runner{Kind: tooldef.RunnerComposite, Steps: []tooldef.CompositeStep{{Tool: "file_read"}}}},
		"mcp":          {Category: "api", Runner: tooldef.Runner{Kind: tooldef.RunnerMCP, Server: "s", Tool: "t"}},
		"search":       {Category: "search", Runner: tooldef.Runner{Kind: tooldef.RunnerBuiltin, Builtin: "web_search"}},
		"http":         {Category: "api", Runner: tooldef.Runner{Kind: tooldef.RunnerHTTP, Method: "GET", URL: "https://api.example.com/{{path}}"}},
	}
	for name, def := range defs {
		t.Run(name, func(t *testing.T) {
			def.Execution = exec
			red, err := redact.New(nil)
			if err != nil {
				t.Fatal(err)
			}
			inv := &Invoker{redactor: red, memo: memos{results: newResultsCache()}}
			runs := 0
			step := inv.cache(func(context.Context, *call) ToolResult {
				runs++
				return ToolResult{Status: models.StatusSucceeded, Success: true}
			})
			mk := func(principal uint, session string) *call {
				return &call{def: def, version: 1, args: map[string]any{"path": "notes.txt"},
					caller: &models.Principal{ID: principal}, req: CallRequest{SessionID: session}}
			}
			shared := tooldef.CallerFree(def)
			for _, tc := range []struct {
				name   string
				c      *call
				cached bool
			}{
				{"agent 1", mk(1, "s1"), false},
				{"agent 2, same session name", mk(2, "s1"), shared},
				{"agent 1, another session", mk(1, "s2"), shared},
				{"agent 1 again", mk(1, "s1"), true},
			} {
				step(context.Background(), tc.c)
				if tc.c.outcome.cached != tc.cached {
					t.Errorf("%s: cached %v, want %v", tc.name, tc.c.outcome.cached, tc.cached)
				}
			}
			if want := map[bool]int{true: 1, false: 3}[shared]; runs != want {
				t.Errorf("ran %d times, want %d", runs, want)
			}
			if shared != (name == "http") {
				t.Errorf("CallerFree = %v", shared)
			}
		})
	}
}
