package invoke

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"toolbelt/models"
	"toolbelt/models/modelstest"
	"toolbelt/services/access"
	"toolbelt/services/embed"
	"toolbelt/services/netpolicy"
	"toolbelt/services/redact"
	"toolbelt/services/runners"
	"toolbelt/services/tooldef"
)

// TestWithRetries checks the retry loop with a fake sleep: no test sleeps.
func TestWithRetries(t *testing.T) {
	retryable := failure(models.CodeTimeout, "slow", true, "")
	permanent := failure(models.CodeExecutionFailed, "bad", false, "")
	ok := ToolResult{Status: models.StatusSucceeded, Success: true}
	cases := []struct {
		name     string
		results  []ToolResult
		retries  int
		attempts int
		success  bool
		sleeps   []time.Duration // base durations; jitter adds up to 20%
	}{
		{"first try", []ToolResult{ok}, 3, 1, true, nil},
		{"retried once", []ToolResult{retryable, ok}, 3, 2, true, []time.Duration{time.Second}},
		{"permanent failure", []ToolResult{permanent, ok}, 3, 1, false, nil},
		{"retries spent", []ToolResult{retryable, retryable, retryable, retryable, ok}, 3, 4, false, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}},
		{"retries disabled", []ToolResult{retryable, ok}, 0, 1, false, nil},
		{"every retry allowed spent", slices.Repeat([]ToolResult{retryable}, tooldef.MaxRetries+1), tooldef.MaxRetries, tooldef.MaxRetries + 1, false,
			[]time.Duration{1 << 0 * time.Second, 1 << 1 * time.Second, 1 << 2 * time.Second, 1 << 3 * time.Second, 1 << 4 * time.Second,
				1 << 5 * time.Second, 1 << 6 * time.Second, 1 << 7 * time.Second, 1 << 8 * time.Second, 1 << 9 * time.Second}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var slept []time.Duration
			sleep := func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }
			i := 0
			res, n := withRetries(context.Background(), tc.retries, sleep, func() ToolResult { i++; return tc.results[i-1] })
			if n != tc.attempts || res.Success != tc.success || len(slept) != len(tc.sleeps) {
				t.Fatalf("attempts %d success %v sleeps %v; want %d %v %v", n, res.Success, slept, tc.attempts, tc.success, tc.sleeps)
			}
			for k, d := range slept {
				if d < tc.sleeps[k] || d > tc.sleeps[k]*6/5 {
					t.Errorf("sleep %d = %v, want %v plus at most 20%%", k, d, tc.sleeps[k])
				}
			}
		})
	}
	t.Run("cancelled while waiting", func(t *testing.T) {
		sleep := func(ctx context.Context, d time.Duration) error { return context.Canceled }
		res, n := withRetries(context.Background(), 3, sleep, func() ToolResult { return retryable })
		if n != 1 || res.Error.Code != models.CodeCancelled {
			t.Errorf("%d %v", n, res.Error)
		}
	})
	t.Run("cancelled before waiting", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		slept := 0
		sleep := func(ctx context.Context, d time.Duration) error { slept++; return nil }
		res, n := withRetries(ctx, 3, sleep, func() ToolResult { cancel(); return retryable })
		if n != 1 || slept != 0 || res.Error.Code != models.CodeCancelled {
			t.Errorf("%d attempts, %d waits, %v", n, slept, res.Error)
		}
	})
}

// TestQueueGuard runs calls through the queue guard alone with a step that
// blocks: the limit holds, the waiting list is bounded, and a call
// cancelled while waiting leaves.
func TestQueueGuard(t *testing.T) {
	inv := &Invoker{queues: newQueues(map[string]int{"shell": 2}, 1)}
	release := make(chan struct{})
	var running, peak atomic.Int64
	step := inv.queue(func(ctx context.Context, c *call) ToolResult {
		n := running.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		<-release
		running.Add(-1)
		return ToolResult{Status: models.StatusSucceeded, Success: true}
	})
	shell := func() *call { return &call{def: tooldef.Definition{Category: "shell"}} }
	var wg sync.WaitGroup
	results := make([]ToolResult, 4)
	for i := range 2 {
		wg.Go(func() { results[i] = step(context.Background(), shell()) })
	}
	waitFor(t, func() bool { return running.Load() == 2 })
	// The third waits; the fourth finds the waiting list full.
	ctx, cancel := context.WithCancel(context.Background())
	wg.Go(func() { results[2] = step(ctx, shell()) })
	waitFor(t, func() bool { return inv.queues.of("shell").waiting.Load() == 1 })
	if res := step(context.Background(), shell()); res.Error == nil || res.Error.Code != models.CodeQueueFull || res.Error.RetryAfter == 0 {
		t.Fatalf("fourth call: %+v", res)
	}
	cancel()
	waitFor(t, func() bool { return inv.queues.of("shell").waiting.Load() == 0 })
	// A waiter that gets a slot runs, and its wait is measured.
	waiter := shell()
	wg.Go(func() { results[3] = step(context.Background(), waiter) })
	waitFor(t, func() bool { return inv.queues.of("shell").waiting.Load() == 1 })
	time.Sleep(30 * time.Millisecond)
	close(release)
	wg.Wait()
	if !results[3].Success || waiter.queueMs < 30 {
		t.Errorf("waiter: %+v after %d ms in the queue (held at least 30 ms)", results[3], waiter.queueMs)
	}
	if results[2].Error == nil || results[2].Error.Code != models.CodeCancelled {
		t.Errorf("cancelled waiter: %+v", results[2])
	}
	if !results[0].Success || !results[1].Success || peak.Load() != 2 {
		t.Errorf("runs %v %v, peak %d (limit 2)", results[0].Success, results[1].Success, peak.Load())
	}
	// Another category is not held up by a full one.
	if cq := inv.queues.of("filesystem"); cq.limit != DefaultQueueLimits["filesystem"] {
		t.Errorf("filesystem limit %d", cq.limit)
	}
}

// waitFor polls cond until it holds (a bounded wait for goroutines to
// reach a state, not a timing assertion).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestPanicBecomesInternal: a panic inside the chain or a tool ends that
// call with INTERNAL, is recorded, and the invoker keeps serving.
func TestPanicBecomesInternal(t *testing.T) {
	ctx := context.Background()
	store, authz := catalogFixture(t)
	red, err := redact.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	sel := newFixtureSelector(t, store, authz, embed.NewBuiltin(), 0)
	inv := NewInvoker(store, sel, authz, red, runners.New(t.TempDir(), netpolicy.Policy{}, quiet), t.TempDir(), nil, quiet)
	t.Cleanup(func() { inv.Close(ctx) })
	normal := inv.run
	inv.run = func(context.Context, *call) ToolResult { panic("tool exploded") }
	res := inv.Call(ctx, nil, CallRequest{Tool: "echo_anything", SessionID: "s"})
	if res.Error == nil || res.Error.Code != models.CodeInternal || strings.Contains(res.Error.Message, "exploded") {
		t.Fatalf("panicking call: %+v", res.Error)
	}
	rec, err := inv.CallRecord(ctx, nil, res.CallID)
	if err != nil || rec.ErrorCode != models.CodeInternal {
		t.Fatalf("record of the panicking call: %+v %v", rec, err)
	}
	inv.run = normal
	if res := inv.Call(ctx, nil, CallRequest{Tool: "file_list", SessionID: "s"}); !res.Success {
		t.Errorf("the next call failed: %+v", res.Error)
	}
}

// TestAuthorizeGuard runs the permission guard alone over roles, levels
// and grants.
func TestAuthorizeGuard(t *testing.T) {
	store, _ := modelstest.Store(t)
	authz, err := access.NewAuthz(context.Background(), store, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := authz.SetGrants(1, access.Grants{Categories: []string{"filesystem"}, Tools: []string{"web_search", "http_request"}}); err != nil {
		t.Fatal(err)
	}
	inv := &Invoker{authz: authz}
	ok := ToolResult{Status: models.StatusSucceeded, Success: true}
	step := inv.authorize(func(context.Context, *call) ToolResult { return ok })
	agent := &models.Principal{ID: 1, Role: access.RoleAgent}
	cases := []struct {
		name     string
		caller   *models.Principal
		tool     string
		category string
		level    string
		allowed  bool
	}{
		{"admin calls anything", &models.Principal{ID: 9, Role: access.RoleAdmin}, "shell_exec", "shell", tooldef.LevelDangerous, true},
		{"reviewer calls nothing", &models.Principal{ID: 8, Role: access.RoleReviewer}, "file_read", "filesystem", tooldef.LevelSafe, false},
		{"safe by category", agent, "file_read", "filesystem", tooldef.LevelSafe, true},
		{"moderate by category", agent, "file_write", "filesystem", tooldef.LevelModerate, true},
		{"dangerous by category", agent, "wipe", "filesystem", tooldef.LevelDangerous, true},
		{"safe by tool name", agent, "web_search", "search", tooldef.LevelSafe, true},
		{"moderate needs its category", agent, "http_request", "api", tooldef.LevelModerate, false},
		{"nothing granted", agent, "code_execute", "code", tooldef.LevelModerate, false},
		{"another agent", &models.Principal{ID: 2, Role: access.RoleAgent}, "file_read", "filesystem", tooldef.LevelSafe, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &call{caller: tc.caller, def: tooldef.Definition{Name: tc.tool, Category: tc.category, Security: tooldef.Security{Level: tc.level}}}
			res := step(context.Background(), c)
			if res.Success != tc.allowed || (!tc.allowed && res.Error.Code != models.CodePermissionDenied) {
				t.Errorf("allowed %v, want %v (%+v)", res.Success, tc.allowed, res.Error)
			}
		})
	}
}

// TestCacheGuard runs the cache guard alone: hits for equal canonical
// arguments, misses for others, for failures, and after the TTL.
func TestCacheGuard(t *testing.T) {
	red, err := redact.New([]string{"hunter2-secret-value"})
	if err != nil {
		t.Fatal(err)
	}
	inv := &Invoker{results: newResultsCache(), redactor: red}
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
		if tc.c.cached != tc.cached || runs != tc.runs {
			t.Errorf("%s: cached %v runs %d; want %v %d", tc.name, tc.c.cached, runs, tc.cached, tc.runs)
		}
	}
	// A hit's history record reuses the arguments redacted once.
	secret := map[string]any{"q": "hunter2-secret-value"}
	step(context.Background(), mk(secret))
	hit := mk(map[string]any{"q": "hunter2-secret-value"})
	step(context.Background(), hit)
	if !hit.cached || strings.Contains(hit.redactedArgs, "hunter2") || !strings.Contains(hit.redactedArgs, "REDACTED") {
		t.Errorf("cache hit: cached %v, redacted arguments %q", hit.cached, hit.redactedArgs)
	}
	short := tooldef.Definition{Name: "t", Category: "search", Execution: tooldef.Execution{Cacheable: true, CacheTTL: 1}}
	step(context.Background(), &call{def: short, version: 3, args: map[string]any{}})
	time.Sleep(20 * time.Millisecond)
	c := &call{def: short, version: 3, args: map[string]any{}}
	step(context.Background(), c)
	if c.cached {
		t.Error("an expired entry was served")
	}
}

// TestLimitGuard runs the rate limit alone: per tool and principal.
func TestLimitGuard(t *testing.T) {
	inv := &Invoker{limits: newRateLimits()}
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

// Arguments with a cached result are not validated again (validation is a
// pure function of the version's schema and the arguments); any others
// still are, a hit for valid arguments notwithstanding.
func TestValidateSkipsCachedArguments(t *testing.T) {
	schema := `{"type":"object","properties":{"q":{"type":"string","minLength":2}},"required":["q"],"additionalProperties":false}`
	def := tooldef.Definition{Name: "t", Category: "search", Parameters: json.RawMessage(schema), Execution: tooldef.Execution{Cacheable: true, CacheTTL: 60_000}}
	red, err := redact.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	inv := &Invoker{schemas: newSchemaCache(), validated: newValidatedMemo(), results: newResultsCache(), redactor: red}
	runs := 0
	step := compose(inv.validate, inv.cache)(func(context.Context, *call) ToolResult {
		runs++
		return ToolResult{Status: models.StatusSucceeded, Success: true}
	})
	do := func(args string) (*call, ToolResult) {
		c := &call{def: def, version: 1, req: CallRequest{Arguments: json.RawMessage(args)}}
		return c, step(context.Background(), c)
	}
	if c, res := do(`{"q":"go"}`); !res.Success || c.cached || runs != 1 {
		t.Fatalf("first call: %+v cached %v runs %d", res, c.cached, runs)
	}
	// The compiled schema is gone: a hit must not need it.
	inv.schemas.Purge()
	inv.schemas.Add(1, nil)
	if c, res := do(` { "q" : "go" } `); !res.Success || !c.cached || runs != 1 || c.args["q"] != "go" {
		t.Fatalf("hit: %+v cached %v runs %d args %v", res, c.cached, runs, c.args)
	}
	inv.schemas.Purge()
	for _, bad := range []string{`{"q":"g"}`, `{"q":"go","x":1}`, `{}`} {
		if c, res := do(bad); res.Success || res.Error.Code != models.CodeValidation || c.cached || runs != 1 {
			t.Errorf("%s: %+v cached %v runs %d; want VALIDATION_ERROR", bad, res, c.cached, runs)
		}
	}
}
